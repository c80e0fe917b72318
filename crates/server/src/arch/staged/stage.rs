//! One stage of the staged architecture: a bounded queue of jobs and the threads that run
//! them, sized by the stage's controllers ([`super::control`]). A stage never blocks its
//! caller: [`Stage::offer`] either queues the job or hands it back (admission control).
//! Results go to one channel shared by all stages, and the stage rings the event loop's
//! eventfd once per batch.
//!
//! Thread count: the stage starts with one thread; [`Stage::controller`] gives the control
//! thread a handle that adds a thread when the queue stays long; a thread that finds no work
//! for a while retires itself unless it is the last. The gauges in the stats endpoint follow
//! every change.

use super::control::{BatchControl, IDLE_RETIRE, ThreadControl};
use crate::arch::job_results::Reporter;
use crate::cache::lock;
use crate::config::StageLimits;
use crate::pipeline::{Job, Pipeline};
use crate::stats::{StageGauges, bump};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// A job and the connection it belongs to.
type Event = (u64, Job);

/// A running stage. Dropping it closes the queue; its threads finish the jobs already queued
/// and are joined.
pub struct Stage {
    core: Arc<Core>,
    jobs: Option<Sender<Event>>,
}

/// What a stage's threads and its controller share.
pub struct Core {
    queue: Receiver<Event>,
    reporter: Reporter,
    pipeline: Arc<Pipeline>,
    gauges: Arc<StageGauges>,
    threads: ThreadControl,
    batching: Mutex<BatchControl>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Stage {
    /// Starts the stage `name` with one thread, registering its gauges in the stats.
    pub fn start(
        name: &'static str,
        pipeline: Arc<Pipeline>,
        limits: StageLimits,
        reporter: Reporter,
    ) -> io::Result<Stage> {
        let (jobs, queue) = bounded(limits.queue);
        let gauges = Arc::new(StageGauges::new(name));
        gauges.batch.store(limits.batch_max as u64, Ordering::Relaxed);
        pipeline.stage_started(gauges.clone());
        let core = Arc::new(Core {
            queue,
            reporter,
            pipeline,
            gauges,
            threads: ThreadControl { min: 1, max: limits.threads_max },
            batching: Mutex::new(BatchControl::new(limits.batch_max)),
            handles: Mutex::new(Vec::new()),
        });
        core.add_thread()?;
        Ok(Stage { core, jobs: Some(jobs) })
    }

    /// Queues `job` for `token`, or hands it back when the queue is full.
    pub fn offer(&self, token: u64, job: Job) -> Result<(), Job> {
        let jobs = self.jobs.as_ref().expect("the queue is open until the stage is dropped");
        let result = match jobs.try_send((token, job)) {
            Ok(()) => {
                crate::metrics::helper_queue(1);
                Ok(())
            }
            Err(TrySendError::Full((_, job)) | TrySendError::Disconnected((_, job))) => {
                bump(&self.core.gauges.refused);
                Err(job)
            }
        };
        self.core.gauges.queue.store(jobs.len() as u64, Ordering::Relaxed);
        result
    }

    /// The stage as its thread-pool controller sees it.
    pub fn controller(&self) -> Arc<Core> {
        self.core.clone()
    }
}

impl Core {
    /// One controller tick: records the queue length and adds a thread if it is long.
    pub fn control(self: &Arc<Self>) {
        let queued = self.queue.len();
        self.gauges.queue.store(queued as u64, Ordering::Relaxed);
        let threads = self.gauges.threads.load(Ordering::Relaxed) as usize;
        if self.threads.should_grow(threads, queued)
            && let Err(e) = self.add_thread()
        {
            eprintln!("amped: staged: cannot add a {} thread: {e}", self.gauges.name);
        }
    }

    fn add_thread(self: &Arc<Self>) -> io::Result<()> {
        let n = self.gauges.threads.fetch_add(1, Ordering::Relaxed) + 1;
        self.gauges.peak_threads.fetch_max(n, Ordering::Relaxed);
        let core = self.clone();
        let spawned = std::thread::Builder::new().name(format!("{}-{n}", self.gauges.name)).spawn(
            move || {
                crate::debox::set_role(crate::debox::Role::Helper);
                core.work()
            },
        );
        match spawned {
            Ok(handle) => {
                let mut handles = lock(&self.handles);
                handles.retain(|h| !h.is_finished());
                handles.push(handle);
                Ok(())
            }
            Err(e) => {
                self.gauges.threads.fetch_sub(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// A stage thread: takes a batch, runs it, announces the results, until it retires or
    /// the queue closes.
    fn work(self: Arc<Self>) {
        let mut batch: Vec<Event> = Vec::new();
        loop {
            match self.queue.recv_timeout(IDLE_RETIRE) {
                Ok(first) => batch.push(first),
                Err(RecvTimeoutError::Timeout) if self.retire() => return,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let want = lock(&self.batching).factor();
            batch.extend(self.queue.try_iter().take(want - 1));
            self.gauges.queue.store(self.queue.len() as u64, Ordering::Relaxed);
            let (started, taken) = (Instant::now(), batch.len());
            crate::metrics::helper_queue(-(taken as i64));
            if !self.run_batch(&mut batch) {
                break;
            }
            let factor = lock(&self.batching).observe(taken, started.elapsed());
            self.gauges.batch.store(factor as u64, Ordering::Relaxed);
        }
        self.gauges.threads.fetch_sub(1, Ordering::Relaxed);
    }

    /// Runs the jobs of one turn; false if nobody takes results any more.
    fn run_batch(&self, batch: &mut Vec<Event>) -> bool {
        let p = &self.pipeline;
        for (token, job) in batch.drain(..) {
            // A bug hit by one job answers that request 500 instead of killing the thread.
            if !self.reporter.run(p, token, job) {
                return false;
            }
            bump(&self.gauges.jobs);
        }
        self.reporter.wake();
        true
    }

    /// Leaves the pool if the controller allows it (never the last thread).
    fn retire(&self) -> bool {
        let t = &self.gauges.threads;
        t.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            self.threads.may_retire(n as usize).then(|| n - 1)
        })
        .is_ok()
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // Threads see the queue close once it is empty, and exit.
        self.jobs.take();
        let handles = std::mem::take(&mut *lock(&self.core.handles));
        for h in handles {
            let _ = h.join();
        }
    }
}
