//! One job at a time while a lane's jobs are slow.
//!
//! A metadata job that takes milliseconds is waiting for a disk that serves one request at a
//! time (an HDD's arm, a volume at its IOPS cap). Running several at once does not make that
//! disk faster: their queue moves into the disk, where each of them goes ahead of the read
//! lane's next chunk of a transfer under way. Measured on the emulated one-arm disk with a
//! heavy-tailed trace, four resolves at the disk at once held the transfers to a fraction of
//! the arm: throughput fell to 60 % of one-at-a-time's and the largest transfers timed out
//! (docs/BENCHMARKS.md §3b, session 10). So while the lane's moving average says its jobs are
//! slow, the gate lets one run at a time; the other threads wait at it, each with the job it
//! took. A quick lane (an SSD with many arms, cached metadata) passes through untouched.
//!
//! Should the job running have gone on for [`STALL`] with others waiting (a
//! read stuck on a dead disk or network file system), one more may go, and one more after
//! each further [`STALL`]: a stuck job slows the lane, it cannot stop it.

use crate::cache::lock;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// With jobs waiting and the one running on for this long, one more may go.
pub const STALL: Duration = Duration::from_millis(500);

/// The gate: how many jobs run, and when one last started or finished.
pub struct SlowGate {
    state: Mutex<Running>,
    turn: Condvar,
    stall: Duration,
}

struct Running {
    jobs: usize,
    /// When a job last started or finished.
    progress: Instant,
}

/// A job's permission to run; dropping it lets the next one go.
pub struct Pass<'a>(&'a SlowGate);

impl SlowGate {
    /// A gate letting one more job through beside a stalled one after `stall`
    /// ([`STALL`] in the server).
    pub fn new(stall: Duration) -> SlowGate {
        SlowGate {
            state: Mutex::new(Running { jobs: 0, progress: Instant::now() }),
            turn: Condvar::new(),
            stall,
        }
    }

    /// Waits until a job may run: at once while `slow()` is false, else when no other job
    /// runs or the one running has stalled.
    pub fn enter(&self, slow: impl Fn() -> bool) -> Pass<'_> {
        let mut st = lock(&self.state);
        loop {
            if st.jobs == 0 || !slow() {
                break;
            }
            let waited = st.progress.elapsed();
            if waited >= self.stall {
                break;
            }
            st = self
                .turn
                .wait_timeout(st, self.stall - waited)
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        st.jobs += 1;
        st.progress = Instant::now();
        Pass(self)
    }

    /// Jobs running now.
    #[cfg(test)]
    fn running(&self) -> usize {
        lock(&self.state).jobs
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.0.state);
        st.jobs -= 1;
        st.progress = Instant::now();
        drop(st);
        // Every waiter looks again: if the lane has turned quick, all of them may go now.
        self.0.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `n` threads each run one job of `job_ms` through the gate; returns the most that ran
    /// at once and how long all took.
    fn run_jobs(gate: Arc<SlowGate>, n: usize, job_ms: u64, slow: bool) -> (usize, Duration) {
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let t0 = Instant::now();
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (gate, now, peak) = (gate.clone(), now.clone(), peak.clone());
                std::thread::spawn(move || {
                    let _pass = gate.enter(|| slow);
                    let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(at_once, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(job_ms));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        (peak.load(Ordering::SeqCst), t0.elapsed())
    }

    #[test]
    fn slow_jobs_run_one_at_a_time_and_quick_ones_together() {
        let gate = Arc::new(SlowGate::new(Duration::from_secs(10)));
        let (peak, took) = run_jobs(gate.clone(), 4, 30, true);
        assert_eq!(peak, 1, "slow jobs ran together");
        assert!(took >= Duration::from_millis(120), "four 30 ms jobs in turn took {took:?}");
        assert_eq!(gate.running(), 0, "every pass was given back");
        let (peak, _) = run_jobs(gate.clone(), 4, 200, false);
        assert!(peak > 1, "quick jobs waited for each other");
        assert_eq!(gate.running(), 0);
    }

    #[test]
    fn a_stalled_job_lets_one_more_through_per_stall() {
        // Three slow jobs of 1 s behind a 200 ms stall: the second goes after ~200 ms beside
        // the first, the third ~200 ms later; all three end well before 3 s in turn would.
        let gate = Arc::new(SlowGate::new(Duration::from_millis(200)));
        let (peak, took) = run_jobs(gate.clone(), 3, 1000, true);
        assert!(peak >= 2, "a stalled job held the others back");
        assert!(took < Duration::from_millis(2500), "took {took:?}");
        assert_eq!(gate.running(), 0);
    }
}
