//! Staged (SEDA, Welsh et al. 2001, and its web server Haboob, the server the New Flash
//! paper's Linux comparison measures): the request's path cut into stages, each with its own
//! event queue and its own thread pool, connected by queues, each pool sized at run time by
//! a controller.
//!
//! ```text
//!  socket stage (1 thread, epoll)        resolve stage (1..max threads)    read stage (1..max)
//!  accept, read, parse, cache lookups ─► translate, open, stat, read a  ─► (results back to
//!  send (writev / sendfile / splice) ◄─  small body: Job::Resolve          the socket stage)
//!        │  chunk not resident ─────────────────────────────────────────► Job::Fill/Copy/ReadAhead
//!        ◄──────────────────────────── results + one eventfd ring per batch ◄──────┘
//! ```
//!
//! The socket stage is [`super::event_loop`] (like Haboob's asynchronous socket layer, one
//! thread that reads and writes every socket); the two job stages are `stage::Stage`s. What
//! makes this SEDA rather than AMPED is how the job stages are governed
//! (`control.rs`): a thread-pool controller grows a stage's pool while its queue stays long (up
//! to `--stage-threads-max`) and idle threads retire; a batching controller sets how many
//! jobs a thread takes per turn (up to `--stage-batch-max`); and the queues are bounded
//! (`--stage-queue`), so a request whose job finds the resolve queue full is answered
//! `503 Service Unavailable` with `Retry-After: 1` and counted in `queue_overflows`
//! (admission control). A cold chunk's job (`Job::Fill`, `Job::Copy` or `Job::ReadAhead`, per
//! `--read-path`) finding the read queue full is not refused — the response is already under
//! way — the socket stage runs it itself, waiting for the disk as SPED would. Stage queues are
//! FIFO, as SEDA's are (amped's read lane serves new requests and transfers under way in turn).
//!
//! One control thread ticks the thread-pool controllers. Each stage's threads, peak threads,
//! queue length, batch factor, jobs and refusals are in the stats endpoint under `stages`.

mod control;
mod stage;

use super::job_results::JobResults;
use super::job_results::JobRunner;
use crate::pipeline::{Job, JobDone, Pipeline};
use stage::{Core, Stage};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The job stages of one staged server, as the socket stage's [`JobRunner`].
pub struct Stages {
    resolve: Stage,
    read: Stage,
    results: JobResults,
    controller: Option<JoinHandle<()>>,
    stop_controller: Arc<AtomicBool>,
    pipeline: Arc<Pipeline>,
    last_refusal_note: Option<Instant>,
}

impl Stages {
    /// Starts both job stages (one thread each) and their control thread.
    pub fn start(pipeline: Arc<Pipeline>) -> std::io::Result<Stages> {
        let (results, reporter) = JobResults::new()?;
        let limits = pipeline.config().stages;
        let stage = |name| Stage::start(name, pipeline.clone(), limits, reporter.clone());
        let (resolve, read) = (stage("resolve")?, stage("read")?);
        let stop_controller = Arc::new(AtomicBool::new(false));
        let cores = [resolve.controller(), read.controller()];
        let stop = stop_controller.clone();
        let controller = std::thread::Builder::new()
            .name("stage-control".into())
            .spawn(move || control_loop(&cores, &stop))?;
        Ok(Stages {
            resolve,
            read,
            results,
            controller: Some(controller),
            stop_controller,
            pipeline,
            last_refusal_note: None,
        })
    }

    /// Admission control refused a request: count it, and say so on stderr at most once a
    /// second.
    fn note_refusal(&mut self) {
        self.pipeline.queue_overflowed();
        let now = Instant::now();
        if self.last_refusal_note.is_none_or(|t| now - t >= Duration::from_secs(1)) {
            self.last_refusal_note = Some(now);
            eprintln!(
                "amped: staged: resolve queue full ({} jobs); answering 503 (see --stage-queue, --stage-threads-max)",
                self.pipeline.config().stages.queue
            );
        }
    }
}

fn control_loop(cores: &[Arc<Core>], stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(control::CONTROL_TICK);
        for core in cores {
            core.control();
        }
    }
}

impl JobRunner for Stages {
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone> {
        match job {
            Job::Resolve { .. } => match self.resolve.offer(token, job) {
                Ok(()) => None,
                Err(_) => {
                    self.note_refusal();
                    Some(JobDone::Refused)
                }
            },
            Job::ReadAhead { .. } | Job::Fill { .. } | Job::Copy { .. } => {
                match self.read.offer(token, job) {
                    Ok(()) => None,
                    Err(job) => {
                        // The response is under way: no 503 now. The socket stage reads the chunk
                        // itself, as SPED would.
                        Some(self.pipeline.run_job_inline(job))
                    }
                }
            }
        }
    }

    fn results(&self) -> Option<&JobResults> {
        Some(&self.results)
    }
}

impl Drop for Stages {
    fn drop(&mut self) {
        self.stop_controller.store(true, Ordering::Relaxed);
        if let Some(c) = self.controller.take() {
            let _ = c.join();
        }
        // The stages (dropped next) join their threads.
    }
}
