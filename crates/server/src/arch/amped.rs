//! AMPED (Flash §3.4, New Flash): the SPED event loop plus helper threads that run every job
//! — pathname translation, `open`/`stat`, reading pages into memory. The loop hands a job to
//! the helpers through a queue and parks the connection; a helper runs it (blocking as long as
//! the disk takes), queues the result and rings an eventfd the loop polls like any socket.
//! Helpers pass back open descriptors and metadata, never file data, so the loop never repeats
//! a file-system call (New Flash's fix) and never waits on the disk.

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

/// A pool of helper threads serving one event loop.
pub struct HelperPool {
    jobs: Option<Sender<(u64, Job)>>,
    results: Receiver<(u64, JobDone)>,
    waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

impl HelperPool {
    /// Starts `n` helpers running jobs of `pipeline`.
    pub fn start(pipeline: Arc<Pipeline>, n: usize) -> std::io::Result<Self> {
        let (job_tx, job_rx) = unbounded::<(u64, Job)>();
        let (done_tx, done_rx) = unbounded();
        let waker = Arc::new(Waker::new()?);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (rx, tx, waker, pipeline) = (job_rx.clone(), done_tx.clone(), waker.clone(), pipeline.clone());
            threads.push(std::thread::Builder::new().name(format!("helper-{i}")).spawn(move || {
                for (token, job) in rx {
                    let done = pipeline.run_job(job);
                    bump(&pipeline.stats.jobs_helper);
                    if tx.send((token, done)).is_err() {
                        break;
                    }
                    waker.wake();
                }
            })?);
        }
        Ok(HelperPool { jobs: Some(job_tx), results: done_rx, waker, threads })
    }
}

impl JobRunner for HelperPool {
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone> {
        let tx = self.jobs.as_ref().expect("helpers run until the pool is dropped");
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
        self.jobs.take(); // helpers see the queue close and exit after their current job
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Serves `listener` with an AMPED loop and `pipeline.cfg.helpers` helpers until shutdown.
pub fn run(pipeline: Arc<Pipeline>, listener: TcpListener, shutdown: &AtomicBool) -> std::io::Result<()> {
    let helpers = HelperPool::start(pipeline.clone(), pipeline.cfg.helpers)?;
    EventLoop::new(pipeline, helpers, listener)?.run(shutdown)
}
