//! Ring opens one at a time while they are slow and file reads wait for the disk: the rule of
//! AMPED's metadata lane ([`crate::arch::slow_gate`]) for the opens io_uring runs on its ring.
//!
//! An open whose translation is known runs as ring operations (`OPENAT`, `STATX`, a small
//! body's `READ`), outside the disk gate that orders file reads ([`super::disk_gate`]). On a
//! disk serving one request at a time, every new request's open then went to the disk beside
//! the transfers' next reads, which waited their turn in the gate: on the heavy-tailed trace
//! the large transfers crawled and timed out. So while opens take [`SLOW_SERVICE`] or more on
//! average and reads wait at the disk gate, one open runs at a time and the others wait here
//! in arrival order; one more goes whenever nothing started or ended for [`STALL`]. With a
//! fixed metadata lane (`--metadata-helpers N`) the gate is off, as the lane's own is.

use crate::arch::metadata_lane::SLOW_SERVICE;
use crate::arch::slow_gate::{STALL, fold_average, may_start};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An open waiting for its turn.
pub(super) struct WaitingOpen {
    /// The connection's token.
    pub token: u64,
    pub url_path: String,
    pub path: PathBuf,
}

/// Opens running, their moving average, and those waiting.
pub(super) struct OpenGate {
    /// Off with a fixed metadata lane (`--metadata-helpers N`), as the lane's own gate is.
    on: bool,
    running: usize,
    /// When an open last started or ended.
    progress: Instant,
    /// How long opens take, ns (a moving average; 0: none yet).
    average_ns: u64,
    waiting: VecDeque<WaitingOpen>,
}

impl OpenGate {
    /// A gate that holds slow opens back if `on`, else lets every open go.
    pub fn new(on: bool) -> OpenGate {
        let progress = Instant::now();
        OpenGate { on, running: 0, progress, average_ns: 0, waiting: VecDeque::new() }
    }

    /// Whether an open may start now (`reads_wait`: file reads wait at the disk gate); if so
    /// it counts as running. Never ahead of opens already waiting.
    pub fn try_start(&mut self, reads_wait: bool) -> bool {
        self.waiting.is_empty() && self.take_turn(reads_wait)
    }

    /// Queues an open until its turn.
    pub fn wait(&mut self, open: WaitingOpen) {
        self.waiting.push_back(open);
    }

    /// The longest-waiting open, counted as running, if one may start now.
    pub fn next(&mut self, reads_wait: bool) -> Option<WaitingOpen> {
        if self.waiting.is_empty() || !self.take_turn(reads_wait) {
            return None;
        }
        self.waiting.pop_front()
    }

    /// An open ended after `took` (`None`: abandoned, its time unknown).
    pub fn ended(&mut self, took: Option<Duration>) {
        self.running = self.running.saturating_sub(1);
        self.progress = Instant::now();
        if let Some(took) = took {
            self.average_ns = fold_average(self.average_ns, took);
        }
    }

    fn take_turn(&mut self, reads_wait: bool) -> bool {
        let slow =
            || self.on && reads_wait && Duration::from_nanos(self.average_ns) >= SLOW_SERVICE;
        if !may_start(self.running, slow, self.progress.elapsed(), STALL) {
            return false;
        }
        self.running += 1;
        self.progress = Instant::now();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(token: u64) -> WaitingOpen {
        WaitingOpen { token, url_path: "/f".into(), path: "f".into() }
    }

    #[test]
    fn quick_opens_run_together() {
        let mut gate = OpenGate::new(true);
        assert!((0..5).all(|_| gate.try_start(true)), "no average yet: not slow");
        (0..5).for_each(|_| gate.ended(Some(Duration::from_micros(50))));
        assert!((0..5).all(|_| gate.try_start(true)), "quick opens are never held");
    }

    #[test]
    fn slow_opens_go_one_at_a_time_in_order_only_while_reads_wait() {
        let mut gate = OpenGate::new(true);
        assert!(gate.try_start(true));
        gate.ended(Some(SLOW_SERVICE * 3));
        assert!(gate.try_start(true), "none running: one goes");
        assert!(!gate.try_start(true), "a second slow open waits while reads wait");
        assert!(gate.try_start(false), "with no read waiting it goes");
        gate.wait(open(1));
        gate.wait(open(2));
        assert!(!gate.try_start(false), "never ahead of opens already waiting");
        assert!(gate.next(true).is_none(), "two running, reads wait: none more");
        gate.ended(Some(SLOW_SERVICE * 3));
        gate.ended(Some(SLOW_SERVICE * 3));
        assert_eq!(gate.next(true).map(|o| o.token), Some(1), "the first to wait goes first");
        assert!(gate.next(true).is_none());
        assert_eq!(gate.next(false).map(|o| o.token), Some(2), "reads stopped waiting");
    }

    #[test]
    fn a_gate_that_is_off_lets_slow_opens_run_together() {
        let mut gate = OpenGate::new(false);
        assert!(gate.try_start(true));
        gate.ended(Some(SLOW_SERVICE * 3));
        assert!((0..3).all(|_| gate.try_start(true)));
    }

    #[test]
    fn a_stalled_open_lets_one_more_go() {
        let mut gate = OpenGate::new(true);
        assert!(gate.try_start(true));
        gate.ended(Some(SLOW_SERVICE * 3));
        assert!(gate.try_start(true));
        gate.wait(open(7));
        assert!(gate.next(true).is_none());
        gate.progress -= STALL; // as if the running open had stalled for STALL
        assert_eq!(gate.next(true).map(|o| o.token), Some(7));
    }
}
