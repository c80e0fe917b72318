//! Signal dispositions a server needs beyond handlers: ignoring the signals whose default
//! action would kill it although they mean nothing to it (SIGUSR2, SIGPIPE, SIGALRM, the
//! real-time signals …). Handlers for the signals that do mean something (SIGTERM, SIGHUP,
//! SIGUSR1 …) are installed with `signal-hook` by the server itself.

use std::io;

/// The asynchronous signals whose default action terminates the process and that amped
/// does not use: a stray `kill -USR2` or a timer signal must not take the site down.
/// Synchronous fault signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS) keep
/// their default action: they mean a bug, and ignoring them would hide it or loop forever.
pub fn unused_fatal_signals() -> Vec<i32> {
    let mut sigs = vec![
        libc::SIGUSR2,
        libc::SIGPIPE,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
        libc::SIGXFSZ,
    ];
    // The C library keeps the first real-time signals for itself; SIGRTMIN() is the first
    // one left to applications.
    sigs.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    sigs
}

/// Sets the disposition of every signal in `signals` to "ignore". Ignored dispositions are
/// inherited by processes started afterwards (the `mp` workers), which is what we want.
pub fn ignore(signals: &[i32]) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: SIG_IGN installs no handler, so no code of ours runs in signal context;
        // `sig` is a valid, catchable signal number (the callers pass constants from libc).
        let previous = unsafe { libc::signal(sig, libc::SIG_IGN) };
        if previous == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_signals_do_not_kill() {
        let sigs = unused_fatal_signals();
        assert!(sigs.contains(&libc::SIGUSR2) && sigs.contains(&libc::SIGPIPE));
        assert!(!sigs.contains(&libc::SIGSEGV) && !sigs.contains(&libc::SIGTERM));
        ignore(&[libc::SIGUSR2]).unwrap();
        rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::USR2)
            .unwrap();
        // Still alive: the signal was discarded.
    }
}
