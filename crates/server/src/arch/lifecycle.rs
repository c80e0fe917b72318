//! What every architecture's serving loop does around its events, whatever it waits on: the
//! phase a connection is in and the deadline that phase gives it, the housekeeping tick
//! ([`Housekeeping`]), the pause after `accept` ran out of descriptors, and the one
//! graceful-shutdown clock ([`Stop`]: notice the signal, drain, give up at the deadline) that
//! every architecture keeps. The event loops (epoll in [`super::event_loop`], io_uring in
//! [`super::uring`]) also take from here when they may accept ([`AcceptPause`]) and their
//! turn-by-turn [`Lifecycle`]; the blocking driver ([`super::blocking`]) shares the phases, the
//! tick, the back-off and the clock, and its waiting rooms ([`super::waiting_room`]) sweep on
//! the same housekeeping tick.

use crate::config::Config;
use crate::pipeline::Pipeline;
use amped_sys::listen::is_fd_exhaustion;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
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
    /// When a connection of `p` entering this phase at `now` times out.
    pub fn deadline(self, p: &Pipeline, now: Instant) -> Instant {
        match self {
            Phase::Head => now + p.header_timeout(),
            Phase::Idle => now + p.keepalive_timeout(),
            Phase::Send => now + p.send_timeout(),
            Phase::Parked | Phase::Served => now + Duration::from_secs(365 * 24 * 3600),
        }
    }
}

/// When an event loop may accept: below `--max-connections`, and not in the
/// [`ACCEPT_BACKOFF`] pause after `accept` ran out of descriptors. Both kinds of pause are
/// counted ([`Pipeline::accept_paused`]; reaching the cap once per stay there).
#[derive(Debug, Default)]
pub struct AcceptPause {
    until: Option<Instant>,
    at_cap: bool,
}

impl AcceptPause {
    /// Whether the loop may accept at `now` with `open` connections of `p` open.
    pub fn may_accept(&mut self, open: usize, now: Instant, p: &Pipeline) -> bool {
        if open >= p.max_connections() {
            if !self.at_cap {
                self.at_cap = true;
                p.accept_paused();
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
    pub fn accept_failed(&mut self, e: &io::Error, p: &Pipeline) -> bool {
        if !out_of_descriptors(e, p) {
            return false;
        }
        self.until = Some(Instant::now() + ACCEPT_BACKOFF);
        true
    }
}

/// Whether `accept` failed with `e` for lack of descriptors (`EMFILE`/`ENFILE`); if so, the
/// [`ACCEPT_BACKOFF`] pause that follows is logged and counted here, and the caller pauses.
pub fn out_of_descriptors(e: &io::Error, p: &Pipeline) -> bool {
    if !is_fd_exhaustion(e) {
        return false;
    }
    crate::errlog::warn!("accept: {e}; pausing accepts for {ACCEPT_BACKOFF:?}");
    p.accept_paused();
    true
}

/// Graceful shutdown, one clock for every thread of a server (or of an `mp` worker): begun
/// when the signal flag (SIGTERM/SIGINT/SIGQUIT) is set, over the configuration's shutdown
/// timeout — as it is when a thread first notices — after that.
pub struct Stop {
    flag: Arc<AtomicBool>,
    /// Holds the (live) shutdown timeout.
    live: Arc<crate::config::Live>,
    /// When in-flight work is abandoned; set by the first thread to notice the flag.
    deadline: OnceLock<Instant>,
}

impl Stop {
    /// Watches `flag`; in-flight work may take `cfg`'s shutdown timeout after it is set.
    pub fn new(flag: Arc<AtomicBool>, cfg: &Config) -> Self {
        Stop { flag, live: cfg.live.clone(), deadline: OnceLock::new() }
    }

    /// True once shutdown has begun: finish what is in flight, take nothing new.
    pub fn draining(&self) -> bool {
        self.deadline().is_some()
    }

    /// When in-flight work must be abandoned (`None` before shutdown began).
    pub fn deadline(&self) -> Option<Instant> {
        if let Some(d) = self.deadline.get() {
            return Some(*d);
        }
        if !self.flag.load(Ordering::Relaxed) {
            return None;
        }
        Some(*self.deadline.get_or_init(|| Instant::now() + self.live.shutdown_timeout()))
    }

    /// True once the shutdown deadline has passed.
    pub fn expired(&self) -> bool {
        self.deadline().is_some_and(|d| Instant::now() >= d)
    }
}

/// When a loop's housekeeping (sweeping overdue connections, page yields) is next due: once
/// a [`TICK`].
#[derive(Debug)]
pub struct Housekeeping {
    next: Instant,
}

impl Housekeeping {
    /// First due a tick after `now`.
    pub fn after(now: Instant) -> Housekeeping {
        Housekeeping { next: now + TICK }
    }

    /// Whether housekeeping is due at `now` (then it is next due a tick later).
    pub fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + TICK;
        true
    }
}

/// An event loop's turns: when to sweep, and where it is in a graceful shutdown ([`Stop`]).
pub struct Lifecycle {
    housekeeping: Housekeeping,
    stop: Stop,
    /// The loop has begun draining.
    draining: bool,
}

impl Lifecycle {
    /// A loop that has just started, shutting down by `stop`.
    pub fn new(stop: Stop) -> Lifecycle {
        Lifecycle { housekeeping: Housekeeping::after(Instant::now()), stop, draining: false }
    }

    /// True exactly once: on the first turn after shutdown began. The loop then begins
    /// draining, until the shutdown deadline.
    pub fn shutdown_begins(&mut self) -> bool {
        if !self.draining && self.stop.draining() {
            self.draining = true;
            return true;
        }
        false
    }

    /// Whether a draining loop should stop now: nothing is left in flight (`drained`), or
    /// the deadline has passed.
    pub fn should_stop(&self, drained: bool) -> bool {
        self.draining && (drained || self.stop.expired())
    }

    /// Whether housekeeping is due at `now` (then it is next due a tick later).
    pub fn sweep_due(&mut self, now: Instant) -> bool {
        self.housekeeping.due(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock on `flag` whose shutdown timeout is `grace`.
    fn stop(flag: &Arc<AtomicBool>, grace: Duration) -> Stop {
        let live = crate::config::Live::new(
            [Duration::from_secs(1), Duration::ZERO, Duration::ZERO, grace],
            0,
        );
        Stop { flag: flag.clone(), live: Arc::new(live), deadline: OnceLock::new() }
    }

    #[test]
    fn shutdown_begins_once_and_stops_when_drained_or_late() {
        let flag = Arc::new(AtomicBool::new(false));
        let mut l = Lifecycle::new(stop(&flag, Duration::from_secs(5)));
        assert!(!l.shutdown_begins());
        assert!(!l.should_stop(true), "not stopping without a shutdown");
        flag.store(true, Ordering::Relaxed);
        assert!(l.shutdown_begins());
        assert!(!l.shutdown_begins(), "begins only once");
        assert!(!l.should_stop(false), "work in flight, deadline ahead");
        assert!(l.should_stop(true));
        let mut late = Lifecycle::new(stop(&flag, Duration::ZERO));
        late.shutdown_begins();
        assert!(late.should_stop(false), "the deadline passed");
    }

    #[test]
    fn the_deadline_is_fixed_by_the_first_to_notice() {
        let flag = Arc::new(AtomicBool::new(false));
        let s = stop(&flag, Duration::from_secs(5));
        assert!(!s.draining() && s.deadline().is_none() && !s.expired());
        flag.store(true, Ordering::Relaxed);
        let first = s.deadline().expect("shutdown began");
        assert!(first > Instant::now() + Duration::from_secs(4));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.deadline(), Some(first), "later looks see the same deadline");
        assert!(s.draining() && !s.expired());
        assert!(stop(&flag, Duration::ZERO).expired());
    }

    #[test]
    fn accepting_pauses_at_the_cap_and_after_running_out_of_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let args = crate::config::Args {
            root: Some(dir.path().to_path_buf()),
            max_connections: Some(2),
            ..Default::default()
        };
        let cfg = Arc::new(Config::resolve(args).unwrap());
        let stats = Arc::new(crate::stats::Stats::default());
        let server = Pipeline::new(cfg, stats.clone(), crate::access_log::AccessLogger::off());
        let pauses = || stats.accept_pauses().load(Ordering::Relaxed);
        let mut p = AcceptPause::default();
        let now = Instant::now();
        assert!(p.may_accept(1, now, &server));
        assert!(!p.may_accept(2, now, &server) && !p.may_accept(2, now, &server));
        assert_eq!(pauses(), 1, "one stay at the cap, one pause");
        assert!(p.may_accept(1, now, &server));
        let aborted = io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert!(!p.accept_failed(&aborted, &server) && p.may_accept(1, now, &server));
        let emfile = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(p.accept_failed(&emfile, &server));
        assert_eq!(pauses(), 2);
        assert!(!p.may_accept(0, Instant::now(), &server), "paused");
        assert!(p.may_accept(0, Instant::now() + ACCEPT_BACKOFF, &server), "the pause is over");
    }

    #[test]
    fn sweeps_come_a_tick_apart() {
        let mut l = Lifecycle::new(stop(&Arc::new(AtomicBool::new(false)), Duration::ZERO));
        let t0 = Instant::now();
        assert!(!l.sweep_due(t0));
        assert!(l.sweep_due(t0 + TICK));
        assert!(!l.sweep_due(t0 + TICK + TICK / 2));
        assert!(l.sweep_due(t0 + 3 * TICK));
    }
}
