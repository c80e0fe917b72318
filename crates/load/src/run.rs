//! Running a whole load: one [`Worker`] per thread, started together on a shared time zero,
//! their [`Stats`] merged at the end, and the progress line drawn meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::budget::Budget;
use crate::config::{Config, Mode};
use crate::progress;
use crate::stats::Stats;
use crate::worker::{ProgressCell, Shared, Worker};
use crate::workload::Workload;

/// Head start before an open-loop schedule begins: threads start and pools connect first, so
/// the first due requests are not late because of set-up.
const OPEN_LOOP_HEAD_START: Duration = Duration::from_millis(20);

/// What a run measured.
pub struct Outcome {
    /// All threads' measurements merged.
    pub stats: Stats,
    /// From time zero until the last thread finished.
    pub duration: Duration,
}

/// Runs `config` to its end.
pub fn run(
    config: &Config,
    workload: &Workload,
    interrupted: &AtomicBool,
) -> Result<Outcome, String> {
    let budget = Budget::new(match config.mode {
        Mode::Closed => config.requests,
        Mode::Open { .. } => None,
    });
    let origin = match config.mode {
        Mode::Closed => Instant::now(),
        Mode::Open { .. } => Instant::now() + OPEN_LOOP_HEAD_START,
    };
    let cells: Vec<ProgressCell> = (0..config.threads).map(|_| ProgressCell::default()).collect();
    let done = AtomicBool::new(false);
    let results: Vec<Result<Stats, String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|index| {
                let shared = Shared {
                    config,
                    workload,
                    budget: &budget,
                    interrupted,
                    progress: &cells[index],
                    origin,
                };
                std::thread::Builder::new()
                    .name(format!("ampload-{index}"))
                    .spawn_scoped(scope, move || Worker::new(shared, index).map(Worker::run))
                    .map_err(|e| format!("cannot start a thread: {e}"))
            })
            .collect();
        if config.progress {
            scope.spawn(|| progress::print_until(&cells, &done, origin));
        }
        let results = workers
            .into_iter()
            .map(|w| {
                w.and_then(|handle| {
                    handle.join().map_err(|_| "a worker thread panicked".to_string())?
                })
            })
            .collect();
        done.store(true, Ordering::Relaxed);
        results
    });
    let mut stats = Stats::default();
    for result in results {
        stats.merge(&result?);
    }
    let end = stats.finished.unwrap_or_else(Instant::now);
    Ok(Outcome { duration: end.saturating_duration_since(origin), stats })
}
