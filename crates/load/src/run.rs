//! Running a whole load: one [`Worker`] per thread, started together from a shared time zero,
//! their [`Stats`] merged at the end, and the progress line drawn meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::budget::Budget;
use crate::config::{Config, Mode};
use crate::progress;
use crate::start::StartLine;
use crate::stats::Stats;
use crate::worker::{ProgressCell, Shared, Worker};
use crate::workload::Workload;

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
    let start = StartLine::new(config.threads);
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
                    start: &start,
                };
                let start = &start;
                let work = move || match Worker::new(shared, index) {
                    Ok(worker) => Ok(worker.run()),
                    Err(e) => {
                        start.withdraw();
                        Err(e)
                    }
                };
                let spawned = std::thread::Builder::new()
                    .name(format!("ampload-{index}"))
                    .spawn_scoped(scope, work);
                spawned.map_err(|e| {
                    start.withdraw();
                    format!("cannot start a thread: {e}")
                })
            })
            .collect();
        if config.progress {
            scope.spawn(|| progress::print_until(&cells, &done, Instant::now()));
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
    let mut duration =
        start.origin().map_or(Duration::ZERO, |origin| end.saturating_duration_since(origin));
    // A time-bounded run lasts at least its duration, even if its last (open-loop) request
    // was due and answered a little before the end.
    if let (Some(bound), None, false, false) =
        (config.duration, config.requests, stats.unreachable, interrupted.load(Ordering::Relaxed))
    {
        duration = duration.max(bound);
    }
    Ok(Outcome { duration, stats })
}
