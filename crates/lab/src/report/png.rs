//! PNG copies of the SVG figures, rendered in-process by resvg (no external converter). Text
//! needs a font: resvg reads the system's fonts (fontconfig's folders, e.g. Debian's
//! fonts-dejavu-core, which `amplab install-peers` installs). Without any font a PNG would have
//! no labels, so none is written and the run says why (stderr, setup.json, summary.md).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{self, fontdb};

/// Renders at twice the SVG's size, sharp enough for print.
const SCALE: f32 = 2.0;

/// The fonts found on this machine, loaded once per run.
fn fonts() -> &'static Arc<fontdb::Database> {
    static FONTS: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    FONTS.get_or_init(|| {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        // The figures ask for "DejaVu Sans, Helvetica, Arial, sans-serif"; make the generic
        // family one that is there.
        let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
            .into_iter()
            .find(|name| db.faces().any(|f| f.families.iter().any(|(n, _)| n == name)))
            .or_else(|| db.faces().next().and_then(|f| f.families.first()).map(|(n, _)| n.as_str()))
            .map(str::to_string);
        if let Some(family) = family {
            db.set_sans_serif_family(family);
        }
        Arc::new(db)
    })
}

/// Why PNGs cannot be made here, or `None` when they can.
pub fn unavailable() -> Option<String> {
    (fonts().is_empty()).then(|| {
        "no font is installed (resvg found none in the system's font folders), so the PNG copies \
         of the figures were not written (only the SVGs): install one, e.g. `apt-get install \
         fonts-dejavu-core` (amplab install-peers does)"
            .to_string()
    })
}

/// Writes `svg` as a PNG at `path`.
pub fn write(svg: &str, path: &Path) -> Result<(), String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    let options = usvg::Options { fontdb: Arc::clone(fonts()), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| format!("unreadable SVG: {e}"))?;
    let size = tree.size();
    let (w, h) = ((size.width() * SCALE).ceil() as u32, (size.height() * SCALE).ceil() as u32);
    let mut pixmap = Pixmap::new(w, h).ok_or("the figure has no area")?;
    resvg::render(&tree, Transform::from_scale(SCALE, SCALE), &mut pixmap.as_mut());
    pixmap.save_png(path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_figure_with_its_text() {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.png");
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40" fill="white"/><text x="4" y="28" font-family="sans-serif" font-size="20">amped</text></svg>"#;
        write(svg, &path).unwrap();
        let png = Pixmap::load_png(&path).unwrap();
        assert_eq!((png.width(), png.height()), (240, 80));
        let dark = png.pixels().iter().filter(|p| p.red() < 128).count();
        assert!(dark > 100, "the text was drawn ({dark} dark pixels)");
        assert!(write("<svg", &path).is_err());
    }
}
