//! One colour and one marker per server, the same in every figure: a fixed table keyed by the
//! server's label (amped's architectures in blues and greens, the peers in warm colours and
//! greys), and for labels not in it (option variants like `amped:no-file-cache`) a colour and a
//! marker chosen from the name's hash, so they too are stable from figure to figure.
//!
//! A series may qualify its server (`"mt p99"`): the server part picks the colour; a tail
//! statistic (`p90`, `p99`, `mean`, `max`, …; not `median`/`p50`) is drawn darker and dashed,
//! other qualifiers (`"64 MiB (0.5×)"`) are not. Within one figure no two
//! series share a colour: [`assign`] gives a later series that collides the next free colour of
//! the spare palette, in legend order, so a figure with the same series always looks the same.

/// How a series is drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Style {
    /// `#rrggbb`.
    pub color: String,
    pub marker: Marker,
    /// Dashed line (tail statistics).
    pub dashed: bool,
}

/// Point markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    TriangleDown,
    Cross,
}

const MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
];

/// The servers amplab runs by default, with their colour and marker.
const KNOWN: &[(&str, &str, Marker)] = &[
    ("amped", "#1f77b4", Marker::Circle),
    ("amped:instances=2", "#6baed6", Marker::Circle),
    ("sped", "#ff7f0e", Marker::Square),
    ("mt", "#2ca02c", Marker::Triangle),
    ("pool", "#9467bd", Marker::Diamond),
    ("pool:threads=64", "#9467bd", Marker::Diamond),
    ("pool:threads=5", "#9467bd", Marker::Diamond),
    ("mp", "#8c564b", Marker::TriangleDown),
    ("mp:processes=64", "#8c564b", Marker::TriangleDown),
    ("uring", "#17becf", Marker::Cross),
    ("nginx", "#d62728", Marker::Square),
    ("nginx-aio", "#e377c2", Marker::Square),
    ("nginx-direct", "#f7b6d2", Marker::Circle),
    ("apache-event", "#7f7f7f", Marker::Diamond),
    ("apache-prefork-150", "#525252", Marker::Triangle),
    ("apache-prefork-300", "#a6a6a6", Marker::TriangleDown),
    ("lighttpd", "#bcbd22", Marker::Circle),
    ("h2o", "#393b79", Marker::Cross),
    ("staged", "#8c6d31", Marker::TriangleDown),
];

/// Colours for labels not in the table, and for collisions within a figure: none close to a
/// colour of the table, so a variant is never mistaken for a default server.
const SPARE: [&str; 14] = [
    "#000000", "#e6ab02", "#1b9e77", "#e7298a", "#66a61e", "#a6761d", "#7570b3", "#d95f02",
    "#fb9a99", "#6a3d9a", "#b2df8a", "#01665e", "#cab2d6", "#8c510a",
];

/// Statistics drawn as the main line; others (p99, mean, …) are dashed.
const MAIN_STATS: [&str; 2] = ["median", "p50"];

/// FNV-1a, so a label's fallback style never changes between runs or builds.
fn hash(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The style of the series named `name` on its own.
pub fn of(name: &str) -> Style {
    let (server, stat) = name.split_once(' ').unwrap_or((name, ""));
    let known = KNOWN.iter().find(|(label, _, _)| *label == server);
    let (color, marker) = match known {
        Some((_, color, marker)) => (color.to_string(), *marker),
        None => {
            let h = hash(server);
            (SPARE[(h % SPARE.len() as u64) as usize].to_string(), MARKERS[(h / 7 % 6) as usize])
        }
    };
    let tail = is_statistic(stat) && !MAIN_STATS.contains(&stat);
    Style { color: if tail { darker(&color) } else { color }, marker, dashed: tail }
}

/// The styles of a figure's series, in legend order, with no colour used twice.
pub fn assign(names: &[String]) -> Vec<Style> {
    let mut styles: Vec<Style> = Vec::with_capacity(names.len());
    for name in names {
        let mut style = of(name);
        if styles.iter().any(|s| s.color == style.color) {
            let free = SPARE.iter().find(|c| !styles.iter().any(|s| s.color == **c));
            style.color = match free {
                Some(c) => c.to_string(),
                None => format!("#{:06x}", hash(name) & 0xff_ffff),
            };
        }
        styles.push(style);
    }
    styles
}

/// Whether a qualifier names a statistic: `mean`, `max`, `median`, or `p` and a number.
fn is_statistic(q: &str) -> bool {
    matches!(q, "mean" | "max" | "median")
        || q.strip_prefix('p').is_some_and(|n| !n.is_empty() && n.parse::<f64>().is_ok())
}

/// `#rrggbb` at 60 % brightness.
fn darker(color: &str) -> String {
    let channel = |i: usize| u8::from_str_radix(&color[i..i + 2], 16).unwrap_or(0);
    let dim = |v: u8| (f64::from(v) * 0.6).round() as u8;
    format!("#{:02x}{:02x}{:02x}", dim(channel(1)), dim(channel(3)), dim(channel(5)))
}

/// The SVG element drawing `marker` centred at (x, y) in `color`.
pub fn marker_svg(marker: Marker, x: f64, y: f64, color: &str) -> String {
    let r = 3.5;
    match marker {
        Marker::Circle => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{color}"/>"#),
        Marker::Square => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"/>"#,
            x - r,
            y - r,
            2.0 * r,
            2.0 * r
        ),
        Marker::Triangle => {
            polygon(&[(x, y - r * 1.2), (x + r * 1.1, y + r), (x - r * 1.1, y + r)], color)
        }
        Marker::TriangleDown => {
            polygon(&[(x, y + r * 1.2), (x + r * 1.1, y - r), (x - r * 1.1, y - r)], color)
        }
        Marker::Diamond => polygon(
            &[(x, y - r * 1.3), (x + r * 1.3, y), (x, y + r * 1.3), (x - r * 1.3, y)],
            color,
        ),
        Marker::Cross => format!(
            r#"<path d="M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}" stroke="{color}" stroke-width="2.2"/>"#,
            x - r,
            y - r,
            x + r,
            y + r,
            x - r,
            y + r,
            x + r,
            y - r
        ),
    }
}

fn polygon(points: &[(f64, f64)], color: &str) -> String {
    let pts: Vec<String> = points.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
    format!(r#"<polygon points="{}" fill="{color}"/>"#, pts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_keeps_its_style_and_tails_are_dashed_and_darker() {
        assert_eq!(of("nginx").color, "#d62728");
        assert_eq!(of("nginx"), of("nginx"));
        assert_eq!(of("amped:no-file-cache"), of("amped:no-file-cache"));
        let (median, tail) = (of("mt median"), of("mt p99"));
        assert_eq!(median.color, of("mt").color);
        assert!(tail.dashed && !median.dashed);
        assert_eq!(tail.color, "#1a601a");
        assert!(of("mt p99.9").dashed && of("mt mean").dashed);
        assert!(!of("staged 64 MiB (0.5×)").dashed, "a qualifier that is no statistic");
    }

    #[test]
    fn no_colour_twice_in_a_figure() {
        let names: Vec<String> = ["pool:threads=64", "pool", "amped", "a", "b", "c", "d", "e"]
            .iter()
            .map(|s| s.to_string())
            .chain((0..20).map(|i| format!("variant-{i}")))
            .collect();
        let styles = assign(&names);
        for (i, a) in styles.iter().enumerate() {
            assert!(styles[..i].iter().all(|b| b.color != a.color), "{} repeats", a.color);
        }
        assert_eq!(styles[0], of("pool:threads=64"), "the first keeps its own style");
    }
}
