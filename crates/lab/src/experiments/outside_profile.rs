//! The closest equivalent of amped's DeBox profile for a server amplab cannot ask: gathered
//! from outside the process (docs/DEBOX.md §6).
//!
//! Two parts:
//!
//! * **The measured phase, from /proc** (no tracer, nothing slowed): every thread of the
//!   server's process group is read when the measured phase begins and when it ends —
//!   `/proc/PID/task/TID/schedstat` (time on a CPU, time waiting for one), `status` (voluntary
//!   and involuntary context switches), `stat` (minor and major faults; field 42, the block-I/O
//!   delay, when `kernel.task_delayacct` is on).
//! * **A profiled slice, with `perf trace`** (`perf trace -S --duration T -p PIDS`): after the
//!   measured phase, the same load runs for a short slice with the tracer attached. perf trace
//!   slows a server a lot (every system call goes through the tracer), so it never runs while
//!   the experiment's numbers are measured; the slice's own rate against the measured one is
//!   kept as the tracer's cost. Its summary gives, per thread and call, the count, the wall
//!   time and the longest call; the calls that took `T` ms or longer are printed one by one
//!   with the file they were about. With the same /proc reading around the slice, a thread's
//!   time **asleep outside its idle waits** is its time off a CPU (wall − CPU − run queue)
//!   less the wall time of its idle waits (`epoll_wait`, `futex`, `poll`, `accept`, …).
//!
//! Threads are given amped's roles: `loop` (a thread that waits in an event wait and serves
//! sockets), `helper` (any other busy thread of an event-driven server: nginx's thread pool),
//! `worker` (Apache's threads and processes, amped's mt/pool/mp). A thread that did nothing
//! in the slice (nginx's master, Apache's idle spares) is left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::servers::{ServerKind, ServerSpec};

/// Calls slower than this (ms) are listed one by one by perf trace: amped's loop-stall
/// threshold (`--debox-stall-ms`).
pub const SLOW_MS: f64 = 1.0;

/// Calls a thread makes to wait for work: time in them is idle, not blocked.
pub const IDLE_CALLS: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "futex",
    "nanosleep",
    "clock_nanosleep",
    "io_getevents",
    "io_pgetevents",
    "io_uring_enter",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "pause",
    "wait4",
    "waitid",
    "accept",
    "accept4",
    "semop",
    "semtimedop",
];

/// Calls that wait for events on many descriptors: a thread that makes them is an event loop.
const EVENT_WAITS: &[&str] =
    &["epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "io_uring_enter"];

/// Calls that can wait for the disk (when their descriptor is a file): a slow one on a loop is
/// a loop stall, as amped counts them.
pub const DISK_CALLS: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "stat",
    "lstat",
    "fstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "read",
    "pread64",
    "readv",
    "preadv",
    "preadv2",
    "sendfile",
    "sendfile64",
    "splice",
    "copy_file_range",
    "fadvise64",
    "readahead",
    "getdents",
    "getdents64",
    "mmap",
    "mincore",
    "io_submit",
];

// ---------------------------------------------------------------------------------------------
// /proc

/// One thread's cumulative counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadCounters {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Time on a CPU, ns (schedstat 1st field).
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU, ns (schedstat 2nd field).
    pub runq_ns: u64,
    pub vol_switches: u64,
    pub invol_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Block-I/O delay, clock ticks (stat field 42; 0 without delay accounting).
    pub blkio_ticks: u64,
}

/// Parses `/proc/PID/task/TID/stat`: (comm, process group, minor faults, major faults,
/// block-I/O ticks).
pub fn parse_stat(text: &str) -> Option<(String, i64, u64, u64, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // Fields from 3 (state) on; field N is rest[N - 3].
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let pgrp = field(5)?;
    let minflt = field(10)? as u64;
    let majflt = field(12)? as u64;
    let blkio = field(42).unwrap_or(0).max(0) as u64;
    Some((comm, pgrp, minflt, majflt, blkio))
}

/// Parses `schedstat`: (ns on a CPU, ns waiting for one).
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// Parses `status`: (voluntary, involuntary context switches).
pub fn parse_status(text: &str) -> (u64, u64) {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("voluntary_ctxt_switches:"), get("nonvoluntary_ctxt_switches:"))
}

/// The processes of process group `pgid` (the server and every process it forked).
pub fn group_pids(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse_stat(&t))
                .is_some_and(|(_, pgrp, ..)| pgrp == i64::from(pgid))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Every thread of the processes `pids`, now.
pub fn read_threads(pids: &[u32]) -> BTreeMap<u32, ThreadCounters> {
    let mut out = BTreeMap::new();
    for &pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let dir = t.path();
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
            let Some((comm, _, minflt, majflt, blkio)) = read("stat").and_then(|s| parse_stat(&s))
            else {
                continue;
            };
            let (cpu_ns, runq_ns) =
                read("schedstat").and_then(|s| parse_schedstat(&s)).unwrap_or_default();
            let (vol, invol) = read("status").map(|s| parse_status(&s)).unwrap_or_default();
            out.insert(
                tid,
                ThreadCounters {
                    pid,
                    tid,
                    comm,
                    cpu_ns,
                    runq_ns,
                    vol_switches: vol,
                    invol_switches: invol,
                    minor_faults: minflt,
                    major_faults: majflt,
                    blkio_ticks: blkio,
                },
            );
        }
    }
    out
}

/// The server's threads at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub threads: BTreeMap<u32, ThreadCounters>,
}

impl Snapshot {
    /// Every thread of process group `pgid`, now.
    pub fn take(pgid: u32) -> Snapshot {
        Snapshot { threads: read_threads(&group_pids(pgid)) }
    }

    /// Per thread, what it did since `earlier` (a thread born since counts from zero; one gone
    /// since is lost).
    pub fn since(&self, earlier: &Snapshot) -> BTreeMap<u32, ThreadCounters> {
        self.threads
            .iter()
            .map(|(tid, now)| {
                let was = earlier.threads.get(tid).cloned().unwrap_or_default();
                let d = ThreadCounters {
                    pid: now.pid,
                    tid: *tid,
                    comm: now.comm.clone(),
                    cpu_ns: now.cpu_ns.saturating_sub(was.cpu_ns),
                    runq_ns: now.runq_ns.saturating_sub(was.runq_ns),
                    vol_switches: now.vol_switches.saturating_sub(was.vol_switches),
                    invol_switches: now.invol_switches.saturating_sub(was.invol_switches),
                    minor_faults: now.minor_faults.saturating_sub(was.minor_faults),
                    major_faults: now.major_faults.saturating_sub(was.major_faults),
                    blkio_ticks: now.blkio_ticks.saturating_sub(was.blkio_ticks),
                };
                (*tid, d)
            })
            .collect()
    }
}

/// Clock ticks per second of `/proc`'s tick fields.
fn ticks_per_s() -> f64 {
    100.0
}

/// Whether `kernel.task_delayacct` is on.
pub fn delay_accounting() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|v| v.trim() == "1")
}

// ---------------------------------------------------------------------------------------------
// perf trace

/// One call's row of perf trace's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SysRow {
    pub count: u64,
    pub errors: u64,
    pub total_ms: f64,
    pub max_ms: f64,
}

/// One thread's part of the summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerfThread {
    pub comm: String,
    pub calls: BTreeMap<String, SysRow>,
}

/// A call printed one by one (it took the `--duration` threshold or longer).
#[derive(Clone, Debug, PartialEq)]
pub struct SlowCall {
    pub tid: u32,
    pub call: String,
    /// When it started, ms on perf's clock.
    pub at_ms: f64,
    pub ms: f64,
    /// The first descriptor's target or file name in its arguments (`/path`, `socket:[N]`).
    pub about: Option<String>,
    /// Whether the thread went to sleep inside it (a `sched_switch` away in state S or D),
    /// rather than only being preempted; `None` when no switch was traced.
    pub slept: Option<bool>,
}

/// A thread switched off its CPU (`sched:sched_switch`, traced in the switching thread).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Switch {
    pub tid: u32,
    pub at_ms: f64,
    /// Asleep (S or D), not preempted.
    pub sleep: bool,
}

/// One event line: a call (whole, begun, or `[continued]`), or a switch.
enum Line {
    Call { tid: u32, at_ms: f64, call: String, ms: Option<f64>, about: Option<String> },
    Continued { tid: u32, call: String, ms: f64 },
    Switch(Switch),
}

/// What a `perf trace -S --duration T` output says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerfReport {
    pub threads: BTreeMap<u32, PerfThread>,
    pub slow: Vec<SlowCall>,
    /// `sched_switch` events traced (0: the trace had none, so a slow call's sleep is not
    /// told from a preemption).
    pub switches: u64,
}

/// Parses perf trace's output: the events printed one by one (`T ( D ms): comm/tid call(args)
/// = R`) and the `Summary of events` (per thread `comm (tid), N events, P%`, then a table of
/// `call calls [errors] total min avg max stddev`).
pub fn parse_perf_trace(text: &str) -> PerfReport {
    let mut report = PerfReport::default();
    let (events, summary) = match text.find("Summary of events:") {
        Some(at) => (&text[..at], &text[at..]),
        None => (text, ""),
    };
    let (slow, switches) = slow_calls_and_switches(events);
    report.slow = slow;
    if !switches.is_empty() {
        mark_sleeps(&mut report.slow, &switches);
    }
    report.switches = switches.len() as u64;
    read_summary(summary, &mut report);
    if report.threads.len() == 1 {
        let only = *report.threads.keys().next().unwrap_or(&0);
        for s in report.slow.iter_mut().filter(|s| s.tid == 0) {
            s.tid = only;
        }
    }
    report
}

/// The event lines' slow calls (not yet marked slept or not) and context switches.
fn slow_calls_and_switches(events: &str) -> (Vec<SlowCall>, Vec<Switch>) {
    // A call interrupted by a switch is printed twice: begun (`(   ): … call(args) ...`) and
    // `[continued]: call()) = R` with its duration.
    let mut begun: BTreeMap<u32, (f64, String, Option<String>)> = BTreeMap::new();
    let mut slow = Vec::new();
    let mut switches: Vec<Switch> = Vec::new();
    for line in events.lines() {
        match parse_event(line) {
            Some(Line::Call { tid, at_ms, call, ms: Some(ms), about }) => {
                slow.push(SlowCall { tid, call, at_ms, ms, about, slept: None });
            }
            Some(Line::Call { tid, at_ms, call, ms: None, about }) => {
                begun.insert(tid, (at_ms, call, about));
            }
            Some(Line::Continued { tid, call, ms }) => {
                let (at_ms, about) = match begun.remove(&tid) {
                    Some((at, c, about)) if c == call => (at, about),
                    _ => (f64::NAN, None),
                };
                slow.push(SlowCall { tid, call, at_ms, ms, about, slept: None });
            }
            Some(Line::Switch(sw)) => switches.push(sw),
            None => {}
        }
    }
    (slow, switches)
}

/// Marks each slow call slept (a sleeping switch of its thread happened while it ran) or not.
fn mark_sleeps(slow: &mut [SlowCall], switches: &[Switch]) {
    for call in slow {
        let end = call.at_ms + call.ms;
        let inside = switches
            .iter()
            // tid 0: perf traced one thread and named none.
            .filter(|w| call.tid == 0 || w.tid == call.tid)
            .filter(|w| w.at_ms >= call.at_ms - 0.001 && w.at_ms <= end);
        let mut seen = false;
        let mut slept = false;
        for w in inside {
            seen = true;
            slept |= w.sleep;
        }
        call.slept = if seen { Some(slept) } else { Some(false) };
    }
}

/// The `Summary of events` part: each thread's name and its per-call rows.
fn read_summary(summary: &str, report: &mut PerfReport) {
    let mut current: Option<u32> = None;
    for line in summary.lines() {
        let t = line.trim();
        if let Some((comm, tid)) = thread_header(t) {
            report.threads.entry(tid).or_default().comm = comm;
            current = Some(tid);
            continue;
        }
        let Some(tid) = current else { continue };
        let cols: Vec<&str> = t.split_whitespace().collect();
        if cols.len() < 7 || cols[0] == "syscall" || cols[0].starts_with('-') {
            continue;
        }
        let nums: Vec<f64> =
            cols[1..].iter().map(|c| c.trim_end_matches('%').parse::<f64>()).flatten_ok();
        // perf ≥ 5.x: calls errors total min avg max stddev; older: no errors column.
        let row = match nums.len() {
            7 => SysRow {
                count: nums[0] as u64,
                errors: nums[1] as u64,
                total_ms: nums[2],
                max_ms: nums[5],
            },
            6 => SysRow { count: nums[0] as u64, errors: 0, total_ms: nums[1], max_ms: nums[4] },
            _ => continue,
        };
        report.threads.entry(tid).or_default().calls.insert(cols[0].to_string(), row);
    }
}

/// Parses every item or gives up (an empty vector when one is not a number).
trait FlattenOk {
    fn flatten_ok(self) -> Vec<f64>;
}

impl<I: Iterator<Item = Result<f64, std::num::ParseFloatError>>> FlattenOk for I {
    fn flatten_ok(self) -> Vec<f64> {
        self.collect::<Result<Vec<f64>, _>>().unwrap_or_default()
    }
}

/// `comm (tid), N events, P%` → (comm, tid).
fn thread_header(t: &str) -> Option<(String, u32)> {
    if !t.contains(" events") {
        return None;
    }
    let (head, _) = t.split_once("),")?;
    let (comm, tid) = head.rsplit_once(" (")?;
    Some((comm.trim().to_string(), tid.trim().parse().ok()?))
}

/// `  0.104 ( 5.038 ms): nginx/15710 epoll_wait(epfd: 7<anon_inode:[eventpoll]>, …) = 1`.
fn parse_event(line: &str) -> Option<Line> {
    let t = line.trim_start();
    let (at, rest) = t.split_once(' ')?;
    let at_ms: f64 = at.parse().ok()?;
    let rest = rest.trim_start();
    if let Some((_, ev)) = rest.split_once("sched:sched_switch(") {
        // `comm/tid sched:sched_switch(prev_comm: …, prev_pid: N (comm), prev_state: 1, …)`
        // (one thread traced: `(   ): sched:sched_switch(…)`): prev_state absent (0) or 256
        // is a preemption; 1 (S) or 2 (D) a sleep.
        let field = |name: &str| -> Option<u64> {
            let (_, v) = ev.split_once(name)?;
            v.split([',', ')', ' ']).next()?.trim().parse().ok()
        };
        let tid = field("prev_pid: ").unwrap_or(0) as u32;
        let state = field("prev_state: ").unwrap_or(0);
        return Some(Line::Switch(Switch { tid, at_ms, sleep: state & 0xff != 0 }));
    }
    if !rest.starts_with('(') {
        return None;
    }
    let (dur, rest) = rest[1..].split_once("):")?;
    let ms: Option<f64> = dur.trim().strip_suffix("ms").and_then(|d| d.trim().parse().ok());
    let rest = rest.trim_start();
    if let Some((who, cont)) = rest.split_once("... [continued]: ") {
        let tid = who.trim().rsplit_once('/').and_then(|(_, t)| t.parse().ok()).unwrap_or(0);
        let call = cont.split('(').next()?.trim().to_string();
        return Some(Line::Continued { tid, call, ms: ms? });
    }
    let paren = rest.find('(')?;
    // `comm/tid call(`, or just `call(` when perf traces a single thread (tid 0 here, the
    // summary's only thread once parsed).
    let (tid, call) = match rest[..paren].rsplit_once(' ') {
        Some((who, call)) => (who.rsplit_once('/')?.1.parse().ok()?, call),
        None => (0, &rest[..paren]),
    };
    let args = &rest[paren + 1..];
    Some(Line::Call { tid, at_ms, call: call.trim().to_string(), ms, about: about(args) })
}

/// What a call's arguments say it was about: the first descriptor target that is a path
/// (`15</data/f>`; sendfile's in_fd after its socket), else a `filename: "/…"` argument, else
/// the first descriptor target (`12<socket:[9]>`).
fn about(args: &str) -> Option<String> {
    let mut targets = Vec::new();
    let mut rest = args;
    while let Some(a) = rest.find('<') {
        let Some(end) = rest[a + 1..].find('>') else { break };
        targets.push(rest[a + 1..a + 1 + end].to_string());
        rest = &rest[a + 1 + end..];
    }
    if let Some(path) = targets.iter().find(|t| t.starts_with('/')) {
        return Some(path.clone());
    }
    let name = args.find("filename: ").map(|a| {
        let v = &args[a + "filename: ".len()..];
        v.split([',', ')']).next().unwrap_or_default().trim_matches('"').to_string()
    });
    match name {
        Some(n) if n.starts_with('/') => Some(n),
        _ => targets.into_iter().next(),
    }
}

/// Whether a descriptor target is a socket, pipe or other non-file (a call on it cannot wait
/// for the disk).
fn is_socket_like(about: &str) -> bool {
    ["socket:", "pipe:", "anon_inode:", "TCP", "UDP", "UNIX"].iter().any(|p| about.starts_with(p))
}

/// perf, if `perf trace` works here (as root or with perf_event_paranoid ≤ -1); else why not.
pub fn perf_available() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let perf = crate::tools::which("perf")
                .ok_or("perf is not installed (Debian: linux-perf)".to_string())?;
            let out = Command::new(&perf)
                .args(["trace", "-s", "--syscalls", "-e", "sched:sched_switch"])
                .args(["--filter", SLEEPS, "--", "true"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run perf: {e}"))?;
            if out.status.success() {
                Ok(perf)
            } else {
                let err = String::from_utf8_lossy(&out.stderr);
                Err(format!(
                    "`perf trace` does not work here ({})",
                    err.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim()
                ))
            }
        })
        .clone()
}

/// The kernel-side filter on `sched_switch`: switches into a sleep (S or D).
const SLEEPS: &str = "prev_state == 1 || prev_state == 2";

/// A `perf trace` attached to a server.
pub struct PerfTrace {
    child: Child,
    out: PathBuf,
}

impl PerfTrace {
    /// Attaches to `pids` (every thread of each), writing to `out`.
    pub fn start(perf: &Path, pids: &[u32], out: &Path) -> Result<PerfTrace, String> {
        if pids.is_empty() {
            return Err("no process to trace".into());
        }
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let child = Command::new(perf)
            // Only switches into a sleep (S or D): preemptions are many on a busy machine, and
            // a slow call without a sleep inside was preempted.
            .args(["trace", "-S", "--syscalls", "-e", "sched:sched_switch", "--filter", SLEEPS])
            .args(["--duration", &SLOW_MS.to_string(), "-p", &list.join(",")])
            .arg("-o")
            .arg(out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start perf trace: {e}"))?;
        // perf opens its events per thread before it traces anything; it says nothing when
        // ready, so give it time by the number of threads.
        let threads: usize = pids
            .iter()
            .map(|p| std::fs::read_dir(format!("/proc/{p}/task")).map_or(1, Iterator::count))
            .sum();
        std::thread::sleep(Duration::from_millis((300 + 2 * threads as u64).min(5000)));
        Ok(PerfTrace { child, out: out.to_path_buf() })
    }

    /// Stops the trace (SIGINT: perf prints its summary) and returns its output.
    pub fn stop(mut self) -> Result<String, String> {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err("perf trace did not stop within 60 s".into());
                }
            }
        }
        std::fs::read_to_string(&self.out).map_err(|e| format!("{}: {e}", self.out.display()))
    }
}

impl Drop for PerfTrace {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The profile

/// How a server's threads are named to roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Event loops and helpers (nginx, h2o, lighttpd, amped's event architectures).
    Event,
    /// Threads or processes that each serve a connection (Apache, amped's mt/pool/mp).
    Workers,
}

impl Kind {
    /// The kind of `spec`.
    pub fn of(spec: &ServerSpec) -> Kind {
        match &spec.kind {
            ServerKind::Amped { arch, .. } if matches!(arch.as_str(), "mt" | "pool" | "mp") => {
                Kind::Workers
            }
            ServerKind::Peer(p) if p.program() == "apache2" => Kind::Workers,
            _ => Kind::Event,
        }
    }
}

/// The role of a thread from the calls it made.
pub fn role(kind: Kind, calls: &BTreeMap<String, SysRow>) -> &'static str {
    let waits_for_events = calls.keys().any(|c| EVENT_WAITS.contains(&c.as_str()));
    match (kind, waits_for_events) {
        (Kind::Event, true) => "loop",
        (Kind::Event, false) => "helper",
        // Apache event's listener thread and mp's workers wait in epoll but hand work on or
        // serve one connection at a time: the paper's MP/MT, where blocking is by design.
        (Kind::Workers, _) => "worker",
    }
}

/// One role's /proc counters over an interval, summed over its threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleCounters {
    pub threads: u32,
    pub cpu_s: f64,
    pub runq_s: f64,
    /// Wall − CPU − run queue, summed over the threads.
    pub off_cpu_s: f64,
    pub vol_switches: u64,
    pub invol_switches: u64,
    pub major_faults: u64,
    pub minor_faults: u64,
    /// Block-I/O delay (with delay accounting), s.
    pub blkio_s: f64,
}

impl RoleCounters {
    fn add(&mut self, d: &ThreadCounters, wall_s: f64) {
        let cpu = d.cpu_ns as f64 / 1e9;
        let runq = d.runq_ns as f64 / 1e9;
        self.threads += 1;
        self.cpu_s += cpu;
        self.runq_s += runq;
        self.off_cpu_s += (wall_s - cpu - runq).max(0.0);
        self.vol_switches += d.vol_switches;
        self.invol_switches += d.invol_switches;
        self.major_faults += d.major_faults;
        self.minor_faults += d.minor_faults;
        self.blkio_s += d.blkio_ticks as f64 / ticks_per_s();
    }
}

/// One (role, call) in the slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CallRow {
    pub count: u64,
    pub errors: u64,
    /// Wall time in the call, ms (perf's clock, with the tracer's own cost in it).
    pub total_ms: f64,
    pub max_ms: f64,
    /// Calls of `SLOW_MS` or longer on a file (not a socket or pipe), and their time.
    pub slow: u64,
    pub slow_ms: f64,
    /// A wait for work (`IDLE_CALLS`).
    pub idle: bool,
}

/// One role in the slice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceRole {
    pub counters: RoleCounters,
    /// Wall time in idle waits, s, summed over the threads.
    pub idle_s: f64,
    /// Time in calls that blocked: calls other than idle waits, on a file (not a socket or
    /// pipe), that took `SLOW_MS` or longer, s, summed over the threads. Shorter sleeps are
    /// not seen.
    pub asleep_s: f64,
    /// For comparison: time off a CPU (/proc) less the wall time of idle waits (perf) over
    /// the traced window, s — catches short sleeps too, but is skewed by calls in flight when
    /// the tracer attaches and detaches.
    pub off_cpu_not_idle_s: f64,
}

/// The slice traced with perf.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    pub secs: f64,
    pub requests: u64,
    /// Requests/s in the slice over requests/s while measured (closed loop: the tracer's
    /// cost; open loop: 1 unless the server fell behind).
    pub speed: Option<f64>,
    /// Mean latency in the slice over the measured mean (ms/ms).
    pub latency_ratio: Option<f64>,
    pub roles: BTreeMap<String, SliceRole>,
    /// "role call" → row.
    pub calls: BTreeMap<String, CallRow>,
    /// Loop calls that can wait for the disk, on a file, of `SLOW_MS` or longer.
    pub loop_disk_stalls: u64,
    /// Up to eight of them: `call about ms`.
    pub stall_examples: Vec<String>,
    /// Threads that did nothing in the slice (left out).
    pub idle_threads: u32,
    /// Slow calls on files that were only preempted, not asleep (not counted as blocked).
    #[serde(default)]
    pub preempted: u64,
    /// Whether sleeps were told from preemptions (`sched_switch` traced).
    #[serde(default)]
    pub switches_traced: bool,
}

/// A server's profile from outside.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutsideProfile {
    /// /proc over the measured phase, per role (roles from the slice; without one, every
    /// thread is `all`).
    pub measured: BTreeMap<String, RoleCounters>,
    pub measured_s: f64,
    pub measured_requests: u64,
    pub slice: Option<Slice>,
    pub delay_accounting: bool,
    /// Whether every thread's block-I/O delay fits in the measured time (on this machine's
    /// kernel it does not under the FUSE disk: it grows faster than the clock).
    #[serde(default)]
    pub blkio_plausible: bool,
    /// Why there is no slice, or what went wrong.
    pub note: Option<String>,
}

impl OutsideProfile {
    /// Seconds asleep outside idle waits per second of the slice, summed over `role`'s
    /// threads (None without a slice).
    pub fn asleep_share(&self, role: &str) -> Option<f64> {
        let s = self.slice.as_ref()?;
        Some(s.roles.get(role).map_or(0.0, |r| r.asleep_s) / s.secs.max(1e-9))
    }

    /// Major faults per request while measured.
    pub fn major_faults_per_request(&self) -> f64 {
        let f: u64 = self.measured.values().map(|r| r.major_faults).sum();
        f as f64 / self.measured_requests.max(1) as f64
    }

    /// Block-I/O delay per second while measured, for `roles` summed (None without delay
    /// accounting).
    pub fn blkio_share(&self, roles: &[&str]) -> Option<f64> {
        (self.delay_accounting && self.blkio_plausible).then(|| {
            let s: f64 = self
                .measured
                .iter()
                .filter(|(r, _)| roles.contains(&r.as_str()))
                .map(|(_, c)| c.blkio_s)
                .sum();
            s / self.measured_s.max(1e-9)
        })
    }

    /// The `n` (role, call)s with the most time in slow calls on files, as
    /// `role call: slow× ms (about)`, else those with the most wall time outside idle waits.
    pub fn top(&self, n: usize) -> String {
        self.top_where(n, |_| true)
    }

    /// [`OutsideProfile::top`] of one role's calls.
    pub fn top_of(&self, role: &str, n: usize) -> String {
        self.top_where(n, |k| k.split(' ').next() == Some(role))
    }

    fn top_where(&self, n: usize, keep: impl Fn(&str) -> bool) -> String {
        let Some(s) = &self.slice else { return "-".into() };
        let mut v: Vec<(&String, &CallRow)> =
            s.calls.iter().filter(|(k, c)| !c.idle && c.slow > 0 && keep(k)).collect();
        v.sort_by(|a, b| b.1.slow_ms.total_cmp(&a.1.slow_ms));
        let parts: Vec<String> = v
            .iter()
            .take(n)
            .map(|(k, c)| format!("{k}: {}× ≥{SLOW_MS} ms, {:.0} ms", c.slow, c.slow_ms))
            .collect();
        if parts.is_empty() { "none ≥ 1 ms".into() } else { parts.join("; ") }
    }
}

/// What a slice gave: the /proc deltas over the traced window, perf's report, the window's
/// length, and the slice load's length and requests.
pub struct SliceInput<'a> {
    pub threads: &'a BTreeMap<u32, ThreadCounters>,
    pub perf: &'a PerfReport,
    pub window_s: f64,
    pub secs: f64,
    pub requests: u64,
}

/// Builds the profile: `measured` (per thread, /proc over the measured phase), and if there
/// was a slice, its /proc deltas and perf trace's report.
pub fn assemble(
    kind: Kind,
    measured: &BTreeMap<u32, ThreadCounters>,
    measured_s: f64,
    measured_requests: u64,
    slice: Option<SliceInput>,
) -> OutsideProfile {
    let mut profile = OutsideProfile {
        measured_s,
        measured_requests,
        delay_accounting: delay_accounting(),
        ..OutsideProfile::default()
    };
    let roles_of = match slice {
        Some(input) => {
            let (s, roles) = slice_profile(kind, input);
            profile.slice = Some(s);
            roles
        }
        None => BTreeMap::new(),
    };
    profile.blkio_plausible =
        measured.values().all(|d| d.blkio_ticks as f64 / ticks_per_s() <= measured_s * 1.05 + 0.05);
    for (tid, d) in measured {
        let role = match roles_of.get(tid) {
            Some(r) => *r,
            None if profile.slice.is_some() => continue,
            None => "all",
        };
        profile.measured.entry(role.to_string()).or_default().add(d, measured_s);
    }
    profile
}

/// The slice's part of a profile, and the role of each thread perf saw make a call.
fn slice_profile(kind: Kind, input: SliceInput) -> (Slice, BTreeMap<u32, &'static str>) {
    let SliceInput { threads, perf, window_s, secs, requests } = input;
    let mut s = Slice { secs, requests, switches_traced: perf.switches > 0, ..Slice::default() };
    let mut roles_of: BTreeMap<u32, &'static str> = BTreeMap::new();
    for (tid, d) in threads {
        let calls = perf.threads.get(tid).map(|t| t.calls.clone()).unwrap_or_default();
        if calls.is_empty() {
            s.idle_threads += 1;
            continue;
        }
        let role = role(kind, &calls);
        roles_of.insert(*tid, role);
        add_thread(&mut s, role, d, &calls, window_s);
    }
    for slow in &perf.slow {
        if let Some(role) = roles_of.get(&slow.tid) {
            add_slow_call(&mut s, role, slow);
        }
    }
    (s, roles_of)
}

/// Adds one traced thread's counters, idle and off-CPU time and calls to its role's.
fn add_thread(
    s: &mut Slice,
    role: &str,
    d: &ThreadCounters,
    calls: &BTreeMap<String, SysRow>,
    window_s: f64,
) {
    let r = s.roles.entry(role.to_string()).or_default();
    r.counters.add(d, window_s);
    let idle_ms: f64 = calls
        .iter()
        .filter(|(c, _)| IDLE_CALLS.contains(&c.as_str()))
        .map(|(_, row)| row.total_ms)
        .sum();
    let off = (window_s - d.cpu_ns as f64 / 1e9 - d.runq_ns as f64 / 1e9).max(0.0);
    r.idle_s += idle_ms / 1e3;
    r.off_cpu_not_idle_s += (off - idle_ms / 1e3).max(0.0);
    for (call, row) in calls {
        let c = s.calls.entry(format!("{role} {call}")).or_default();
        c.count += row.count;
        c.errors += row.errors;
        c.total_ms += row.total_ms;
        c.max_ms = c.max_ms.max(row.max_ms);
        c.idle = IDLE_CALLS.contains(&call.as_str());
    }
}

/// Counts one slow call of a thread in `role`: a sleep on a file (a disk wait; a stall when the
/// role is the loop) or, if the thread never slept, a preemption.
fn add_slow_call(s: &mut Slice, role: &str, slow: &SlowCall) {
    let on_file = slow.about.as_deref().is_none_or(|a| !is_socket_like(a));
    if !DISK_CALLS.contains(&slow.call.as_str()) || !on_file {
        return;
    }
    if slow.slept == Some(false) {
        // Long because the thread was preempted (a busy machine), not asleep.
        s.preempted += 1;
        return;
    }
    let c = s.calls.entry(format!("{role} {}", slow.call)).or_default();
    c.slow += 1;
    c.slow_ms += slow.ms;
    s.roles.entry(role.to_string()).or_default().asleep_s += slow.ms / 1e3;
    if role == "loop" {
        s.loop_disk_stalls += 1;
        if s.stall_examples.len() < 8 {
            s.stall_examples.push(format!(
                "{} {} {:.1} ms",
                slow.call,
                slow.about.as_deref().unwrap_or("?"),
                slow.ms
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Driving it around an experiment's phases

/// What a load run gave: requests answered, its length (s), its mean latency (ms).
#[derive(Clone, Copy, Debug)]
pub struct LoadResult {
    pub requests: u64,
    pub secs: f64,
    pub mean_ms: f64,
}

/// One server's profile in progress: started when its measured phase begins.
pub struct Watch {
    kind: Kind,
    label: String,
    pgid: u32,
    from: Snapshot,
    measured: Option<(BTreeMap<u32, ThreadCounters>, LoadResult)>,
}

impl Watch {
    /// Reads the server's threads: call when its measured phase begins.
    pub fn begin(spec: &ServerSpec, server: &crate::servers::RunningServer) -> Watch {
        let pgid = server.pgid();
        Watch {
            kind: Kind::of(spec),
            label: spec.label.clone(),
            pgid,
            from: Snapshot::take(pgid),
            measured: None,
        }
    }

    /// Reads them again: call when the measured phase ends.
    pub fn end_measured(&mut self, result: LoadResult) {
        let now = Snapshot::take(self.pgid);
        self.measured = Some((now.since(&self.from), result));
    }

    /// The profile without a perf slice (`why` says why not).
    pub fn without_slice(self, why: &str) -> OutsideProfile {
        let (measured, r) = self.measured.unwrap_or_else(|| {
            (BTreeMap::new(), LoadResult { requests: 0, secs: 0.0, mean_ms: 0.0 })
        });
        let mut p = assemble(self.kind, &measured, r.secs, r.requests, None);
        p.note = Some(why.to_string());
        p
    }

    /// Runs `load` (the slice: the measured load, continued) with perf trace attached, keeps
    /// perf's output as `keep`, and returns the profile. Without perf, or if the trace fails,
    /// the profile has the measured part only and says why.
    pub fn with_slice(
        self,
        keep: &Path,
        load: impl FnOnce() -> Option<LoadResult>,
    ) -> OutsideProfile {
        let traced = match perf_available().and_then(|perf| self.trace_slice(&perf, keep, load)) {
            Ok(t) => t,
            Err(why) => return self.without_slice(&why),
        };
        let report = parse_perf_trace(&traced.text);
        keep_trace(keep, &traced.text, report.switches);
        if report.threads.is_empty() {
            return self.without_slice("perf trace's output had no summary");
        }
        let result = traced.result;
        let (measured, m) = self.measured.clone().unwrap_or_else(|| (BTreeMap::new(), result));
        let mut p = assemble(
            self.kind,
            &measured,
            m.secs,
            m.requests,
            Some(SliceInput {
                threads: &traced.threads,
                perf: &report,
                window_s: traced.window_s,
                secs: result.secs,
                requests: result.requests,
            }),
        );
        if let Some(s) = p.slice.as_mut() {
            let rps = |r: &LoadResult| r.requests as f64 / r.secs.max(1e-9);
            s.speed = (m.requests > 0).then(|| rps(&result) / rps(&m));
            s.latency_ratio = (m.mean_ms > 0.0).then(|| result.mean_ms / m.mean_ms);
        }
        eprintln!(
            "[amplab] {}: perf trace slice of {:.1} s, {} threads traced",
            self.label,
            result.secs,
            report.threads.len()
        );
        p
    }

    /// Runs `load` with perf trace attached to the server's threads: the load's result, perf's
    /// output, the traced window's length and the threads' /proc deltas over it.
    fn trace_slice(
        &self,
        perf: &Path,
        keep: &Path,
        load: impl FnOnce() -> Option<LoadResult>,
    ) -> Result<TracedSlice, String> {
        let pids = group_pids(self.pgid);
        if let Some(dir) = keep.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let before = Snapshot::take(self.pgid);
        let from = Instant::now();
        let trace = PerfTrace::start(perf, &pids, keep)?;
        let result = load();
        let after = Snapshot::take(self.pgid);
        let window_s = from.elapsed().as_secs_f64();
        let text = trace.stop();
        let result = result.ok_or("the profiled slice's load failed")?;
        Ok(TracedSlice { result, text: text?, window_s, threads: after.since(&before) })
    }
}

/// What a traced slice gave: see [`Watch::trace_slice`].
struct TracedSlice {
    result: LoadResult,
    text: String,
    window_s: f64,
    threads: BTreeMap<u32, ThreadCounters>,
}

/// Keeps perf's output as `keep`, without the context switches (they only told sleeps from
/// preemptions), unless AMPLAB_PERF_RAW=1 asks for the whole output (a test fixture's source).
fn keep_trace(keep: &Path, text: &str, switches: u64) {
    let kept: String = text
        .lines()
        .filter(|l| !l.contains(" sched:sched_switch("))
        .map(|l| format!("{l}\n"))
        .collect();
    if std::env::var_os("AMPLAB_PERF_RAW").is_none() {
        let _ = std::fs::write(
            keep,
            format!("# perf trace; its {switches} sched_switch lines dropped\n{kept}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../tests/fixtures/perf-trace-lighttpd-hdd.txt");

    #[test]
    fn proc_files_parse() {
        let stat = "4242 (nginx: worker) S 4240 4240 4240 0 -1 4194560 120 0 7 0 50 20 0 0 20 0 1 0 100 1000 50 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 33 0 0 0 0 0 0 0 0 0 0";
        let (comm, pgrp, minflt, majflt, blkio) = parse_stat(stat).unwrap();
        assert_eq!(
            (comm.as_str(), pgrp, minflt, majflt, blkio),
            ("nginx: worker", 4240, 120, 7, 33)
        );
        assert_eq!(parse_schedstat("2608352 1000 1\n"), Some((2608352, 1000)));
        let status = "Name:\tnginx\nvoluntary_ctxt_switches:\t15\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_status(status), (15, 3));
        // This process's own threads read back.
        let me = std::process::id();
        let threads = read_threads(&[me]);
        assert!(threads.contains_key(&me), "{threads:?}");
        assert!(threads[&me].cpu_ns > 0);
    }

    #[test]
    fn a_captured_perf_trace_parses() {
        let r = parse_perf_trace(SAMPLE);
        assert!(!r.threads.is_empty(), "no thread in the summary");
        // lighttpd is one thread: its event wait and its file calls are in one table.
        let (_, t) = r.threads.iter().find(|(_, t)| t.comm == "lighttpd").expect("lighttpd");
        assert!(t.calls.contains_key("epoll_wait"), "{:?}", t.calls.keys());
        let sum_counts: u64 = t.calls.values().map(|c| c.count).sum();
        assert!(sum_counts > 100, "{sum_counts}");
        for row in t.calls.values() {
            assert!(row.total_ms >= 0.0 && row.max_ms <= row.total_ms + 1e-9, "{row:?}");
        }
        // Sleeps were traced (sched_switch into S or D), and the slow file calls slept.
        assert!(r.switches > 0);
        let file_calls: Vec<&SlowCall> =
            r.slow.iter().filter(|s| s.call == "pread64" || s.call == "newfstatat").collect();
        assert!(!file_calls.is_empty() && file_calls.iter().all(|s| s.slept.is_some()));
        assert!(file_calls.iter().filter(|s| s.slept == Some(true)).count() * 2 > file_calls.len());
        // Its slow calls name files of the data set.
        assert!(!r.slow.is_empty());
        assert!(
            r.slow.iter().all(|s| s.ms >= SLOW_MS),
            "{:?}",
            r.slow.iter().find(|s| s.ms < SLOW_MS)
        );
        assert!(
            r.slow.iter().any(|s| DISK_CALLS.contains(&s.call.as_str())
                && s.about.as_deref().is_some_and(|a| a.starts_with('/'))),
            "{:?}",
            &r.slow[..r.slow.len().min(5)]
        );
        let kind = Kind::Event;
        let tid = *r.threads.keys().next().unwrap();
        assert_eq!(role(kind, &r.threads[&tid].calls), "loop");
    }

    #[test]
    fn a_captured_multi_threaded_trace_gives_a_loop_and_helpers() {
        // nginx-aio on the hdd model: its worker's loop opens files itself, its thread pool
        // sends them (`aio threads` covers sendfile).
        let r = parse_perf_trace(include_str!("../../tests/fixtures/perf-trace-nginx-aio-hdd.txt"));
        // The worker and its 32 pool threads.
        assert_eq!(r.threads.len(), 33, "{:?}", r.threads.keys());
        let roles: Vec<&str> = r.threads.values().map(|t| role(Kind::Event, &t.calls)).collect();
        assert_eq!(roles.iter().filter(|r| **r == "loop").count(), 1, "{roles:?}");
        assert_eq!(roles.iter().filter(|r| **r == "helper").count(), 32, "{roles:?}");
        assert!(r.switches > 0 && r.slow.iter().any(|s| s.slept == Some(true)));
        let sendfile = r.slow.iter().find(|s| s.call == "sendfile").expect("a slow sendfile");
        assert!(sendfile.about.as_deref().is_some_and(|a| a.contains("/specweb-")), "{sendfile:?}");
        let threads: BTreeMap<u32, ThreadCounters> = r
            .threads
            .keys()
            .map(|&tid| (tid, ThreadCounters { tid, ..ThreadCounters::default() }))
            .collect();
        let input =
            SliceInput { threads: &threads, perf: &r, window_s: 1.0, secs: 0.5, requests: 40 };
        let p = assemble(Kind::Event, &threads, 1.0, 40, Some(input));
        let s = p.slice.as_ref().unwrap();
        assert!(s.loop_disk_stalls > 0 && s.calls["loop openat"].slow > 0, "{s:?}");
        assert!(s.calls["helper sendfile"].slow > 0, "{s:?}");
        assert!(p.top_of("loop", 1).starts_with("loop openat: "), "{}", p.top(3));
    }

    #[test]
    fn summary_lines_with_and_without_an_errors_column() {
        let text = "\n Summary of events:\n\n nginx (15711), 8334 events, 6.9%\n\n   syscall            calls  errors  total       min       avg       max       stddev\n                                     (msec)    (msec)    (msec)    (msec)        (%)\n   --------------- --------  ------ -------- --------- --------- ---------     ------\n   futex               2405     22  3818.029     0.000     1.588   433.855     12.08%\n   sendfile             881      0    21.664     0.012     0.025     2.249     10.87%\n\n\n old (7), 3 events, 1.0%\n\n   read                   3     0.033     0.010     0.011     0.011      3.02%\n";
        let r = parse_perf_trace(text);
        assert_eq!(r.threads[&15711].comm, "nginx");
        assert_eq!(
            r.threads[&15711].calls["futex"],
            SysRow { count: 2405, errors: 22, total_ms: 3818.029, max_ms: 433.855 }
        );
        assert_eq!(
            r.threads[&7].calls["read"],
            SysRow { count: 3, errors: 0, total_ms: 0.033, max_ms: 0.011 }
        );
        let ev = "     6.954 ( 12.269 ms): nginx/15711 pread64(fd: 15</data/dir00001/class2_3>, buf: 0x1, count: 4096) = 4096\n";
        let r = parse_perf_trace(ev);
        assert_eq!(
            r.slow,
            vec![SlowCall {
                tid: 15711,
                call: "pread64".into(),
                at_ms: 6.954,
                ms: 12.269,
                about: Some("/data/dir00001/class2_3".into()),
                slept: None,
            }]
        );
    }

    fn slow(tid: u32, call: &str, ms: f64, about: Option<&str>, slept: Option<bool>) -> SlowCall {
        let about = about.map(str::to_string);
        SlowCall { tid, call: call.into(), at_ms: 0.0, ms, about, slept }
    }

    #[test]
    fn a_call_interrupted_by_a_switch_is_joined_and_its_sleep_told_from_a_preemption() {
        let text = "     1.538 (         ): nginx/12 sendfile(out_fd: 9<socket:[74]>, in_fd: 12</w/f1.bin>, count: 200000) ...\n\
     1.600 nginx/12 sched:sched_switch(prev_comm: \"nginx\", prev_pid: 12 (nginx), prev_prio: 120, prev_state: 2, next_comm: \"swapper/1\", next_prio: 120)\n\
     1.538 ( 3.911 ms): nginx/12  ... [continued]: sendfile())                                         = 200000\n\
     9.000 (         ): nginx/12 pread64(fd: 15</w/f2.bin>, count: 4096) ...\n\
     9.100 nginx/12 sched:sched_switch(prev_comm: \"nginx\", prev_pid: 12 (nginx), prev_prio: 120, prev_state: 256, next_comm: \"perf\", next_pid: 5 (perf), next_prio: 120)\n\
     9.000 ( 2.000 ms): nginx/12  ... [continued]: pread64())                                         = 4096\n";
        let r = parse_perf_trace(text);
        assert_eq!(r.switches, 2);
        assert_eq!(r.slow.len(), 2, "{:?}", r.slow);
        assert_eq!(r.slow[0].about.as_deref(), Some("/w/f1.bin"));
        assert_eq!((r.slow[0].at_ms, r.slow[0].ms, r.slow[0].slept), (1.538, 3.911, Some(true)));
        assert_eq!(r.slow[1].slept, Some(false), "256: preempted");
    }

    #[test]
    fn the_profile_puts_blocking_on_roles_and_counts_loop_stalls() {
        let thread = |tid, cpu_ms: u64, runq_ms: u64, majflt| ThreadCounters {
            pid: 10,
            tid,
            comm: "x".into(),
            cpu_ns: cpu_ms * 1_000_000,
            runq_ns: runq_ms * 1_000_000,
            major_faults: majflt,
            blkio_ticks: 5,
            ..ThreadCounters::default()
        };
        let slice: BTreeMap<u32, ThreadCounters> =
            [(10, thread(10, 300, 100, 0)), (11, thread(11, 100, 0, 0)), (12, thread(12, 0, 0, 0))]
                .into();
        let measured: BTreeMap<u32, ThreadCounters> =
            [(10, thread(10, 1000, 0, 4)), (11, thread(11, 100, 0, 6)), (12, thread(12, 0, 0, 0))]
                .into();
        let row = |count, total_ms| SysRow { count, errors: 0, total_ms, max_ms: total_ms };
        let mut perf = PerfReport::default();
        perf.threads.insert(
            10,
            PerfThread {
                comm: "x".into(),
                calls: [
                    ("epoll_wait".to_string(), row(10, 100.0)),
                    ("openat".to_string(), row(5, 500.0)),
                ]
                .into(),
            },
        );
        perf.threads.insert(
            11,
            PerfThread { comm: "x".into(), calls: [("futex".to_string(), row(3, 900.0))].into() },
        );
        perf.slow = vec![
            slow(10, "openat", 400.0, Some("/d/a"), Some(true)),
            slow(10, "read", 9.0, Some("socket:[5]"), Some(true)),
            slow(10, "pread64", 30.0, Some("/d/b"), Some(false)),
            slow(11, "futex", 900.0, None, Some(true)),
        ];
        let input =
            SliceInput { threads: &slice, perf: &perf, window_s: 1.0, secs: 1.0, requests: 50 };
        let p = assemble(Kind::Event, &measured, 2.0, 100, Some(input));
        let s = p.slice.as_ref().unwrap();
        assert_eq!(s.idle_threads, 1);
        // loop: blocked in the one slow openat, 0.4 s of the 1 s slice; off CPU
        // 1 − 0.3 − 0.1 = 0.6 s, of which 0.1 s in epoll_wait → 0.5 s by /proc.
        assert!((p.asleep_share("loop").unwrap() - 0.4).abs() < 1e-9);
        assert!((s.roles["loop"].off_cpu_not_idle_s - 0.5).abs() < 1e-9);
        // helper: its slow futex is an idle wait → not asleep.
        assert!(p.asleep_share("helper").unwrap().abs() < 1e-9);
        assert_eq!(s.loop_disk_stalls, 1, "the socket read is not a disk stall");
        assert_eq!(s.preempted, 1, "the preempted pread64 did not block");
        assert_eq!(s.calls["loop openat"].slow, 1);
        assert_eq!(p.top(2), "loop openat: 1× ≥1 ms, 400 ms");
        assert_eq!(p.measured["loop"].major_faults, 4);
        assert_eq!(p.measured["helper"].major_faults, 6);
        assert!(!p.measured.contains_key("all"), "the idle thread is left out");
        assert!((p.major_faults_per_request() - 0.1).abs() < 1e-9);
        assert_eq!(Kind::of(&ServerSpec::parse("apache-event").unwrap()), Kind::Workers);
        assert_eq!(Kind::of(&ServerSpec::parse("mt").unwrap()), Kind::Workers);
        assert_eq!(Kind::of(&ServerSpec::parse("nginx-aio").unwrap()), Kind::Event);
    }
}
