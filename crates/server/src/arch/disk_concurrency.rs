//! How many cold reads may be at the disk at once: fixed, or adapted to what the disk shows.
//!
//! A disk that serves one request at a time (one arm, an IOPS-capped volume past its cap)
//! gains nothing from a deeper queue: every read it is given only waits there longer, in the
//! disk's own first-come order — behind reads that amped's queues would have put after it
//! (the read lane serves new requests and transfers under way in turn, the oldest transfer
//! first). A disk that serves many at once (an SSD, a striped volume) is under-used by a few.
//! So the bound adapts, one policy for both of amped's disk queues (AMPED's read lane and
//! io_uring's disk gate), by the disk's throughput: while reads wait for a slot, each *round*
//! (twice as many reads as the bound, at least eight) measures the 128 KiB pieces moved per
//! second at that bound. A bound whose throughput is not clearly above the next lower one's
//! (by at least half of what one more slot would add on a disk that serves them all in
//! parallel) is given up for the lower one; one that is, grows while the next higher one has
//! not shown otherwise. Every 16 rounds the neighbours' throughputs are forgotten, so the
//! bound probes both ways again when the disk or the load changes.
//!
//! It is not the default: on the heavy-tailed access log over the one-arm FUSE disk it cost
//! throughput and timed out more of the largest transfers than the fixed bound (a one-arm disk
//! with one read in flight idles between reads, so "no gain from depth" was not what it
//! measured; docs/BENCHMARKS.md §3b, 2026-11-25). `--disk-concurrency auto` turns it on; by
//! default the bound is `--helpers`, and `--disk-concurrency N` fixes it at N.

use std::time::{Duration, Instant};

/// The size of a piece: one read-ahead window, what one disk request usually moves.
const PIECE: u64 = 128 << 10;
/// Rounds between forgetting the neighbouring bounds' throughputs.
const REPROBE_ROUNDS: u32 = 16;

/// The bound on cold reads in flight, and how it adapts.
#[derive(Debug, Clone)]
pub struct DiskConcurrency {
    limit: usize,
    min: usize,
    max: usize,
    adaptive: bool,
    /// Pieces per second measured at each bound (index: the bound), while reads waited.
    throughput: Vec<Option<f64>>,
    round: Round,
    rounds: u32,
}

/// The reads finished since the last round ended.
#[derive(Debug, Clone, Default)]
struct Round {
    since: Option<Instant>,
    reads: usize,
    pieces: u64,
    waited: usize,
}

impl DiskConcurrency {
    /// A bound fixed at `n` (at least one).
    pub fn fixed(n: usize) -> DiskConcurrency {
        let n = n.max(1);
        DiskConcurrency::new(n, n, n, false)
    }

    /// The bound `cfg` asks for: `--helpers` by default, `--disk-concurrency N`, or with
    /// `auto` one adapting between one and four times `--helpers`, starting at `--helpers`.
    pub fn configured(cfg: &crate::config::Config) -> DiskConcurrency {
        use crate::config::DiskBound;
        match cfg.disk_concurrency {
            DiskBound::AsHelpers => DiskConcurrency::fixed(cfg.helpers),
            DiskBound::Fixed(n) => DiskConcurrency::fixed(n),
            DiskBound::Auto => DiskConcurrency::adaptive(cfg.helpers, 4 * cfg.helpers),
        }
    }

    /// A bound starting at `start`, adapting between one and `max`.
    pub fn adaptive(start: usize, max: usize) -> DiskConcurrency {
        let max = max.max(1);
        DiskConcurrency::new(start.clamp(1, max), 1, max, true)
    }

    fn new(limit: usize, min: usize, max: usize, adaptive: bool) -> DiskConcurrency {
        DiskConcurrency {
            limit,
            min,
            max,
            adaptive,
            throughput: vec![None; max + 2],
            round: Round::default(),
            rounds: 0,
        }
    }

    /// Cold reads allowed at the disk at once now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The most it may reach (how many threads a lane needs).
    pub fn max(&self) -> usize {
        self.max
    }

    /// A read that moved `bytes` finished at `now`; `waiting` reads wanted a slot then.
    pub fn finished(&mut self, now: Instant, bytes: u64, waiting: usize) {
        if !self.adaptive {
            return;
        }
        let Some(since) = self.round.since else {
            self.round.since = Some(now);
            return;
        };
        self.round.reads += 1;
        self.round.pieces += bytes.div_ceil(PIECE).max(1);
        self.round.waited += usize::from(waiting > 0);
        if self.round.reads < 2 * self.limit.max(4) {
            return;
        }
        let round =
            std::mem::replace(&mut self.round, Round { since: Some(now), ..Round::default() });
        let elapsed = now.saturating_duration_since(since).max(Duration::from_micros(1));
        if 2 * round.waited < round.reads {
            return; // the disk was not the limit: nothing learnt about it
        }
        let measured = round.pieces as f64 / elapsed.as_secs_f64();
        let here = self.throughput[self.limit].map_or(measured, |old| (old + measured) / 2.0);
        self.throughput[self.limit] = Some(here);
        let before = self.limit;
        self.decide(here);
        if self.limit != before {
            crate::errlog::debug!(
                "disk concurrency {before} -> {} ({here:.0} pieces of 128 KiB/s at {before})",
                self.limit
            );
        }
        self.rounds += 1;
        if self.rounds.is_multiple_of(REPROBE_ROUNDS) {
            self.throughput[self.limit - 1] = None;
            self.throughput[self.limit + 1] = None;
        }
    }

    /// Moves the bound one step, given the throughput `here` at the current one.
    fn decide(&mut self, here: f64) {
        let n = self.limit;
        // One more slot is worth keeping if it adds at least half of a slot's share.
        let worth = |lower: f64, at: usize| lower * (1.0 + 0.5 / (at - 1) as f64);
        if n > self.min && self.throughput[n - 1].is_none_or(|lower| here < worth(lower, n)) {
            self.limit = n - 1;
        } else if n < self.max
            && self.throughput[n + 1].is_none_or(|upper| upper >= worth(here, n + 1))
        {
            self.limit = n + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `rounds` rounds of saturated reads of one piece to `c` from a disk that completes
    /// `per_second(limit)` of them a second when `limit` are in flight.
    fn run(c: &mut DiskConcurrency, reads: usize, per_second: impl Fn(usize) -> f64) {
        let mut now = Instant::now();
        for _ in 0..reads {
            now += Duration::from_secs_f64(1.0 / per_second(c.limit()));
            c.finished(now, PIECE, 5);
        }
    }

    #[test]
    fn a_disk_that_serves_one_read_at_a_time_gets_one_or_two() {
        // One arm, 8.3 ms a read: 120 reads a second however many are in flight.
        let mut c = DiskConcurrency::adaptive(4, 16);
        run(&mut c, 2_000, |_| 120.0);
        assert!(c.limit() <= 2, "limit {}", c.limit());
    }

    #[test]
    fn a_disk_with_many_arms_gets_many() {
        // 32 arms, 0.3 ms a read: throughput grows with every read in flight up to 32.
        let mut c = DiskConcurrency::adaptive(4, 16);
        run(&mut c, 20_000, |n| n.min(32) as f64 / 0.000_3);
        assert!(c.limit() >= 14, "limit {}", c.limit());
    }

    #[test]
    fn a_disk_with_four_arms_gets_about_four() {
        let mut c = DiskConcurrency::adaptive(1, 16);
        run(&mut c, 20_000, |n| n.min(4) as f64 / 0.000_3);
        assert!((3..=6).contains(&c.limit()), "limit {}", c.limit());
    }

    #[test]
    fn nothing_is_learnt_while_no_read_waits() {
        let mut c = DiskConcurrency::adaptive(3, 16);
        let mut now = Instant::now();
        for _ in 0..1_000 {
            now += Duration::from_millis(8);
            c.finished(now, PIECE, 0);
        }
        assert_eq!(c.limit(), 3, "the disk was never the limit");
    }

    #[test]
    fn a_fixed_bound_never_moves() {
        let mut c = DiskConcurrency::fixed(4);
        run(&mut c, 2_000, |_| 120.0);
        assert_eq!((c.limit(), c.max()), (4, 4));
        assert_eq!(DiskConcurrency::fixed(0).limit(), 1);
    }
}
