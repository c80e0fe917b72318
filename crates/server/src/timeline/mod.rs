//! Per-request timelines (`--slow-log`): where one request's time went — waiting for the rest
//! of its head, parsing, the path cache, the helper queue and the helper's run (and its
//! `open`), the residency test, each kind of send and how long the socket was not writable.
//! A request slower than `--slow-request-ms`, or picked by the 1-in-`--slow-sample` sample,
//! becomes one JSON line in the slow log ([`slowlog`]), which an operator can `tail -f`.
//!
//! Off unless `--slow-log` or `--metrics-path` is given; then every request carries a
//! [`Timeline`] (a few clock reads and one small allocation), only the slow or sampled ones
//! are written, and every one feeds the metrics' histograms.

pub mod slowlog;

use serde::Serialize;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Steps kept per request; further sends are folded into the last send step.
const MAX_STEPS: usize = 32;

/// One step of a request.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepTime {
    /// What the request was doing.
    pub step: &'static str,
    /// How long, ms.
    pub ms: f64,
    /// How it went (hit/miss, the kind of job or send).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
    /// Bytes moved (sends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Calls folded into this step (sends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
}

/// The timeline of one request.
#[derive(Debug)]
pub struct Timeline {
    started: Instant,
    peer: SocketAddr,
    request: String,
    steps: Vec<StepTime>,
    job_at: Option<Instant>,
    unwritable_since: Option<Instant>,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl Timeline {
    /// A request whose first byte arrived at `first_byte` (if known) and whose head was parsed
    /// from `parse_from` until now.
    pub fn begin(
        first_byte: Option<Instant>,
        parse_from: Instant,
        peer: SocketAddr,
        request: String,
    ) -> Box<Timeline> {
        let now = Instant::now();
        let started = first_byte.unwrap_or(parse_from);
        let mut t = Box::new(Timeline {
            started,
            peer,
            request,
            steps: Vec::with_capacity(8),
            job_at: None,
            unwritable_since: None,
        });
        if first_byte.is_some() {
            t.step("read", parse_from - started, None);
        }
        t.step("parse", now - parse_from, None);
        t
    }

    /// Adds a step. Once the timeline is full, the time is added to the latest step of the
    /// same kind and note (its `calls` counts how many it stands for), so a long transfer's
    /// totals stay whole.
    pub fn step(&mut self, step: &'static str, took: Duration, note: Option<&'static str>) {
        if self.steps.len() < MAX_STEPS {
            self.steps.push(StepTime { step, ms: ms(took), note, bytes: None, calls: None });
        } else if let Some(same) =
            self.steps.iter_mut().rev().find(|s| s.step == step && s.note == note)
        {
            same.ms = ((same.ms + ms(took)) * 1e3).round() / 1e3;
            *same.calls.get_or_insert(1) += 1;
        }
    }

    /// A send call of `kind` that moved `bytes` in `took`: consecutive sends of one kind are
    /// one step.
    pub fn send(&mut self, kind: &'static str, bytes: usize, took: Duration) {
        let full = self.steps.len() == MAX_STEPS;
        if let Some(last) = self.steps.last_mut()
            && last.step == "send"
            && (last.note == Some(kind) || full)
        {
            last.ms = ((last.ms + ms(took)) * 1e3).round() / 1e3;
            *last.bytes.get_or_insert(0) += bytes as u64;
            *last.calls.get_or_insert(0) += 1;
            return;
        }
        if self.steps.len() < MAX_STEPS {
            self.steps.push(StepTime {
                step: "send",
                ms: ms(took),
                note: Some(kind),
                bytes: Some(bytes as u64),
                calls: Some(1),
            });
        }
    }

    /// A job was handed out now.
    pub fn job_submitted(&mut self) {
        self.job_at = Some(Instant::now());
    }

    /// A resolve job that began running at `ran_from`, opened its file in `open` and ended at
    /// `ended` is back: its queue wait, run, open and the way back to the loop are steps.
    pub fn resolved(&mut self, ran_from: Instant, ended: Instant, open: Option<Duration>) {
        let Some(at) = self.job_at.take() else { return };
        self.step("job_queue", ran_from.saturating_duration_since(at), Some("resolve"));
        self.step("job_run", ended.saturating_duration_since(ran_from), Some("resolve"));
        if let Some(open) = open {
            self.step("open", open, None);
        }
        self.step("job_return", ended.elapsed(), None);
    }

    /// A cold-chunk job (`kind`: fill or read-ahead) is back: the whole wait is one step.
    pub fn chunk_back(&mut self, kind: &'static str) {
        if let Some(at) = self.job_at.take() {
            self.step("cold_chunk", at.elapsed(), Some(kind));
        }
    }

    /// The socket was found full now.
    pub fn unwritable(&mut self) {
        self.unwritable_since = Some(Instant::now());
    }

    /// Sending resumes: the time the socket was full is a step.
    pub fn writable_again(&mut self) {
        if let Some(since) = self.unwritable_since.take() {
            self.step("not_writable", since.elapsed(), None);
        }
    }

    /// The steps so far.
    pub fn steps(&self) -> &[StepTime] {
        &self.steps
    }

    /// Time since the request's first byte.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The slow-request settings, once the log is open.
struct Settings {
    threshold: Duration,
    sample: u64,
    log: slowlog::SlowLog,
}

static ON: AtomicBool = AtomicBool::new(false);
static SETTINGS: OnceLock<Settings> = OnceLock::new();
static SEEN: AtomicU64 = AtomicU64::new(0);

/// Whether requests carry timelines (`--slow-log` given).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns timelines on for the slow log: requests of `threshold` or longer, and one in
/// `sample` of the others (0: none), are written to `log`.
pub fn start(threshold: Duration, sample: u64, log: slowlog::SlowLog) {
    if SETTINGS.set(Settings { threshold, sample, log }).is_ok() {
        ON.store(true, Ordering::Relaxed);
    }
}

/// Turns timelines on for the metrics' histograms (every request is observed there).
pub fn keep() {
    ON.store(true, Ordering::Relaxed);
}

/// One slow-log line.
#[derive(Serialize)]
struct Line<'a> {
    time_unix_ms: u64,
    peer: String,
    request: &'a str,
    status: u16,
    bytes: u64,
    /// Seconds from the first byte of the request to the last byte handed to the kernel
    /// (nginx's `$request_time`).
    request_time: f64,
    why: &'static str,
    steps: &'a [StepTime],
}

/// The request is done (`status`, `bytes` body bytes sent): writes its line if it was slow
/// or sampled.
pub fn finish(t: &Timeline, status: u16, bytes: u64) {
    let total = t.elapsed();
    if crate::metrics::on() {
        crate::metrics::observe_request(total, &t.steps, bytes);
    }
    let Some(s) = SETTINGS.get() else { return };
    let why = if total >= s.threshold {
        "slow"
    } else if s.sample > 0 && SEEN.fetch_add(1, Ordering::Relaxed).is_multiple_of(s.sample) {
        "sample"
    } else {
        return;
    };
    s.log.write(render(t, status, bytes, total, why));
}

fn render(t: &Timeline, status: u16, bytes: u64, total: Duration, why: &'static str) -> String {
    let line = Line {
        time_unix_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        peer: t.peer.to_string(),
        request: &t.request,
        status,
        bytes,
        request_time: (total.as_secs_f64() * 1e6).round() / 1e6,
        why,
        steps: &t.steps,
    };
    let mut s = serde_json::to_string(&line).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline() -> Box<Timeline> {
        let t0 = Instant::now();
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        Timeline::begin(Some(t0), t0 + Duration::from_millis(2), peer, "GET /a HTTP/1.1".into())
    }

    #[test]
    fn steps_record_read_parse_jobs_and_fold_sends() {
        let mut t = timeline();
        assert_eq!(t.steps()[0].step, "read");
        assert_eq!(t.steps()[0].ms, 2.0);
        assert_eq!(t.steps()[1].step, "parse");
        t.job_submitted();
        let ran = Instant::now();
        t.resolved(ran, ran, Some(Duration::from_micros(1500)));
        let names: Vec<_> = t.steps().iter().map(|s| s.step).collect();
        assert_eq!(names, ["read", "parse", "job_queue", "job_run", "open", "job_return"]);
        assert_eq!(t.steps()[4].ms, 1.5);
        t.send("sendfile", 100, Duration::from_millis(1));
        t.send("sendfile", 50, Duration::from_millis(2));
        t.unwritable();
        t.writable_again();
        t.send("sendfile", 1, Duration::ZERO);
        let sends: Vec<_> = t.steps().iter().filter(|s| s.step == "send").collect();
        assert_eq!(sends.len(), 2, "a not-writable wait splits the sends");
        assert_eq!((sends[0].bytes, sends[0].calls, sends[0].ms), (Some(150), Some(2), 3.0));
    }

    #[test]
    fn steps_are_bounded_and_a_line_is_one_json_object() {
        let mut t = timeline();
        for i in 0..100 {
            t.step("job_run", Duration::ZERO, None);
            t.send(if i % 2 == 0 { "send" } else { "sendfile" }, 1, Duration::ZERO);
        }
        assert_eq!(t.steps().len(), MAX_STEPS);
        // Past the bound, time still adds up in a step of the same kind.
        t.step("job_run", Duration::from_millis(7), None);
        let runs: f64 = t.steps().iter().filter(|s| s.step == "job_run").map(|s| s.ms).sum();
        assert_eq!(runs, 7.0, "the time of a step past the bound is kept");
        let line = render(&t, 200, 5, Duration::from_millis(120), "slow");
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["request_time"], 0.12);
        assert_eq!(v["request"], "GET /a HTTP/1.1");
        assert_eq!(v["steps"][0]["step"], "read");
    }
}
