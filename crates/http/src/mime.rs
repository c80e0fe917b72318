//! Content-Type for a file, by extension (mime_guess), with a charset for textual types.
//!
//! Textual types get "; charset=utf-8" so browsers do not guess an encoding (and cannot be talked
//! into a dangerous one); unknown extensions are served as opaque bytes.

use std::path::Path;

/// Non-`text/*` types that are text too and therefore get a charset.
const TEXTUAL: &[&str] =
    &["application/javascript", "application/json", "application/xml", "image/svg+xml"];

/// Extensions whose registered type differs from mime_guess's table (which keeps older,
/// unregistered names: `application/font-woff`, `application/font-sfnt`) or is missing there.
/// RFC 8081 registered the `font/*` types; RFC 9239 made `text/javascript` the one type for
/// JavaScript, modules (`.mjs`) included; RFC 8878 registered `application/zstd`.
const REGISTERED: &[(&str, &str)] = &[
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("otf", "font/otf"),
    ("ttf", "font/ttf"),
    ("js", "text/javascript"),
    ("mjs", "text/javascript"),
    ("zst", "application/zstd"),
];

/// Content-Type for a file path; unknown → "application/octet-stream".
pub fn content_type_for(path: &Path) -> String {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if let Some((_, mime)) = REGISTERED.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)) {
        return with_charset(mime, mime.starts_with("text/"));
    }
    let Some(mime) = mime_guess::from_path(path).first() else {
        return "application/octet-stream".to_owned();
    };
    let essence = mime.essence_str();
    with_charset(essence, mime.type_() == mime_guess::mime::TEXT || TEXTUAL.contains(&essence))
}

fn with_charset(essence: &str, textual: bool) -> String {
    if textual { format!("{essence}; charset=utf-8") } else { essence.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let cases = [
            ("index.html", "text/html; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("notes.txt", "text/plain; charset=utf-8"),
            ("data.json", "application/json; charset=utf-8"),
            ("feed.xml", "text/xml; charset=utf-8"),
            ("logo.svg", "image/svg+xml; charset=utf-8"),
            ("photo.JPG", "image/jpeg"),
            ("image.png", "image/png"),
            ("paper.pdf", "application/pdf"),
            ("dir/no_extension", "application/octet-stream"),
            ("blob.unknownext", "application/octet-stream"),
            ("font.woff", "font/woff"),
            ("font.WOFF2", "font/woff2"),
            ("font.otf", "font/otf"),
            ("font.ttf", "font/ttf"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("module.mjs", "text/javascript; charset=utf-8"),
            ("archive.tar.zst", "application/zstd"),
        ];
        for (path, expected) in cases {
            assert_eq!(content_type_for(Path::new(path)), expected, "{path}");
        }
    }
}
