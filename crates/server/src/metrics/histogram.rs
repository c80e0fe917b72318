//! A fixed-bucket latency histogram with atomic counters, rendered in the Prometheus text
//! format (buckets cumulative, ending with `+Inf`, then `_sum` and `_count`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds, seconds: 100 µs to 10 s, roughly ×2.5 apart.
pub const BOUNDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Counts of observations per bucket (not cumulative), their sum and count.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BOUNDS.len() + 1],
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| s <= *b).unwrap_or(BOUNDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Appends the samples of this histogram as `name{labels,le=…}` lines.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BOUNDS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_with_inf_equal_to_count() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "step=\"a\"");
        assert!(out.contains("x_seconds_bucket{step=\"a\",le=\"0.0001\"} 1\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{step=\"a\",le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{step=\"a\",le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{step=\"a\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_seconds_count{step=\"a\"} 3\n"), "{out}");
        assert!(out.contains("x_seconds_sum{step=\"a\"} 60.00305\n"), "{out}");
    }
}
