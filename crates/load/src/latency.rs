//! Exporting the latency distribution: the percentile spectrum (wrk2's `--latency` table), the
//! histogram encoded as HdrHistogram's compressed V2 format in base64 (what every HdrHistogram
//! implementation decodes), and the standard interval log (`.hlog`, as Java's
//! `HistogramLogWriter` writes and `HistogramLogProcessor` reads). Values are microseconds.
//! Also the text report's unit choice (µs, ms or s).

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
#[cfg(test)]
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
#[cfg(test)]
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde::Serialize;

/// Spectrum points per halving of the distance to 100 % (HdrHistogram's percentile
/// distribution uses 5 too): 0, 10, 20, … 50, 55, … 75, 77.5, … so the tail is finely sampled.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// One line of the percentile spectrum.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpectrumPoint {
    /// Percentile, 0..=100.
    pub percentile: f64,
    /// Latency at that percentile, microseconds (highest equivalent value of its bucket).
    pub value_us: u64,
    /// Requests with a latency up to `value_us`.
    pub count: u64,
}

/// One interval histogram of a run (`--interval`).
#[derive(Debug, Clone)]
pub struct Window {
    /// Start, from the run's time zero.
    pub start: Duration,
    /// Length (the last window may be shorter).
    pub length: Duration,
    /// Latencies of the requests the window holds (by their end or start, `--interval-by`),
    /// microseconds.
    pub histogram: Histogram<u64>,
}

/// The percentile spectrum of `hist` (empty when nothing was recorded).
pub fn spectrum(hist: &Histogram<u64>) -> Vec<SpectrumPoint> {
    if hist.is_empty() {
        return Vec::new();
    }
    let mut points: Vec<SpectrumPoint> = hist
        .iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .map(|v| SpectrumPoint {
            percentile: v.quantile_iterated_to() * 100.0,
            value_us: hist.highest_equivalent(v.value_iterated_to()),
            count: 0,
        })
        .collect();
    // The iterator repeats 100 % once at its end; keep one.
    points.dedup_by(|b, a| a.percentile >= 100.0 && b.percentile >= 100.0);
    let mut seen = 0;
    let mut recorded = hist.iter_recorded().peekable();
    for p in &mut points {
        while let Some(v) = recorded.next_if(|v| v.value_iterated_to() <= p.value_us) {
            seen += v.count_at_value();
        }
        p.count = seen;
    }
    points
}

/// `hist` in HdrHistogram's compressed V2 encoding, base64 (the form interval logs hold).
pub fn encode(hist: &Histogram<u64>) -> String {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(hist, &mut bytes).expect("serialising to memory succeeds");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes what [`encode`] made (or any V2 / V2-compressed base64 histogram).
#[cfg(test)]
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("not an HdrHistogram: {e:?}"))
}

/// Writes the interval log of a run that started at `started` (wall clock): one histogram per
/// window, timestamps relative to the start (`BaseTime`), values in microseconds.
pub fn write_hlog(path: &Path, started: SystemTime, windows: &[Window]) -> io::Result<()> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("ampload latency histograms; values in microseconds")
        .with_start_time(started)
        .with_base_time(started)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)?;
    log.write_comment(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    )?;
    for w in windows {
        log.write_histogram(&w.histogram, w.start, w.length, None)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
    }
    drop(log);
    std::fs::write(path, out)
}

/// Reads an interval log back: each histogram with its start (relative to `BaseTime` when the
/// log has one) and length.
#[cfg(test)]
pub fn read_hlog(bytes: &[u8]) -> Result<Vec<Window>, String> {
    let mut windows = Vec::new();
    for entry in IntervalLogIterator::new(bytes) {
        match entry.map_err(|e| format!("unreadable interval log: {e:?}"))? {
            LogEntry::Interval(h) => windows.push(Window {
                start: h.start_timestamp(),
                length: h.duration(),
                histogram: decode(h.encoded_histogram())?,
            }),
            LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
        }
    }
    Ok(windows)
}

/// A latency in the unit that suits it: `850 µs`, `3.31 ms`, `1.25 s`.
pub fn human(us: f64) -> String {
    if !us.is_finite() {
        "-".to_string()
    } else if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 37 % 90_000 + 1).unwrap();
        }
        h.record(2_500_000).unwrap();
        h
    }

    #[test]
    fn the_encoding_round_trips() {
        let h = sample();
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q {q}");
        }
        assert!(decode("not base64!").is_err());
    }

    #[test]
    fn the_interval_log_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.hlog");
        let mut second = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        second.record(42).unwrap();
        let windows = [
            Window { start: Duration::ZERO, length: Duration::from_secs(5), histogram: sample() },
            Window {
                start: Duration::from_secs(5),
                length: Duration::from_millis(2500),
                histogram: second,
            },
        ];
        write_hlog(&path, SystemTime::now(), &windows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("#[BaseTime: ") && text.contains("#[StartTime: "), "{text}");
        let back = read_hlog(text.as_bytes()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(
            (back[1].start, back[1].length),
            (Duration::from_secs(5), Duration::from_millis(2500))
        );
        for (a, b) in windows.iter().zip(&back) {
            assert_eq!(spectrum(&a.histogram), spectrum(&b.histogram));
        }
    }

    #[test]
    fn the_spectrum_rises_to_the_maximum() {
        let h = sample();
        let s = spectrum(&h);
        assert!(s.len() > 20, "{}", s.len());
        assert_eq!(s[0].percentile, 0.0);
        assert_eq!(s.last().unwrap().percentile, 100.0);
        assert_eq!(s.last().unwrap().count, h.len());
        assert_eq!(s.last().unwrap().value_us, h.highest_equivalent(h.max()));
        assert!(s.windows(2).all(|w| w[0].value_us <= w[1].value_us && w[0].count <= w[1].count));
        let median = s.iter().find(|p| p.percentile >= 50.0).unwrap();
        assert_eq!(median.value_us, h.highest_equivalent(h.value_at_quantile(0.5)));
        assert!(spectrum(&Histogram::new(3).unwrap()).is_empty());
    }

    #[test]
    fn units_suit_the_value() {
        assert_eq!(human(850.4), "850 µs");
        assert_eq!(human(3_311_615.0), "3.31 s");
        assert_eq!(human(3311.6), "3.31 ms");
        assert_eq!(human(f64::NAN), "-");
    }
}
