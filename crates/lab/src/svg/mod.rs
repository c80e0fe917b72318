//! A small SVG chart writer: line charts (optionally log-scaled) and grouped bar charts, each
//! with a title naming the workload, axis labels with units, ticks and a legend.
//!
//! Every series is drawn inside `<g class="series" data-series="NAME">`, so a figure's series
//! can be counted and named by reading the SVG back (the tests do).

pub mod axis;

use std::fmt::Write;

pub use axis::Scale;
use axis::{Axis, label};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 72.0;
const BOTTOM: f64 = 64.0;

const COLORS: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939",
];

/// One line: (x, y) points, drawn in x order.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// What the chart draws.
#[derive(Clone, Debug)]
pub enum Plot {
    /// Lines through points.
    Lines(Vec<Series>),
    /// Groups of bars: one group per category, one bar per series (values by category).
    Bars { categories: Vec<String>, series: Vec<(String, Vec<f64>)> },
}

/// A complete figure.
#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    /// A second, smaller title line (the workload's details).
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub plot: Plot,
}

impl Chart {
    /// Names of the series, in legend order.
    pub fn series_names(&self) -> Vec<String> {
        match &self.plot {
            Plot::Lines(s) => s.iter().map(|s| s.name.clone()).collect(),
            Plot::Bars { series, .. } => series.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// The SVG document.
    pub fn render(&self) -> String {
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = write!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
        let _ = write!(
            svg,
            r#"<text class="title" x="{}" y="26" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
            WIDTH / 2.0,
            esc(&self.title)
        );
        let _ = write!(
            svg,
            r##"<text class="subtitle" x="{}" y="46" text-anchor="middle" font-size="{:.1}" fill="#444">{}</text>"##,
            WIDTH / 2.0,
            subtitle_font_size(&self.subtitle),
            esc(&self.subtitle)
        );
        match &self.plot {
            Plot::Lines(series) => self.render_lines(&mut svg, series),
            Plot::Bars { categories, series } => self.render_bars(&mut svg, categories, series),
        }
        self.render_legend(&mut svg);
        svg.push_str("</svg>\n");
        svg
    }

    fn render_lines(&self, svg: &mut String, series: &[Series]) {
        let x = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), self.x_scale);
        let y = Axis::fit(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), self.y_scale);
        self.render_frame(svg, Some(&x), &y);
        for (i, s) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let dash = if i >= COLORS.len() { r#" stroke-dasharray="6 3""# } else { "" };
            let mut pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(a, b)| usable(*a, self.x_scale) && usable(*b, self.y_scale))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let _ = write!(svg, r#"<g class="series" data-series="{}">"#, esc(&s.name));
            let path: Vec<String> =
                pts.iter().map(|&(a, b)| format!("{:.1},{:.1}", px(&x, a), py(&y, b))).collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
            for &(a, b) in &pts {
                let _ = write!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                    px(&x, a),
                    py(&y, b)
                );
            }
            svg.push_str("</g>");
        }
    }

    fn render_bars(&self, svg: &mut String, categories: &[String], series: &[(String, Vec<f64>)]) {
        let y = Axis::fit(series.iter().flat_map(|(_, v)| v.iter().copied()), self.y_scale);
        self.render_frame(svg, None, &y);
        let plot_w = WIDTH - LEFT - RIGHT;
        let group_w = plot_w / categories.len().max(1) as f64;
        let bar_w = group_w * 0.8 / series.len().max(1) as f64;
        for (ci, cat) in categories.iter().enumerate() {
            let cx = LEFT + group_w * (ci as f64 + 0.5);
            let _ = write!(
                svg,
                r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                HEIGHT - BOTTOM + 16.0,
                esc(cat)
            );
        }
        let base = py(&y, if self.y_scale == Scale::Log { y.min } else { 0.0f64.max(y.min) });
        for (si, (name, values)) in series.iter().enumerate() {
            let color = COLORS[si % COLORS.len()];
            let _ = write!(svg, r#"<g class="series" data-series="{}">"#, esc(name));
            for (ci, &v) in values.iter().enumerate().take(categories.len()) {
                if !usable(v, self.y_scale) {
                    continue;
                }
                let x0 = LEFT + group_w * ci as f64 + group_w * 0.1 + bar_w * si as f64;
                let top = py(&y, v);
                let _ = write!(
                    svg,
                    r#"<rect x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
                    bar_w * 0.92,
                    (base - top).max(0.0),
                    esc(name),
                    label(v)
                );
            }
            svg.push_str("</g>");
        }
    }

    /// Plot frame, grid, ticks and axis labels (`x` is `None` for bar charts).
    fn render_frame(&self, svg: &mut String, x: Option<&Axis>, y: &Axis) {
        let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        svg.push_str(r#"<g class="axes">"#);
        for &t in &y.ticks {
            let ty = py(y, t);
            let _ = write!(
                svg,
                r##"<line x1="{x0}" y1="{ty:.1}" x2="{x1}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 6.0,
                ty + 4.0,
                label(t)
            );
        }
        if let Some(x) = x {
            for &t in &x.ticks {
                let tx = px(x, t);
                let _ = write!(
                    svg,
                    r##"<line x1="{tx:.1}" y1="{y0}" x2="{tx:.1}" y2="{y1}" stroke="#f0f0f0"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                    y1 + 16.0,
                    label(t)
                );
            }
        }
        let _ = write!(
            svg,
            r#"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="none" stroke="black"/>"#,
            x1 - x0,
            y1 - y0
        );
        let _ = write!(
            svg,
            r#"<text class="x-label" x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
            (x0 + x1) / 2.0,
            HEIGHT - 18.0,
            esc(&self.x_label)
        );
        let _ = write!(
            svg,
            r#"<text class="y-label" transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle" font-size="13">{}</text>"#,
            (y0 + y1) / 2.0,
            esc(&self.y_label)
        );
        svg.push_str("</g>");
    }

    fn render_legend(&self, svg: &mut String) {
        let lx = WIDTH - RIGHT + 16.0;
        svg.push_str(r#"<g class="legend">"#);
        let _ = write!(svg, r#"<text x="{lx}" y="{}" font-weight="bold">Legend</text>"#, TOP + 4.0);
        for (i, name) in self.series_names().iter().enumerate() {
            let ly = TOP + 24.0 + 18.0 * i as f64;
            let color = COLORS[i % COLORS.len()];
            let _ = write!(
                svg,
                r#"<rect x="{lx}" y="{:.1}" width="14" height="10" fill="{color}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
                ly - 9.0,
                lx + 20.0,
                esc(name)
            );
        }
        svg.push_str("</g>");
    }
}

fn usable(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

fn px(x: &Axis, v: f64) -> f64 {
    LEFT + x.frac(v) * (WIDTH - LEFT - RIGHT)
}

fn py(y: &Axis, v: f64) -> f64 {
    HEIGHT - BOTTOM - y.frac(v) * (HEIGHT - TOP - BOTTOM)
}

/// XML text escaping.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The subtitle's font size: 12 px, smaller for a long workload description so that it fits
/// the chart's width (about 0.54 em per character) in every renderer — rsvg-convert, which
/// makes the PNGs, ignores SVG's `textLength` — but never below 7 px.
fn subtitle_font_size(text: &str) -> f64 {
    let room = WIDTH - 20.0;
    let wanted = text.chars().count() as f64 * 0.54;
    if wanted * 12.0 <= room { 12.0 } else { (room / wanted).max(7.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(plot: Plot) -> Chart {
        Chart {
            title: "Single file <1 KiB> & more".into(),
            subtitle: "workload".into(),
            x_label: "file size (KiB)".into(),
            y_label: "bandwidth (Mb/s)".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            plot,
        }
    }

    #[test]
    fn a_long_subtitle_gets_a_smaller_font_and_a_short_one_does_not() {
        let mut c = chart(Plot::Lines(vec![Series { name: "a".into(), points: vec![(0.0, 1.0)] }]));
        assert!(c.render().contains(r##"font-size="12.0" fill="#444">workload<"##));
        c.subtitle = "x".repeat(200);
        let svg = c.render();
        assert!(svg.contains(r##"font-size="8.1" fill="#444">xxx"##), "{svg}");
        assert_eq!(subtitle_font_size(&"x".repeat(1000)), 7.0, "never below 7 px");
    }

    #[test]
    fn renders_lines_with_one_group_per_series() {
        let c = chart(Plot::Lines(vec![
            Series { name: "amped".into(), points: vec![(0.0, 1.0), (1.0, 10.0)] },
            Series { name: "nginx".into(), points: vec![(0.0, f64::NAN), (1.0, 0.0), (2.0, 5.0)] },
        ]));
        let svg = c.render();
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert!(svg.contains("Single file &lt;1 KiB&gt; &amp; more"));
        assert!(svg.contains("bandwidth (Mb/s)") && svg.contains("Legend"));
    }

    #[test]
    fn renders_bars() {
        let c = chart(Plot::Bars {
            categories: vec!["p5".into(), "p50".into()],
            series: vec![("a".into(), vec![1.0, 2.0]), ("b".into(), vec![3.0, f64::NAN])],
        });
        let svg = c.render();
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert_eq!(svg.matches("<rect x=").count(), 2 + 3 + 1);
    }
}
