//! DeBox-style measurement of amped's own system calls (after the DeBox paper, USENIX 2004:
//! per-call performance data returned to the application that made the call).
//!
//! Every wrapper in this crate runs its syscall through [`around`]. While measuring is off
//! (the default) that costs one relaxed load and one predictable branch. Once [`enable`]d,
//! each call's wall time is taken (vDSO clock, no syscall), and calls that can sleep on the
//! disk ([`Call::may_sleep_on_disk`]) are also *probed*: the thread's usage is read before
//! and after ([`thread_usage`]: `getrusage(RUSAGE_THREAD)`, `/proc/thread-self/schedstat`
//! and, if `kernel.task_delayacct` is on, the block-I/O delay of `/proc/thread-self/stat`),
//! so the [`Sample`] says whether and how long the call slept. The sample goes to the one
//! sink the server installed, which aggregates; nothing is kept here.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::panic::Location;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The system calls amped makes, as DeBox groups them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Call {
    /// `epoll_wait`: the event loop's idle wait.
    EpollWait,
    /// `epoll_ctl` (add, modify, delete).
    EpollCtl,
    /// `accept4`.
    Accept,
    /// `recv`/`read` from a socket.
    Recv,
    /// `writev` to a socket.
    Writev,
    /// `send` to a socket.
    Send,
    /// `sendfile` from a file to a socket.
    Sendfile,
    /// `splice` from a file into a pipe (may wait for the disk).
    SpliceIn,
    /// `splice` from a pipe into a socket.
    SpliceOut,
    /// `cachestat` (or `mincore`): the page-cache residency test.
    Cachestat,
    /// `posix_fadvise`.
    Fadvise,
    /// `vmsplice` of a file mapping into a pipe: faults the pages in (in whole blocks, may wait
    /// for the disk) and moves references to them, as `splice` does.
    VmspliceIn,
    /// `open` of a file.
    Open,
    /// `stat`/`statx`/`fstat`, `readlink` walks (`canonicalize`).
    Stat,
    /// `read`/`pread` of a file.
    FileRead,
    /// Reading a directory's entries whole (`getdents64` until the end; a listing).
    ReadDir,
    /// `io_uring_enter`: submit, and the io_uring loop's idle wait.
    UringEnter,
    /// eventfd write/read (helpers waking the loop).
    Wake,
}

impl Call {
    /// Every call, in output order.
    pub const ALL: [Call; 18] = [
        Call::EpollWait,
        Call::EpollCtl,
        Call::Accept,
        Call::Recv,
        Call::Writev,
        Call::Send,
        Call::Sendfile,
        Call::SpliceIn,
        Call::SpliceOut,
        Call::Cachestat,
        Call::Fadvise,
        Call::VmspliceIn,
        Call::Open,
        Call::Stat,
        Call::FileRead,
        Call::ReadDir,
        Call::UringEnter,
        Call::Wake,
    ];

    /// The name used in the profile.
    pub fn name(self) -> &'static str {
        match self {
            Call::EpollWait => "epoll_wait",
            Call::EpollCtl => "epoll_ctl",
            Call::Accept => "accept",
            Call::Recv => "recv",
            Call::Writev => "writev",
            Call::Send => "send",
            Call::Sendfile => "sendfile",
            Call::SpliceIn => "splice_in",
            Call::SpliceOut => "splice_out",
            Call::Cachestat => "cachestat",
            Call::Fadvise => "fadvise",
            Call::VmspliceIn => "vmsplice_in",
            Call::Open => "open",
            Call::Stat => "stat",
            Call::FileRead => "file_read",
            Call::ReadDir => "read_dir",
            Call::UringEnter => "io_uring_enter",
            Call::Wake => "eventfd",
        }
    }

    /// Calls that may wait for the disk: these are probed (usage read before and after).
    /// Socket calls are non-blocking and the residency test never reads, so those are only
    /// timed.
    pub fn may_sleep_on_disk(self) -> bool {
        matches!(
            self,
            Call::Sendfile
                | Call::SpliceIn
                | Call::Fadvise
                | Call::VmspliceIn
                | Call::Open
                | Call::Stat
                | Call::FileRead
                | Call::ReadDir
        )
    }

    /// Calls whose waiting is the loop's idle time, never a stall.
    pub fn is_idle_wait(self) -> bool {
        matches!(self, Call::EpollWait | Call::UringEnter)
    }

    /// Calls that move file data (a sleep in them is a page-cache miss being read).
    pub fn reads_file_data(self) -> bool {
        matches!(self, Call::Sendfile | Call::SpliceIn | Call::FileRead)
    }
}

/// What a call was about, for stall reports.
#[derive(Clone, Copy, Debug)]
pub enum About<'a> {
    /// Nothing worth naming.
    Nothing,
    /// A descriptor (a socket names its peer, a file its path; see [`describe_fd`]).
    Fd(BorrowedFd<'a>),
    /// A path not yet open.
    Path(&'a Path),
}

/// A thread's cumulative usage at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Voluntary context switches (the thread slept).
    pub vol_switches: u64,
    /// Involuntary context switches (the thread was preempted).
    pub invol_switches: u64,
    /// Major page faults (a page had to be read from the disk).
    pub major_faults: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Time on a CPU, ns (schedstat).
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU, ns (schedstat).
    pub run_delay_ns: u64,
    /// Time waiting for block I/O, ns (`kernel.task_delayacct`; 10 ms granularity; 0 if off).
    pub blkio_ns: u64,
}

impl Usage {
    /// What happened between `self` and the later snapshot `after`.
    pub fn delta(&self, after: &Usage) -> Usage {
        Usage {
            vol_switches: after.vol_switches.saturating_sub(self.vol_switches),
            invol_switches: after.invol_switches.saturating_sub(self.invol_switches),
            major_faults: after.major_faults.saturating_sub(self.major_faults),
            minor_faults: after.minor_faults.saturating_sub(self.minor_faults),
            cpu_ns: after.cpu_ns.saturating_sub(self.cpu_ns),
            run_delay_ns: after.run_delay_ns.saturating_sub(self.run_delay_ns),
            blkio_ns: after.blkio_ns.saturating_sub(self.blkio_ns),
        }
    }
}

/// One measured call, handed to the sink.
#[derive(Debug)]
pub struct Sample<'a> {
    /// Which call.
    pub call: Call,
    /// The amped source line that made it.
    pub site: &'static Location<'static>,
    /// Wall time from entry to return, ns.
    pub wall_ns: u64,
    /// The usage it took, for probed calls.
    pub usage: Option<Usage>,
    /// The errno it failed with, if it failed.
    pub errno: Option<i32>,
    /// What it was about.
    pub about: About<'a>,
}

impl Sample<'_> {
    /// Wall time from entry to return.
    pub fn wall(&self) -> Duration {
        Duration::from_nanos(self.wall_ns)
    }

    /// Time the call spent asleep (neither on a CPU nor waiting for one), for probed calls.
    pub fn slept(&self) -> Option<Duration> {
        self.usage.map(|u| {
            let busy = u.cpu_ns.saturating_add(u.run_delay_ns);
            Duration::from_nanos(self.wall_ns.saturating_sub(busy))
        })
    }

    /// Whether the call blocked: it slept (a voluntary switch) or took a major fault.
    pub fn blocked(&self) -> bool {
        self.usage.is_some_and(|u| u.vol_switches > 0 || u.major_faults > 0)
    }
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static SINK: OnceLock<fn(&Sample<'_>)> = OnceLock::new();

/// Starts measuring: from now on every wrapped call produces a [`Sample`] for `sink`. The
/// first sink installed stays (one server per process).
pub fn enable(sink: fn(&Sample<'_>)) {
    let _ = SINK.set(sink);
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether measuring is on.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// What a call returns, as far as the profile cares: did it fail, with which errno.
pub trait Outcome {
    /// The errno of a failure.
    fn errno(&self) -> Option<i32>;
}

impl<T> Outcome for io::Result<T> {
    fn errno(&self) -> Option<i32> {
        self.as_ref().err().and_then(|e| e.raw_os_error())
    }
}

impl<T> Outcome for rustix::io::Result<T> {
    fn errno(&self) -> Option<i32> {
        self.as_ref().err().map(|e| e.raw_os_error())
    }
}

/// Runs the syscall `f` as `call`, measured when measuring is on. The site recorded is the
/// caller's (wrappers carry `#[track_caller]`, so it is the amped line that asked).
#[inline]
#[track_caller]
pub fn around<R: Outcome>(call: Call, about: About<'_>, f: impl FnOnce() -> R) -> R {
    if !enabled() {
        return f();
    }
    measured(call, about, Location::caller(), f)
}

/// A call that cannot wait for the disk: timed only. Kept lean, as it runs for every socket
/// call of a busy loop; calls that may wait for the disk go to [`probed`].
#[cold]
#[inline(never)]
fn measured<R: Outcome>(
    call: Call,
    about: About<'_>,
    site: &'static Location<'static>,
    f: impl FnOnce() -> R,
) -> R {
    if call.may_sleep_on_disk() {
        return probed(call, about, site, f);
    }
    let t0 = monotonic_ns();
    let r = f();
    let wall_ns = monotonic_ns().saturating_sub(t0);
    deliver(&Sample { call, site, wall_ns, usage: None, errno: r.errno(), about });
    r
}

/// A call that may wait for the disk: timed, and the thread's usage read around it.
#[inline(never)]
fn probed<R: Outcome>(
    call: Call,
    about: About<'_>,
    site: &'static Location<'static>,
    f: impl FnOnce() -> R,
) -> R {
    let before = thread_usage();
    let t0 = monotonic_ns();
    let r = f();
    let wall_ns = monotonic_ns().saturating_sub(t0);
    let usage = Some(before.delta(&thread_usage()));
    deliver(&Sample { call, site, wall_ns, usage, errno: r.errno(), about });
    r
}

#[inline]
fn deliver(s: &Sample<'_>) {
    if let Some(sink) = SINK.get() {
        sink(s);
    }
}

/// The monotonic clock in ns (vDSO, no syscall): cheaper than `Instant` arithmetic, which
/// normalises a seconds/nanoseconds pair on every subtraction.
#[inline]
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the call to fill; CLOCK_MONOTONIC cannot
    // fail. (libc's, not rustix's own vDSO call: valgrind's tools run the former.)
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(t.tv_nsec as u64)
}

thread_local! {
    /// This thread's `/proc/thread-self/schedstat` and `stat`, kept open: a probe re-reads
    /// them with one `pread` each.
    static PROC: Option<(File, Option<File>)> = open_proc();
}

fn open_proc() -> Option<(File, Option<File>)> {
    let sched = File::open("/proc/thread-self/schedstat").ok()?;
    let stat = delay_accounting().then(|| File::open("/proc/thread-self/stat").ok()).flatten();
    Some((sched, stat))
}

/// Whether the kernel keeps per-task delay accounting (`kernel.task_delayacct`), which the
/// block-I/O delay needs. Read once.
pub fn delay_accounting() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|s| s.trim() == "1")
    })
}

/// The calling thread's usage now: context switches and faults from `getrusage(RUSAGE_THREAD)`,
/// CPU and run-queue time from schedstat, block-I/O delay if delay accounting is on. Costs
/// one syscall and one or two `pread`s of procfs.
#[inline(never)]
pub fn thread_usage() -> Usage {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one `struct rusage` into `ru`, which is live and writable.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let mut u = Usage::default();
    if rc == 0 {
        u.vol_switches = ru.ru_nvcsw as u64;
        u.invol_switches = ru.ru_nivcsw as u64;
        u.major_faults = ru.ru_majflt as u64;
        u.minor_faults = ru.ru_minflt as u64;
    }
    PROC.with(|p| {
        let Some((sched, stat)) = p else { return };
        let mut buf = [0u8; 512];
        if let Ok(n) = sched.read_at(&mut buf, 0)
            && let Some((cpu, delay)) = parse_schedstat(&buf[..n])
        {
            u.cpu_ns = cpu;
            u.run_delay_ns = delay;
        }
        if let Some(stat) = stat
            && let Ok(n) = stat.read_at(&mut buf, 0)
        {
            u.blkio_ns = parse_blkio_ticks(&buf[..n]).unwrap_or(0) * tick_ns();
        }
    });
    u
}

/// `/proc/.../schedstat`: "cpu_ns run_delay_ns timeslices".
fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(text).ok()?;
    let mut it = s.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// `/proc/.../stat` field 42, `delayacct_blkio_ticks` (fields counted after the `(comm)`,
/// which may hold spaces).
fn parse_blkio_ticks(text: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(text).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(42 - 3)?.parse().ok()
}

/// The length of a clock tick (`_SC_CLK_TCK`), ns. Asked of libc, not of rustix, which reads
/// the auxiliary vector's ELF headers itself: that faults under valgrind (which callgrind, in
/// bench/scripts/debox_callgrind.sh, cannot survive) once delay accounting is on.
fn tick_ns() -> u64 {
    static NS: OnceLock<u64> = OnceLock::new();
    *NS.get_or_init(|| {
        // SAFETY: sysconf only reads a configuration value; it has no memory arguments.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        1_000_000_000 / u64::try_from(hz).unwrap_or(100).max(1)
    })
}

/// Names what a descriptor is: `peer ADDR` for a connected socket, else the path procfs
/// gives it (`/srv/www/big.bin`, `pipe:[…]`). Meant for rare reports (costs a syscall).
pub fn describe_fd(fd: BorrowedFd<'_>) -> String {
    if let Ok(Some(addr)) = rustix::net::getpeername(fd)
        && let Ok(sa) = std::net::SocketAddr::try_from(addr)
    {
        return format!("peer {sa}");
    }
    match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        Ok(p) => p.display().to_string(),
        Err(_) => format!("fd {}", fd.as_raw_fd()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn parses_schedstat_and_the_blkio_field_past_a_spaced_comm() {
        assert_eq!(parse_schedstat(b"123 456 7\n"), Some((123, 456)));
        assert_eq!(parse_schedstat(b"x"), None);
        let mut stat = String::from("42 (a b) c) S");
        for i in 4..=52 {
            stat.push_str(&format!(" {i}"));
        }
        assert_eq!(parse_blkio_ticks(stat.as_bytes()), Some(42));
    }

    #[test]
    fn usage_moves_forward_and_a_sleep_is_a_voluntary_switch() {
        let a = thread_usage();
        std::thread::sleep(Duration::from_millis(5));
        let b = thread_usage();
        let d = a.delta(&b);
        assert!(d.vol_switches >= 1, "{d:?}");
        assert!(b.cpu_ns >= a.cpu_ns);
    }

    #[test]
    fn an_enabled_wrapper_reports_its_caller_and_probes_only_disk_calls() {
        use std::sync::Mutex;
        type Seen = (Call, u32, bool, Option<i32>);
        static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
        fn sink(s: &Sample<'_>) {
            SEEN.lock().unwrap().push((s.call, s.site.line(), s.usage.is_some(), s.errno));
        }
        enable(sink);
        let fail = || Err(io::Error::from_raw_os_error(5));
        let line = line!() + 1;
        let r: io::Result<()> = around(Call::FileRead, About::Nothing, fail);
        assert!(r.is_err());
        let _ = around(Call::Writev, About::Nothing, || io::Result::Ok(1));
        let seen = SEEN.lock().unwrap();
        assert!(seen.contains(&(Call::FileRead, line, true, Some(5))), "{seen:?}");
        assert!(seen.iter().any(|s| s.0 == Call::Writev && !s.2), "{seen:?}");
    }

    #[test]
    fn describes_a_socket_by_its_peer_and_a_file_by_its_path() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(describe_fd(c.as_fd()), format!("peer {}", l.local_addr().unwrap()));
        let exe = std::env::current_exe().unwrap();
        let f = File::open(&exe).unwrap();
        assert_eq!(describe_fd(f.as_fd()), exe.display().to_string());
    }
}
