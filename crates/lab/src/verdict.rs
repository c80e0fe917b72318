//! Verdicts that respect noise: a finding of the paper "holds" or "does not hold" only when every
//! round agrees — the whole range of the compared quantity over rounds (e.g. the per-round ratio
//! sped/amped) lies on one side of the threshold. When the range straddles the threshold the
//! verdict is "within noise", with the numbers. A quick run gives no verdict at all (its cells
//! last a fraction of a second), and a single round says that its noise was not measured.

use crate::stats::{Spread, fmt};

/// What the paper's finding asks of the quantity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cmp {
    /// At least the threshold.
    AtLeast(f64),
    /// At most the threshold.
    AtMost(f64),
    /// Strictly below the threshold.
    Below(f64),
}

impl Cmp {
    fn holds(self, v: f64) -> bool {
        match self {
            Cmp::AtLeast(t) => v >= t,
            Cmp::AtMost(t) => v <= t,
            Cmp::Below(t) => v < t,
        }
    }

    fn text(self) -> String {
        match self {
            Cmp::AtLeast(t) => format!("≥ {}", fmt(t, 2)),
            Cmp::AtMost(t) => format!("≤ {}", fmt(t, 2)),
            Cmp::Below(t) => format!("< {}", fmt(t, 2)),
        }
    }
}

/// The outcome of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// The rounds disagree: their range straddles the threshold.
    WithinNoise,
    /// A quick run: no verdict.
    Quick,
    /// Nothing was measured.
    NoData,
}

/// A check of one quantity over rounds.
#[derive(Clone, Copy, Debug)]
pub struct Judgement {
    pub spread: Spread,
    pub cmp: Cmp,
    pub verdict: Verdict,
}

/// Judges the per-round values `samples` (NaN = a round that did not measure it).
pub fn judge(samples: &[f64], cmp: Cmp, quick: bool) -> Judgement {
    let spread = Spread::of(samples);
    let verdict = if quick {
        Verdict::Quick
    } else if spread.n == 0 {
        Verdict::NoData
    } else {
        match (cmp.holds(spread.min), cmp.holds(spread.max)) {
            (true, true) => Verdict::Holds,
            (false, false) => Verdict::DoesNotHold,
            _ => Verdict::WithinNoise,
        }
    };
    Judgement { spread, cmp, verdict }
}

/// Per-round ratios `num[r] / den[r]` when both list the same rounds; otherwise the widest
/// ratios the ranges allow (min/max, median/median, max/min), so the check stays conservative.
pub fn ratios(num: &[f64], den: &[f64]) -> Vec<f64> {
    if num.len() == den.len() {
        return num.iter().zip(den).map(|(a, b)| crate::stats::ratio(*a, *b)).collect();
    }
    let (a, b) = (Spread::of(num), Spread::of(den));
    let r = crate::stats::ratio;
    vec![r(a.min, b.max), r(a.median, b.median), r(a.max, b.min)]
}

impl Judgement {
    /// The verdict as summary text: `Holds.` / `Does not hold: why.` / `Within noise: …`, with
    /// the rounds' range whenever there is more than one round.
    pub fn text(&self, yes: &str, no: &str) -> String {
        let s = &self.spread;
        let range = if s.n > 1 {
            format!(" (rounds: {}–{})", fmt(s.min, 2), fmt(s.max, 2))
        } else {
            " (one round: noise not measured)".to_string()
        };
        match self.verdict {
            Verdict::Holds => format!("{yes}{range}."),
            Verdict::DoesNotHold => format!("{no}{range}."),
            Verdict::WithinNoise => format!(
                "Within noise: the rounds give {}–{}, on both sides of {}; no verdict.",
                fmt(s.min, 2),
                fmt(s.max, 2),
                self.cmp.text()
            ),
            Verdict::Quick => "No verdict (quick run).".to_string(),
            Verdict::NoData => "No verdict (not measured).".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_rounds_are_within_noise() {
        // mp/amped per round: 0.92, 1.08, 1.00 — the median is 1.00 but the rounds disagree.
        let j = judge(&ratios(&[920.0, 1080.0, 1000.0], &[1000.0; 3]), Cmp::Below(1.0), false);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert!(j.text("Holds", "Does not hold").contains("0.92–1.08, on both sides of < 1.00"));
    }

    #[test]
    fn agreeing_rounds_decide() {
        let j = judge(&[0.81, 0.9, 0.85], Cmp::Below(1.0), false);
        assert_eq!(j.verdict, Verdict::Holds);
        assert_eq!(j.text("Holds", "No"), "Holds (rounds: 0.81–0.90).");
        let j = judge(&[1.2, 1.31, f64::NAN], Cmp::AtMost(1.1), false);
        assert_eq!(j.verdict, Verdict::DoesNotHold);
        assert_eq!(
            j.text("Holds", "Does not hold: why"),
            "Does not hold: why (rounds: 1.20–1.31)."
        );
        let one = judge(&[3.0], Cmp::AtLeast(2.0), false);
        assert_eq!(one.text("Holds", "No"), "Holds (one round: noise not measured).");
    }

    #[test]
    fn quick_runs_and_missing_data_give_no_verdict() {
        assert_eq!(
            judge(&[0.5], Cmp::Below(1.0), true).text("Holds", "No"),
            "No verdict (quick run)."
        );
        assert_eq!(judge(&[f64::NAN], Cmp::Below(1.0), false).verdict, Verdict::NoData);
    }

    #[test]
    fn unpaired_ratios_take_the_widest_range() {
        let r = ratios(&[9.0, 11.0], &[10.0]);
        assert_eq!(r, vec![0.9, 1.0, 1.1]);
        assert_eq!(judge(&r, Cmp::AtLeast(1.0), false).verdict, Verdict::WithinNoise);
    }
}
