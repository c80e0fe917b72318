//! AMPED (Flash §3.4, New Flash): the SPED event loop plus helper threads that run every job
//! — pathname translation, `open`/`stat`, reading pages into memory. The loop hands a job to
//! the helpers through a queue and parks the connection; a helper runs it (blocking as long as
//! the disk takes), queues the result and rings an eventfd the loop polls like any socket.
//! Helpers pass back open descriptors and metadata, never file data, so the loop never repeats
//! a file-system call (New Flash's fix) and never waits on the disk.
//!
//! Two lanes, as Flash had pathname helpers and read helpers: metadata jobs (translate, open,
//! revalidate — usually served from the kernel's dentry and inode caches) never queue behind
//! data jobs (reading hundreds of KiB from a slow disk), so a hot file's once-a-second
//! revalidation is not stuck behind a cold file's read.

use super::event_loop::{EventLoop, JobRunner};
use crate::pipeline::{Job, JobDone, Pipeline};
use crate::stats::bump;
use amped_sys::epoll::Waker;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::net::TcpListener;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

/// The helper threads serving one event loop: `n` metadata helpers and `n` read helpers.
pub struct HelperPool {
    metadata: Option<Sender<(u64, Job)>>,
    data: Option<Sender<(u64, Job)>>,
    results: Receiver<(u64, JobDone)>,
    waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

impl HelperPool {
    /// Starts `n` helpers per lane running jobs of `pipeline`.
    pub fn start(pipeline: Arc<Pipeline>, n: usize) -> std::io::Result<Self> {
        let (done_tx, done_rx) = unbounded();
        let waker = Arc::new(Waker::new()?);
        let mut threads = Vec::with_capacity(2 * n);
        let mut lane = |name: &str| -> std::io::Result<Sender<(u64, Job)>> {
            let (job_tx, job_rx) = unbounded::<(u64, Job)>();
            for i in 0..n {
                let (rx, tx, waker, pipeline) =
                    (job_rx.clone(), done_tx.clone(), waker.clone(), pipeline.clone());
                let t =
                    std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                        for (token, job) in rx {
                            let run = std::panic::AssertUnwindSafe(|| pipeline.run_job(job));
                            let done = std::panic::catch_unwind(run).unwrap_or(JobDone::Failed);
                            bump(&pipeline.stats.jobs_helper);
                            if tx.send((token, done)).is_err() {
                                break;
                            }
                            waker.wake();
                        }
                    })?;
                threads.push(t);
            }
            Ok(job_tx)
        };
        let metadata = lane("meta-helper")?;
        let data = lane("read-helper")?;
        Ok(HelperPool {
            metadata: Some(metadata),
            data: Some(data),
            results: done_rx,
            waker,
            threads,
        })
    }
}

impl JobRunner for HelperPool {
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone> {
        let lane = match job {
            Job::Resolve { .. } => &self.metadata,
            Job::ReadAhead { .. } => &self.data,
        };
        let tx = lane.as_ref().expect("helpers run until the pool is dropped");
        tx.send((token, job)).expect("helpers outlive the pool's sender");
        None
    }

    fn completed(&mut self, out: &mut Vec<(u64, JobDone)>) {
        out.extend(self.results.try_iter());
    }

    fn waker(&self) -> Option<BorrowedFd<'_>> {
        Some(self.waker.as_fd())
    }

    fn drain_waker(&self) {
        self.waker.drain();
    }
}

impl Drop for HelperPool {
    fn drop(&mut self) {
        // Helpers see their queue close and exit after their current job.
        self.metadata.take();
        self.data.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Serves `listener` with an AMPED loop and `pipeline.cfg.helpers` helpers per lane until
/// shutdown.
pub fn run(
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    shutdown: &AtomicBool,
) -> std::io::Result<()> {
    let helpers = HelperPool::start(pipeline.clone(), pipeline.cfg.helpers)?;
    EventLoop::new(pipeline, helpers, listener)?.run(shutdown)
}
