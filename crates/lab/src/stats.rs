//! Small statistics over rounds: medians and ratios, and number formatting for tables.

/// Median of the finite values (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The spread of one quantity over rounds: median, min and max of the finite values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Finite values (rounds that measured it).
    pub n: usize,
}

impl Spread {
    /// The spread of `values` (all NaN when none is finite).
    pub fn of(values: &[f64]) -> Spread {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let (min, max) = finite
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        if finite.is_empty() {
            return Spread { median: f64::NAN, min: f64::NAN, max: f64::NAN, n: 0 };
        }
        Spread { median: median(&finite), min, max, n: finite.len() }
    }

    /// (min, max), for whiskers.
    pub fn range(&self) -> (f64, f64) {
        (self.min, self.max)
    }

    /// `12.3 (11.0–14.1)` over several rounds, `12.3` for one.
    pub fn text(&self, decimals: usize) -> String {
        if self.n > 1 && self.max > self.min {
            format!(
                "{} ({}–{})",
                fmt(self.median, decimals),
                fmt(self.min, decimals),
                fmt(self.max, decimals)
            )
        } else {
            fmt(self.median, decimals)
        }
    }

    /// The widest relative spread, (max − min) / median, NaN for fewer than two rounds.
    pub fn relative(&self) -> f64 {
        if self.n > 1 { ratio(self.max - self.min, self.median) } else { f64::NAN }
    }
}

/// A table cell over rounds: `median`, or `median (min–max)` when two or more rounds
/// measured it (only the finite values count; `-` when none did).
pub fn spread(v: &[f64], decimals: usize) -> String {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let m = fmt(median(&finite), decimals);
    if finite.len() < 2 {
        return m;
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m} ({}–{})", fmt(lo, decimals), fmt(hi, decimals))
}

/// A figure's note on its spread: what the whiskers over `rounds` rounds per `point` show,
/// or that one round has none.
pub fn whiskers_note(rounds: u32, point: &str) -> String {
    if rounds > 1 {
        format!("Medians of {rounds} rounds per {point}; whiskers: min–max over the rounds.")
    } else {
        format!("One round per {point}: no spread was measured, so there are no whiskers.")
    }
}

/// A CDF figure's note on what it draws: the measured histogram, or lines through the
/// percentiles of a run from before ampload exported one.
pub fn cdf_note(measured: bool) -> &'static str {
    if measured {
        "Each server's measured latency histogram (ampload's percentile spectrum), last round."
    } else {
        "Not a measured distribution: straight lines through the 8 percentiles ampload reported."
    }
}

/// `a / b`, NaN when either is not a positive finite number.
pub fn ratio(a: f64, b: f64) -> f64 {
    if a.is_finite() && b.is_finite() && b > 0.0 { a / b } else { f64::NAN }
}

/// A number for tables: `-` for NaN, else with the given decimals.
pub fn fmt(value: f64, decimals: usize) -> String {
    if value.is_finite() { format!("{value:.decimals$}") } else { "-".to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_ratios_and_formats() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert_eq!(fmt(f64::NAN, 2), "-");
        assert_eq!(fmt(1.234, 1), "1.2");
        assert!(ratio(1.0, 0.0).is_nan());
    }

    #[test]
    fn spreads_over_rounds() {
        let s = Spread::of(&[10.0, f64::NAN, 12.0, 9.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (10.0, 9.0, 12.0, 3));
        assert_eq!(s.text(1), "10.0 (9.0–12.0)");
        assert!((s.relative() - 0.3).abs() < 1e-12);
        assert_eq!(Spread::of(&[5.0]).text(0), "5");
        assert!(Spread::of(&[]).median.is_nan() && Spread::of(&[5.0]).relative().is_nan());
    }

    #[test]
    fn a_cell_over_rounds_shows_its_range() {
        assert_eq!(spread(&[12.0, 10.0, f64::NAN, 11.0], 1), "11.0 (10.0–12.0)");
        assert_eq!(spread(&[3.0, 3.0], 0), "3 (3–3)");
        assert_eq!(spread(&[7.24], 1), "7.2");
        assert_eq!(spread(&[f64::NAN], 1), "-");
    }
}
