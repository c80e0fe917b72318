//! A small SVG chart writer: line charts (optionally log-scaled) and grouped bar charts, each
//! with a title naming the workload, axis labels with units, ticks and a legend.
//!
//! Every series is drawn inside `<g class="series" data-series="NAME">` with its colour in
//! `data-color`, and its legend entry is `<g class="legend-entry" data-series="NAME">`, so a
//! figure's series, colours and legend can be read back from the SVG (the tests do). Layout
//! rules a reviewer would check:
//! - each server has one colour and marker in every figure ([`style`]);
//! - a point or bar with a spread over rounds carries a min–max whisker;
//! - the legend column is as wide as its longest name and the canvas as tall as the legend, so
//!   no legend entry is ever cut off;
//! - a bar chart whose bars differ by more than 10× on a linear axis is drawn as one panel per
//!   category, each with its own axis, so small bars stay visible (when the categories' tops
//!   differ by more than 2×; line charts of such data take a log axis); a bar that has no
//!   measurement is marked "n/a", not left out silently;
//! - a dense line (a CDF, a time series) carries a marker every few points only, so the
//!   markers that tell series apart in print do not smear into a thick band;
//! - bars have a filled swatch in the legend, lines their line and marker.

pub mod axis;
#[cfg(test)]
pub mod check;
pub mod style;

use std::fmt::Write;

pub use axis::Scale;
use axis::{Axis, label};
use style::Style;

/// Width of the plotting area (all panels together).
const PLOT_W: f64 = 586.0;
/// Height of the plotting area.
const PLOT_H: f64 = 404.0;
const LEFT: f64 = 84.0;
const TOP: f64 = 72.0;
const BOTTOM: f64 = 64.0;
/// Narrowest legend column.
const LEGEND_MIN: f64 = 200.0;
/// Legend rows.
const LEGEND_ROW: f64 = 18.0;
/// Estimated advance of one character at 12 px (DejaVu Sans averages ~0.55 em; a little more
/// so that an estimate never falls short).
const CHAR_W: f64 = 7.4;
/// Gap between bar panels (holds the next panel's tick labels).
const PANEL_GAP: f64 = 64.0;
/// A bar chart's categories are split into panels above this ratio of its largest and
/// smallest bars…
const PANEL_RATIO: f64 = 10.0;
/// … when the categories' largest bars differ by more than this (else one axis shows them
/// as well).
const PANEL_TOPS_RATIO: f64 = 2.0;
/// A line with more points than this gets markers along it, not at every point.
const DENSE_POINTS: usize = 20;
/// Distance between the markers of a dense line, pixels along the line.
const MARKER_GAP: f64 = 60.0;

/// An (x, y) point.
type Point = (f64, f64);
/// A (min, max) spread.
type Range = (f64, f64);

/// One line: (x, y) points, drawn in x order, with an optional (min, max) per point.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Spread over rounds at each point (same order as `points`), or empty.
    pub spread: Vec<(f64, f64)>,
}

impl Series {
    /// A line without spreads.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, spread: Vec::new() }
    }
}

/// One series of a bar chart: a value per category, with an optional (min, max) each.
#[derive(Clone, Debug, Default)]
pub struct Bars {
    pub name: String,
    pub values: Vec<f64>,
    /// Spread over rounds per category, or empty.
    pub spread: Vec<(f64, f64)>,
}

/// What the chart draws.
#[derive(Clone, Debug)]
pub enum Plot {
    /// Lines through points.
    Lines(Vec<Series>),
    /// Groups of bars: one group per category, one bar per series.
    Bars { categories: Vec<String>, series: Vec<Bars> },
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
    /// A short note under the legend, e.g. what the whiskers are or that a single round has
    /// none (empty: no note).
    pub note: String,
}

/// A plotting rectangle in pixels.
#[derive(Clone, Copy, Debug)]
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

/// One panel of a bar chart: where it is drawn and which categories it shows.
struct BarPanel<'a> {
    frame: Frame,
    /// The frame's width as computed (x1 − x0 may differ from it in the last bit).
    width: f64,
    cats: &'a [usize],
    series: &'a [Bars],
    styles: &'a [Style],
    /// The first panel carries the axis labels.
    first: bool,
}

/// Where one bar stands: its panel's frame and axis, its left edge and width, the base line
/// it rises from and its colour.
struct BarSpot<'a> {
    frame: Frame,
    y: &'a Axis,
    x: f64,
    width: f64,
    base: f64,
    color: &'a str,
}

impl Frame {
    fn px(&self, x: &Axis, v: f64) -> f64 {
        self.x0 + x.frac(v) * (self.x1 - self.x0)
    }

    fn py(&self, y: &Axis, v: f64) -> f64 {
        self.y1 - y.frac(v) * (self.y1 - self.y0)
    }
}

impl Chart {
    /// A response-time CDF: a line per server over a log time axis, with `note` saying what
    /// the lines are.
    pub fn latency_cdf(title: String, subtitle: String, series: Vec<Series>, note: &str) -> Chart {
        Chart {
            title,
            subtitle,
            x_label: "response time (ms, log scale)".into(),
            y_label: "fraction of requests answered within".into(),
            x_scale: Scale::Log,
            y_scale: Scale::Linear,
            plot: Plot::Lines(series),
            note: note.into(),
        }
    }

    /// Names of the series, in legend order.
    pub fn series_names(&self) -> Vec<String> {
        match &self.plot {
            Plot::Lines(s) => s.iter().map(|s| s.name.clone()).collect(),
            Plot::Bars { series, .. } => series.iter().map(|b| b.name.clone()).collect(),
        }
    }

    /// Canvas width: the plot, then a legend column wide enough for the longest name.
    fn width(&self) -> f64 {
        let longest = self.series_names().iter().map(|n| text_width(n)).fold(0.0, f64::max);
        LEFT + PLOT_W + LEGEND_MIN.max(16.0 + 24.0 + longest + 16.0)
    }

    /// Canvas height: the plot, or the legend (and its note) if it is taller.
    fn height(&self) -> f64 {
        let rows = self.series_names().len() + self.note_lines().len();
        let legend = TOP + 24.0 + LEGEND_ROW * rows as f64 + 12.0;
        (TOP + PLOT_H + BOTTOM).max(legend)
    }

    /// The note, wrapped to the legend column's width (at 11 px).
    fn note_lines(&self) -> Vec<String> {
        let room = self.width() - (LEFT + PLOT_W + 16.0) - 8.0;
        let per_line = ((room / (CHAR_W * 11.0 / 12.0)).floor() as usize).max(10);
        let mut lines: Vec<String> = Vec::new();
        for word in self.note.split_whitespace() {
            match lines.last_mut() {
                Some(line) if line.chars().count() + 1 + word.chars().count() <= per_line => {
                    line.push(' ');
                    line.push_str(word);
                }
                _ => lines.push(word.to_string()),
            }
        }
        lines
    }

    /// The SVG document.
    pub fn render(&self) -> String {
        let (width, height) = (self.width(), self.height());
        let frame = Frame { x0: LEFT, x1: LEFT + PLOT_W, y0: TOP, y1: TOP + PLOT_H };
        let styles = style::assign(&self.series_names());
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = write!(svg, r#"<rect width="{width}" height="{height}" fill="white"/>"#);
        let _ = write!(
            svg,
            r#"<text class="title" x="{}" y="26" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
            width / 2.0,
            esc(&self.title)
        );
        let (lines, size) = subtitle_layout(&self.subtitle, width);
        let first_y = if lines.len() > 1 { 42.0 } else { 46.0 };
        for (i, line) in lines.iter().enumerate() {
            let _ = write!(
                svg,
                r##"<text class="subtitle" x="{}" y="{:.1}" text-anchor="middle" font-size="{size:.1}" fill="#444">{}</text>"##,
                width / 2.0,
                first_y + 13.0 * i as f64,
                esc(line)
            );
        }
        match &self.plot {
            Plot::Lines(series) => self.render_lines(&mut svg, frame, series, &styles),
            Plot::Bars { categories, series } => {
                self.render_bars(&mut svg, frame, categories, series, &styles)
            }
        }
        self.render_legend(&mut svg, frame, &styles);
        svg.push_str("</svg>\n");
        svg
    }

    fn render_lines(&self, svg: &mut String, f: Frame, series: &[Series], styles: &[Style]) {
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = series.iter().flat_map(|s| {
            s.points.iter().map(|p| p.1).chain(s.spread.iter().flat_map(|&(a, b)| [a, b]))
        });
        let x = Axis::fit(xs, self.x_scale);
        let y = Axis::fit(ys, self.y_scale);
        self.render_frame(svg, f, Some(&x), &y, true);
        let dodge = |i: usize| (i as f64 - (series.len() as f64 - 1.0) / 2.0) * 2.5;
        for (si, (s, st)) in series.iter().zip(styles).enumerate() {
            let mut pts: Vec<(Point, Option<Range>)> = s
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| (*p, s.spread.get(i).copied()))
                .filter(|((a, b), _)| usable(*a, self.x_scale) && usable(*b, self.y_scale))
                .collect();
            pts.sort_by(|a, b| a.0.0.total_cmp(&b.0.0));
            let color = &st.color;
            let _ = write!(
                svg,
                r#"<g class="series" data-series="{}" data-color="{color}">"#,
                esc(&s.name)
            );
            let path: Vec<String> = pts
                .iter()
                .map(|&((a, b), _)| format!("{:.1},{:.1}", f.px(&x, a), f.py(&y, b)))
                .collect();
            let dash = if st.dashed { r#" stroke-dasharray="6 3""# } else { "" };
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
            // A dense line: markers about MARKER_GAP px apart along it, staggered from series
            // to series so they do not pile up where lines meet.
            let dense = pts.len() > DENSE_POINTS;
            let mut walked = MARKER_GAP - 11.0 * si as f64 % MARKER_GAP;
            let mut last: Option<Point> = None;
            for &((a, b), spread) in &pts {
                let (cx, cy) = (f.px(&x, a), f.py(&y, b));
                if let Some((lo, hi)) = spread {
                    // Side by side, so whiskers of series at the same x stay apart.
                    whisker(svg, cx + dodge(si), f.py(&y, lo), f.py(&y, hi), color);
                }
                walked += last.map_or(0.0, |(px, py)| (cx - px).hypot(cy - py));
                last = Some((cx, cy));
                if !dense || walked >= MARKER_GAP {
                    walked = 0.0;
                    svg.push_str(&style::marker_svg(st.marker, cx, cy, color));
                }
            }
            svg.push_str("</g>");
        }
    }

    fn render_bars(
        &self,
        svg: &mut String,
        f: Frame,
        categories: &[String],
        series: &[Bars],
        styles: &[Style],
    ) {
        let groups = self.bar_panels(categories.len(), series);
        let n = groups.len() as f64;
        let panel_w = (PLOT_W - PANEL_GAP * (n - 1.0)) / n;
        for (gi, cats) in groups.iter().enumerate() {
            let x0 = f.x0 + gi as f64 * (panel_w + PANEL_GAP);
            let frame = Frame { x0, x1: x0 + panel_w, ..f };
            let panel = BarPanel { frame, width: panel_w, cats, series, styles, first: gi == 0 };
            self.render_bar_panel(svg, &panel, categories);
        }
    }

    /// The categories of each panel: one panel per category when the bars span more than
    /// `PANEL_RATIO` and the small bars sit in another category than the large ones (so each
    /// gets an axis of its own), else one panel with every category.
    fn bar_panels(&self, categories: usize, series: &[Bars]) -> Vec<Vec<usize>> {
        let bars = series.iter().flat_map(|b| b.values.iter().copied());
        let (lo, hi) = bars
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
        let tops: Vec<f64> = (0..categories)
            .map(|ci| series.iter().filter_map(|b| b.values.get(ci).copied()).fold(0.0, f64::max))
            .filter(|t| *t > 0.0)
            .collect();
        let (top_lo, top_hi) =
            tops.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &t| (a.min(t), b.max(t)));
        let panels = self.y_scale != Scale::Log
            && categories > 1
            && hi > PANEL_RATIO * lo
            && top_hi > PANEL_TOPS_RATIO * top_lo;
        if panels {
            (0..categories).map(|c| vec![c]).collect()
        } else {
            vec![(0..categories).collect()]
        }
    }

    /// One panel: its frame and y axis, the category labels under it, and each series' bars.
    fn render_bar_panel(&self, svg: &mut String, p: &BarPanel, categories: &[String]) {
        let values = p.cats.iter().flat_map(|&ci| {
            p.series.iter().flat_map(move |b| {
                let v = b.values.get(ci).copied();
                let s = b.spread.get(ci).map(|s| s.1);
                [v, s].into_iter().flatten()
            })
        });
        let y = Axis::fit(values, self.y_scale);
        self.render_frame(svg, p.frame, None, &y, p.first);
        let group_w = p.width / p.cats.len().max(1) as f64;
        let bar_w = group_w * 0.8 / p.series.len().max(1) as f64;
        for (k, &ci) in p.cats.iter().enumerate() {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                p.frame.x0 + group_w * (k as f64 + 0.5),
                p.frame.y1 + 16.0,
                esc(&categories[ci])
            );
        }
        let base =
            p.frame.py(&y, if self.y_scale == Scale::Log { y.min } else { 0.0f64.max(y.min) });
        for (si, (b, st)) in p.series.iter().zip(p.styles).enumerate() {
            let color = &st.color;
            let _ = write!(
                svg,
                r#"<g class="series" data-series="{}" data-color="{color}">"#,
                esc(&b.name)
            );
            for (k, &ci) in p.cats.iter().enumerate() {
                let Some(&v) = b.values.get(ci) else { continue };
                let bx = p.frame.x0 + group_w * k as f64 + group_w * 0.1 + bar_w * si as f64;
                let spot = BarSpot { frame: p.frame, y: &y, x: bx, width: bar_w, base, color };
                self.render_bar(svg, &spot, &b.name, v, b.spread.get(ci).copied());
            }
            svg.push_str("</g>");
        }
    }

    /// One bar (with its whisker when it has a spread), or "n/a" where a failed cell's bar
    /// would stand.
    fn render_bar(
        &self,
        svg: &mut String,
        at: &BarSpot,
        name: &str,
        v: f64,
        spread: Option<Range>,
    ) {
        let (frame, y, bx, bar_w, color) = (at.frame, at.y, at.x, at.width, at.color);
        if v.is_nan() {
            // No measurement (the cell failed): say so where its bar would stand.
            let _ = write!(
                svg,
                r##"<text class="missing" x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="{color}">n/a<title>{}: no measurement</title></text>"##,
                bx + bar_w * 0.46,
                at.base - 4.0,
                esc(name)
            );
            return;
        }
        if !usable(v, self.y_scale) {
            return;
        }
        let top = frame.py(y, v);
        let range =
            spread.map_or(String::new(), |(a, z)| format!(" (min {}, max {})", label(a), label(z)));
        let _ = write!(
            svg,
            r#"<rect x="{bx:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}{range}</title></rect>"#,
            bar_w * 0.92,
            (at.base - top).max(0.0),
            esc(name),
            label(v)
        );
        if let Some((a, z)) = spread {
            let cx = bx + bar_w * 0.46;
            whisker(svg, cx, frame.py(y, a), frame.py(y, z), "#222");
        }
    }

    /// Frame, grid, ticks; the axis labels when `labels` (`x` is `None` for bar charts).
    fn render_frame(&self, svg: &mut String, f: Frame, x: Option<&Axis>, y: &Axis, labels: bool) {
        svg.push_str(r#"<g class="axes">"#);
        for &t in &y.ticks {
            let ty = f.py(y, t);
            let _ = write!(
                svg,
                r##"<line x1="{:.1}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                f.x0,
                f.x1,
                f.x0 - 6.0,
                ty + 4.0,
                label(t)
            );
        }
        if let Some(x) = x {
            for &t in &x.ticks {
                let tx = f.px(x, t);
                let _ = write!(
                    svg,
                    r##"<line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{}" stroke="#f0f0f0"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                    f.y0,
                    f.y1,
                    f.y1 + 16.0,
                    label(t)
                );
            }
        }
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{}" width="{:.1}" height="{}" fill="none" stroke="black"/>"#,
            f.x0,
            f.y0,
            f.x1 - f.x0,
            f.y1 - f.y0
        );
        if labels {
            let _ = write!(
                svg,
                r#"<text class="x-label" x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#,
                LEFT + PLOT_W / 2.0,
                f.y1 + BOTTOM - 18.0,
                esc(&self.x_label)
            );
            let _ = write!(
                svg,
                r#"<text class="y-label" transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle" font-size="13">{}</text>"#,
                (f.y0 + f.y1) / 2.0,
                esc(&self.y_label)
            );
        }
        svg.push_str("</g>");
    }

    fn render_legend(&self, svg: &mut String, f: Frame, styles: &[Style]) {
        let lx = f.x1 + 16.0;
        svg.push_str(r#"<g class="legend">"#);
        let _ = write!(svg, r#"<text x="{lx}" y="{}" font-weight="bold">Legend</text>"#, TOP + 4.0);
        for (i, (name, st)) in self.series_names().iter().zip(styles).enumerate() {
            let ly = TOP + 24.0 + LEGEND_ROW * i as f64;
            let color = &st.color;
            let dash = if st.dashed { r#" stroke-dasharray="4 2""# } else { "" };
            let symbol = match self.plot {
                Plot::Bars { .. } => format!(
                    r#"<rect x="{:.1}" y="{:.1}" width="14" height="10" fill="{color}"/>"#,
                    lx + 2.0,
                    ly - 9.0
                ),
                Plot::Lines(_) => format!(
                    r#"<line x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"{dash}/>{}"#,
                    ly - 4.0,
                    lx + 18.0,
                    ly - 4.0,
                    style::marker_svg(st.marker, lx + 9.0, ly - 4.0, color)
                ),
            };
            let _ = write!(
                svg,
                r#"<g class="legend-entry" data-series="{}" data-color="{color}">{symbol}<text x="{:.1}" y="{ly:.1}">{}</text></g>"#,
                esc(name),
                lx + 24.0,
                esc(name)
            );
        }
        let first = TOP + 24.0 + LEGEND_ROW * (self.series_names().len() as f64 + 0.4);
        for (i, line) in self.note_lines().iter().enumerate() {
            let _ = write!(
                svg,
                r##"<text class="note" x="{lx}" y="{:.1}" font-size="11" fill="#444">{}</text>"##,
                first + LEGEND_ROW * i as f64,
                esc(line)
            );
        }
        svg.push_str("</g>");
    }
}

/// A vertical min–max whisker with caps at `x`, from pixel `lo` to `hi` (drawn only when the
/// range is visible).
fn whisker(svg: &mut String, x: f64, lo: f64, hi: f64, color: &str) {
    if !(lo.is_finite() && hi.is_finite()) || (lo - hi).abs() < 0.5 {
        return;
    }
    let _ = write!(
        svg,
        r#"<path class="spread" d="M{x:.1} {lo:.1}V{hi:.1}M{:.1} {lo:.1}H{:.1}M{:.1} {hi:.1}H{:.1}" stroke="{color}" stroke-width="1.2" fill="none"/>"#,
        x - 3.0,
        x + 3.0,
        x - 3.0,
        x + 3.0
    );
}

/// Estimated width in pixels of `text` at 12 px.
pub fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_W
}

fn usable(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale != Scale::Log || v > 0.0)
}

/// XML text escaping.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Estimated advance of a character, in ems (DejaVu Sans averages a little less).
const EM_PER_CHAR: f64 = 0.54;
/// The smallest subtitle font on one line; below it the subtitle takes two lines.
const SUBTITLE_MIN_ONE_LINE: f64 = 9.5;

/// The subtitle's lines and font size: one line at 12 px, smaller for a long workload
/// description down to 9.5 px; longer ones on two lines split at the word nearest the middle,
/// at most 11 px and as large as fits (never below 7 px).
fn subtitle_layout(text: &str, width: f64) -> (Vec<String>, f64) {
    let room = width - 20.0;
    let fits = |line: &str| room / (line.chars().count() as f64 * EM_PER_CHAR).max(1.0);
    let one = fits(text);
    if one >= SUBTITLE_MIN_ONE_LINE {
        return (vec![text.to_string()], one.min(12.0));
    }
    // Split after the "; " nearest the middle (one part of the description per line), or
    // failing one near it at the space nearest the middle.
    let middle = text.chars().count() / 2;
    let off = |at: &usize| text[..*at].chars().count().abs_diff(middle);
    let nearest = |sep: &str| text.match_indices(sep).map(|(at, _)| at).min_by_key(off);
    let split = nearest("; ").filter(|at| off(at) <= middle / 2).or_else(|| nearest(" "));
    let Some(at) = split else { return (vec![text.to_string()], one.max(7.0)) };
    let (a, b) = (text[..at].trim_end(), text[at..].trim_start_matches([';', ' ']));
    let a = if text[at..].starts_with(';') { &text[..=at] } else { a };
    (vec![a.to_string(), b.to_string()], fits(a).min(fits(b)).clamp(7.0, 11.0))
}

#[cfg(test)]
mod tests {
    use super::check::check_figure;
    use super::*;

    #[test]
    fn the_checker_measures_text_as_the_layout_does() {
        assert_eq!(super::check::CHAR_W, CHAR_W);
    }

    fn chart(plot: Plot) -> Chart {
        Chart {
            title: "Single file <1 KiB> & more".into(),
            subtitle: "workload".into(),
            x_label: "file size (KiB)".into(),
            y_label: "bandwidth (Mb/s)".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            plot,
            note: String::new(),
        }
    }

    fn bars(name: &str, values: &[f64]) -> Bars {
        Bars { name: name.into(), values: values.to_vec(), spread: Vec::new() }
    }

    #[test]
    fn a_long_subtitle_gets_a_smaller_font_then_two_lines() {
        let mut c = chart(Plot::Lines(vec![Series::new("a", vec![(0.0, 1.0)])]));
        assert!(c.render().contains(r##"font-size="12.0" fill="#444">workload<"##));
        c.subtitle = "word ".repeat(30).trim_end().to_string();
        assert!(c.render().contains(r##"font-size="10.6" fill="#444">word word"##));
        c.subtitle = "word ".repeat(60).trim_end().to_string();
        let svg = c.render();
        assert_eq!(svg.matches(r#"class="subtitle""#).count(), 2, "{svg}");
        let (lines, size) = subtitle_layout(&c.subtitle, c.width());
        assert_eq!((lines[0].len(), lines[1].len()), (149, 149));
        assert!((size - 10.56).abs() < 0.01, "{size}");
        let (lines, size) = subtitle_layout(&"x".repeat(1000), 870.0);
        assert_eq!((lines.len(), size), (1, 7.0), "one word: one line, never below 7 px");
    }

    #[test]
    fn renders_lines_with_one_group_per_series_and_whiskers() {
        let mut amped = Series::new("amped", vec![(0.0, 1.0), (1.0, 10.0)]);
        amped.spread = vec![(0.5, 2.0), (9.0, 12.0)];
        let c = chart(Plot::Lines(vec![
            amped,
            Series::new("nginx", vec![(0.0, f64::NAN), (1.0, 0.0), (2.0, 5.0)]),
        ]));
        let svg = c.render();
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert_eq!(svg.matches(r#"class="spread""#).count(), 2);
        assert!(svg.contains("Single file &lt;1 KiB&gt; &amp; more"));
        assert!(svg.contains("bandwidth (Mb/s)") && svg.contains("Legend"));
        assert_eq!(check_figure(&svg).unwrap(), ["amped", "nginx"]);
    }

    #[test]
    fn renders_bars_with_spreads() {
        let mut a = bars("a", &[1.0, 2.0]);
        a.spread = vec![(0.8, 1.5), (2.0, 2.0)];
        let c = chart(Plot::Bars {
            categories: vec!["p5".into(), "p50".into()],
            series: vec![a, bars("b", &[3.0, f64::NAN])],
        });
        let svg = c.render();
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert_eq!(svg.matches("</title></rect>").count(), 3, "3 bars");
        assert_eq!(svg.matches(r#"class="spread""#).count(), 1, "a zero-width spread is not drawn");
        assert!(svg.contains("(min 0.8, max 1.5)"));
        check_figure(&svg).unwrap();
    }

    #[test]
    fn long_names_and_many_series_stay_inside_the_canvas() {
        let names = [
            "amped:no-path-cache:no-header-cache:no-file-cache",
            "amped:no-path-cache:no-header-cache",
            "amped:no-header-cache:no-file-cache",
        ];
        let mut series: Vec<Series> =
            names.iter().map(|n| Series::new(*n, vec![(1.0, 1.0), (2.0, 3.0)])).collect();
        series.extend((0..40).map(|i| Series::new(format!("s{i}"), vec![(1.0, f64::from(i))])));
        let svg = chart(Plot::Lines(series)).render();
        assert_eq!(check_figure(&svg).unwrap().len(), 43);
        let width = chart(Plot::Lines(vec![Series::new(names[0], vec![])])).width();
        assert!(width > LEFT + PLOT_W + LEGEND_MIN, "the legend column widened");
        let wide = format!(r#"width="{width}""#);
        let cut = svg.replacen(&wide, r#"width="700""#, 1);
        assert!(check_figure(&cut).is_err(), "a canvas too narrow for the legend is caught");
    }

    #[test]
    fn bars_ten_times_apart_get_a_panel_each() {
        let mut c = chart(Plot::Bars {
            categories: vec!["owlnet".into(), "cs".into()],
            series: vec![bars("amped", &[900.0, 40.0]), bars("sped", &[850.0, 4.0])],
        });
        c.y_scale = Scale::Linear;
        let svg = c.render();
        assert_eq!(svg.matches(r#"fill="none" stroke="black""#).count(), 2, "two panels");
        // Each series is drawn once per panel, in its one colour: a reviewer's check passes.
        assert_eq!(check_figure(&svg).unwrap(), ["amped", "sped"]);
        c.plot = Plot::Bars {
            categories: vec!["owlnet".into(), "cs".into()],
            series: vec![bars("amped", &[900.0, 400.0])],
        };
        assert_eq!(c.render().matches(r#"fill="none" stroke="black""#).count(), 1);
        // Category tops 5× apart, but one bar 70× below the largest: panels too.
        c.plot = Plot::Bars {
            categories: vec!["0.5".into(), "3.3".into()],
            series: vec![bars("amped", &[4200.0, 780.0]), bars("apache", &[500.0, 60.0])],
        };
        assert_eq!(c.render().matches(r#"fill="none" stroke="black""#).count(), 2);
        // A small bar beside tops alike: one axis would look the same twice.
        c.plot = Plot::Bars {
            categories: vec!["1.5".into(), "3.3".into()],
            series: vec![bars("amped", &[3800.0, 3000.0]), bars("uring", &[f64::NAN, 60.0])],
        };
        let svg = c.render();
        assert_eq!(svg.matches(r#"fill="none" stroke="black""#).count(), 1);
        assert!(svg.contains(">n/a<title>uring: no measurement</title>"), "{svg}");
        check_figure(&svg).unwrap();
    }

    #[test]
    fn a_note_sits_under_the_legend_wrapped_inside_the_canvas() {
        let mut c = chart(Plot::Lines(vec![Series::new("amped", vec![(1.0, 1.0)])]));
        c.note = "One round per point: no spread measured, so no whiskers are drawn here.".into();
        let svg = c.render();
        let lines: Vec<&str> = svg.split(r#"class="note""#).skip(1).collect();
        assert!(lines.len() >= 2, "wrapped: {svg}");
        for l in lines {
            let text = l.split('>').nth(1).unwrap().split('<').next().unwrap();
            assert!(LEFT + PLOT_W + 16.0 + text_width(text) * 11.0 / 12.0 <= c.width(), "{text}");
        }
        check_figure(&svg).unwrap();
    }

    #[test]
    fn dense_lines_carry_a_few_markers_and_bars_a_swatch() {
        // 60 points on a straight line across the plot (its diagonal: ~710 px).
        let dense: Vec<(f64, f64)> = (0..60).map(|i| (f64::from(i), f64::from(i))).collect();
        let mut c = chart(Plot::Lines(vec![Series::new("amped", dense)]));
        c.y_scale = Scale::Linear;
        let svg = c.render();
        let series = svg.split(r#"class="series""#).nth(1).unwrap().split("</g>").next().unwrap();
        let markers = series.matches("<circle").count();
        assert!((9..=14).contains(&markers), "{markers} markers: {series}");
        let sparse = chart(Plot::Lines(vec![Series::new("amped", vec![(1.0, 1.0), (2.0, 2.0)])]));
        assert_eq!(sparse.render().matches("<circle").count(), 2 + 1, "two points and the legend");
        let svg =
            chart(Plot::Bars { categories: vec!["a".into()], series: vec![bars("amped", &[1.0])] })
                .render();
        let legend = svg.split(r#"class="legend-entry""#).nth(1).unwrap();
        assert!(
            legend.starts_with(r#" data-series="amped""#) && !legend.contains("<circle"),
            "{legend}"
        );
    }
}
