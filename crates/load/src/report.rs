//! The run's report: one flat JSON object for machines (`--json`, read by `amplab`; schema in
//! `crates/load/README.md`) or a short human summary. Both come from the same [`Report`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::cli::IntervalBy;
use crate::config::{Config, Mode};
use crate::latency::{self, SpectrumPoint, Window, human};
use crate::stats::{ErrorKind, Latencies, Stats, WindowStats};
use crate::workload::Workload;

/// Failed requests by cause.
#[derive(Debug, Serialize)]
pub struct Errors {
    pub connect: u64,
    pub timeout: u64,
    pub reset: u64,
    pub bad_response: u64,
}

impl Errors {
    fn of(count: impl Fn(ErrorKind) -> u64) -> Errors {
        Errors {
            connect: count(ErrorKind::Connect),
            timeout: count(ErrorKind::Timeout),
            reset: count(ErrorKind::Reset),
            bad_response: count(ErrorKind::BadResponse),
        }
    }

    fn total(&self) -> u64 {
        self.connect + self.timeout + self.reset + self.bad_response
    }
}

/// Latency summary in microseconds.
#[derive(Debug, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p5: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
}

impl Latency {
    /// Exact mean, min and max, and the histogram's percentiles (zeros when empty).
    fn of(l: &Latencies) -> Latency {
        let hist = l.histogram();
        let quantile = |q: f64| if hist.is_empty() { 0 } else { hist.value_at_quantile(q) };
        let (mean, min, max) = l.exact_us();
        Latency {
            mean,
            min,
            max,
            p5: quantile(0.05),
            p50: quantile(0.50),
            p90: quantile(0.90),
            p95: quantile(0.95),
            p99: quantile(0.99),
            p999: quantile(0.999),
        }
    }
}

/// One `--interval` window: its latencies, answers and failures.
#[derive(Debug, Serialize)]
pub struct IntervalReport {
    /// Window start from the run's time zero, and its length, seconds.
    pub start_s: f64,
    pub length_s: f64,
    /// Valid responses in the window.
    pub requests: u64,
    /// Of those, 2xx/3xx.
    pub ok: u64,
    /// Their body payload bytes.
    pub body_bytes: u64,
    /// Failed requests in the window, by cause.
    pub errors: Errors,
    pub errors_total: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Every statistic of the window's latency, as `latency_us` has it for the run.
    pub latency_us: Latency,
    /// The window's histogram, compressed V2 base64 (as in the interval log).
    pub histogram: String,
}

/// Everything reported about a run.
#[derive(Debug, Serialize)]
pub struct Report {
    pub url: String,
    pub mode: &'static str,
    pub threads: usize,
    pub connections: usize,
    pub pipeline: usize,
    pub requests_per_conn: Option<u32>,
    pub requests: u64,
    pub ok: u64,
    pub sent: u64,
    pub bytes: u64,
    pub body_bytes: u64,
    pub duration_s: f64,
    pub rps: f64,
    pub bytes_per_s: f64,
    pub connections_opened: u64,
    pub conn_per_s: f64,
    pub status: BTreeMap<String, u64>,
    pub errors: Errors,
    pub errors_total: u64,
    pub first_errors: BTreeMap<&'static str, String>,
    pub latency_us: Latency,
    /// Percentile spectrum of the whole run's latency.
    pub latency_spectrum: Vec<SpectrumPoint>,
    /// The whole run's latency histogram, compressed V2 base64.
    pub latency_histogram: String,
    /// Per-window latency (`--interval`), in time order; empty without it.
    pub intervals: Vec<IntervalReport>,
    /// What places a request in a window (`--interval-by`: "start" or "end"); null without
    /// `--interval`.
    pub interval_by: Option<&'static str>,
    /// Time zero on the wall clock, seconds since the Unix epoch (windows start from it).
    pub time_zero_unix_s: f64,
    pub target_rate: Option<f64>,
    pub achieved_rate: f64,
    pub schedule_lag_warnings: u64,
    pub max_schedule_lag_us: u64,
    pub backlog_max: usize,
    pub workload_targets: usize,
    pub workload_skipped_lines: u64,
    pub unreachable: bool,
    pub interrupted: bool,
    /// Whether the text report lists the spectrum (`--latency`); not part of the JSON.
    #[serde(skip)]
    show_spectrum: bool,
}

/// The rate the requests were sent at: between the first send and the last (0 with fewer than
/// two).
fn achieved_rate(stats: &Stats) -> f64 {
    match (stats.first_send, stats.last_send) {
        (Some(first), Some(last)) if stats.sent > 1 && last > first => {
            (stats.sent - 1) as f64 / (last - first).as_secs_f64()
        }
        _ => 0.0,
    }
}

/// The first error message of each kind that happened.
fn first_errors(stats: &Stats) -> BTreeMap<&'static str, String> {
    ErrorKind::ALL
        .into_iter()
        .filter_map(|k| Some((k.name(), stats.first_error(k)?.to_string())))
        .collect()
}

impl Report {
    /// Builds the report of a run that started at `started` (its time zero, wall clock) and
    /// lasted `duration`.
    pub fn new(
        config: &Config,
        workload: &Workload,
        stats: &Stats,
        started: SystemTime,
        duration: Duration,
        interrupted: bool,
    ) -> Report {
        let secs = duration.as_secs_f64();
        let per_second = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let hist = stats.latency().histogram();
        Report {
            url: config.url_text.clone(),
            mode: match config.mode {
                Mode::Closed => "closed",
                Mode::Open { .. } => "open",
            },
            threads: config.threads,
            connections: config.connections,
            pipeline: config.pipeline,
            requests_per_conn: config.per_conn,
            requests: stats.requests,
            ok: stats.ok,
            sent: stats.sent,
            bytes: stats.bytes,
            body_bytes: stats.body_bytes,
            duration_s: secs,
            rps: per_second(stats.requests),
            bytes_per_s: per_second(stats.bytes),
            connections_opened: stats.connections_opened,
            conn_per_s: per_second(stats.connections_opened),
            status: stats.statuses().map(|(code, n)| (code.to_string(), n)).collect(),
            errors: Errors::of(|k| stats.errors(k)),
            errors_total: stats.total_errors(),
            first_errors: first_errors(stats),
            latency_us: Latency::of(stats.latency()),
            target_rate: match config.mode {
                Mode::Closed => None,
                Mode::Open { rate } => Some(rate),
            },
            achieved_rate: achieved_rate(stats),
            schedule_lag_warnings: stats.lag_warnings,
            max_schedule_lag_us: stats.max_lag.as_micros() as u64,
            backlog_max: stats.backlog_max,
            workload_targets: workload.len(),
            workload_skipped_lines: workload.skipped_lines,
            unreachable: stats.unreachable,
            latency_spectrum: latency::spectrum(hist),
            latency_histogram: latency::encode(hist),
            intervals: interval_reports(config, stats, duration),
            interval_by: config.interval.map(|i| i.by.name()),
            time_zero_unix_s: started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            interrupted,
            show_spectrum: config.spectrum,
        }
    }

    /// The JSON form: one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the report serialises")
    }

    /// The human summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let rate = self.target_rate.map_or(String::new(), |r| format!(" at {r} req/s"));
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let sessions = self.requests_per_conn.map_or(String::new(), |k| {
            format!(", {k} request{} per connection", plural(k as usize))
        });
        let _ = writeln!(
            out,
            "{} loop{rate}, {} connection{}, {} thread{}, pipeline {}{sessions}: {}",
            self.mode,
            self.connections,
            plural(self.connections),
            self.threads,
            plural(self.threads),
            self.pipeline,
            self.url
        );
        self.write_counts(&mut out);
        self.write_latency(&mut out);
        if let Some(target) = self.target_rate {
            let _ = writeln!(
                out,
                "  schedule     target {target} req/s, achieved {:.1} req/s, {} lag warnings (max lag {} us), backlog max {}",
                self.achieved_rate,
                self.schedule_lag_warnings,
                self.max_schedule_lag_us,
                self.backlog_max
            );
        }
        if self.interrupted {
            let _ =
                writeln!(out, "  INTERRUPTED  stopped by Ctrl-C: the run is shorter than asked");
        }
        out
    }

    /// Duration, requests, bytes, connections, statuses and errors.
    fn write_counts(&self, out: &mut String) {
        let _ = writeln!(out, "  duration     {:.3} s", self.duration_s);
        let _ = writeln!(
            out,
            "  requests     {} ({} 2xx/3xx)   {:.1} req/s",
            self.requests, self.ok, self.rps
        );
        let _ = writeln!(out, "  bytes        {}   {:.2} MB/s", self.bytes, self.bytes_per_s / 1e6);
        let _ = writeln!(
            out,
            "  connections  {} opened   {:.1} conn/s",
            self.connections_opened, self.conn_per_s
        );
        let statuses: Vec<String> =
            self.status.iter().map(|(code, n)| format!("{code}: {n}")).collect();
        let _ = writeln!(
            out,
            "  status       {}",
            if statuses.is_empty() { "-".into() } else { statuses.join(", ") }
        );
        let e = &self.errors;
        let _ = writeln!(
            out,
            "  errors       connect {}, timeout {}, reset {}, bad response {}",
            e.connect, e.timeout, e.reset, e.bad_response
        );
        for (kind, detail) in &self.first_errors {
            let _ = writeln!(out, "               first {kind}: {detail}");
        }
    }

    /// The latency summary, the spectrum with `--latency`, and the `--interval` windows.
    fn write_latency(&self, out: &mut String) {
        let l = &self.latency_us;
        let h = |us: u64| human(us as f64);
        let _ = writeln!(
            out,
            "  latency      mean {}, min {}, max {}",
            human(l.mean),
            human(l.min),
            human(l.max)
        );
        let _ = writeln!(
            out,
            "               p5 {}, p50 {}, p90 {}, p95 {}, p99 {}, p99.9 {}",
            h(l.p5),
            h(l.p50),
            h(l.p90),
            h(l.p95),
            h(l.p99),
            h(l.p999)
        );
        if self.show_spectrum {
            let _ = writeln!(out, "  latency spectrum (percentile, latency, requests up to it)");
            for p in &self.latency_spectrum {
                let _ = writeln!(
                    out,
                    "    {:>12.6}%  {:>10}  {:>10}",
                    p.percentile,
                    h(p.value_us),
                    p.count
                );
            }
        }
        for w in &self.intervals {
            let _ = writeln!(
                out,
                "  {:>7.1}-{:<7.1}s {} requests, p50 {}, p90 {}, p99 {}, max {}",
                w.start_s,
                w.start_s + w.length_s,
                w.requests,
                h(w.p50_us),
                h(w.p90_us),
                h(w.p99_us),
                h(w.max_us)
            );
        }
    }
}

/// The spans of the run's `--interval` windows with what each saw: the last one cut at the
/// run's end, which for windows by start is the end of sending (`--duration`).
fn spans<'a>(
    config: &Config,
    stats: &'a Stats,
    duration: Duration,
) -> Vec<(Duration, Duration, &'a WindowStats)> {
    let Some(interval) = config.interval else { return Vec::new() };
    let end = match (interval.by, config.duration) {
        (IntervalBy::Start, Some(d)) => d.min(duration),
        _ => duration,
    };
    stats
        .windows()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let start = interval.length * i as u32;
            let left = end.saturating_sub(start);
            let length = if left.is_zero() { interval.length } else { interval.length.min(left) };
            (start, length, w)
        })
        .collect()
}

/// The run's latency windows: one per `--interval`, or the whole run as one window without it.
pub fn windows(config: &Config, stats: &Stats, duration: Duration) -> Vec<Window> {
    if config.interval.is_none() {
        return vec![Window {
            start: Duration::ZERO,
            length: duration,
            histogram: stats.latency().histogram().clone(),
        }];
    }
    spans(config, stats, duration)
        .into_iter()
        .map(|(start, length, w)| Window {
            start,
            length,
            histogram: w.latencies.histogram().clone(),
        })
        .collect()
}

/// `intervals` of the report (empty without `--interval`).
fn interval_reports(config: &Config, stats: &Stats, duration: Duration) -> Vec<IntervalReport> {
    spans(config, stats, duration)
        .into_iter()
        .map(|(start, length, w)| {
            let latency = Latency::of(&w.latencies);
            let h = w.latencies.histogram();
            let errors = Errors::of(|k| w.errors(k));
            IntervalReport {
                start_s: start.as_secs_f64(),
                length_s: length.as_secs_f64(),
                requests: w.requests(),
                ok: w.ok,
                body_bytes: w.body_bytes,
                errors_total: errors.total(),
                errors,
                p50_us: latency.p50,
                p90_us: latency.p90,
                p99_us: latency.p99,
                max_us: if h.is_empty() { 0 } else { h.max() },
                latency_us: latency,
                histogram: latency::encode(h),
            }
        })
        .collect()
}
