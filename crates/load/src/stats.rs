//! What one event-loop thread measured, and merging the threads' measurements at the end.
//!
//! Each thread owns its [`Stats`] outright (no sharing, no atomics on the hot path); latencies go
//! into an HDR histogram in microseconds, and exact sum/min/max are kept in nanoseconds beside
//! it. Error counts are per request: a request that got no valid response is counted once,
//! under the cause that ended its connection ([`ErrorKind`]).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::cli::IntervalBy;
use crate::config::Interval;
use crate::response::Response;

/// Why a request got no valid response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The connection could not be established (refused, unreachable, timed out, out of fds).
    Connect,
    /// No complete response within `--timeout` of the request's start.
    Timeout,
    /// The connection broke (reset, or closed by the server without warning).
    Reset,
    /// The response was not valid HTTP or broke its own framing.
    BadResponse,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 4] =
        [ErrorKind::Connect, ErrorKind::Timeout, ErrorKind::Reset, ErrorKind::BadResponse];

    /// The name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::BadResponse => "bad_response",
        }
    }
}

/// Largest latency the histogram holds (one hour, in microseconds); larger ones saturate.
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Status codes are 100..=599, so an array indexed by code covers them all.
const STATUS_SLOTS: usize = 600;

/// Latencies: the HDR histogram (microseconds) and the exact sum, min and max beside it.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies { histogram: new_histogram(), sum_ns: 0, min_ns: u64::MAX, max_ns: 0 }
    }
}

impl Latencies {
    fn record(&mut self, ns: u64) {
        self.histogram.saturating_record((ns / 1000).max(1));
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    fn merge(&mut self, other: &Latencies) {
        self.histogram.add(&other.histogram).expect("histograms share their bounds");
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The histogram, in microseconds.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.histogram
    }

    /// Exact (mean, min, max) in microseconds; zeros when nothing was recorded.
    pub fn exact_us(&self) -> (f64, f64, f64) {
        let n = self.histogram.len();
        if n == 0 {
            return (0.0, 0.0, 0.0);
        }
        let mean = self.sum_ns as f64 / n as f64 / 1000.0;
        (mean, self.min_ns as f64 / 1000.0, self.max_ns as f64 / 1000.0)
    }
}

/// What one `--interval` window saw.
#[derive(Debug, Clone, Default)]
pub struct WindowStats {
    /// Latencies of the valid responses.
    pub latencies: Latencies,
    /// Of those, 2xx/3xx.
    pub ok: u64,
    /// Their body payload bytes.
    pub body_bytes: u64,
    /// Failed requests per [`ErrorKind`].
    errors: [u64; 4],
}

impl WindowStats {
    /// Valid responses.
    pub fn requests(&self) -> u64 {
        self.latencies.histogram.len()
    }

    /// Failed requests of `kind`.
    pub fn errors(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    fn merge(&mut self, other: &WindowStats) {
        self.latencies.merge(&other.latencies);
        self.ok += other.ok;
        self.body_bytes += other.body_bytes;
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors) {
            *mine += theirs;
        }
    }
}

/// One thread's measurements.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Requests that got a complete, valid response (any status).
    pub requests: u64,
    /// Those with a 2xx or 3xx status.
    pub ok: u64,
    /// Wire bytes of those responses (heads and bodies).
    pub bytes: u64,
    /// Body payload bytes of those responses.
    pub body_bytes: u64,
    /// Responses per status code.
    status: Vec<u64>,
    /// Failed requests per [`ErrorKind`].
    errors: [u64; 4],
    /// The first failure's description per kind.
    first_error: [Option<String>; 4],
    /// Connections that completed their TCP handshake.
    pub connections_opened: u64,
    /// Latencies of the valid responses.
    latency: Latencies,
    /// Requests handed to a connection.
    pub sent: u64,
    /// When the first and the last of them were handed over.
    pub first_send: Option<Instant>,
    pub last_send: Option<Instant>,
    /// Open loop: requests the generator released more than the lag threshold late.
    pub lag_warnings: u64,
    /// Open loop: the worst such lateness.
    pub max_lag: Duration,
    /// Open loop: most requests ever waiting for a free connection.
    pub backlog_max: usize,
    /// When the thread finished its last request.
    pub finished: Option<Instant>,
    /// `--interval`: the run's time zero and the windows.
    windowing: Option<(Instant, Interval)>,
    /// Per window (index = time since time zero / length, by the request's start or end).
    windows: Vec<WindowStats>,
    /// The thread gave up because the server could not be reached at all.
    pub unreachable: bool,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            requests: 0,
            ok: 0,
            bytes: 0,
            body_bytes: 0,
            status: vec![0; STATUS_SLOTS],
            errors: [0; 4],
            first_error: Default::default(),
            connections_opened: 0,
            latency: Latencies::default(),
            sent: 0,
            first_send: None,
            last_send: None,
            lag_warnings: 0,
            max_lag: Duration::ZERO,
            backlog_max: 0,
            finished: None,
            windowing: None,
            windows: Vec::new(),
            unreachable: false,
        }
    }
}

/// An empty latency histogram: microseconds, 3 significant digits, up to an hour.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
}

impl Stats {
    /// Counts a valid response to a request that started (or was due) at `start`.
    pub fn record_response(&mut self, response: &Response, start: Instant, now: Instant) {
        let ok = (200..400).contains(&response.status);
        self.requests += 1;
        self.ok += u64::from(ok);
        self.bytes += response.bytes;
        self.body_bytes += response.body_bytes;
        self.status[usize::from(response.status).min(STATUS_SLOTS - 1)] += 1;
        let ns = u64::try_from(now.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        self.latency.record(ns);
        if let Some(w) = self.window_of(start, now) {
            w.latencies.record(ns);
            w.ok += u64::from(ok);
            w.body_bytes += response.body_bytes;
        }
    }

    /// Also keeps measurements per window of `interval` from `origin`.
    pub fn start_windows(&mut self, origin: Instant, interval: Interval) {
        self.windowing = Some((origin, interval));
    }

    /// The window a request that started at `start` and ended at `now` belongs to (created if
    /// new), when windows are kept.
    fn window_of(&mut self, start: Instant, now: Instant) -> Option<&mut WindowStats> {
        let (origin, interval) = self.windowing?;
        let at = match interval.by {
            IntervalBy::Start => start,
            IntervalBy::End => now,
        };
        let index =
            (at.saturating_duration_since(origin).as_nanos() / interval.length.as_nanos()) as usize;
        if self.windows.len() <= index {
            self.windows.resize_with(index + 1, WindowStats::default);
        }
        Some(&mut self.windows[index])
    }

    /// The per-window measurements (`--interval`), from the first window to the last one
    /// holding a request.
    pub fn windows(&self) -> &[WindowStats] {
        &self.windows
    }

    /// Counts failed requests of `kind` detected at `now`, one per start in `starts` (each
    /// request's start, for `--interval-by start`; `now` for a failure that had none);
    /// `detail` describes the failure the first time.
    pub fn record_errors(
        &mut self,
        kind: ErrorKind,
        starts: impl IntoIterator<Item = Instant>,
        now: Instant,
        detail: impl FnOnce() -> String,
    ) {
        let slot = kind as usize;
        let mut count = 0;
        for start in starts {
            count += 1;
            if let Some(w) = self.window_of(start, now) {
                w.errors[slot] += 1;
            }
        }
        if count == 0 {
            return;
        }
        self.errors[slot] += count;
        if self.first_error[slot].is_none() {
            self.first_error[slot] = Some(detail());
        }
    }

    /// Counts a request handed to a connection at `now`.
    pub fn record_send(&mut self, now: Instant) {
        self.sent += 1;
        self.first_send.get_or_insert(now);
        self.last_send = Some(now);
    }

    /// Failed requests of `kind`.
    pub fn errors(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    /// All failed requests.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// The first failure of `kind`, described.
    pub fn first_error(&self, kind: ErrorKind) -> Option<&str> {
        self.first_error[kind as usize].as_deref()
    }

    /// (status, count) for every status seen, in order.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(code, n)| (code as u16, *n))
    }

    /// The valid responses' latencies.
    pub fn latency(&self) -> &Latencies {
        &self.latency
    }

    /// Adds another thread's measurements to these.
    pub fn merge(&mut self, other: &Stats) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.bytes += other.bytes;
        self.body_bytes += other.body_bytes;
        for (mine, theirs) in self.status.iter_mut().zip(&other.status) {
            *mine += theirs;
        }
        for kind in ErrorKind::ALL {
            let slot = kind as usize;
            self.errors[slot] += other.errors[slot];
            if self.first_error[slot].is_none() {
                self.first_error[slot].clone_from(&other.first_error[slot]);
            }
        }
        self.connections_opened += other.connections_opened;
        self.latency.merge(&other.latency);
        if self.windows.len() < other.windows.len() {
            self.windows.resize_with(other.windows.len(), WindowStats::default);
        }
        for (mine, theirs) in self.windows.iter_mut().zip(&other.windows) {
            mine.merge(theirs);
        }
        self.windowing = self.windowing.or(other.windowing);
        self.sent += other.sent;
        self.first_send = earliest(self.first_send, other.first_send);
        self.last_send = self.last_send.max(other.last_send);
        self.lag_warnings += other.lag_warnings;
        self.max_lag = self.max_lag.max(other.max_lag);
        self.backlog_max = self.backlog_max.max(other.backlog_max);
        self.finished = self.finished.max(other.finished);
        self.unreachable |= other.unreachable;
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> Response {
        Response { status, bytes: 100, body_bytes: 60, keep_alive: true }
    }

    #[test]
    fn records_and_merges() {
        let t0 = Instant::now();
        let mut a = Stats::default();
        a.record_response(&response(200), t0, t0 + Duration::from_micros(100));
        a.record_response(&response(404), t0, t0 + Duration::from_micros(300));
        a.record_errors(ErrorKind::Reset, [t0, t0], t0, || "first".into());
        a.record_errors(ErrorKind::Reset, [t0], t0, || "second".into());
        a.record_errors(ErrorKind::Reset, [], t0, || "none".into());
        let mut b = Stats::default();
        b.record_response(&response(302), t0, t0 + Duration::from_micros(200));
        b.record_errors(ErrorKind::Timeout, [t0], t0, || "slow".into());
        a.merge(&b);
        assert_eq!((a.requests, a.ok, a.bytes, a.body_bytes), (3, 2, 300, 180));
        assert_eq!(a.statuses().collect::<Vec<_>>(), [(200, 1), (302, 1), (404, 1)]);
        assert_eq!((a.errors(ErrorKind::Reset), a.errors(ErrorKind::Timeout)), (3, 1));
        assert_eq!((a.total_errors(), a.first_error(ErrorKind::Reset)), (4, Some("first")));
        assert_eq!(a.latency().exact_us(), (200.0, 100.0, 300.0));
        assert_eq!(a.latency().histogram().len(), 3);
    }

    fn windowed(by: IntervalBy, t0: Instant) -> Stats {
        let mut s = Stats::default();
        s.start_windows(t0, Interval { length: Duration::from_secs(1), by });
        s
    }

    #[test]
    fn windows_split_latencies_by_completion_time() {
        let t0 = Instant::now();
        let mut a = windowed(IntervalBy::End, t0);
        a.record_response(&response(200), t0, t0 + Duration::from_millis(10));
        a.record_response(&response(200), t0, t0 + Duration::from_millis(2500));
        let mut b = windowed(IntervalBy::End, t0);
        b.record_response(&response(200), t0, t0 + Duration::from_millis(1200));
        a.merge(&b);
        let counts: Vec<u64> = a.windows().iter().map(WindowStats::requests).collect();
        assert_eq!(counts, [1, 1, 1]);
        assert_eq!(a.windows()[2].latencies.histogram().max(), a.latency().histogram().max());
    }

    #[test]
    fn windows_by_start_hold_the_requests_started_in_them_with_their_failures() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut a = windowed(IntervalBy::Start, t0);
        // Started in window 0, answered 2.5 s later: still window 0.
        a.record_response(&response(200), t0 + ms(100), t0 + ms(2600));
        a.record_response(&response(404), t0 + ms(1100), t0 + ms(1200));
        // Two requests of windows 0 and 1 time out at 3.5 s; a connect failure without a
        // request counts where it was seen.
        a.record_errors(ErrorKind::Timeout, [t0 + ms(500), t0 + ms(1500)], t0 + ms(3500), || {
            "slow".into()
        });
        a.record_errors(ErrorKind::Connect, [t0 + ms(3500)], t0 + ms(3500), || "refused".into());
        let w = a.windows();
        assert_eq!(w.len(), 4);
        assert_eq!((w[0].requests(), w[0].ok, w[0].body_bytes), (1, 1, 60));
        assert_eq!((w[1].requests(), w[1].ok), (1, 0));
        assert_eq!((w[0].errors(ErrorKind::Timeout), w[1].errors(ErrorKind::Timeout)), (1, 1));
        assert_eq!((w[2].requests(), w[3].errors(ErrorKind::Connect)), (0, 1));
        assert_eq!(w[0].latencies.exact_us(), (2_500_000.0, 2_500_000.0, 2_500_000.0));
    }
}
