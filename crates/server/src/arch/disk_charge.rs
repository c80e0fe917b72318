//! What the disk runs out of first, requests or bytes, read from the device's own counts while
//! amped's cold reads keep it busy; the page policy reads large files around the page cache
//! only while bytes do not bind (`--disk-charge-test`).
//!
//! A direct read ([`crate::cache::pages`], `--direct-io-above`) trades bytes for requests:
//! one 2 MiB request instead of the page cache's smaller ones, but the file's pages are not
//! kept, so the next request for it reads them again. On a volume that caps requests (IOPS)
//! that trade bought 1.29–1.39× the throughput; on one whose bandwidth binds first it cost
//! 6–9 % of it and 2.6× the p95 at a fixed rate (docs/BENCHMARKS.md §3b, sessions 21–23). Which
//! kind of disk this is cannot be read from its latency (queueing hides it), but it shows in
//! what the disk lets through while it is saturated: under a request cap, requests per second
//! stay at the cap while bytes per second follow the sizes asked for; under a byte cap it is the
//! other way round. So, over windows of [`WINDOW`] in which AMPED's read lane always had a
//! cold read at the disk (idle at most [`IDLE_SHARE`] of the window: the disk, not a lull in
//! the load, set the pace), the one of the two rates that varies less relative to its mean is
//! the one that binds. The last [`KEEP`] such windows decide, with a dead band between the two
//! verdicts so that a mixed disk (an SSD, neither cap close) keeps the one it has, and a verdict
//! changes only when [`HOLD`] windows in a row say so; until then, and on a file system without
//! a block device (FUSE, NFS, tmpfs), requests are taken to bind, as before this test existed.
//!
//! Requests are counted two ways, and the more level of the two is the one compared with the
//! bytes: as the device completed them, and as they were submitted (completed plus merged into
//! one already queued). A volume behind the device caps what reaches it, after merging; a
//! blkio throttle caps what was submitted, before. Under the throttle merged reads lower the
//! completed count while the submitted one stays at the cap; should the bytes happen to stay
//! level meanwhile, completions alone would say bytes bind. (With 256 MiB one cold start in
//! about twenty took the reads-only cap for a byte cap for six seconds, that round −30 %;
//! whether merges did it is not known: docs/BENCHMARKS.md §3b, session 24.)
//!
//! Reads need not wait in amped's own queue for a window to count: with the adaptive depth
//! ([`super::disk_concurrency`]) they mostly wait in the kernel's, and a first version that
//! asked for waiting in amped's queue saw a byte cap at 85 req/s (the disk ~77 % busy)
//! saturated only in the last seconds of a 35 s run. The device's counts include other
//! processes' reads of it: what the disk is short of is what it is short of, whoever asks.
//! io_uring does not watch: its page-cache path moved less on a byte-capped volume than its
//! direct reads and left requests unanswered (sessions 22–23), so it keeps the memory rule.

use amped_sys::block_stat::{self, DeviceReads};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One measurement window lasts at least this long.
const WINDOW: Duration = Duration::from_millis(500);
/// A window counts if the queue had no read at the disk for at most this share of it.
const IDLE_SHARE: f64 = 0.1;
/// Saturated windows kept for the verdict.
const KEEP: usize = 12;
/// Saturated windows needed before a verdict.
const LEAST: usize = 8;
/// Bytes bind when their rate's coefficient of variation is below this share of the
/// requests' (measured: 0.04–0.40 under a 60 MB/s cap, most windows, 0.87–0.90 warming up).
const BYTES_BIND_BELOW: f64 = 0.5;
/// Requests bind when it is above this share (measured: 1.15–18 under a 300 reads/s cap, and
/// 0.32–0.49 in a few windows right after a cold start before the spread left out each
/// series' highest and lowest window; 0.52–0.76 at the least since).
const REQUESTS_BIND_ABOVE: f64 = 1.0;
/// A verdict changes only after this many saturated windows in a row on its side (three
/// seconds): one window's mix of sizes, a cold start's burst of small reads, does not flip it.
const HOLD: u32 = 6;

/// The watch over one disk's counts, fed by the queue its cold reads wait in.
#[derive(Debug)]
pub struct DiskCharge {
    /// The device's stat file; `None`: not watching.
    stat: Option<PathBuf>,
    /// The verdict, shared with the page policy.
    bytes_bind: Arc<AtomicBool>,
    window: Option<Window>,
    /// What the last saturated windows moved per second.
    rounds: VecDeque<Rates>,
    /// Saturated windows in a row whose ratio said the other verdict than the one held.
    against: u32,
}

/// One saturated window's rates, per second.
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// Requests the device completed.
    requests: f64,
    /// Reads submitted to it: completed plus merged into one already queued.
    submitted: f64,
    bytes: f64,
}

/// A window under way.
#[derive(Debug, Clone, Copy)]
struct Window {
    since: Instant,
    at_start: DeviceReads,
    /// Time in it with no read of the queue at the disk, up to `idle_since`.
    idle: Duration,
    /// Since when none has been, if none is now.
    idle_since: Option<Instant>,
}

impl DiskCharge {
    /// No watch: the verdict stays where it is.
    pub fn off() -> DiskCharge {
        DiskCharge::with_stat(None, Arc::new(AtomicBool::new(false)))
    }

    /// A watch over the device holding the file system `dev` (an `st_dev`), its verdict
    /// published in `bytes_bind`; off where `dev` is not a block device.
    pub fn watching(dev: u64, bytes_bind: Arc<AtomicBool>) -> DiskCharge {
        DiskCharge::with_stat(block_stat::stat_path(dev), bytes_bind)
    }

    fn with_stat(stat: Option<PathBuf>, bytes_bind: Arc<AtomicBool>) -> DiskCharge {
        DiskCharge { stat, bytes_bind, window: None, rounds: VecDeque::new(), against: 0 }
    }

    /// The queue's reads at the disk changed to `n` at `now` (one started or finished).
    pub fn reads_at_disk(&mut self, now: Instant, n: usize) {
        let Some(stat) = &self.stat else { return };
        let Some(w) = &mut self.window else {
            self.window = block_stat::read(stat).map(|at_start| Window::new(now, at_start, n));
            return;
        };
        w.note(now, n);
        let took = now.saturating_duration_since(w.since);
        if took < WINDOW {
            return;
        }
        let (from, idle) = (w.at_start, w.idle);
        let Some(counts) = block_stat::read(stat) else {
            self.stat = None; // the device went away: no more verdicts
            return;
        };
        self.window = Some(Window::new(now, counts, n));
        crate::errlog::debug!(
            "disk window: {} requests ({} merged), {} bytes, idle {} of {} ms",
            counts.requests.saturating_sub(from.requests),
            counts.merged.saturating_sub(from.merged),
            counts.bytes.saturating_sub(from.bytes),
            idle.as_millis(),
            took.as_millis()
        );
        if idle.as_secs_f64() <= IDLE_SHARE * took.as_secs_f64() {
            self.observe(took, from, counts);
        }
    }

    /// Takes one saturated window's counts into the verdict.
    fn observe(&mut self, took: Duration, from: DeviceReads, to: DeviceReads) {
        let secs = took.as_secs_f64();
        let per_second = |to: u64, from: u64| to.saturating_sub(from) as f64 / secs;
        let requests = per_second(to.requests, from.requests);
        let merged = per_second(to.merged, from.merged);
        let bytes = per_second(to.bytes, from.bytes);
        if requests <= 0.0 || bytes <= 0.0 {
            return; // reads that all found the page cache: nothing learnt about the disk
        }
        self.rounds.push_back(Rates { requests, submitted: requests + merged, bytes });
        if self.rounds.len() > KEEP {
            self.rounds.pop_front();
        }
        if self.rounds.len() < LEAST {
            return;
        }
        let spread = |f: fn(&Rates) -> f64| variation(self.rounds.iter().map(f));
        let requests_spread = spread(|r| r.requests).min(spread(|r| r.submitted));
        let ratio = spread(|r| r.bytes) / requests_spread;
        crate::errlog::debug!(
            "disk charge: {requests:.0} requests/s, {:.1} MB/s; spread ratio {ratio:.2}",
            bytes / 1e6
        );
        self.judge(ratio);
    }

    /// Takes one window's ratio (spread of bytes/s ÷ spread of requests/s) into the verdict.
    fn judge(&mut self, ratio: f64) {
        let before = self.bytes_bind.load(Ordering::Relaxed);
        let says = if ratio < BYTES_BIND_BELOW {
            true
        } else if ratio > REQUESTS_BIND_ABOVE {
            false
        } else {
            before
        };
        self.against = if says == before { 0 } else { self.against + 1 };
        if self.against >= HOLD {
            let now = says;
            self.against = 0;
            self.bytes_bind.store(now, Ordering::Relaxed);
            crate::errlog::notice!(
                "the disk's {} bind (spread of bytes/s ÷ spread of requests/s {ratio:.2} over \
                 {} saturated windows): large cold files {} the page cache",
                if now { "bytes" } else { "requests" },
                self.rounds.len(),
                if now { "go through" } else { "may be read around" },
            );
        }
    }

    /// Whether the disk's bytes bind now.
    #[cfg(test)]
    fn bytes_bind(&self) -> bool {
        self.bytes_bind.load(Ordering::Relaxed)
    }
}

impl Window {
    fn new(since: Instant, at_start: DeviceReads, at_disk: usize) -> Window {
        Window {
            since,
            at_start,
            idle: Duration::ZERO,
            idle_since: (at_disk == 0).then_some(since),
        }
    }

    /// The queue's reads at the disk are `n` from `now` on; the idle time up to `now` counts.
    fn note(&mut self, now: Instant, n: usize) {
        if let Some(from) = self.idle_since.take() {
            self.idle += now.saturating_duration_since(from);
        }
        self.idle_since = (n == 0).then_some(now);
    }
}

/// The coefficient of variation of `xs` (standard deviation over mean; 0 for a constant),
/// without its highest and lowest value: one window's burst — at a cold start, 731 requests/s
/// once under a cap of 300 — would otherwise stand for the whole spread.
fn variation(xs: impl Iterator<Item = f64>) -> f64 {
    let mut xs: Vec<f64> = xs.collect();
    xs.sort_by(f64::total_cmp);
    let xs = if xs.len() >= 5 { &xs[1..xs.len() - 1] } else { &xs[..] };
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    if mean > 0.0 { var.sqrt() / mean } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    /// Feeds windows of a disk that, saturated, moves `sizes[i]` bytes per request: capped at
    /// `iops` requests/s and `bps` bytes/s, whichever binds first.
    fn feed(c: &mut DiskCharge, sizes: &[f64], iops: f64, bps: f64) {
        feed_rates(
            c,
            sizes.iter().map(|size| {
                let requests = iops.min(bps / size);
                (requests, 0.0, requests * size)
            }),
        );
    }

    /// Feeds half-second windows in which the device completed requests, merged reads and
    /// moved bytes at these rates per second.
    fn feed_rates(c: &mut DiskCharge, rates: impl IntoIterator<Item = (f64, f64, f64)>) {
        let mut at = DeviceReads { requests: 0, merged: 0, bytes: 0 };
        for (requests, merged, bytes) in rates {
            let next = DeviceReads {
                requests: at.requests + (requests / 2.0) as u64,
                merged: at.merged + (merged / 2.0) as u64,
                bytes: at.bytes + (bytes / 2.0) as u64,
            };
            c.observe(WINDOW, at, next);
            at = next;
        }
    }

    /// Request sizes that vary from window to window, as a mix of small files and large
    /// transfers does.
    fn mix() -> Vec<f64> {
        (0..2 * KEEP).map(|i| [0.3, 1.8, 0.9, 1.2, 0.5, 2.0][i % 6] * MB).collect()
    }

    #[test]
    fn a_request_cap_keeps_direct_reads() {
        let mut c = DiskCharge::off();
        feed(&mut c, &mix(), 300.0, 1e12);
        assert!(!c.bytes_bind(), "requests pinned at the cap, bytes follow the sizes");
    }

    #[test]
    fn a_byte_cap_stops_them_and_a_request_cap_brings_them_back() {
        let mut c = DiskCharge::off();
        feed(&mut c, &mix(), 1e6, 60.0 * MB);
        assert!(c.bytes_bind(), "bytes pinned at 60 MB/s, requests follow the sizes");
        feed(&mut c, &mix(), 300.0, 1e12);
        assert!(!c.bytes_bind(), "the disk changed (a volume resized): requests bind again");
    }

    #[test]
    fn merged_reads_under_a_throttle_that_counts_submissions_keep_direct_reads() {
        // A blkio throttle passes 300 reads/s, counted as submitted; the block layer merges
        // 0-90 of them a second into requests already queued, so the device completes
        // 210-300, larger ones, and the bytes stay nearly level: by completions alone, a
        // byte cap.
        let mut c = DiskCharge::off();
        feed_rates(
            &mut c,
            (0..2 * KEEP).map(|i| {
                let merged = [0.0, 60.0, 20.0, 90.0, 40.0, 10.0][i % 6];
                let bytes = [540.0, 548.0, 544.0, 552.0, 536.0, 546.0][i % 6] * MB;
                (300.0 - merged, merged, bytes)
            }),
        );
        assert!(!c.bytes_bind(), "submitted reads pinned at the cap: requests bind");
    }

    #[test]
    fn a_volume_counting_completed_requests_is_a_request_cap_too() {
        // Behind the device: 300 requests/s completed, whatever was merged before.
        let mut c = DiskCharge::off();
        let merged = [0.0, 120.0, 30.0, 200.0].into_iter().cycle();
        feed_rates(&mut c, mix().into_iter().zip(merged).map(|(size, m)| (300.0, m, 300.0 * size)));
        assert!(!c.bytes_bind(), "completed requests pinned: requests bind");
    }

    #[test]
    fn a_verdict_changes_only_after_windows_in_a_row_say_so() {
        let mut c = DiskCharge::off();
        for _ in 0..HOLD - 1 {
            c.judge(0.2);
        }
        c.judge(0.7); // the dead band: the streak starts again
        for _ in 0..HOLD - 1 {
            c.judge(0.2);
        }
        assert!(!c.bytes_bind(), "a burst of windows (a cold start's small reads) is not enough");
        c.judge(0.2);
        assert!(c.bytes_bind(), "{HOLD} in a row");
        c.judge(3.0);
        assert!(c.bytes_bind(), "one window back does not undo it");
    }

    #[test]
    fn one_windows_burst_does_not_make_the_spread() {
        let steady = [300.0, 298.0, 305.0, 301.0, 296.0, 303.0, 299.0, 302.0];
        let with_burst = steady.iter().copied().chain([731.0]);
        assert!(variation(with_burst) < 0.02, "the burst is left out");
        assert_eq!(variation([5.0, 5.0, 5.0].into_iter()), 0.0);
    }

    #[test]
    fn no_verdict_before_enough_windows() {
        let mut c = DiskCharge::off();
        feed(&mut c, &mix()[..LEAST - 1], 1e6, 60.0 * MB);
        assert!(!c.bytes_bind(), "too few windows: as without the test");
    }

    #[test]
    fn a_disk_where_neither_binds_keeps_its_verdict() {
        let mut c = DiskCharge::off();
        c.bytes_bind.store(true, Ordering::Relaxed); // a verdict reached earlier
        // Both rates vary alike: the load, not a cap, sets them.
        let mut at = DeviceReads { requests: 0, merged: 0, bytes: 0 };
        for i in 0..KEEP {
            let k = [1.0, 2.0, 3.0][i % 3];
            let next = DeviceReads {
                requests: at.requests + (100.0 * k) as u64,
                merged: 0,
                bytes: at.bytes + (100.0 * k * MB) as u64,
            };
            c.observe(WINDOW, at, next);
            at = next;
        }
        assert!(c.bytes_bind(), "within the dead band the verdict stays");
    }

    #[test]
    fn windows_count_only_while_the_disk_is_kept_busy() {
        let dir = std::env::temp_dir().join(format!("amped-charge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stat = dir.join("stat");
        let flag = Arc::new(AtomicBool::new(false));
        let mut c = DiskCharge::with_stat(Some(stat.clone()), flag.clone());
        let t0 = Instant::now();
        // A disk capped at 60 MB/s seen through its stat file: 30 MB per half-second window,
        // in requests of sizes that vary. For the first KEEP windows the queue has a read at
        // the disk only half the time (a lull in the load), then all the time.
        let (mut requests, mut sectors) = (0u64, 0u64);
        for (w, size) in mix().iter().cycle().take(3 * KEEP).enumerate() {
            if w == KEEP {
                assert!(c.rounds.is_empty(), "no window counts while the disk idles");
            }
            std::fs::write(&stat, format!("{requests} 0 {sectors} 0 0 0 0\n")).unwrap();
            let at = t0 + WINDOW * w as u32;
            c.reads_at_disk(at, 1);
            let lull = if w < KEEP { 0 } else { 1 };
            c.reads_at_disk(at + WINDOW / 2, lull);
            requests += (30.0 * MB / size) as u64;
            sectors += (30.0 * MB / 512.0) as u64;
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(c.rounds.len(), KEEP, "windows with the disk busy count");
        assert!(flag.load(Ordering::Relaxed), "bytes bind, published to the page policy");
    }
}
