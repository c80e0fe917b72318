//! Who runs an event loop's jobs ([`JobRunner`]: inline for SPED, helpers for AMPED and
//! uring, stages for staged) and how jobs run off the loop report back: each worker runs a
//! job (a panic becomes a failed job, answered 500, rather than a lost request), queues the
//! result and rings an eventfd that the loop polls like a socket. One implementation for
//! AMPED's helpers and the staged architecture's stage threads, and one way for both event
//! loops (epoll and io_uring) to take the results back to their parked connections
//! ([`ResumesJobs`]).
//!
//! The eventfd is rung once per batch: after the first result since the loop last looked,
//! further results only queue (a flag says the loop is already called). On a server whose
//! threads share one core, each ring would otherwise wake the loop and preempt the worker, a
//! pair of context switches per job.

use crate::pipeline::{Job, JobDone, Pipeline};
use amped_sys::epoll::Waker;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::os::fd::BorrowedFd;

/// Who runs the blocking jobs of an event loop.
pub trait JobRunner {
    /// Runs `job` for the connection `token`: returns its result if it ran inline, or `None`
    /// if it was handed off (the connection parks until [`JobRunner::finished`] returns it).
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone>;
    /// Where handed-off jobs report back (none for inline runners).
    fn results(&self) -> Option<&JobResults> {
        None
    }
    /// A descriptor that becomes readable when hand-offs finish (none for inline runners).
    fn waker(&self) -> Option<BorrowedFd<'_>> {
        self.results().map(JobResults::waker)
    }
    /// Resets the waker, then moves the finished hand-offs into `out` (in that order: see
    /// [`JobResults::drain_waker`]).
    fn finished(&self, out: &mut Vec<(u64, JobDone)>) {
        if let Some(r) = self.results() {
            r.drain_waker();
            r.collect(out);
        }
    }
}

/// An event loop whose connections park while their job runs elsewhere: how it takes the
/// results back, written once for the epoll loop and the io_uring loop. A result whose
/// connection has gone meanwhile (its token's generation is stale) is dropped.
pub trait ResumesJobs {
    /// The loop's job runner.
    type Runner: JobRunner;
    /// The runner, and the buffer results are collected into (kept across wake-ups, so
    /// taking results back allocates nothing).
    fn runner_and_results(&mut self) -> (&mut Self::Runner, &mut Vec<(u64, JobDone)>);
    /// The key of the open connection `token` names, if it is still open.
    fn live_key(&self, token: u64) -> Option<usize>;
    /// Continues the open connection `key`, parked on the job that returned `done`.
    fn resume_parked(&mut self, key: usize, done: JobDone);

    /// Resumes every connection whose job has finished. Called when the runner's waker
    /// fires, and on every housekeeping tick, so a wake-up that went missing would cost at
    /// most a tick, never a hang.
    fn finish_jobs(&mut self) {
        let (runner, results) = self.runner_and_results();
        let mut done = std::mem::take(results);
        runner.finished(&mut done);
        for (token, result) in done.drain(..) {
            if let Some(key) = self.live_key(token) {
                self.resume_parked(key, result);
            }
        }
        *self.runner_and_results().1 = done;
    }
}
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The loop's side: the results that arrived and the eventfd that says so.
pub struct JobResults {
    rx: Receiver<(u64, JobDone)>,
    waker: Arc<Waker>,
    rung: Arc<AtomicBool>,
}

/// A worker's side (cloned into every worker thread).
#[derive(Clone)]
pub struct Reporter {
    tx: Sender<(u64, JobDone)>,
    waker: Arc<Waker>,
    /// The eventfd was rung and the loop has not reset it yet.
    rung: Arc<AtomicBool>,
}

impl JobResults {
    /// A new results queue and the reporter its workers use.
    pub fn new() -> std::io::Result<(JobResults, Reporter)> {
        let (tx, rx) = unbounded();
        let waker = Arc::new(Waker::new()?);
        let rung = Arc::new(AtomicBool::new(false));
        Ok((
            JobResults { rx, waker: waker.clone(), rung: rung.clone() },
            Reporter { tx, waker, rung },
        ))
    }

    /// Moves every result that has arrived into `out`.
    pub fn collect(&self, out: &mut Vec<(u64, JobDone)>) {
        out.extend(self.rx.try_iter());
    }

    /// The eventfd the loop polls.
    pub fn waker(&self) -> BorrowedFd<'_> {
        self.waker.as_fd()
    }

    /// Resets the eventfd before its results are collected: a result queued after this rings
    /// again, one queued before it is collected now.
    ///
    /// The eventfd is read *before* the flag is cleared. The other order loses wake-ups for
    /// good: a worker that sets the flag and rings between the two steps has its ring read
    /// away while the flag stays set, so no worker rings again and every later result waits
    /// unannounced (seen as a server whose parked connections all hung, in CLOSE_WAIT,
    /// until it ran out of descriptors). In this order a worker that finds the flag set
    /// either rang after the read (the loop wakes again) or queued its result before the
    /// collection that follows (the loop takes it now).
    pub fn drain_waker(&self) {
        self.drain_waker_around(|| {});
    }

    /// [`JobResults::drain_waker`], running `meanwhile` between its two steps (where a
    /// worker may ring; the tests put one there).
    fn drain_waker_around(&self, meanwhile: impl FnOnce()) {
        self.waker.drain();
        meanwhile();
        self.rung.store(false, Ordering::SeqCst);
    }
}

impl Reporter {
    /// Runs `job` for `token` on this thread and queues the result (not yet announced: see
    /// [`Reporter::wake`]). False once the loop has gone away.
    pub fn run(&self, pipeline: &Pipeline, token: u64, job: Job) -> bool {
        self.run_paced(pipeline, token, job, false)
    }

    /// As [`Reporter::run`], knowing whether new requests' reads go before a transfer's
    /// ask-ahead (`new_reads_first`, see [`crate::disk::Job::run`]).
    pub fn run_paced(
        &self,
        pipeline: &Pipeline,
        token: u64,
        job: Job,
        new_reads_first: bool,
    ) -> bool {
        let run = std::panic::AssertUnwindSafe(|| pipeline.run_job_paced(job, new_reads_first));
        let done = std::panic::catch_unwind(run).unwrap_or(JobDone::Failed);
        pipeline.helper_ran_job();
        self.tx.send((token, done)).is_ok()
    }

    /// Tells the loop that results are waiting, unless it was told since it last looked.
    pub fn wake(&self) {
        if !self.rung.swap(true, Ordering::SeqCst) {
            self.waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amped_sys::epoll::{Interest, Poller};
    use std::time::Duration;

    /// Whether the loop's poller would wake now.
    fn rings(poller: &mut Poller) -> bool {
        poller.wait(Some(Duration::ZERO)).unwrap().count() > 0
    }

    #[test]
    fn a_batch_rings_once_and_no_result_is_left_unannounced() {
        let (results, reporter) = JobResults::new().unwrap();
        let mut poller = Poller::new(8).unwrap();
        poller.add(results.waker(), 1, Interest::Read).unwrap();
        assert!(!rings(&mut poller));
        for token in 0..3 {
            reporter.tx.send((token, JobDone::ReadAhead)).unwrap();
            reporter.wake();
        }
        assert!(rings(&mut poller), "the first result rings");
        // The loop resets, then collects: all three are there.
        results.drain_waker();
        let mut out = Vec::new();
        results.collect(&mut out);
        assert_eq!(out.len(), 3);
        assert!(!rings(&mut poller), "nothing new since the loop looked");
        // A result after the reset rings again, though the earlier ones did not ring again.
        reporter.tx.send((9, JobDone::ReadAhead)).unwrap();
        reporter.wake();
        assert!(rings(&mut poller), "a result after the loop looked rings again");
    }

    #[test]
    fn a_ring_during_the_reset_is_not_lost() {
        let (results, reporter) = JobResults::new().unwrap();
        let mut poller = Poller::new(8).unwrap();
        poller.add(results.waker(), 1, Interest::Read).unwrap();
        reporter.tx.send((1, JobDone::ReadAhead)).unwrap();
        reporter.wake();
        assert!(rings(&mut poller));
        // The loop resets while a second worker queues a result and rings.
        results.drain_waker_around(|| {
            reporter.tx.send((2, JobDone::ReadAhead)).unwrap();
            reporter.wake();
        });
        let mut out = Vec::new();
        results.collect(&mut out);
        assert_eq!(out.len(), 2, "both results are collected after the reset");
        // A later result must ring: the loop has nothing else to wake it.
        reporter.tx.send((3, JobDone::ReadAhead)).unwrap();
        reporter.wake();
        assert!(rings(&mut poller), "a result after the reset rings");
    }
}
