//! What a reviewer checks in a figure, read back from its SVG. Shared by the chart writer's unit
//! tests and the quick-run tests (`tests/common` includes this file), so both hold every
//! generated figure to the same rules.

/// The layout's estimate of a character's width at 12 px (the same as `svg::CHAR_W`; a unit
/// test keeps them equal).
pub const CHAR_W: f64 = 7.4;

/// What a reviewer checks in a figure, read back from its SVG: every series has a legend entry
/// whose text fits inside the canvas (by the same width estimate the layout uses), and no two
/// series share a colour. Returns the series names, or what is wrong.
pub fn check_figure(svg: &str) -> Result<Vec<String>, String> {
    let doc = roxmltree::Document::parse(svg).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    let num = |n: roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok());
    let (width, height) = (num(root, "width").unwrap_or(0.0), num(root, "height").unwrap_or(0.0));
    let class = |n: &roxmltree::Node, c: &str| n.attribute("class") == Some(c);
    let mut names = Vec::new();
    let mut colors: Vec<&str> = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for g in doc.descendants().filter(|n| class(n, "series")) {
        let name = g.attribute("data-series").unwrap_or_default();
        let color = g.attribute("data-color").unwrap_or_default();
        // A bar chart drawn in panels has a group per series in each panel: the same series.
        match seen.iter().find(|(n, _)| *n == name) {
            Some((_, c)) if *c == color => continue,
            Some((_, c)) => {
                return Err(format!("series {name:?} changes colour from {c} to {color}"));
            }
            None => seen.push((name, color)),
        }
        if colors.contains(&color) {
            return Err(format!("series {name:?} repeats colour {color}"));
        }
        colors.push(color);
        let entry = doc
            .descendants()
            .find(|n| class(n, "legend-entry") && n.attribute("data-series") == Some(name))
            .ok_or_else(|| format!("series {name:?} has no legend entry"))?;
        if entry.attribute("data-color") != Some(color) {
            return Err(format!("series {name:?}: the legend shows another colour"));
        }
        let text = entry
            .descendants()
            .find(|n| n.has_tag_name("text"))
            .ok_or_else(|| format!("{name:?}: empty legend entry"))?;
        let (x, y) = (num(text, "x").unwrap_or(-1.0), num(text, "y").unwrap_or(-1.0));
        let label = text.text().unwrap_or_default();
        if label != name
            || x < 0.0
            || x + label.chars().count() as f64 * CHAR_W > width
            || y < 12.0
            || y > height
        {
            return Err(format!(
                "legend entry {label:?} at ({x}, {y}) is not inside the {width}×{height} canvas"
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}
