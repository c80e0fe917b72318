//! Worker processes of the `mp` architecture (Flash-MP, Apache prefork): spawning a re-executed
//! copy of the server that inherits the listening socket, dies with its parent and may be
//! pinned to a CPU; adopting the inherited socket in the worker; signalling workers.
//!
//! The listener keeps `FD_CLOEXEC` in the parent; it is cleared only in the forked child,
//! just before `exec`, so no other program the parent might start inherits it.

use rustix::io::{FdFlags, fcntl_setfd};
use rustix::process::{
    Pid, Signal, getpid, getppid, kill_process, set_parent_process_death_signal,
};
use rustix::thread::{CpuSet, sched_setaffinity};
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Spawns `cmd` as a worker: `listeners` (and `also_inherit`, e.g. the shared counters) stay
/// open in it under the same descriptor numbers,
/// it receives SIGTERM when the spawning thread dies (`PR_SET_PDEATHSIG` fires on the exit of
/// the thread that forked, so spawn from a thread that outlives the worker), and, with `cpu`,
/// it runs pinned to that CPU if the system allows. Spawning fails if the parent died during
/// the fork.
pub fn spawn_worker(
    mut cmd: Command,
    listeners: &[TcpListener],
    also_inherit: Option<RawFd>,
    cpu: Option<usize>,
) -> io::Result<Child> {
    // Gathered before the fork: the hook must not allocate.
    let fds: Vec<RawFd> = listeners.iter().map(AsRawFd::as_raw_fd).chain(also_inherit).collect();
    let parent: Pid = getpid();
    let cpus = cpu.map(|c| {
        let mut set = CpuSet::new();
        set.set(c % CpuSet::MAX_CPU);
        set
    });
    let setup = move || -> io::Result<()> {
        set_parent_process_death_signal(Some(Signal::TERM))?;
        if getppid() != Some(parent) {
            // The parent died before the death signal was armed: nobody would stop us.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        for &fd in &fds {
            // SAFETY: `fd` is a listener or `also_inherit`, open in the parent when it forked
            // (the caller holds it), so it is open in this child, which owns nothing else
            // under that number; the borrow ends at once.
            fcntl_setfd(unsafe { BorrowedFd::borrow_raw(fd) }, FdFlags::empty())?;
        }
        if let Some(set) = &cpus {
            let _ = sched_setaffinity(None, set); // best effort, like the event loops' pinning
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It only makes raw system calls
    // through rustix (prctl, getppid, fcntl, sched_setaffinity) on values prepared before the
    // fork; it neither allocates nor takes locks (its errors are raw OS error codes).
    unsafe {
        cmd.pre_exec(setup);
    }
    cmd.spawn()
}

/// Adopts the listening socket a worker inherited as descriptor `fd` (`--worker-fd`), after
/// checking that it is an open, listening stream socket. It becomes close-on-exec again.
pub fn inherited_listener(fd: RawFd) -> io::Result<TcpListener> {
    let invalid =
        |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("--worker-fd {fd}: {why}"));
    if fd < 0 {
        return Err(invalid("not a descriptor"));
    }
    // SAFETY: the borrow is used only for the checks below, which fail with EBADF (no harm)
    // if `fd` is not open; nothing is closed meanwhile.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let listening =
        rustix::net::sockopt::socket_acceptconn(borrowed).map_err(|e| invalid(&e.to_string()))?;
    let stream = rustix::net::sockopt::socket_type(borrowed)
        .map_err(|e| invalid(&e.to_string()))?
        == rustix::net::SocketType::STREAM;
    if !(listening && stream) {
        return Err(invalid("not a listening stream socket"));
    }
    fcntl_setfd(borrowed, FdFlags::CLOEXEC)?;
    // SAFETY: `fd` is an open listening socket (checked above) that the parent handed to this
    // process for it alone to own; nothing else in this process refers to it.
    Ok(unsafe { TcpListener::from_raw_fd(fd) })
}

/// The signals a supervisor sends its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerSignal {
    /// Graceful stop: finish the response in flight, then exit.
    Terminate,
    /// Immediate stop.
    Kill,
    /// Re-read the configuration and re-open the logs (SIGHUP).
    Reload,
    /// Re-open the logs (SIGUSR1).
    ReopenLogs,
}

/// Sends `sig` to the process `pid` (a worker the caller spawned and has not reaped yet).
pub fn signal_worker(pid: u32, sig: WorkerSignal) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    let sig = match sig {
        WorkerSignal::Terminate => Signal::TERM,
        WorkerSignal::Kill => Signal::KILL,
        WorkerSignal::Reload => Signal::HUP,
        WorkerSignal::ReopenLogs => Signal::USR1,
    };
    Ok(kill_process(pid, sig)?)
}

/// The real user id of this process (for messages such as "not readable by uid 65534").
pub fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The monotonic clock in microseconds (systemd's `MONOTONIC_USEC` in a reload notification).
pub fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000 + (t.tv_nsec as u64) / 1000
}
