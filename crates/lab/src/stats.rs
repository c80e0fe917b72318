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
}
