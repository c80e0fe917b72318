//! Process limits: the descriptor limit (a server with many connections and a descriptor
//! cache needs it raised) and CPU pinning for benchmark set-ups.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use std::io;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let cur = getrlimit(Resource::Nofile);
    if cur.maximum.is_some() && cur.current != cur.maximum {
        setrlimit(Resource::Nofile, Rlimit { current: cur.maximum, maximum: cur.maximum })?;
    }
    Ok(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX))
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// The `i`-th CPU (wrapping around) of those this process may run on, so that pinning
/// respects a restricted CPU set (`taskset -c 2,3 amped --pin` uses CPUs 2 and 3).
pub fn nth_allowed_cpu(i: usize) -> usize {
    let allowed: Vec<usize> = match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    };
    if allowed.is_empty() { i % available_cpus() } else { allowed[i % allowed.len()] }
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
