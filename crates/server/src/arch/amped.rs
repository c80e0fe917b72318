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
//! its chunks, nor can long transfers hold every helper from new requests. The metadata lane
//! has `--helpers` threads, or with `--metadata-helpers auto` grows while its jobs wait (a
//! cold start, when every request needs a resolve) and shrinks when idle
//! ([`super::metadata_lane`]); a resolve of a URL path already in the lane follows that one
//! instead of queueing again ([`super::coalesce`]); and while resolves are slow and a
//! transfer under way waits in the read lane, they run one at a time, so they do not take the
//! disk from transfers ([`super::slow_gate`]).

use super::disk_charge::DiskCharge;
use super::disk_concurrency::DiskConcurrency;
use super::disk_pace::ReadDone;
use super::job_results::JobResults;
use super::job_results::JobRunner;
use super::metadata_lane::{LaneSize, MetadataLane, Pushed, RETIRE_AFTER};
use super::read_lane::ReadLane;
use crate::pipeline::{Job, JobDone, Pipeline};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

/// The helper threads serving one event loop: metadata helpers and read helpers.
pub struct HelperPool {
    metadata: Option<MetadataLane<(u64, Job)>>,
    data: Arc<ReadLane>,
    results: JobResults,
    readers: Vec<JoinHandle<()>>,
    /// Where coalesced resolves are counted.
    pipeline: Arc<Pipeline>,
}

impl HelperPool {
    /// Starts the metadata lane (`--helpers` threads, or as `--metadata-helpers` says; see
    /// [`super::metadata_lane`]) and the read helpers running jobs of `pipeline`: as many as
    /// the read lane's disk-concurrency bound may reach (4 × `--helpers` under `auto`, N when
    /// `--disk-concurrency N` fixes it).
    /// The read lane watches what binds the disk (`--disk-charge-test`,
    /// [`super::disk_charge`]): AMPED's cold reads all go through it.
    pub fn start(pipeline: Arc<Pipeline>) -> std::io::Result<Self> {
        let charge = pipeline.disk_charge();
        HelperPool::start_yielding(pipeline, charge, None)
    }

    /// As [`HelperPool::start`], with the read lane feeding `charge` (or nothing, with
    /// [`DiskCharge::off`]) and the metadata lane's slow gate also closing while
    /// `transfers_wait_elsewhere` is set (io_uring's transfers wait at its own disk gate,
    /// not in this pool's read lane).
    pub fn start_yielding(
        pipeline: Arc<Pipeline>,
        charge: DiskCharge,
        transfers_wait_elsewhere: Option<Arc<AtomicBool>>,
    ) -> std::io::Result<Self> {
        let (results, reporter) = JobResults::new()?;
        let cfg = pipeline.config();
        let data = Arc::new(
            ReadLane::new(cfg.transfer_order, DiskConcurrency::configured(cfg))
                .watched_by(charge)
                .transfers_at_once(cfg.transfers_at_once),
        );
        let (meta_reporter, meta_pipeline, gauge) =
            (reporter.clone(), pipeline.clone(), pipeline.clone());
        let metadata = MetadataLane::start_keyed(
            LaneSize::configured(cfg),
            RETIRE_AFTER,
            if cfg.coalesce_resolves { resolve_key } else { |_: &(u64, Job)| None },
            {
                let data = data.clone();
                move || {
                    data.transfers_wait()
                        || transfers_wait_elsewhere
                            .as_ref()
                            .is_some_and(|f| f.load(Ordering::Relaxed))
                }
            },
            move |(token, job)| {
                crate::metrics::helper_queue(-1);
                let ran = meta_reporter.run(&meta_pipeline, token, job);
                if ran {
                    meta_reporter.wake();
                }
                ran
            },
            move |change| gauge.metadata_helpers_changed(change),
        )?;
        let readers = (0..data.max_helpers())
            .map(|i| {
                let (reporter, pipeline, lane) = (reporter.clone(), pipeline.clone(), data.clone());
                std::thread::Builder::new().name(format!("read-helper-{i}")).spawn(move || {
                    crate::debox::set_role(crate::debox::Role::Helper);
                    while let Some((token, job)) = lane.pop() {
                        crate::metrics::helper_queue(-1);
                        let (bytes, first) = (job.disk_bytes(), !job.continues());
                        let began = Instant::now();
                        // While the disk has time to spare and is slow, a transfer off a
                        // block device does not ask ahead (`--fill-ahead-yields`,
                        // `ask_ahead::yields`).
                        let new_first = lane.new_reads_first();
                        let ran = reporter.run_paced(&pipeline, token, job, new_first);
                        let (at, took) = (Instant::now(), began.elapsed());
                        lane.finished(token, ReadDone { at, took, bytes, first });
                        if !ran {
                            break;
                        }
                        reporter.wake();
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(HelperPool { metadata: Some(metadata), data, results, readers, pipeline })
    }
}

/// A resolve's coalescing key: its URL path's hash ([`super::coalesce`]).
fn resolve_key((_, job): &(u64, Job)) -> Option<u64> {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    match job {
        Job::Resolve { url_path, .. } => {
            Some(BuildHasherDefault::<DefaultHasher>::default().hash_one(url_path))
        }
        _ => None,
    }
}

impl JobRunner for HelperPool {
    fn submit(&mut self, token: u64, job: Job) -> Option<JobDone> {
        crate::metrics::helper_queue(1);
        match job {
            Job::Resolve { .. } => {
                let lane = self.metadata.as_ref().expect("helpers run until the pool is dropped");
                if lane.push((token, job)) == Pushed::Followed {
                    self.pipeline.resolve_coalesced();
                }
            }
            Job::ReadAhead { .. } | Job::Fill { .. } | Job::Copy { .. } => {
                self.data.push(token, job)
            }
        }
        None
    }

    fn results(&self) -> Option<&JobResults> {
        Some(&self.results)
    }
}

impl Drop for HelperPool {
    fn drop(&mut self) {
        // Metadata helpers run what is queued and exit (every one joined, those the lane
        // added too); read helpers exit after their current job.
        self.metadata.take();
        self.data.close();
        for t in self.readers.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_log::AccessLogger;
    use crate::config::{Args, Config};
    use crate::stats::Stats;

    #[test]
    fn dropping_the_pool_runs_every_queued_resolve_and_joins_every_metadata_helper() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            std::fs::write(dir.path().join(format!("f{i}.txt")), format!("file {i}")).unwrap();
        }
        let args = Args {
            root: Some(dir.path().to_path_buf()),
            helpers: Some(2),
            metadata_helpers: Some("auto".into()),
            metadata_helpers_max: Some(8),
            ..Default::default()
        };
        let stats = Arc::new(Stats::default());
        let cfg = Arc::new(Config::resolve(args).unwrap());
        let pipeline = Arc::new(Pipeline::new(cfg, stats.clone(), AccessLogger::off()));
        let mut pool = HelperPool::start(pipeline).unwrap();
        assert_eq!(stats.total_named("metadata_helpers"), 2, "the lane starts at --helpers");
        for i in 0..300 {
            let job = Job::Resolve {
                url_path: format!("/f{i}.txt"),
                rel: format!("f{i}.txt").into(),
                trailing_slash: false,
                known: None,
            };
            assert!(pool.submit(i, job).is_none(), "handed to a helper");
        }
        drop(pool);
        assert_eq!(stats.total_named("jobs_helper"), 300, "every queued resolve ran");
        assert_eq!(stats.total_named("metadata_helpers"), 0, "every metadata helper left");
        let peak = stats.total_named("metadata_helpers_peak");
        assert!((2..=8).contains(&peak), "peak {peak}");
    }
}
