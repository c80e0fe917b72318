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
//! revalidation is not stuck behind a cold file's read. Metadata jobs are served in arrival
//! order; data jobs from [`super::read_lane`], which serves new requests and transfers under
//! way in turn, so a large transfer is not re-queued behind every newer request for each of
//! its chunks, nor can long transfers hold every helper from new requests.

use super::disk_concurrency::DiskConcurrency;
use super::job_results::JobResults;
use super::job_results::JobRunner;
use super::read_lane::ReadLane;
use crate::pipeline::{Job, JobDone, Pipeline};
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The helper threads serving one event loop: metadata helpers and read helpers.
pub struct HelperPool {
    metadata: Option<Sender<(u64, Job)>>,
    data: Arc<ReadLane>,
    results: JobResults,
    threads: Vec<JoinHandle<()>>,
}

impl HelperPool {
    /// Starts `--helpers` metadata helpers and the read helpers running jobs of `pipeline`:
    /// as many as the read lane's disk-concurrency bound may reach (`--helpers` when it is
    /// fixed there).
    pub fn start(pipeline: Arc<Pipeline>) -> std::io::Result<Self> {
        let (results, reporter) = JobResults::new()?;
        let (meta_tx, meta_rx) = unbounded::<(u64, Job)>();
        let cfg = pipeline.config();
        let n = cfg.helpers;
        let data = Arc::new(ReadLane::new(cfg.transfer_order, DiskConcurrency::configured(cfg)));
        let readers = data.max_helpers();
        let mut threads = Vec::with_capacity(n + readers);
        for (name, take, count) in [
            ("meta-helper", Lane::Fifo(meta_rx), n),
            ("read-helper", Lane::Oldest(data.clone()), readers),
        ] {
            for i in 0..count {
                let (reporter, pipeline, take) = (reporter.clone(), pipeline.clone(), take.clone());
                let t =
                    std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || {
                        crate::debox::set_role(crate::debox::Role::Helper);
                        while let Some((token, job)) = take.next() {
                            crate::metrics::helper_queue(-1);
                            let bytes = job.disk_bytes();
                            let ran = reporter.run(&pipeline, token, job);
                            take.finished(bytes);
                            if !ran {
                                break;
                            }
                            reporter.wake();
                        }
                    })?;
                threads.push(t);
            }
        }
        Ok(HelperPool { metadata: Some(meta_tx), data, results, threads })
    }
}

/// Where a helper takes its next job from.
#[derive(Clone)]
enum Lane {
    /// The metadata lane, in arrival order.
    Fifo(Receiver<(u64, Job)>),
    /// The read lane: new requests and transfers under way in turn.
    Oldest(Arc<ReadLane>),
}

impl Lane {
    /// The next job, waiting for one; `None` once the pool is being dropped.
    fn next(&self) -> Option<(u64, Job)> {
        match self {
            Lane::Fifo(rx) => rx.recv().ok(),
            Lane::Oldest(lane) => lane.pop(),
        }
    }

    /// The job taken last has run, having moved `bytes` from the disk.
    fn finished(&self, bytes: u64) {
        if let Lane::Oldest(lane) = self {
            lane.finished(bytes);
        }
    }
}

impl JobRunner for HelperPool {
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone> {
        crate::metrics::helper_queue(1);
        match job {
            Job::Resolve { .. } => {
                let tx = self.metadata.as_ref().expect("helpers run until the pool is dropped");
                tx.send((token, job)).expect("helpers outlive the pool's sender");
            }
            Job::ReadAhead { .. } | Job::Fill { .. } => self.data.push(token, job),
        }
        None
    }

    fn results(&self) -> Option<&JobResults> {
        Some(&self.results)
    }
}

impl Drop for HelperPool {
    fn drop(&mut self) {
        // Helpers see their queue close and exit after their current job.
        self.metadata.take();
        self.data.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
