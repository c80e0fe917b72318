//! Axis scales and tick positions: linear axes get "nice" ticks (1, 2, 5 × 10^k), logarithmic
//! axes get powers of ten (with 2 and 5 in between when the range is short).

/// Linear or base-10 logarithmic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear, from zero when the data are non-negative (magnitudes: throughput, time).
    Linear,
    /// Linear over the data's own range only (offered rates, where zero is not a point of
    /// interest and would squeeze the data into a corner).
    Span,
    Log,
}

/// A data range mapped onto a pixel range.
#[derive(Clone, Debug)]
pub struct Axis {
    pub scale: Scale,
    pub min: f64,
    pub max: f64,
    pub ticks: Vec<f64>,
}

impl Axis {
    /// An axis covering `values` (non-finite values, and non-positive ones on a log axis, are
    /// ignored). A linear axis of non-negative data starts at zero.
    pub fn fit(values: impl IntoIterator<Item = f64>, scale: Scale) -> Axis {
        let vals: Vec<f64> = values
            .into_iter()
            .filter(|v| v.is_finite() && (scale != Scale::Log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) =
            vals.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        if vals.is_empty() {
            (lo, hi) = if scale == Scale::Log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        match scale {
            Scale::Linear | Scale::Span => {
                if scale == Scale::Linear && lo >= 0.0 {
                    lo = 0.0;
                }
                if hi <= lo {
                    // One value: a unit (or a tenth of it) either side.
                    let pad = (lo.abs() * 0.1).max(if scale == Scale::Span { 1e-9 } else { 1.0 });
                    (lo, hi) =
                        if scale == Scale::Span { (lo - pad, hi + pad) } else { (lo, lo + 1.0) };
                }
                let step = nice_step((hi - lo) / 5.0);
                let (min, max) = ((lo / step).floor() * step, (hi / step).ceil() * step);
                let n = ((max - min) / step).round() as usize;
                let ticks = (0..=n).map(|i| min + step * i as f64).collect();
                Axis { scale, min, max, ticks }
            }
            Scale::Log => {
                let min = 10f64.powf(lo.log10().floor());
                let mut max = 10f64.powf(hi.log10().ceil());
                if max <= min {
                    max = min * 10.0;
                }
                let decades = (max / min).log10().round() as i32;
                let mut ticks = Vec::new();
                for d in 0..=decades {
                    let base = min * 10f64.powi(d);
                    ticks.push(base);
                    if decades <= 2 && d < decades {
                        ticks.push(base * 2.0);
                        ticks.push(base * 5.0);
                    }
                }
                Axis { scale, min, max, ticks }
            }
        }
    }

    /// Position of `v` in [0, 1] along the axis.
    pub fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear | Scale::Span => (v - self.min) / (self.max - self.min),
            Scale::Log => {
                (v.max(self.min * 1e-3).log10() - self.min.log10())
                    / (self.max.log10() - self.min.log10())
            }
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = if raw > 0.0 && raw.is_finite() { raw } else { 1.0 };
    let mag = 10f64.powf(raw.log10().floor());
    let unit = raw / mag;
    let n = if unit <= 1.0 {
        1.0
    } else if unit <= 2.0 {
        2.0
    } else if unit <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

/// A tick label: `0`, `2.5`, `1k`, `20k`, `1.5M`, `0.001`.
pub fn label(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    };
    if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_nice() {
        let a = Axis::fit([3.0, 97.0], Scale::Linear);
        assert_eq!((a.min, a.max), (0.0, 100.0));
        assert_eq!(a.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(a.frac(50.0), 0.5);
    }

    #[test]
    fn a_span_axis_covers_the_data_only() {
        let a = Axis::fit([108.0, 153.0, 198.0, 243.0], Scale::Span);
        assert_eq!((a.min, a.max), (100.0, 250.0));
        let one = Axis::fit([150.0], Scale::Span);
        assert!(one.min < 150.0 && one.max > 150.0 && one.min > 100.0, "{one:?}");
    }

    #[test]
    fn log_ticks_are_decades() {
        let a = Axis::fit([0.3, 2000.0], Scale::Log);
        assert_eq!((a.min, a.max), (0.1, 10_000.0));
        assert_eq!(a.ticks.len(), 6);
        assert!((a.frac(1.0) - 0.2).abs() < 1e-9);
        let empty = Axis::fit([f64::NAN], Scale::Log);
        assert_eq!((empty.min, empty.max), (1.0, 10.0));
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(0.0), "0");
        assert_eq!(label(2.5), "2.5");
        assert_eq!(label(20_000.0), "20k");
        assert_eq!(label(1_500_000.0), "1.5M");
        assert_eq!(label(0.001), "0.001");
    }
}
