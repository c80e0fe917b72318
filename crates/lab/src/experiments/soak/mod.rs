//! `amplab soak`: a bounded reliability run against each server in turn (amped architectures
//! and peers), so reliability is measured side by side like performance. For `--duration`
//! seconds per server, all on loopback and at once: keep-alive and `Connection: close` clients
//! (GET, HEAD, Range), large-file clients, slow readers, slowloris heads (that complete, and
//! that never do), malformed and oversize requests, churn files rewritten by rename, truncated,
//! removed and re-created while they are served, and the server's reload signal. Each answer is
//! judged against the history of its file ([`content`]); RSS and descriptors of the server's
//! processes are sampled from /proc ([`procstat`]).
//!
//! Bounded: every client checks the deadline before each request, every read gives up after
//! the I/O timeout without progress, the drain after the deadline is capped, and Ctrl-C
//! (SIGINT, SIGTERM) abandons the run, stops the server and writes what was measured.

pub mod client;
pub mod content;
pub mod files;
pub mod malformed;
pub mod procstat;
mod report;
pub mod tally;
pub mod workers;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Lab;
use crate::cli::SoakArgs;
use crate::progress::Progress;
use crate::servers::{Peer, RunningServer, ServerKind, ServerSpec};
use files::{FileSet, Mutations, SetPlan};
use procstat::{Sample, Span};
use tally::Tally;
use workers::Shared;

pub use report::rebuild;

/// Every amped architecture and the four peers.
pub const DEFAULT_SERVERS: &[&str] = &[
    "amped",
    "sped",
    "uring",
    "mt",
    "pool",
    "mp",
    "staged",
    "nginx",
    "h2o",
    "lighttpd",
    "apache-event",
];

/// The size of the load and how long each part takes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Knobs {
    pub duration_s: f64,
    pub keepalive_clients: u32,
    pub close_clients: u32,
    pub large_clients: u32,
    pub slow_readers: u32,
    pub slowloris: u32,
    pub endless_slowloris: u32,
    pub malformed_clients: u32,
    pub requests_per_conn: u32,
    /// A slow reader's rate (bytes/s) and how long it reads slowly (s): uniform in each range.
    pub slow_rate: (f64, f64),
    pub slow_phase_s: (f64, f64),
    pub slowloris_byte_ms: u64,
    pub endless_cap_s: f64,
    pub malformed_pause_ms: u64,
    pub mutate_every_ms: u64,
    /// Seconds between reload signals (the first after half a period).
    pub signal_every_s: f64,
    pub sample_every_s: f64,
    pub io_timeout_s: f64,
    /// Staleness allowed before an answer counts as stale (amped documents one second).
    pub grace_s: f64,
    /// Longest wait for in-flight requests after the deadline.
    pub drain_cap_s: f64,
    /// Idle time after the load before the last sample.
    pub idle_after_s: f64,
    pub set: SetPlan,
}

impl Knobs {
    fn new(a: &SoakArgs) -> Knobs {
        let q = a.common.quick;
        let duration_s = a.common.duration.unwrap_or(if q { 3.0 } else { 120.0 });
        let n = |full: u32, quick: u32| if q { quick } else { full };
        Knobs {
            duration_s,
            keepalive_clients: n(6, 2),
            close_clients: n(6, 2),
            large_clients: n(2, 1),
            slow_readers: n(4, 1),
            slowloris: n(24, 2),
            endless_slowloris: n(8, 1),
            malformed_clients: 1,
            requests_per_conn: 50,
            slow_rate: if q { (20_000.0, 50_000.0) } else { (2_000.0, 16_000.0) },
            slow_phase_s: if q { (0.3, 0.6) } else { (5.0, 20.0) },
            slowloris_byte_ms: if q { 5 } else { 60 },
            endless_cap_s: 120.0,
            malformed_pause_ms: if q { 5 } else { 20 },
            mutate_every_ms: if q { 40 } else { 250 },
            signal_every_s: a.signal_every.unwrap_or(if q { duration_s } else { 30.0 }),
            sample_every_s: if q { 0.1 } else { 1.0 },
            io_timeout_s: a.io_timeout.unwrap_or(if q { 10.0 } else { 30.0 }),
            grace_s: a.grace,
            drain_cap_s: if q { 15.0 } else { 45.0 },
            idle_after_s: if q { 0.3 } else { 3.0 },
            set: SetPlan {
                small: n(16, 4) as usize,
                small_max: if q { 8 << 10 } else { 64 << 10 },
                large: if q { vec![1 << 20] } else { vec![4 << 20, 8 << 20] },
                churn: n(8, 3) as usize,
                churn_min: if q { 4 << 10 } else { 16 << 10 },
                churn_max: if q { 512 << 10 } else { 4 << 20 },
            },
        }
    }

    /// Client threads, in all.
    fn clients(&self) -> u32 {
        self.keepalive_clients
            + self.close_clients
            + self.large_clients
            + self.slow_readers
            + self.slowloris
            + self.endless_slowloris
            + self.malformed_clients
    }
}

/// The reload signal a server gets, or why it gets none.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Signals {
    /// `SIGHUP`, `SIGUSR1`, or none.
    pub signal: Option<String>,
    /// What it does to this server.
    pub note: String,
    pub sent: u32,
}

/// The reload signal of `spec`.
fn reload_signal(spec: &ServerSpec) -> (Option<rustix::process::Signal>, Signals) {
    use rustix::process::Signal;
    let (sig, name, note) = match &spec.kind {
        ServerKind::Amped { .. } => (
            Some(Signal::HUP),
            "SIGHUP",
            "reload: re-read the configuration, re-open the logs (mp: forwarded to every worker)",
        ),
        ServerKind::Peer(Peer::Nginx | Peer::NginxAio | Peer::NginxDirect) => (
            Some(Signal::HUP),
            "SIGHUP",
            "reload: new workers start, the old ones finish their connections",
        ),
        ServerKind::Peer(Peer::ApacheEvent | Peer::ApachePrefork(_)) => {
            (Some(Signal::USR1), "SIGUSR1", "graceful restart (apachectl graceful)")
        }
        ServerKind::Peer(Peer::Lighttpd) => {
            (Some(Signal::USR1), "SIGUSR1", "graceful restart (lighttpd ≥ 1.4.46)")
        }
        ServerKind::Peer(Peer::H2o) => (
            None,
            "",
            "none sent: h2o reloads only under start_server (Server::Starter), which amplab does not use; a bare h2o exits on SIGHUP",
        ),
    };
    (sig, Signals { signal: sig.map(|_| name.to_string()), note: note.to_string(), sent: 0 })
}

/// What one server's soak gave.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServerSoak {
    pub label: String,
    /// Why it did not run (or stopped early), if so.
    pub error: Option<String>,
    /// Seconds of load (the deadline, or less if interrupted).
    pub load_s: f64,
    pub tally: Tally,
    pub mutations: Mutations,
    pub signals: Signals,
    pub samples: Vec<Sample>,
    pub rss_kb: Span,
    pub fds: Span,
    /// The descriptors held before the load and once idle after it, by kind (see
    /// [`procstat::fd_kinds`]).
    pub fds_start_kinds: std::collections::BTreeMap<String, u64>,
    pub fds_end_kinds: std::collections::BTreeMap<String, u64>,
    pub max_procs: u64,
    /// The server still ran after the load.
    pub alive_at_end: bool,
    /// Latency of the keep-alive and close clients' small-file answers, ms: p50, p99, max.
    pub latency_ms: (f64, f64, f64),
    pub verdict: report::Verdict,
}

/// Runs the soak and writes its folder.
pub fn run(a: &SoakArgs) -> Result<PathBuf, String> {
    let knobs = Knobs::new(a);
    if !(knobs.grace_s >= 0.0 && knobs.io_timeout_s > 0.0 && knobs.signal_every_s >= 0.0) {
        return Err("--grace, --io-timeout and --signal-every must be non-negative numbers".into());
    }
    let mut lab = Lab::open("soak", &a.common, DEFAULT_SERVERS)?;
    let quit = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, quit.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    if let Some(cpus) = lab.client_cpus() {
        pin_this_thread(cpus);
    }
    let per = knobs.duration_s + knobs.idle_after_s + 5.0;
    let mut progress =
        Progress::new(lab.experiment, lab.servers.len(), per * lab.servers.len() as f64);
    let mut results = Vec::new();
    let mut notes = Vec::new();
    for (i, spec) in lab.servers.clone().iter().enumerate() {
        if quit.load(Ordering::Relaxed) {
            notes.push(format!("interrupted (Ctrl-C): {} not run", spec.label));
            continue;
        }
        progress.step(&format!("{} for {} s", spec.label, knobs.duration_s), per);
        let r = soak_one(&lab, spec, &knobs, &quit, lab.seed.wrapping_add(i as u64 * 7919));
        progress.note(&r.verdict.line);
        results.push(r);
    }
    if quit.load(Ordering::Relaxed) {
        notes.push(
            "the run was interrupted (Ctrl-C): the servers' results stop where it was".into(),
        );
    }
    lab.run
        .write_json("results.json", &results)
        .map_err(|e| format!("cannot write results: {e}"))?;
    let summary = report::outputs(&mut lab, &knobs, &results, &notes)?;
    let params = serde_json::to_value(&knobs).unwrap_or(Value::Null);
    lab.finish(params, None, notes, &summary)
}

/// Pins the calling thread (and the threads it starts) to a taskset-style CPU list.
fn pin_this_thread(list: &str) {
    let mut set = rustix::thread::CpuSet::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
            (a..=b).for_each(|c| set.set(c));
        }
    }
    if rustix::thread::sched_setaffinity(None, &set).is_err() {
        eprintln!("[amplab soak] could not pin the clients to CPU {list}; they run unpinned");
    }
}

/// Soaks one server.
fn soak_one(
    lab: &Lab,
    spec: &ServerSpec,
    knobs: &Knobs,
    quit: &AtomicBool,
    seed: u64,
) -> ServerSoak {
    let (sig, signals) = reload_signal(spec);
    let mut out = ServerSoak { label: spec.label.clone(), signals, ..ServerSoak::default() };
    let slug = crate::servers::launch::slug(&spec.label);
    let root = lab.data_dir.join(format!("soak-{}-{slug}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let result = FileSet::create(&root, &knobs.set, seed)
        .map_err(|e| format!("cannot write the files: {e}"))
        .and_then(|set| {
            let server = lab.start(spec, &root, None, "/s/small-1.bin")?;
            load(&mut out, server, &set, knobs, quit, sig, seed);
            Ok(())
        });
    if let Err(e) = result {
        out.error = Some(e);
    }
    let _ = std::fs::remove_dir_all(&root);
    out.rss_kb = Span::of(&out.samples, |s| s.rss_kb);
    out.fds = Span::of(&out.samples, |s| s.fds);
    out.max_procs = out.samples.iter().map(|s| s.procs).max().unwrap_or(0);
    out.latency_ms = report::percentiles(&mut out.tally.latencies_ms);
    out.verdict = report::verdict(&out, knobs);
    out
}

/// Runs the clients, the mutator, the signals and the sampler against a started server.
fn load(
    out: &mut ServerSoak,
    mut server: RunningServer,
    set: &FileSet,
    knobs: &Knobs,
    quit: &AtomicBool,
    sig: Option<rustix::process::Signal>,
    seed: u64,
) {
    let pgid = server.pgid();
    let abandon = AtomicBool::new(false);
    let sh = Shared {
        port: server.port,
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        quit: &abandon,
        files: set,
        tally: Mutex::new(Tally::default()),
        knobs,
    };
    out.samples.extend(procstat::sample(pgid, 0.0));
    out.fds_start_kinds = procstat::fd_kinds(pgid);
    let mutations = std::thread::scope(|s| {
        let sh = &sh;
        let mut id = seed;
        let mut next_id = || {
            id = id.wrapping_add(0x9E37_79B9);
            id
        };
        let handles = spawn_clients(s, sh, &mut next_id);
        let mutator_seed = next_id();
        let mutator = s.spawn(move || {
            let every = Duration::from_millis(knobs.mutate_every_ms);
            sh.files.mutate(mutator_seed, every, &sh.stop, &|| sh.t())
        });
        watch(out, &mut server, sh, quit, sig, &handles);
        mutator.join().unwrap_or_default()
    });
    out.mutations = mutations;
    idle_and_stop(out, server, &sh, quit);
    out.tally = sh.tally.into_inner().unwrap_or_default();
}

/// Starts every client thread the knobs ask for, each with its own seed from `next_id`.
fn spawn_clients<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    sh: &'scope Shared<'env>,
    next_id: &mut impl FnMut() -> u64,
) -> Vec<std::thread::ScopedJoinHandle<'scope, ()>> {
    let knobs = sh.knobs;
    let mut handles = Vec::new();
    for (count, mix, name) in [
        (knobs.keepalive_clients, workers::KEEPALIVE, "keep-alive"),
        (knobs.close_clients, workers::CLOSE, "close"),
        (knobs.large_clients, workers::LARGE, "large"),
    ] {
        for _ in 0..count {
            let id = next_id();
            handles.push(s.spawn(move || workers::file_client(sh, name, mix, id)));
        }
    }
    for _ in 0..knobs.slow_readers {
        let id = next_id();
        handles.push(s.spawn(move || workers::slow_reader(sh, id)));
    }
    for _ in 0..knobs.slowloris {
        let id = next_id();
        handles.push(s.spawn(move || workers::slowloris(sh, id)));
    }
    for _ in 0..knobs.endless_slowloris {
        handles.push(s.spawn(move || workers::endless_slowloris(sh)));
    }
    for _ in 0..knobs.malformed_clients {
        let id = next_id();
        handles.push(s.spawn(move || workers::malformed(sh, id)));
    }
    handles
}

/// Leaves the server idle for the knobs' while (what it keeps once the load is gone), takes
/// the last sample and fd kinds, notes whether it survived, and stops it.
fn idle_and_stop(
    out: &mut ServerSoak,
    mut server: RunningServer,
    sh: &Shared<'_>,
    quit: &AtomicBool,
) {
    let pgid = server.pgid();
    let idle_until = Instant::now() + Duration::from_secs_f64(sh.knobs.idle_after_s);
    while Instant::now() < idle_until && !quit.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    out.samples.extend(procstat::sample(pgid, sh.t()));
    out.fds_end_kinds = procstat::fd_kinds(pgid);
    out.alive_at_end = server.alive();
    if !out.alive_at_end && out.error.is_none() {
        out.error =
            Some(format!("the server exited during the soak (log: {})", server.log.display()));
    }
    server.stop();
}

/// The main thread's part: samples, signals and the deadline, then the bounded drain.
fn watch(
    out: &mut ServerSoak,
    server: &mut RunningServer,
    sh: &Shared<'_>,
    quit: &AtomicBool,
    sig: Option<rustix::process::Signal>,
    handles: &[std::thread::ScopedJoinHandle<'_, ()>],
) {
    let k = sh.knobs;
    let pgid = server.pgid();
    let mut next_sample = k.sample_every_s;
    // Signals halfway through each period: a run of one period still gets one.
    let mut next_signal =
        if k.signal_every_s > 0.0 { k.signal_every_s / 2.0 } else { f64::INFINITY };
    let mut stopped_at: Option<f64> = None;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let t = sh.t();
        if quit.load(Ordering::Relaxed) {
            sh.quit.store(true, Ordering::Relaxed);
        }
        if stopped_at.is_none()
            && (t >= k.duration_s || quit.load(Ordering::Relaxed) || !server.alive())
        {
            sh.stop.store(true, Ordering::Relaxed);
            stopped_at = Some(t);
            out.load_s = t;
        }
        if t >= next_sample {
            out.samples.extend(procstat::sample(pgid, t));
            next_sample += k.sample_every_s;
        }
        if stopped_at.is_none() && t >= next_signal {
            next_signal += k.signal_every_s;
            if let Some(sig) = sig
                && let Some(pid) = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw)
                && rustix::process::kill_process(pid, sig).is_ok()
            {
                out.signals.sent += 1;
            }
        }
        if let Some(at) = stopped_at {
            if handles.iter().all(|h| h.is_finished()) {
                return;
            }
            if t - at > k.drain_cap_s && !sh.quit.load(Ordering::Relaxed) {
                out.error.get_or_insert(format!(
                    "requests still in flight {} s after the deadline were abandoned",
                    k.drain_cap_s
                ));
                sh.quit.store(true, Ordering::Relaxed);
            }
        }
    }
}
