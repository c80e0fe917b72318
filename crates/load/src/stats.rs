//! What one event-loop thread measured, and merging the threads' measurements at the end.
//!
//! Each thread owns its [`Stats`] outright (no sharing, no atomics on the hot path); latencies go
//! into an HDR histogram in microseconds, and exact sum/min/max are kept in nanoseconds beside
//! it. Error counts are per request: a request that got no valid response is counted once,
//! under the cause that ended its connection ([`ErrorKind`]).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

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
    /// Latency in microseconds.
    latency: Histogram<u64>,
    latency_sum_ns: u128,
    latency_min_ns: u64,
    latency_max_ns: u64,
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
    /// `--interval`: the run's time zero and the window length.
    windowing: Option<(Instant, Duration)>,
    /// Latency per window of completion time (index = elapsed / length), microseconds.
    windows: Vec<Histogram<u64>>,
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
            latency: new_histogram(),
            latency_sum_ns: 0,
            latency_min_ns: u64::MAX,
            latency_max_ns: 0,
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
        self.requests += 1;
        if (200..400).contains(&response.status) {
            self.ok += 1;
        }
        self.bytes += response.bytes;
        self.body_bytes += response.body_bytes;
        self.status[usize::from(response.status).min(STATUS_SLOTS - 1)] += 1;
        let ns = u64::try_from(now.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        let us = (ns / 1000).max(1);
        self.latency.saturating_record(us);
        if let Some((origin, length)) = self.windowing {
            let index =
                (now.saturating_duration_since(origin).as_nanos() / length.as_nanos()) as usize;
            if self.windows.len() <= index {
                self.windows.resize_with(index + 1, new_histogram);
            }
            self.windows[index].saturating_record(us);
        }
        self.latency_sum_ns += u128::from(ns);
        self.latency_min_ns = self.latency_min_ns.min(ns);
        self.latency_max_ns = self.latency_max_ns.max(ns);
    }

    /// Also records latencies per window of `length` from `origin` (by completion time).
    pub fn start_windows(&mut self, origin: Instant, length: Duration) {
        self.windowing = Some((origin, length));
    }

    /// The per-window histograms (`--interval`), from the first window to the last one with a
    /// completed request.
    pub fn windows(&self) -> &[Histogram<u64>] {
        &self.windows
    }

    /// Counts `count` failed requests of `kind`; `detail` describes the failure the first time.
    pub fn record_error(&mut self, kind: ErrorKind, count: u64, detail: impl FnOnce() -> String) {
        let slot = kind as usize;
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

    /// The latency histogram, in microseconds.
    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }

    /// Exact (mean, min, max) latency in microseconds; zeros when nothing was recorded.
    pub fn latency_exact_us(&self) -> (f64, f64, f64) {
        if self.requests == 0 {
            return (0.0, 0.0, 0.0);
        }
        let mean = self.latency_sum_ns as f64 / self.requests as f64 / 1000.0;
        (mean, self.latency_min_ns as f64 / 1000.0, self.latency_max_ns as f64 / 1000.0)
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
        self.latency.add(&other.latency).expect("histograms share their bounds");
        if self.windows.len() < other.windows.len() {
            self.windows.resize_with(other.windows.len(), new_histogram);
        }
        for (mine, theirs) in self.windows.iter_mut().zip(&other.windows) {
            mine.add(theirs).expect("histograms share their bounds");
        }
        self.windowing = self.windowing.or(other.windowing);
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_min_ns = self.latency_min_ns.min(other.latency_min_ns);
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
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
        a.record_error(ErrorKind::Reset, 2, || "first".into());
        a.record_error(ErrorKind::Reset, 1, || "second".into());
        let mut b = Stats::default();
        b.record_response(&response(302), t0, t0 + Duration::from_micros(200));
        b.record_error(ErrorKind::Timeout, 1, || "slow".into());
        a.merge(&b);
        assert_eq!((a.requests, a.ok, a.bytes, a.body_bytes), (3, 2, 300, 180));
        assert_eq!(a.statuses().collect::<Vec<_>>(), [(200, 1), (302, 1), (404, 1)]);
        assert_eq!((a.errors(ErrorKind::Reset), a.errors(ErrorKind::Timeout)), (3, 1));
        assert_eq!((a.total_errors(), a.first_error(ErrorKind::Reset)), (4, Some("first")));
        assert_eq!(a.latency_exact_us(), (200.0, 100.0, 300.0));
        assert_eq!(a.latency().len(), 3);
    }

    #[test]
    fn windows_split_latencies_by_completion_time() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut a = Stats::default();
        a.start_windows(t0, second);
        a.record_response(&response(200), t0, t0 + Duration::from_millis(10));
        a.record_response(&response(200), t0, t0 + Duration::from_millis(2500));
        let mut b = Stats::default();
        b.start_windows(t0, second);
        b.record_response(&response(200), t0, t0 + Duration::from_millis(1200));
        a.merge(&b);
        let counts: Vec<u64> = a.windows().iter().map(Histogram::len).collect();
        assert_eq!(counts, [1, 1, 1]);
        assert_eq!(a.windows()[2].max(), a.latency().max());
    }
}
