//! Prometheus text metrics (`--metrics-path`): the request-latency histogram, one histogram
//! per request step (from the requests' timelines, [`crate::timeline`]), the helper queue
//! depth, and the server's counters and gauges — residency misses, loop stalls (with
//! `--debox`), open connections, metadata helper threads (now and at most), body bytes sent —
//! plus the process's disk reads as the kernel counts them (`/proc/self/io`). Under `mp`, a
//! scrape is answered by one worker: the counters are summed over every worker (the shared
//! stats), the rest describes that worker.

pub mod histogram;

use crate::stats::Stats;
use histogram::Histogram;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

static ON: AtomicBool = AtomicBool::new(false);
static REQUESTS: Histogram = Histogram::new();
/// The steps that get a histogram (see `Timeline`), in output order.
pub const STEPS: [&str; 10] = [
    "read",
    "parse",
    "job_queue",
    "job_run",
    "open",
    "job_return",
    "residency",
    "cold_chunk",
    "send",
    "not_writable",
];
static STEP_TIMES: [Histogram; STEPS.len()] = [const { Histogram::new() }; STEPS.len()];
static BYTES_SENT: AtomicU64 = AtomicU64::new(0);
static HELPER_QUEUE: AtomicI64 = AtomicI64::new(0);

/// Turns the metrics on (requests then carry timelines).
pub fn start() {
    ON.store(true, Ordering::Relaxed);
    crate::timeline::keep();
}

/// Whether the metrics are on.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A request took `total`, its steps `steps`, and sent `bytes` body bytes.
pub fn observe_request(total: Duration, steps: &[crate::timeline::StepTime], bytes: u64) {
    REQUESTS.observe(total);
    BYTES_SENT.fetch_add(bytes, Ordering::Relaxed);
    for s in steps {
        if let Some(i) = STEPS.iter().position(|n| *n == s.step) {
            STEP_TIMES[i].observe(Duration::from_secs_f64(s.ms / 1e3));
        }
    }
}

/// `n` jobs joined a helper queue (negative: left it).
pub fn helper_queue(n: i64) {
    if on() {
        HELPER_QUEUE.fetch_add(n, Ordering::Relaxed);
    }
}

/// What the kernel counted of this process's I/O (`/proc/self/io`).
fn process_io(out: &mut String) {
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else { return };
    let field = |k: &str| {
        text.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(": ")?.trim().parse::<u64>().ok())
    };
    for (key, name, help) in [
        (
            "read_bytes",
            "amped_disk_read_bytes_total",
            "Bytes this process caused to be read from storage (/proc/self/io read_bytes).",
        ),
        (
            "rchar",
            "amped_read_chars_total",
            "Bytes read by read-like system calls, page cache included (/proc/self/io rchar).",
        ),
        ("syscr", "amped_read_syscalls_total", "Read-like system calls (/proc/self/io syscr)."),
    ] {
        if let Some(v) = field(key) {
            family(out, name, "counter", help);
            let _ = writeln!(out, "{name} {v}");
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The metrics document.
pub fn render(stats: &Stats) -> String {
    let mut out = String::with_capacity(8 << 10);
    family(
        &mut out,
        "amped_request_duration_seconds",
        "histogram",
        "Time from a request's first byte to its last byte handed to the kernel.",
    );
    REQUESTS.render(&mut out, "amped_request_duration_seconds", "");
    family(
        &mut out,
        "amped_request_step_duration_seconds",
        "histogram",
        "Time requests spent in each step (docs/DEBOX.md lists the steps).",
    );
    for (name, h) in STEPS.iter().zip(&STEP_TIMES) {
        h.render(&mut out, "amped_request_step_duration_seconds", &format!("step=\"{name}\""));
    }
    let stalls = crate::debox::stalls::snapshot();
    for (name, kind, help, v) in [
        ("amped_requests_total", "counter", "Responses started.", stats.total_named("requests")),
        (
            "amped_connections_accepted_total",
            "counter",
            "Connections accepted.",
            stats.total_named("connections_accepted"),
        ),
        (
            "amped_connections_open",
            "gauge",
            "Connections open now.",
            stats.total_named("connections_open"),
        ),
        (
            "amped_residency_misses_total",
            "counter",
            "Body ranges found not in the page cache by the residency test.",
            stats.total_named("residency_misses"),
        ),
        (
            "amped_being_read_waits_total",
            "counter",
            "Body ranges sent through a job, untested, because a job was reading the same file.",
            stats.total_named("being_read_waits"),
        ),
        (
            "amped_direct_reads_total",
            "counter",
            "Cold body chunks read around the page cache into a huge page (--direct-io-above).",
            stats.total_named("direct_reads"),
        ),
        (
            "amped_direct_budget_full_total",
            "counter",
            "Cold body chunks to be read around the page cache that took a pipe: the copy budget was full.",
            stats.total_named("direct_budget_full"),
        ),
        (
            "amped_resolves_coalesced_total",
            "counter",
            "Resolves that ran right after one of the same URL path instead of queueing again.",
            stats.total_named("resolves_coalesced"),
        ),
        (
            "amped_helper_jobs_total",
            "counter",
            "Blocking jobs run by helper threads.",
            stats.total_named("jobs_helper"),
        ),
        (
            "amped_inline_jobs_total",
            "counter",
            "Blocking jobs run on the serving thread itself.",
            stats.total_named("jobs_inline"),
        ),
        (
            "amped_metadata_helpers",
            "gauge",
            "Threads serving AMPED's metadata lanes now (grows under --metadata-helpers auto).",
            stats.total_named("metadata_helpers"),
        ),
        (
            "amped_metadata_helpers_peak",
            "gauge",
            "Most threads AMPED's metadata lanes have had at once.",
            stats.total_named("metadata_helpers_peak"),
        ),
        (
            "amped_body_bytes_sent_total",
            "counter",
            "Response body bytes sent.",
            BYTES_SENT.load(Ordering::Relaxed),
        ),
        (
            "amped_loop_stalls_total",
            "counter",
            "Event-loop calls slower than --debox-stall-ms (counted with --debox only).",
            stalls.count,
        ),
        (
            "amped_loop_disk_stalls_total",
            "counter",
            "Of the loop stalls, those in calls that can wait for the disk (with --debox only).",
            stalls.in_disk_calls,
        ),
    ] {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    family(
        &mut out,
        "amped_helper_queue_depth",
        "gauge",
        "Jobs waiting for a helper (amped) or a job stage (staged).",
    );
    let _ =
        writeln!(out, "amped_helper_queue_depth {}", HELPER_QUEUE.load(Ordering::Relaxed).max(0));
    process_io(&mut out);
    out
}
