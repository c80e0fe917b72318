//! What every architecture's serving loop does around its events, whatever it waits on: the
//! phase a connection is in and the deadline that phase gives it, the housekeeping tick, the
//! pause after `accept` ran out of descriptors, and — for the event loops (epoll in
//! [`super::event_loop`], io_uring in [`super::uring`]) — when they may accept
//! ([`AcceptPause`]) and the graceful-shutdown sequence (notice the signal, drain, stop once
//! drained or at the deadline). The blocking driver ([`super::blocking`]) shares the phases,
//! the tick and the back-off period.

use crate::config::Config;
use crate::stats::{Stats, bump};
use amped_sys::listen::is_fd_exhaustion;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a loop wakes for housekeeping (timeouts, page yields, accept back-off); in the
/// blocking architectures, the longest a socket call blocks — the granularity of their
/// timeouts and of noticing a shutdown.
pub const TICK: Duration = Duration::from_millis(250);

/// Pause after `accept` failed for lack of descriptors (`EMFILE`/`ENFILE`): the connections
/// already open get a chance to close before the next attempt.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What a connection waits for, which decides its timeout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Waiting for (the rest of) a request head: header timeout.
    Head,
    /// Between requests: keep-alive timeout.
    Idle,
    /// Blocked on a full socket buffer, or a send in flight: send timeout.
    Send,
    /// Waiting for disk work (a job, a helper, the ring): no timeout, the disk bounds it.
    /// (The blocking architectures run jobs inline and never park.)
    Parked,
    /// A response just completed: whatever the connection waits for next starts a fresh
    /// deadline (a pipelining client is never timed out for its previous request's wait).
    Served,
}

impl Phase {
    /// When a connection entering this phase at `now` times out.
    pub fn deadline(self, cfg: &Config, now: Instant) -> Instant {
        match self {
            Phase::Head => now + cfg.header_timeout(),
            Phase::Idle => now + cfg.keepalive_timeout(),
            Phase::Send => now + cfg.send_timeout(),
            Phase::Parked | Phase::Served => now + Duration::from_secs(365 * 24 * 3600),
        }
    }
}

/// When an event loop may accept: below `--max-connections`, and not in the
/// [`ACCEPT_BACKOFF`] pause after `accept` ran out of descriptors. Both kinds of pause are
/// counted in `accept_pauses` (reaching the cap once per stay there).
#[derive(Debug, Default)]
pub struct AcceptPause {
    until: Option<Instant>,
    at_cap: bool,
}

impl AcceptPause {
    /// Whether the loop may accept at `now` with `open` of at most `max` connections open.
    pub fn may_accept(&mut self, open: usize, max: usize, now: Instant, stats: &Stats) -> bool {
        if open >= max {
            if !self.at_cap {
                self.at_cap = true;
                bump(stats.accept_pauses());
            }
            return false;
        }
        self.at_cap = false;
        if self.until.is_some_and(|t| now < t) {
            return false;
        }
        self.until = None;
        true
    }

    /// `accept` failed with `e`. Out of descriptors, accepting pauses (logged and counted)
    /// and this returns true; any other error (the client gave up) changes nothing.
    pub fn accept_failed(&mut self, e: &io::Error, stats: &Stats) -> bool {
        if !is_fd_exhaustion(e) {
            return false;
        }
        crate::errlog::warn!("accept: {e}; pausing accepts for {ACCEPT_BACKOFF:?}");
        bump(stats.accept_pauses());
        self.until = Some(Instant::now() + ACCEPT_BACKOFF);
        true
    }
}

/// The loop's clock: when to sweep, and where it is in a graceful shutdown.
#[derive(Debug)]
pub struct Lifecycle {
    next_sweep: Instant,
    drain_deadline: Option<Instant>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle::new()
    }
}

impl Lifecycle {
    /// A loop that has just started.
    pub fn new() -> Lifecycle {
        Lifecycle { next_sweep: Instant::now() + TICK, drain_deadline: None }
    }

    /// True exactly once: on the first turn after `shutdown` was set. The loop then begins
    /// draining, and has `grace` to finish.
    pub fn shutdown_begins(&mut self, shutdown: &AtomicBool, grace: Duration) -> bool {
        if self.drain_deadline.is_none() && shutdown.load(Ordering::Relaxed) {
            self.drain_deadline = Some(Instant::now() + grace);
            return true;
        }
        false
    }

    /// Whether a draining loop should stop now: nothing is left in flight (`drained`), or
    /// the deadline has passed.
    pub fn should_stop(&self, drained: bool) -> bool {
        self.drain_deadline.is_some_and(|d| drained || Instant::now() >= d)
    }

    /// Whether housekeeping is due at `now` (then it is next due a tick later).
    pub fn sweep_due(&mut self, now: Instant) -> bool {
        if now < self.next_sweep {
            return false;
        }
        self.next_sweep = now + TICK;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_begins_once_and_stops_when_drained_or_late() {
        let mut l = Lifecycle::new();
        let flag = AtomicBool::new(false);
        assert!(!l.shutdown_begins(&flag, Duration::from_secs(5)));
        assert!(!l.should_stop(true), "not stopping without a shutdown");
        flag.store(true, Ordering::Relaxed);
        assert!(l.shutdown_begins(&flag, Duration::from_secs(5)));
        assert!(!l.shutdown_begins(&flag, Duration::from_secs(5)), "begins only once");
        assert!(!l.should_stop(false), "work in flight, deadline ahead");
        assert!(l.should_stop(true));
        let mut late = Lifecycle::new();
        late.shutdown_begins(&flag, Duration::ZERO);
        assert!(late.should_stop(false), "the deadline passed");
    }

    #[test]
    fn accepting_pauses_at_the_cap_and_after_running_out_of_descriptors() {
        let stats = Stats::default();
        let pauses = || stats.accept_pauses().load(Ordering::Relaxed);
        let mut p = AcceptPause::default();
        let now = Instant::now();
        assert!(p.may_accept(1, 2, now, &stats));
        assert!(!p.may_accept(2, 2, now, &stats) && !p.may_accept(2, 2, now, &stats));
        assert_eq!(pauses(), 1, "one stay at the cap, one pause");
        assert!(p.may_accept(1, 2, now, &stats));
        let aborted = io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert!(!p.accept_failed(&aborted, &stats) && p.may_accept(1, 2, now, &stats));
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(p.accept_failed(&emfile, &stats));
        assert_eq!(pauses(), 2);
        assert!(!p.may_accept(0, 2, Instant::now(), &stats), "paused");
        assert!(p.may_accept(0, 2, Instant::now() + ACCEPT_BACKOFF, &stats), "the pause is over");
    }

    #[test]
    fn sweeps_come_a_tick_apart() {
        let mut l = Lifecycle::new();
        let t0 = Instant::now();
        assert!(!l.sweep_due(t0));
        assert!(l.sweep_due(t0 + TICK));
        assert!(!l.sweep_due(t0 + TICK + TICK / 2));
        assert!(l.sweep_due(t0 + 3 * TICK));
    }
}
