//! SEDA's two resource controllers for one stage, as pure decisions (no threads, no clock):
//! the stage in [`super::stage`] feeds them what it observed and applies what they answer.
//!
//! * [`ThreadControl`] sizes a stage's pool. Every [`CONTROL_TICK`] it looks at the stage's
//!   queue: while [`GROW_AT`] or more jobs wait it adds one thread, up to the stage's maximum
//!   (`--stage-threads-max`). A thread that found no job for [`IDLE_RETIRE`] leaves, down to
//!   one thread. Growth is deliberately one thread per tick: a burst of a few milliseconds
//!   does not turn into twenty threads.
//! * [`BatchControl`] sets how many jobs a thread takes from the queue per turn (results of a
//!   turn are announced to the event loop with one wake-up). It starts at the ceiling
//!   (`--stage-batch-max`) and, every [`BATCH_WINDOW`] turns, compares the stage's job rate
//!   with the previous window's: while the rate holds it lowers the batch by one (smaller
//!   batches answer sooner); when the rate falls by more than a tenth it doubles the batch;
//!   when it collapses to under half it goes straight back to the ceiling.

use std::time::Duration;

/// How often the thread-pool controller looks at the queues.
pub const CONTROL_TICK: Duration = Duration::from_millis(100);
/// Queue length at which a stage gets one more thread per tick.
pub const GROW_AT: usize = 8;
/// How long a thread waits for work before it retires (if it is not the last).
pub const IDLE_RETIRE: Duration = Duration::from_secs(1);
/// Turns of a stage the batching controller averages over before it decides.
pub const BATCH_WINDOW: u32 = 8;

/// The thread-pool controller's bounds for one stage.
#[derive(Clone, Copy, Debug)]
pub struct ThreadControl {
    /// Threads the stage keeps even when idle.
    pub min: usize,
    /// Threads the stage may grow to.
    pub max: usize,
}

impl ThreadControl {
    /// Whether a stage with `threads` threads and `queued` jobs waiting gets another thread.
    pub fn should_grow(&self, threads: usize, queued: usize) -> bool {
        queued >= GROW_AT && threads < self.max
    }

    /// Whether an idle thread may leave a stage of `threads` threads.
    pub fn may_retire(&self, threads: usize) -> bool {
        threads > self.min
    }
}

/// The batching controller of one stage.
#[derive(Debug)]
pub struct BatchControl {
    max: usize,
    factor: usize,
    turns: u32,
    jobs: u64,
    busy: Duration,
    last_rate: Option<f64>,
}

impl BatchControl {
    /// A controller whose batches never exceed `max` jobs; it starts there.
    pub fn new(max: usize) -> BatchControl {
        let max = max.max(1);
        BatchControl { max, factor: max, turns: 0, jobs: 0, busy: Duration::ZERO, last_rate: None }
    }

    /// Jobs a thread should take per turn now.
    pub fn factor(&self) -> usize {
        self.factor
    }

    /// Records one turn (`jobs` run in `took`) and returns the factor for the next turns.
    pub fn observe(&mut self, jobs: usize, took: Duration) -> usize {
        self.turns += 1;
        self.jobs += jobs as u64;
        self.busy += took;
        if self.turns < BATCH_WINDOW {
            return self.factor;
        }
        let rate = self.jobs as f64 / self.busy.as_secs_f64().max(1e-9);
        (self.turns, self.jobs, self.busy) = (0, 0, Duration::ZERO);
        self.factor = match self.last_rate {
            Some(last) if rate < last * 0.5 => self.max,
            Some(last) if rate < last * 0.9 => (self.factor * 2).min(self.max),
            _ => self.factor.saturating_sub(1).max(1),
        };
        self.last_rate = Some(rate);
        self.factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_grow_only_on_a_long_queue_and_up_to_the_maximum() {
        let c = ThreadControl { min: 1, max: 3 };
        assert!(!c.should_grow(1, GROW_AT - 1), "a short queue is left alone");
        assert!(c.should_grow(1, GROW_AT));
        assert!(c.should_grow(2, 1000));
        assert!(!c.should_grow(3, 1000), "never beyond the maximum");
        assert!(c.may_retire(2));
        assert!(!c.may_retire(1), "the last thread stays");
    }

    fn window(c: &mut BatchControl, jobs_per_turn: usize, per_job: Duration) -> usize {
        let mut f = c.factor();
        for _ in 0..BATCH_WINDOW {
            f = c.observe(jobs_per_turn, per_job * jobs_per_turn as u32);
        }
        f
    }

    #[test]
    fn batches_shrink_while_throughput_holds() {
        let mut c = BatchControl::new(4);
        assert_eq!(c.factor(), 4, "starts at the ceiling");
        let us = Duration::from_micros(10);
        assert_eq!(window(&mut c, 4, us), 3);
        assert_eq!(window(&mut c, 3, us), 2);
        assert_eq!(window(&mut c, 2, us), 1);
        assert_eq!(window(&mut c, 1, us), 1, "never below one");
    }

    #[test]
    fn batches_grow_when_throughput_drops_and_reset_when_it_collapses() {
        let mut c = BatchControl::new(16);
        let us = Duration::from_micros(10);
        for _ in 0..20 {
            window(&mut c, 1, us);
        }
        assert_eq!(c.factor(), 1);
        assert_eq!(window(&mut c, 1, us * 5 / 4), 2, "rate fell by a fifth: double");
        assert_eq!(window(&mut c, 2, us * 25 / 16), 4, "fell again: double again");
        assert_eq!(window(&mut c, 4, us * 100), 16, "rate collapsed: back to the ceiling");
    }

    #[test]
    fn the_factor_changes_only_once_a_window() {
        let mut c = BatchControl::new(8);
        for _ in 1..BATCH_WINDOW {
            assert_eq!(c.observe(8, Duration::from_millis(1)), 8);
        }
        assert_eq!(c.observe(8, Duration::from_millis(1)), 7);
    }
}
