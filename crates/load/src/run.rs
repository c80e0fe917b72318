//! Running a whole load: one [`Worker`] per thread, started together from a shared time zero,
//! their [`Stats`] merged at the end, and the progress line drawn meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant, SystemTime};

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
    /// Time zero on the wall clock (for the interval log).
    pub started: SystemTime,
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
                    ticket: start.ticket(),
                };
                spawn_worker(scope, shared, index)
            })
            .collect();
        if config.progress {
            scope.spawn(|| progress::print_until(&cells, &done, Instant::now()));
        }
        let results = workers.into_iter().map(|worker| worker.and_then(join_worker)).collect();
        done.store(true, Ordering::Relaxed);
        results
    });
    let mut stats = Stats::default();
    for result in results {
        stats.merge(&result?);
    }
    let duration =
        measured_duration(config, &stats, start.origin(), interrupted.load(Ordering::Relaxed));
    let since_origin = start.origin().map_or(Duration::ZERO, |o| o.elapsed());
    let started = SystemTime::now().checked_sub(since_origin).unwrap_or_else(SystemTime::now);
    Ok(Outcome { duration, stats, started })
}

/// Starts thread `index`'s event loop.
fn spawn_worker<'scope>(
    scope: &'scope Scope<'scope, '_>,
    shared: Shared<'scope>,
    index: usize,
) -> Result<ScopedJoinHandle<'scope, Result<Stats, String>>, String> {
    std::thread::Builder::new()
        .name(format!("ampload-{index}"))
        .spawn_scoped(scope, move || Worker::new(shared, index).map(Worker::run))
        .map_err(|e| format!("cannot start a thread: {e}"))
}

/// Waits for a thread's measurements.
fn join_worker(handle: ScopedJoinHandle<'_, Result<Stats, String>>) -> Result<Stats, String> {
    handle.join().map_err(|_| "a worker thread panicked".to_string())?
}

/// From time zero until the last request ended; a time-bounded run lasts at least its
/// duration, even if its last (open-loop) request was due and answered a little before the end.
fn measured_duration(
    config: &Config,
    stats: &Stats,
    origin: Option<Instant>,
    interrupted: bool,
) -> Duration {
    let Some(origin) = origin else { return Duration::ZERO };
    let end = stats.finished.unwrap_or_else(Instant::now);
    let measured = end.saturating_duration_since(origin);
    match (config.duration, config.requests) {
        (Some(bound), None) if !stats.unreachable && !interrupted => measured.max(bound),
        _ => measured,
    }
}
