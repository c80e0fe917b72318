//! How many cold reads may be at the disk at once: `--helpers`, deepened while depth pays.
//!
//! A disk that serves one request at a time (one arm, an IOPS-capped volume past its cap)
//! gains nothing from a deeper queue: every read it is given only waits there longer, in the
//! disk's own first-come order — behind reads that amped's queues would have put after it
//! (the read lane serves new requests and transfers under way in turn, the oldest transfer
//! first). A disk that serves many at once (an SSD, a striped volume) is under-used by a few.
//! So the bound adapts, one policy for both of amped's disk queues (AMPED's read lane and
//! io_uring's disk gate), by the pieces of 128 KiB moved per second while reads wait.
//!
//! The rule (`auto`, the default): the bound starts at `--helpers` and never goes below it.
//! Once reads have waited for a slot nearly all the time for [`PROBE_EVERY_MIN`] rounds in a
//! row (a round: at least [`ROUND`]), it tries twice its depth (at most 4 × `--helpers`; from
//! a deeper bound, half), alternating a round at the tried depth with one at the settled depth
//! until each has [`PROBE_ROUNDS`]. A doubling is kept if it won every pair and moved at least
//! [`DOUBLING_GAIN`] more in all; the first pair it loses ends it. A halving is kept if it lost
//! less than [`HALVING_LOSS`]. After a probe that changed nothing the next waits
//! [`PROBE_EVERY_FAILED`] rounds, then four times longer each time (up to
//! [`PROBE_EVERY_MAX`]); after a move it comes soon, in the same direction.
//! `--disk-concurrency N` fixes the bound at N.
//!
//! Why each part (docs/BENCHMARKS.md §3b, session 13; every step measured in
//! `bench/runs/2026-11-28-disk-bound-auto-steps/`):
//! - Doublings, not single slots: past three, one slot adds 5–10 % on the SSD-like model, less
//!   than the rounds' noise, and a climber by single slots fell to one or two there (0.7× the
//!   fixed bound of four), where sixteen moves 1.3× as much.
//! - Alternating rounds: the two depths are compared under the same load, so a change in what
//!   is being read does not pass for a gain of depth.
//! - Every pair won: on the IOPS cap rounds differ by up to a third with the sizes of the
//!   requests the block layer merged, and a total alone deepened uring's bound on noise (it
//!   then moved 0.75–0.81× the bytes of the fixed bound).
//! - Only a lane whose reads all wait: below that the offered load, not the depth, sets the
//!   throughput, and probes there measured noise (on the SSD-like model's SPECweb-like load at
//!   41 492 req/s, the p99 doubled).
//! - The floor: below `--helpers` the one-arm disk and the IOPS cap measured no better, which
//!   the halving rule took for "no loss", walking the bound down to one (uring: 0.77–0.84× its
//!   bytes on the IOPS cap); and a read stuck on a dead disk holds one slot of at least
//!   `--helpers`, as under a fixed bound.
//! - Rare probes after a failure: each puts a one-arm disk at twice the depth for seconds,
//!   which takes from the longest transfers their share of the arm.

use std::time::{Duration, Instant};

/// The size of a piece: one read-ahead window, what one disk request usually moves.
const PIECE: u64 = 128 << 10;
/// A round, the unit of measurement, lasts at least this long, at least [`ROUND_PIECES`]
/// pieces and at least twice as many reads as the bound (eight at least).
const ROUND: Duration = Duration::from_millis(500);
/// The fewest pieces a round counts (a one-arm disk moves ~120 a second).
const ROUND_PIECES: u64 = 64;
/// Rounds a probe measures at each of the two depths it compares, alternating between them.
const PROBE_ROUNDS: usize = 4;
/// A doubled depth is kept if it moves at least this much more.
const DOUBLING_GAIN: f64 = 0.10;
/// A halved depth is kept if it moves at most this much less.
const HALVING_LOSS: f64 = 0.05;
/// Rounds at a settled depth before the next probe: at first and after a move, after a probe
/// that changed nothing (four times more after each further one), and at most.
const PROBE_EVERY_MIN: u32 = 4;
const PROBE_EVERY_FAILED: u32 = 32;
const PROBE_EVERY_MAX: u32 = 128;

/// The bound on cold reads in flight, and how it adapts.
#[derive(Debug, Clone)]
pub struct DiskConcurrency {
    limit: usize,
    min: usize,
    max: usize,
    adaptive: bool,
    round: Round,
    /// The comparison under way, if one is.
    probe: Option<Probe>,
    /// Rounds in a row at the settled depth with reads waiting all the time (since the last
    /// probe), and how many to wait for.
    since_probe: u32,
    probe_every: u32,
    /// The direction of the next probe.
    next_up: bool,
}

/// A comparison of the settled depth with twice or half of it, a round at each in turn.
#[derive(Debug, Clone)]
struct Probe {
    settled: usize,
    tried: usize,
    /// Pieces per second of the rounds at each.
    at_settled: Vec<f64>,
    at_tried: Vec<f64>,
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

    /// The bound `cfg` asks for: `--disk-concurrency N`, or by default (`auto`) one adapting
    /// between `--helpers` and four times as many, starting at `--helpers`.
    pub fn configured(cfg: &crate::config::Config) -> DiskConcurrency {
        use crate::config::DiskBound;
        match cfg.disk_concurrency {
            DiskBound::Fixed(n) => DiskConcurrency::fixed(n),
            DiskBound::Auto => DiskConcurrency::adaptive(cfg.helpers, cfg.helpers, 4 * cfg.helpers),
        }
    }

    /// A bound starting at `start`, adapting between `min` and `max`.
    pub fn adaptive(start: usize, min: usize, max: usize) -> DiskConcurrency {
        let max = max.max(1);
        let min = min.clamp(1, max);
        DiskConcurrency::new(start.clamp(min, max), min, max, true)
    }

    fn new(limit: usize, min: usize, max: usize, adaptive: bool) -> DiskConcurrency {
        DiskConcurrency {
            limit,
            min,
            max,
            adaptive,
            round: Round::default(),
            probe: None,
            since_probe: 0,
            probe_every: PROBE_EVERY_MIN,
            next_up: true,
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
        if !self.adaptive || self.min == self.max {
            return;
        }
        let Some(since) = self.round.since else {
            self.round.since = Some(now);
            return;
        };
        self.round.reads += 1;
        self.round.pieces += bytes.div_ceil(PIECE).max(1);
        self.round.waited += usize::from(waiting > 0);
        let elapsed = now.saturating_duration_since(since);
        if self.round.reads < 2 * self.limit.max(4)
            || self.round.pieces < ROUND_PIECES
            || elapsed < ROUND
        {
            return;
        }
        let round =
            std::mem::replace(&mut self.round, Round { since: Some(now), ..Round::default() });
        let rate = round.pieces as f64 / elapsed.as_secs_f64();
        let Some(probe) = &mut self.probe else {
            // Only a lane whose reads wait all the time (the disk, not the offered load, sets
            // its pace) is probed: below that a depth's throughput is the load's, and a
            // deeper queue only adds its latency.
            let saturated = 10 * round.waited >= 9 * round.reads;
            self.since_probe = if saturated { self.since_probe + 1 } else { 0 };
            if self.since_probe >= self.probe_every {
                self.start_probe();
            }
            return;
        };
        if 2 * round.waited < round.reads {
            return; // the disk was not the limit: nothing learnt about it
        }
        if self.limit == probe.tried {
            probe.at_tried.push(rate);
            self.limit = probe.settled;
        } else {
            probe.at_settled.push(rate);
            self.limit = probe.tried;
        }
        // A doubling must win every pair of rounds: one it loses ends the probe at once (the
        // deeper queue costs the disk's order while it is tried).
        let pairs = probe.at_settled.len().min(probe.at_tried.len());
        let lost = probe.tried > probe.settled
            && pairs > 0
            && probe.at_tried[pairs - 1] <= probe.at_settled[pairs - 1];
        if probe.at_settled.len() >= PROBE_ROUNDS || lost {
            self.conclude();
        }
    }

    /// Starts comparing the settled depth with twice (or half) of it, in the direction due.
    fn start_probe(&mut self) {
        let up = (self.limit < self.max).then(|| (2 * self.limit).min(self.max));
        let down = (self.limit > self.min).then(|| (self.limit / 2).max(self.min));
        let Some(tried) = (if self.next_up { up.or(down) } else { down.or(up) }) else {
            return;
        };
        let settled = self.limit;
        self.probe = Some(Probe { settled, tried, at_settled: Vec::new(), at_tried: Vec::new() });
        self.limit = tried;
    }

    /// Keeps the tried depth or the settled one, by what each moved in its rounds.
    fn conclude(&mut self) {
        let Some(probe) = self.probe.take() else { return };
        let sum = |r: &[f64]| r.iter().sum::<f64>();
        let (settled, tried) = (sum(&probe.at_settled), sum(&probe.at_tried));
        let up = probe.tried > probe.settled;
        let won_every_pair = probe.at_tried.iter().zip(&probe.at_settled).all(|(t, s)| t > s);
        let keep = if up {
            won_every_pair
                && probe.at_tried.len() == PROBE_ROUNDS
                && tried >= settled * (1.0 + DOUBLING_GAIN)
        } else {
            tried >= settled * (1.0 - HALVING_LOSS)
        };
        crate::errlog::debug!(
            "disk concurrency {} or {}: {:.0} against {:.0} pieces of 128 KiB/s, {} kept",
            probe.settled,
            probe.tried,
            tried / probe.at_tried.len().max(1) as f64,
            settled / probe.at_settled.len().max(1) as f64,
            if keep { probe.tried } else { probe.settled }
        );
        self.since_probe = 0;
        if keep {
            self.limit = probe.tried;
            self.probe_every = PROBE_EVERY_MIN;
            self.next_up = up;
        } else {
            self.limit = probe.settled;
            self.probe_every = (4 * self.probe_every).clamp(PROBE_EVERY_FAILED, PROBE_EVERY_MAX);
            self.next_up = !up;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `c` reads of one piece for `secs` seconds from a disk that completes
    /// `per_second(limit)` of them a second when `limit` are in flight, reads always waiting.
    fn run(c: &mut DiskConcurrency, secs: f64, per_second: impl Fn(usize) -> f64) {
        let start = Instant::now();
        let mut now = start;
        while now.duration_since(start).as_secs_f64() < secs {
            now += Duration::from_secs_f64(1.0 / per_second(c.limit()));
            c.finished(now, PIECE, 5);
        }
    }

    #[test]
    fn a_disk_that_serves_one_read_at_a_time_gets_one_or_two() {
        // One arm, 8.3 ms a read: 120 reads a second however many are in flight.
        let mut c = DiskConcurrency::adaptive(4, 1, 16);
        run(&mut c, 120.0, |_| 120.0);
        assert!(c.limit() <= 2, "limit {}", c.limit());
        let mut c = DiskConcurrency::adaptive(4, 4, 16);
        run(&mut c, 120.0, |_| 120.0);
        assert_eq!(c.limit(), 4, "never below the floor");
    }

    #[test]
    fn a_noisy_one_arm_disk_is_not_taken_deeper() {
        // Reads of one arm whose times vary threefold (sizes, positions): the pairs of rounds
        // alternate depths, so the noise does not pass for a gain of depth.
        let mut c = DiskConcurrency::adaptive(4, 1, 16);
        let mut seed = 9u64;
        let mut deepest = 0;
        let start = Instant::now();
        let mut now = start;
        while now.duration_since(start) < Duration::from_secs(600) {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let noise = 0.5 + (seed >> 33) as f64 / (1u64 << 31) as f64;
            now += Duration::from_secs_f64(noise / 120.0);
            c.finished(now, PIECE, 5);
            deepest = deepest.max(c.limit());
        }
        assert!(c.limit() <= 2, "limit {}", c.limit());
        assert!(deepest <= 8, "probes go one doubling at a time: {deepest}");
    }

    #[test]
    fn a_disk_with_many_arms_gets_many() {
        // 32 arms, 0.3 ms a read: throughput grows with every read in flight up to 32.
        let mut c = DiskConcurrency::adaptive(4, 1, 16);
        run(&mut c, 30.0, |n| n.min(32) as f64 / 0.000_3);
        assert_eq!(c.limit(), 16);
    }

    #[test]
    fn diminishing_gains_still_climb_while_a_doubling_pays() {
        // Each slot adds less than the one before (a busy CPU, a disk near its bandwidth), but
        // each doubling of the depth still moves 23 % more.
        let mut c = DiskConcurrency::adaptive(4, 1, 16);
        run(&mut c, 60.0, |n| 3_400.0 * (n as f64).powf(0.3));
        assert_eq!(c.limit(), 16);
    }

    #[test]
    fn a_disk_with_four_arms_gets_about_four() {
        let mut c = DiskConcurrency::adaptive(1, 1, 16);
        run(&mut c, 120.0, |n| n.min(4) as f64 / 0.000_3);
        assert!((4..=8).contains(&c.limit()), "limit {}", c.limit());
        let mut c = DiskConcurrency::adaptive(16, 1, 16);
        run(&mut c, 120.0, |n| n.min(4) as f64 / 0.000_3);
        assert_eq!(c.limit(), 4, "from above, halving to four loses nothing");
    }

    #[test]
    fn nothing_is_learnt_while_no_read_waits() {
        let mut c = DiskConcurrency::adaptive(3, 1, 16);
        let mut now = Instant::now();
        for _ in 0..10_000 {
            now += Duration::from_millis(8);
            c.finished(now, PIECE, 0);
        }
        assert_eq!(c.limit(), 3, "the disk was never the limit");
    }

    #[test]
    fn a_lane_whose_reads_do_not_always_wait_is_not_probed() {
        // Many arms, but a read in five finds no other waiting (a fixed offered load the disk
        // keeps up with): the depth stays, since the load sets the throughput there.
        let mut c = DiskConcurrency::adaptive(4, 4, 16);
        let mut now = Instant::now();
        for i in 0..200_000 {
            now += Duration::from_secs_f64(0.000_3 / 4.0);
            c.finished(now, PIECE, usize::from(i % 5 != 0));
        }
        assert_eq!(c.limit(), 4);
    }

    #[test]
    fn a_fixed_bound_never_moves() {
        let mut c = DiskConcurrency::fixed(4);
        run(&mut c, 60.0, |_| 120.0);
        assert_eq!((c.limit(), c.max()), (4, 4));
        assert_eq!(DiskConcurrency::fixed(0).limit(), 1);
    }
}
