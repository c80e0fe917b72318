//! How jobs run off the event loop report back: each worker runs a job (a panic becomes a
//! failed job, answered 500, rather than a lost request), queues the result and rings an
//! eventfd that the loop polls like a socket. One implementation for AMPED's helpers and the
//! staged architecture's stage threads.

use crate::pipeline::{Job, JobDone, Pipeline};
use crate::stats::bump;
use amped_sys::epoll::Waker;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

/// The loop's side: the results that arrived and the eventfd that says so.
pub struct JobResults {
    rx: Receiver<(u64, JobDone)>,
    waker: Arc<Waker>,
}

/// A worker's side (cloned into every worker thread).
#[derive(Clone)]
pub struct Reporter {
    tx: Sender<(u64, JobDone)>,
    waker: Arc<Waker>,
}

impl JobResults {
    /// A new results queue and the reporter its workers use.
    pub fn new() -> std::io::Result<(JobResults, Reporter)> {
        let (tx, rx) = unbounded();
        let waker = Arc::new(Waker::new()?);
        Ok((JobResults { rx, waker: waker.clone() }, Reporter { tx, waker }))
    }

    /// Moves every result that has arrived into `out`.
    pub fn collect(&self, out: &mut Vec<(u64, JobDone)>) {
        out.extend(self.rx.try_iter());
    }

    /// The eventfd the loop polls.
    pub fn waker(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// Resets the eventfd once its results are collected.
    pub fn drain_waker(&self) {
        self.waker.drain();
    }
}

impl Reporter {
    /// Runs `job` for `token` on this thread and queues the result (not yet announced: see
    /// [`Reporter::wake`]). False once the loop has gone away.
    pub fn run(&self, pipeline: &Pipeline, token: u64, job: Job) -> bool {
        let run = std::panic::AssertUnwindSafe(|| pipeline.run_job(job));
        let done = std::panic::catch_unwind(run).unwrap_or(JobDone::Failed);
        bump(pipeline.stats.jobs_helper());
        self.tx.send((token, done)).is_ok()
    }

    /// Tells the loop that results are waiting (once per job, or once per batch).
    pub fn wake(&self) {
        self.waker.wake();
    }
}
