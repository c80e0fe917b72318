//! The open loop's schedule: when each request is *meant* to be sent, independent of how the
//! server responds (wrk2's constant throughput; Tene, "How NOT to Measure Latency").
//!
//! Request k of the run is due at `origin + k / rate`. With T threads, thread i owns requests
//! i, i+T, i+2T, ..., so together the threads keep one evenly spaced global schedule and a
//! `--requests N` run issues exactly N requests. Latency is measured from these due times, so
//! a request that waits for a stalled server, or for a free connection, is charged the wait.

use std::time::{Duration, Instant};

/// One thread's share of the schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    origin: Instant,
    /// Nanoseconds between consecutive requests of the whole run.
    interval_ns: f64,
    /// Global index of this thread's next request.
    next: u64,
    /// Number of threads sharing the schedule.
    stride: u64,
    /// The run issues requests 0..limit (`--requests`).
    limit: Option<u64>,
    /// The run issues requests due before this offset (`--duration`).
    end: Option<Duration>,
    stopped: bool,
}

impl Schedule {
    /// Thread `thread` of `threads`' share of a schedule of `rate` requests/s from `origin`.
    pub fn new(
        origin: Instant,
        rate: f64,
        (thread, threads): (usize, usize),
        limit: Option<u64>,
        end: Option<Duration>,
    ) -> Schedule {
        Schedule {
            origin,
            interval_ns: 1e9 / rate,
            next: thread as u64,
            stride: threads as u64,
            limit,
            end,
            stopped: false,
        }
    }

    /// When this thread's next request is due; `None` once the schedule is exhausted.
    pub fn peek(&self) -> Option<Instant> {
        if self.stopped || self.limit.is_some_and(|n| self.next >= n) {
            return None;
        }
        let offset = Duration::from_nanos((self.next as f64 * self.interval_ns) as u64);
        if self.end.is_some_and(|end| offset >= end) {
            return None;
        }
        Some(self.origin + offset)
    }

    /// Sets time zero (known only once every thread is ready).
    pub fn start_at(&mut self, origin: Instant) {
        self.origin = origin;
    }

    /// Moves past the request [`peek`](Self::peek) returned.
    pub fn advance(&mut self) {
        self.next += self.stride;
    }

    /// Ends the schedule early (interrupt, unreachable server).
    pub fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(mut s: Schedule, origin: Instant) -> Vec<u128> {
        std::iter::from_fn(|| {
            let t = s.peek()?;
            s.advance();
            Some((t - origin).as_micros())
        })
        .collect()
    }

    #[test]
    fn threads_interleave_into_one_even_schedule() {
        let origin = Instant::now();
        let a = Schedule::new(origin, 1000.0, (0, 2), Some(5), None);
        let b = Schedule::new(origin, 1000.0, (1, 2), Some(5), None);
        assert_eq!(drain(a, origin), [0, 2000, 4000]);
        assert_eq!(drain(b, origin), [1000, 3000]);
    }

    #[test]
    fn duration_bounds_the_schedule() {
        let origin = Instant::now();
        let s = Schedule::new(origin, 100.0, (0, 1), None, Some(Duration::from_secs(1)));
        assert_eq!(drain(s, origin).len(), 100);
        let mut stopped = Schedule::new(origin, 100.0, (0, 1), None, None);
        stopped.stop();
        assert_eq!(stopped.peek(), None);
    }
}
