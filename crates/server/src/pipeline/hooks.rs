//! What a driver (an architecture in `arch/`, and `transmit.rs`) tells the pipeline besides
//! requests, and what it asks of it: the events of a connection's life (accepted, timed out,
//! closed), of the loop's (a housekeeping tick, an accept pause, a full queue), of a job's and
//! of a body's (sent, found not resident), and the settings a serving loop needs (timeouts,
//! the connection cap, how to send). Counting, logging and the page policy happen here, so
//! the drivers read as drivers and never touch the pipeline's configuration, caches or
//! counters themselves.
//!
//! Each hook is a counter bump or a field read; they are `#[inline]`, so the cached path pays
//! nothing for going through them.

use super::{ConnState, Job, JobDone, Pipeline};
use crate::cache::FileEntry;
use crate::config::{Config, Optimizations};
use crate::stats::{StageGauges, bump, drop_one};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Events: what happened, for the counters, the error log and the page policy.
impl Pipeline {
    /// A connection was accepted.
    #[inline]
    pub fn accepted(&self) {
        bump(self.stats.connections_accepted());
        bump(self.stats.connections_open());
    }

    /// A connection [`Pipeline::accepted`] has closed.
    #[inline]
    pub fn closed(&self) {
        drop_one(self.stats.connections_open());
    }

    /// Accepting paused: at the connection cap, or out of descriptors.
    #[inline]
    pub fn accept_paused(&self) {
        bump(self.stats.accept_pauses());
    }

    /// A queue for connections or jobs was full, so a request or connection was refused.
    #[inline]
    pub fn queue_overflowed(&self) {
        bump(self.stats.queue_overflows());
    }

    /// A header or keep-alive timeout closed a connection (its 408, if any, is
    /// [`Pipeline::timeout_response`]).
    #[inline]
    pub fn timed_out(&self) {
        bump(self.stats.timeouts());
    }

    /// A response to `peer` made no progress for the send timeout: its connection closes.
    pub fn send_timed_out(&self, peer: SocketAddr) {
        bump(self.stats.timeouts());
        crate::errlog::info!(
            "{peer}: no send progress for {:?}; connection closed",
            self.cfg.send_timeout()
        );
    }

    /// The loop's housekeeping tick: large files sent under memory pressure whose time has
    /// come yield their pages (`cache/pages.rs`).
    pub fn tick(&self, now: Instant) {
        let yielded = self.caches.pages.release_due(now);
        self.stats.page_yields().fetch_add(yielded, Ordering::Relaxed);
    }

    /// The body of `file` has been sent to its end (the page policy may let it yield).
    #[inline]
    pub fn sent_file(&self, file: &Arc<FileEntry>) {
        self.caches.pages.cached_whole(file.dev, file.ino, file.size);
        if self.caches.pages.enabled() {
            let yielded = self.caches.pages.sent(file);
            self.stats.page_yields().fetch_add(yielded, Ordering::Relaxed);
        }
    }

    /// The residency test found a chunk of a body not in memory.
    #[inline]
    pub fn residency_missed(&self) {
        bump(self.stats.residency_misses());
    }

    /// The residency test found a chunk of `file` not in memory: counted, and evidence of
    /// memory pressure for the page policy.
    #[inline]
    pub fn chunk_not_resident(&self, file: &FileEntry) {
        self.residency_missed();
        self.caches.pages.note_miss(file.dev, file.ino, file.size);
    }

    /// Whether a miss of `file` would tell the page policy anything (see
    /// [`crate::cache::pages::PagePolicy::miss_is_evidence`]).
    #[inline]
    pub fn miss_is_evidence(&self, file: &FileEntry) -> bool {
        self.caches.pages.miss_is_evidence(file.size)
    }

    /// Whether a cold chunk of `file` is to be read around the page cache (the page policy,
    /// `--direct-io-above`).
    #[inline]
    pub fn reads_around_cache(&self, file: &FileEntry) -> bool {
        self.caches.pages.reads_around(file)
    }

    /// A watch over the disk holding the document root, telling the page policy whether its
    /// bytes or its requests bind (`--disk-charge-test`; off where nothing is read around the
    /// page cache): one for AMPED's read lane.
    pub fn disk_charge(&self) -> crate::arch::disk_charge::DiskCharge {
        use crate::arch::disk_charge::DiskCharge;
        use std::os::unix::fs::MetadataExt;
        let cfg = self.config();
        if !cfg.disk_charge_test || cfg.opt.direct_io_above == 0 {
            return DiskCharge::off();
        }
        match std::fs::metadata(&cfg.root) {
            Ok(meta) => DiskCharge::watching(meta.dev(), self.caches.pages.bytes_bind_flag()),
            Err(_) => DiskCharge::off(),
        }
    }

    /// The page policy (tests set its verdicts).
    #[cfg(test)]
    pub(crate) fn page_policy(&self) -> &crate::cache::pages::PagePolicy {
        &self.caches.pages
    }

    /// Whether the page policy takes memory to be tight now (a small file was found cold
    /// within the last second).
    #[cfg(test)]
    pub(crate) fn under_memory_pressure(&self) -> bool {
        self.caches.pages.under_pressure()
    }

    /// A chunk was sent through a job, untested, because a job was reading its file for
    /// another response: counted apart from residency misses and not reported to the page
    /// policy — the kernel may hold those pages already, so it is no sign of memory pressure.
    #[inline]
    pub fn chunk_being_read(&self) {
        bump(self.stats.being_read_waits());
    }

    /// A resolve followed one of the same URL path already in the metadata lane.
    #[inline]
    pub fn resolve_coalesced(&self) {
        bump(self.stats.resolves_coalesced());
    }

    /// Runs a job on the calling thread (it may block on the disk), counted as inline.
    #[inline]
    pub fn run_job_inline(&self, job: Job) -> JobDone {
        bump(self.stats.jobs_inline());
        self.run_job(job)
    }

    /// A helper (or stage) thread has run a job.
    #[inline]
    pub fn helper_ran_job(&self) {
        bump(self.stats.jobs_helper());
    }

    /// A metadata helper thread joined (`change` 1) or left (-1) an AMPED metadata lane: the
    /// `metadata_helpers` gauge (all loops' lanes) and its peak follow.
    pub fn metadata_helpers_changed(&self, change: i64) {
        let now = self.stats.metadata_helpers();
        if change >= 0 {
            let n = now.fetch_add(change as u64, Ordering::Relaxed) + change as u64;
            self.stats.metadata_helpers_peak().fetch_max(n, Ordering::Relaxed);
        } else {
            now.fetch_sub(change.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// A stage of the staged architecture starts: its gauges go into the stats endpoint.
    pub fn stage_started(&self, gauges: Arc<StageGauges>) {
        self.stats.register_stage(gauges);
    }
}

/// Settings: what a serving loop needs to know, each read for what it is for.
impl Pipeline {
    /// The configuration as a whole, for what an architecture sets itself up from (its
    /// threads, helpers, queues and processes); what serving a connection needs has its own
    /// accessor below.
    #[inline]
    pub fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    /// `--max-connections`: the most connections open at once.
    #[inline]
    pub fn max_connections(&self) -> usize {
        self.cfg.max_connections
    }

    /// Time allowed to receive a request head.
    #[inline]
    pub fn header_timeout(&self) -> Duration {
        self.cfg.header_timeout()
    }

    /// Time a keep-alive connection may stay idle between requests.
    #[inline]
    pub fn keepalive_timeout(&self) -> Duration {
        self.cfg.keepalive_timeout()
    }

    /// Time a response may make no progress.
    #[inline]
    pub fn send_timeout(&self) -> Duration {
        self.cfg.send_timeout()
    }

    /// How many bytes to read next for `c` (the rest of a head, a body being discarded).
    #[inline]
    pub fn read_hint(&self, c: &ConnState) -> usize {
        c.read_hint(self.cfg.limits.max_head_bytes)
    }

    /// How bodies are to be sent: sendfile or not, the residency test, the cold-chunk path.
    #[inline]
    pub fn send_settings(&self) -> &Optimizations {
        &self.cfg.opt
    }

    /// What an open needs to apply the open policy (`disk/open.rs`): the configuration and
    /// the page policy.
    #[inline]
    pub fn open_rules(&self) -> crate::disk::OpenRules<'_> {
        crate::disk::OpenRules::new(&self.cfg, &self.caches.pages)
    }
}
