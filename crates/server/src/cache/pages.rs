//! amped's policy over the kernel's page cache: which file pages it lets the kernel keep.
//!
//! A server whose data set does not fit in memory serves most requests from a minority of small,
//! popular files and a few large ones (SPECweb99: 1 % of requests ask for the files that hold
//! ~90 % of the bytes). Left to itself the page cache keeps whatever was read last, so each
//! large file sent pushes out dozens of small ones that are asked for far more often. Under
//! memory pressure, large files therefore *yield*: once a file larger than `--page-yield-above`
//! has been sent, its pages are dropped (`posix_fadvise(DONTNEED)`), leaving the memory to the
//! small files. The drop waits [`YIELD_DELAY`]: the kernel will not drop pages a socket buffer
//! still holds, and right after the last `sendfile` most of a large body is still there. Pages
//! still referenced even then (an open socket can hold some for its lifetime) are moved to the
//! inactive list by the same call, so they are the next to be reclaimed.
//!
//! Small files whose body the file cache keeps in memory (`--small-file-bytes`) also drop their
//! pages under pressure once read: amped answers them from its own copy, so a second copy in
//! the page cache would only take room from files that have none.
//!
//! Large files can also stay out of the page cache altogether (`--direct-io-above`): under
//! pressure, a cold chunk of a file at least that large, on a block device, is read around it (`O_DIRECT`, in
//! requests of up to 2 MiB: [`crate::disk::job`]), so it neither evicts small files nor has
//! its read-ahead evicted before it is sent. Without pressure large files go through the page
//! cache as any other, so one that is asked for often stays cached where memory allows; a
//! miss of a smaller file within the last second is the pressure here. Nor for a large file
//! the page cache holds at least half of (`--keep-cached-large`): one asked for often enough to
//! stay cached, whose missing pages go into the cache too, so that it stays whole — read
//! around the cache, the rest of it would be evicted and the whole read again next time. A
//! file read around the cache gains no pages, so one that is not kept drifts out and stays
//! out; one that is kept stays in. Nor, with `--share-large-reads N`, while N or more responses
//! read a large file from the disk at once ([`super::file::ColdTransfer`]): through the page
//! cache they share its pages (the later transfers find what the first one read), where
//! around it each would read the whole file again — and a file many clients fetch at once
//! gains pages this way until it is kept. Nor while the disk's
//! bytes bind rather than its requests ([`crate::arch::disk_charge`]): there a file read
//! again costs what the disk is short of, and the requests a direct read saves do not.
//!
//! Pressure is the server's own evidence, not a guess: a file at or below the threshold found
//! not resident within the last second — by the residency test before a send, or when a small
//! body is about to be read into memory — that is known to have been in the page cache
//! before ([`super::refaults`]): evicted since. A file's first reading is not evidence; on a
//! data set that fits in memory it is the only kind of miss there is. With everything cached there are no such misses and
//! nothing is dropped, so a cached large file is never re-read because of this policy. Large
//! files yield where the residency test runs before a send (the epoll architectures); the
//! small-body test and drop are the open policy's ([`crate::disk::open`]), so every
//! architecture applies them, io_uring included.

use super::refaults::WasCached;
use super::{FileEntry, lock};
use amped_sys::residency;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a small-file miss keeps the server "under pressure".
const PRESSURE_WINDOW: Duration = Duration::from_secs(1);

/// How long after its send a yielding file's pages are dropped.
pub const YIELD_DELAY: Duration = Duration::from_millis(200);

/// Most files waiting to yield; beyond it the oldest yields at once.
const MAX_WAITING: usize = 4096;

/// The page-yield policy of one server instance (shared by its threads).
#[derive(Debug)]
pub struct PagePolicy {
    /// Files larger than this yield their pages under pressure; 0 turns the policy off.
    yield_above: u64,
    /// Cold chunks of files at least this large are read around the page cache under
    /// pressure; 0: never.
    direct_above: u64,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last small-file miss, plus one (0: none yet).
    last_small_miss: AtomicU64,
    /// The same for a miss of a file below `direct_above`.
    last_direct_miss: AtomicU64,
    /// Set while the disk's bytes, not its requests, bind ([`crate::arch::disk_charge`]):
    /// then nothing is read around the page cache.
    bytes_bind: Arc<AtomicBool>,
    /// The files known to have been in the page cache: only their misses are pressure.
    was_cached: WasCached,
    /// Whether only those misses are (`--refault-test`); else every miss is.
    refaults_only: bool,
    /// Whether a large file at least half cached is read through the page cache
    /// (`--keep-cached-large`).
    keep_cached: bool,
    /// A large file at least this many responses read from the disk at once is read through
    /// the page cache (`--share-large-reads`; 0: never).
    share_reads_from: u32,
    /// Files sent under pressure, oldest first, with when they were sent.
    waiting: Mutex<VecDeque<(Instant, Arc<FileEntry>)>>,
    /// `waiting`'s length, readable without the lock.
    queued: AtomicUsize,
}

impl PagePolicy {
    /// A policy that makes files larger than `yield_above` bytes yield (0: never).
    pub fn new(yield_above: u64) -> PagePolicy {
        PagePolicy::with_direct(yield_above, 0)
    }

    /// The same, with cold chunks of files of at least `direct_above` bytes read around the
    /// page cache under pressure (0: never).
    pub fn with_direct(yield_above: u64, direct_above: u64) -> PagePolicy {
        PagePolicy {
            yield_above,
            direct_above,
            epoch: Instant::now(),
            last_small_miss: AtomicU64::new(0),
            last_direct_miss: AtomicU64::new(0),
            bytes_bind: Arc::new(AtomicBool::new(false)),
            was_cached: WasCached::default(),
            refaults_only: true,
            keep_cached: true,
            share_reads_from: 0,
            waiting: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
        }
    }

    /// The same policy, taking every miss as pressure where `refaults_only` is false
    /// (`--refault-test off`), and reading large files around the page cache however much of
    /// them it holds where `keep_cached` is false (`--keep-cached-large off`).
    pub fn with_evidence(self, refaults_only: bool, keep_cached: bool) -> PagePolicy {
        PagePolicy { refaults_only, keep_cached, ..self }
    }

    /// The same policy, reading a large file through the page cache while at least `from`
    /// responses read it from the disk (`--share-large-reads`; 0: never).
    pub fn sharing_large_reads(self, from: u32) -> PagePolicy {
        PagePolicy { share_reads_from: from, ..self }
    }

    /// Reports that `file` has just been sent in full. Under pressure a large file is queued
    /// to yield its pages [`YIELD_DELAY`] later. Returns how many files yielded meanwhile.
    pub fn sent(&self, file: &Arc<FileEntry>) -> u64 {
        if self.yield_above == 0 || file.size <= self.yield_above {
            return 0; // the common case costs no clock read and no lock
        }
        let now = Instant::now();
        if self.under_pressure_at(now) {
            let mut q = lock(&self.waiting);
            if !q.back().is_some_and(|(_, last)| Arc::ptr_eq(last, file)) {
                q.push_back((now, file.clone()));
                self.queued.store(q.len(), Ordering::Relaxed);
            }
        }
        self.release_due(now)
    }

    /// Drops the pages of every queued file sent at least [`YIELD_DELAY`] before `now` (and of
    /// the oldest ones beyond the queue's bound). Returns how many files yielded.
    pub fn release_due(&self, now: Instant) -> u64 {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut due = Vec::new();
        {
            let mut q = lock(&self.waiting);
            while let Some((at, _)) = q.front() {
                if q.len() <= MAX_WAITING && now.saturating_duration_since(*at) < YIELD_DELAY {
                    break;
                }
                due.extend(q.pop_front().map(|(_, f)| f));
            }
            self.queued.store(q.len(), Ordering::Relaxed);
        }
        due.iter().filter(|f| residency::evict(&f.file).is_ok()).count() as u64
    }

    /// Files waiting to yield.
    pub fn waiting(&self) -> usize {
        lock(&self.waiting).len()
    }

    /// Whether the policy is on (`--page-yield-above` above 0).
    pub fn enabled(&self) -> bool {
        self.yield_above > 0
    }

    /// Whether misses of small files are evidence the policy uses (it yields pages, or reads
    /// large files around the page cache).
    pub fn watches_misses(&self) -> bool {
        self.yield_above > 0 || self.direct_above > 0
    }

    /// Whether a miss of a file of `size` bytes is evidence the policy uses: the file is small
    /// enough for its miss to mean pressure (at most `--page-yield-above`, or below
    /// `--direct-io-above`).
    pub fn miss_is_evidence(&self, size: u64) -> bool {
        self.miss_means_yield(size) || self.miss_means_direct(size)
    }

    /// A miss of a file of `size` bytes puts large files under pressure to yield their pages.
    fn miss_means_yield(&self, size: u64) -> bool {
        self.yield_above > 0 && size <= self.yield_above
    }

    /// A miss of a file of `size` bytes has large files read around the page cache.
    fn miss_means_direct(&self, size: u64) -> bool {
        size < self.direct_above
    }

    /// Whether a cold chunk of `file` is to be read around the page cache now: it is at least
    /// `--direct-io-above`, on a block device, a smaller file was found cold again within the
    /// last second, the disk's bytes are not what binds (`--disk-charge-test`), and the page
    /// cache does not hold half of it already (`--keep-cached-large`), nor are enough responses
    /// reading it from the disk at once to share its pages (`--share-large-reads`).
    pub fn reads_around(&self, file: &FileEntry) -> bool {
        amped_sys::direct::on_block_device(file.dev)
            && self.reads_around_at(file.size, Instant::now())
            && !(self.share_reads_from > 0 && file.cold_transfers() >= self.share_reads_from)
            && !(self.keep_cached && kept_by_the_cache(file))
    }

    fn reads_around_at(&self, size: u64, now: Instant) -> bool {
        self.direct_above > 0
            && size >= self.direct_above
            && within_window(&self.last_direct_miss, self.epoch, now)
            && !self.bytes_bind.load(Ordering::Relaxed)
    }

    /// The flag [`crate::arch::disk_charge`] sets while the disk's bytes bind.
    pub fn bytes_bind_flag(&self) -> Arc<AtomicBool> {
        self.bytes_bind.clone()
    }

    /// Records that part of the file `(dev, ino)` of `size` bytes was not in memory when it
    /// was to be sent (or its body read). Evidence of pressure only when the file is known to
    /// have been in the page cache ([`Self::cached_whole`]) and so was evicted since
    /// ([`super::refaults`]): a file read for the first time says nothing about memory.
    pub fn note_miss(&self, dev: u64, ino: u64, size: u64) {
        if self.miss_is_evidence(size) && (!self.refaults_only || self.was_cached.refault(dev, ino))
        {
            self.note_miss_at(size, Instant::now());
        }
    }

    /// The file `(dev, ino)` of `size` bytes was in the page cache whole: sent to its end, or
    /// its small body read. Remembered for a file whose miss would be evidence, where only
    /// refaults are (`--refault-test`; else the table is never read).
    #[inline]
    pub fn cached_whole(&self, dev: u64, ino: u64, size: u64) {
        if self.refaults_only && self.miss_is_evidence(size) {
            self.was_cached.mark(dev, ino);
        }
    }

    /// Whether a small file was found cold within the last second.
    pub fn under_pressure(&self) -> bool {
        self.under_pressure_at(Instant::now())
    }

    fn note_miss_at(&self, size: u64, now: Instant) {
        let ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        if self.miss_means_yield(size) {
            self.last_small_miss.store(ms + 1, Ordering::Relaxed);
        }
        if self.miss_means_direct(size) {
            self.last_direct_miss.store(ms + 1, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    fn should_yield_at(&self, size: u64, now: Instant) -> bool {
        self.yield_above > 0 && size > self.yield_above && self.under_pressure_at(now)
    }

    fn under_pressure_at(&self, now: Instant) -> bool {
        within_window(&self.last_small_miss, self.epoch, now)
    }
}

/// Whether the page cache holds at least half of `file` (the test cannot tell: no): a large
/// file asked for often enough to stay cached, whose missing pages are read into the cache too,
/// so that it stays whole, rather than around it, which would leave the rest to be evicted and
/// read again next time ([`PagePolicy::reads_around`]).
fn kept_by_the_cache(file: &FileEntry) -> bool {
    match residency::resident_pages(&file.file, 0, file.size) {
        Ok((cached, pages)) => pages > 0 && cached * 2 >= pages,
        Err(_) => false,
    }
}

/// Whether the miss recorded in `last` (milliseconds since `epoch`, plus one; 0: none) was
/// within [`PRESSURE_WINDOW`] of `now`.
fn within_window(last: &AtomicU64, epoch: Instant, now: Instant) -> bool {
    let last = last.load(Ordering::Relaxed);
    if last == 0 {
        return false;
    }
    let now_ms = now.saturating_duration_since(epoch).as_millis() as u64;
    (now_ms + 1).saturating_sub(last) <= PRESSURE_WINDOW.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn without_pressure_nothing_yields() {
        let p = PagePolicy::new(64 * K);
        assert!(!p.should_yield_at(10 << 20, Instant::now()));
    }

    #[test]
    fn a_small_file_miss_makes_large_files_yield_for_a_second() {
        let p = PagePolicy::new(64 * K);
        let t0 = p.epoch + Duration::from_secs(5);
        p.note_miss_at(20 * K, t0);
        assert!(p.should_yield_at(65 * K, t0));
        assert!(p.should_yield_at(1 << 30, t0 + Duration::from_millis(999)));
        assert!(!p.should_yield_at(65 * K, t0 + Duration::from_millis(1002)));
    }

    #[test]
    fn files_at_or_below_the_threshold_never_yield() {
        let p = PagePolicy::new(64 * K);
        let t0 = p.epoch + Duration::from_secs(1);
        p.note_miss_at(K, t0);
        assert!(!p.should_yield_at(64 * K, t0));
        assert!(!p.should_yield_at(0, t0));
    }

    #[test]
    fn large_files_are_read_around_the_cache_only_for_a_second_after_a_smaller_miss() {
        let p = PagePolicy::with_direct(0, 8 << 20);
        let t0 = p.epoch + Duration::from_secs(3);
        assert!(!p.reads_around_at(64 << 20, t0), "no miss yet: through the page cache");
        p.note_miss_at(100 * K, t0);
        assert!(p.reads_around_at(8 << 20, t0), "at the size: around it");
        assert!(!p.reads_around_at((8 << 20) - 1, t0), "below the size: through it");
        assert!(p.reads_around_at(64 << 20, t0 + Duration::from_millis(999)));
        assert!(!p.reads_around_at(64 << 20, t0 + Duration::from_millis(1002)), "pressure over");
        // A large file's own miss is not evidence (its chunks read around the cache miss
        // every time); nor does reading around the cache turn page yielding on.
        p.note_miss_at(64 << 20, t0 + Duration::from_secs(5));
        assert!(!p.reads_around_at(64 << 20, t0 + Duration::from_secs(5)));
        assert!(!p.should_yield_at(64 << 20, t0) && !p.enabled() && p.watches_misses());
        assert!(!PagePolicy::new(0).reads_around_at(64 << 20, t0), "0: never");
    }

    #[test]
    fn nothing_is_read_around_the_cache_while_the_disks_bytes_bind() {
        let p = PagePolicy::with_direct(0, 8 << 20);
        let t0 = p.epoch + Duration::from_secs(3);
        p.note_miss_at(100 * K, t0);
        p.bytes_bind_flag().store(true, Ordering::Relaxed);
        assert!(!p.reads_around_at(64 << 20, t0), "a byte-capped disk: through the page cache");
        p.bytes_bind_flag().store(false, Ordering::Relaxed);
        assert!(p.reads_around_at(64 << 20, t0), "requests bind again: around it");
    }

    #[test]
    fn a_large_file_miss_is_not_pressure() {
        // Large files missing is what yielding causes; it must not keep the policy on.
        let p = PagePolicy::new(64 * K);
        let t0 = p.epoch + Duration::from_secs(1);
        p.note_miss_at(65 * K, t0);
        assert!(!p.should_yield_at(1 << 20, t0));
    }

    #[test]
    fn zero_turns_the_policy_off() {
        let p = PagePolicy::new(0);
        let t0 = p.epoch + Duration::from_secs(1);
        p.note_miss_at(K, t0);
        assert!(!p.should_yield_at(1 << 20, t0));
    }

    fn entry(size: usize) -> Arc<FileEntry> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; size]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        Arc::new(FileEntry::new(path, file, &meta, None))
    }

    #[test]
    fn a_large_file_sent_under_pressure_yields_after_the_delay() {
        let p = PagePolicy::new(64 * K);
        let large = entry(100 << 10);
        assert_eq!(p.sent(&large), 0);
        assert_eq!(p.waiting(), 0, "queued without pressure");
        p.note_miss(1, 2, K);
        assert_eq!(p.sent(&large), 0);
        assert_eq!(p.waiting(), 0, "a first reading is no pressure");
        p.cached_whole(1, 2, K);
        p.note_miss(1, 2, K);
        p.sent(&large);
        p.sent(&large);
        assert_eq!(p.waiting(), 1, "one entry for back-to-back sends of one file");
        assert_eq!(p.release_due(Instant::now()), 0, "released before the delay");
        assert_eq!(p.release_due(Instant::now() + YIELD_DELAY), 1);
        assert_eq!(p.waiting(), 0);
        assert_eq!(p.sent(&entry(64 << 10)), 0);
        assert_eq!(p.waiting(), 0, "a file at the threshold does not yield");
    }

    #[test]
    fn only_a_file_cached_before_and_cold_again_is_pressure() {
        let p = PagePolicy::with_direct(64 * K, 8 << 20);
        p.note_miss(1, 10, K);
        p.note_miss(1, 10, K);
        p.note_miss(1, 11, 100 * K);
        assert!(!p.under_pressure(), "files read for the first time, chunk after chunk");
        p.cached_whole(1, 12, 64 << 20);
        p.note_miss(1, 12, 64 << 20);
        assert!(!p.under_pressure(), "a large file cold again is not evidence");
        p.cached_whole(1, 10, K);
        p.note_miss(1, 10, K);
        assert!(p.under_pressure(), "a small file sent whole and evicted since");
        let q = PagePolicy::with_direct(0, 8 << 20);
        q.note_miss(1, 11, 100 * K);
        assert!(!q.reads_around_at(64 << 20, Instant::now()));
        q.cached_whole(1, 11, 100 * K);
        q.note_miss(1, 11, 100 * K);
        assert!(q.reads_around_at(64 << 20, Instant::now()), "below --direct-io-above, again");
        let every = PagePolicy::with_direct(0, 8 << 20).with_evidence(false, true);
        every.note_miss(1, 13, 100 * K);
        assert!(every.reads_around_at(64 << 20, Instant::now()), "off: a first miss too");
    }

    #[test]
    fn a_miss_at_the_epoch_counts() {
        let p = PagePolicy::new(64 * K);
        p.note_miss_at(K, p.epoch);
        assert!(p.should_yield_at(1 << 20, p.epoch));
    }
}
