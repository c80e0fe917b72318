//! How the disk keeps up with the cold reads a driver starts: whether nearly every read leaves
//! others waiting (the disk sets the pace) and whether new requests' reads come back quickly
//! for their size. AMPED's read lane and io_uring's disk gate each keep one. A transfer off a
//! block device holds back its ask-ahead only while the disk has time to spare *and* is slow
//! ([`DiskPace::new_reads_first`], `--fill-ahead-yields`, [`crate::disk::ask_ahead::yields`]).
//!
//! Why both: on the one-arm disk model (5 ms a read) pieces asked ahead below saturation hold
//! the arm for tens of milliseconds ahead of every small request arriving behind them, and
//! holding them back cut the p95 from 1.5–3.4 s to 44–86 ms at fixed rates. On the SSD-like
//! model (0.1 ms, 32 arms) a piece holds one arm of many for a fraction of a millisecond, so
//! holding back gained nothing there and cost the large files their read-ahead (p99.9 of the
//! large files 34–51 ms asking ahead against 104–178 holding back, docs/BENCHMARKS.md §3b,
//! sessions 32–33). Which disk it is shows in how long a read takes for each piece of 128 KiB it
//! moves: on AMPED's read lane a median of 29 ms on the one-arm model and 0.53 ms on the
//! SSD-like one (session 33).
//!
//! What the verdict hears and how long it waits are the point. Session 33 decided on the last
//! 32 reads of any kind, and on the one-arm disk a burst of reads whose pages an ask-ahead had
//! already brought in turned it quick for a second at a time, which cost the one-arm p95
//! 1.1–1.8×. So only a new response's first read counts (a transfer's later reads are the ones
//! asked ahead for), a read too quick to have met the disk at all ([`FOUND_IN_MEMORY`]) says
//! nothing, and the disk turns quick only after its reads have stayed quick for
//! [`QUICK_FOR`]; it turns slow again at once. A wrong "slow" costs the large files their
//! read-ahead; a wrong "quick" costs every small request behind them.

use std::time::{Duration, Instant};

/// The share of reads leaving a queue behind them above which the disk counts as saturated.
pub const SATURATED: f64 = 0.9;

/// A cold read taking longer than this for each piece of [`PIECE`] it moved is slow: a piece
/// asked ahead of others on that disk holds back whatever arrives behind it by about as long.
pub const QUICK_PIECE: Duration = Duration::from_millis(2);

/// The size of a piece: one read-ahead window, what one disk request usually moves.
pub const PIECE: u64 = 128 << 10;

/// A read finished sooner than this found its pages in memory (brought in by a read-ahead since
/// the residency test): it tells nothing of the disk. Splicing 512 KiB of resident pages takes
/// tens of microseconds; the SSD-like model's quickest reads take about 0.2 ms.
pub const FOUND_IN_MEMORY: Duration = Duration::from_micros(100);

/// A slow disk turns quick once fewer than this share of its counted reads are slow
/// ([`QUICK_PIECE`]) and have stayed so for [`QUICK_FOR`]; a quick one turns slow once at least
/// [`SLOW_FROM`] are.
pub const QUICK_BELOW: f64 = 0.4;
/// See [`QUICK_BELOW`].
pub const SLOW_FROM: f64 = 0.6;
/// How long a slow disk's reads must stay quick before it counts as quick.
pub const QUICK_FOR: Duration = Duration::from_secs(5);

/// A moving share of events that were so, in millionths; each event moves it a 32nd of the way
/// to 0 or 1.
#[derive(Clone, Copy, Debug)]
struct MovingShare(u32);

impl MovingShare {
    fn note(&mut self, yes: bool) {
        let target = if yes { 1_000_000 } else { 0 };
        self.0 = (i64::from(self.0) + (target - i64::from(self.0)) / 32) as u32;
    }

    fn at_least(&self, share: f64) -> bool {
        f64::from(self.0) >= share * 1e6
    }
}

/// A cold read that finished, as a driver saw it.
#[derive(Clone, Copy, Debug)]
pub struct ReadDone {
    /// When it finished.
    pub at: Instant,
    /// How long it took, at the disk.
    pub took: Duration,
    /// The bytes it moved.
    pub bytes: u64,
    /// Whether it was its response's first read from the disk (not one asked ahead for).
    pub first: bool,
}

/// What a driver's cold reads tell of the disk.
#[derive(Clone, Copy, Debug)]
pub struct DiskPace {
    /// Reads started that left others waiting behind them.
    queued: MovingShare,
    /// Counted reads that took longer than [`QUICK_PIECE`] a piece.
    slow: MovingShare,
    /// Since when the slow share has stayed below [`QUICK_BELOW`] while the disk is slow.
    quick_since: Option<Instant>,
    /// The verdict.
    quick: bool,
}

impl Default for DiskPace {
    /// Nothing measured: time to spare, and slow (a disk proves itself quick).
    fn default() -> DiskPace {
        DiskPace {
            queued: MovingShare(0),
            slow: MovingShare(1_000_000),
            quick_since: None,
            quick: false,
        }
    }
}

impl DiskPace {
    /// A read started; `others_wait`: reads still wait behind it.
    pub fn started(&mut self, others_wait: bool) {
        self.queued.note(others_wait);
    }

    /// A read started earlier finished; the new verdict where this read changed it
    /// (`Some(true)`: the disk turned quick).
    pub fn finished(&mut self, read: ReadDone) -> Option<bool> {
        if !read.first || read.took < FOUND_IN_MEMORY {
            return None;
        }
        let pieces = read.bytes.div_ceil(PIECE).clamp(1, u64::from(u32::MAX)) as u32;
        self.slow.note(read.took > QUICK_PIECE * pieces);
        let quick = if self.quick {
            !self.slow.at_least(SLOW_FROM)
        } else if self.slow.at_least(QUICK_BELOW) {
            self.quick_since = None;
            false
        } else {
            let since = *self.quick_since.get_or_insert(read.at);
            read.at.saturating_duration_since(since) >= QUICK_FOR
        };
        (quick != self.quick).then(|| {
            self.quick = quick;
            self.quick_since = None;
            quick
        })
    }

    /// Logs a notice of a verdict [`DiskPace::finished`] changed (`by`: whose reads).
    pub fn tell(quick: bool, by: &str) {
        crate::errlog::notice!(
            "{by}: new requests' cold reads {} {} ms a 128 KiB piece: transfers off a block \
             device ask ahead {}",
            if quick { "have taken at most" } else { "take over" },
            QUICK_PIECE.as_millis(),
            if quick { "always" } else { "only while the disk is saturated" },
        );
    }

    /// Whether nearly every recent read left others waiting: the disk, not the offered load,
    /// sets the pace, as at infinite demand.
    pub fn saturated(&self) -> bool {
        self.queued.at_least(SATURATED)
    }

    /// Whether new requests' reads have been quick ([`QUICK_BELOW`], [`QUICK_FOR`]).
    pub fn quick(&self) -> bool {
        self.quick
    }

    /// Whether new requests' reads should go before a transfer's pieces asked ahead: the disk
    /// has time to spare (below saturation the pieces would go ahead of requests that would
    /// otherwise be served at once) and is slow (each piece ahead of them delays them by a
    /// read's time). Saturated, the pieces are the transfer's share of a queue every read
    /// waits in; quick, they cost the reads behind them little.
    pub fn new_reads_first(&self) -> bool {
        !self.saturated() && !self.quick()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Feeds `p` `n` first reads of `bytes`, one every `every` from `t`, the `i`th taking
    /// `took(i)`; the verdicts told and the time after the last.
    fn feed(
        p: &mut DiskPace,
        t: Instant,
        every: Duration,
        n: u32,
        bytes: u64,
        took: impl Fn(u32) -> Duration,
    ) -> (Vec<bool>, Instant) {
        let told = (0..n)
            .filter_map(|i| {
                let read = ReadDone { at: t + every * i, took: took(i), bytes, first: true };
                p.finished(read)
            })
            .collect();
        (told, t + every * n)
    }

    #[test]
    fn a_disk_counts_as_saturated_only_while_nearly_every_read_leaves_a_queue() {
        let mut p = DiskPace::default();
        assert!(!p.saturated(), "nothing measured: time to spare");
        (0..200).for_each(|_| p.started(true));
        assert!(p.saturated(), "every read left others waiting");
        (0..10).for_each(|i| p.started(i % 3 != 0));
        assert!(!p.saturated(), "a third found no queue: time to spare");
        (0..200).for_each(|i| p.started(i % 4 != 0));
        assert!(!p.saturated(), "three in four is below the mark");
    }

    #[test]
    fn a_disk_turns_quick_only_after_its_reads_stay_quick_for_seconds() {
        let mut p = DiskPace::default();
        assert!(!p.quick(), "nothing measured: slow");
        let (told, t) = feed(&mut p, Instant::now(), ms(10), 200, 1, |_| us(400));
        assert_eq!((told, p.quick()), (vec![], false), "two seconds of quick reads: not yet");
        let (told, t) = feed(&mut p, t, ms(10), 400, 1, |_| us(400));
        assert_eq!((told, p.quick()), (vec![true], true), "six seconds: an SSD's reads");
        let (told, t) = feed(&mut p, t, ms(10), 100, 1, |i| if i % 3 == 0 { ms(8) } else { ms(1) });
        assert_eq!((told, p.quick()), (vec![], true), "a third slow: the median read is quick");
        let (told, _) = feed(&mut p, t, ms(10), 40, 1, |_| ms(6));
        assert_eq!((told, p.quick()), (vec![false], false), "slow reads: slow again at once");
    }

    #[test]
    fn a_second_of_quick_reads_between_slow_ones_leaves_a_slow_disk_slow() {
        let mut p = DiskPace::default();
        let mut t = Instant::now();
        for _ in 0..10 {
            t = feed(&mut p, t, ms(10), 100, PIECE, |_| ms(30)).1;
            let (told, after) = feed(&mut p, t, ms(10), 100, PIECE, |_| us(900));
            assert!(told.is_empty() && !p.quick(), "a one-arm disk's burst of quick reads");
            t = after;
        }
    }

    #[test]
    fn reads_of_pages_in_memory_and_reads_asked_ahead_for_do_not_count() {
        let mut p = DiskPace::default();
        let t0 = Instant::now();
        let (_, t) = feed(&mut p, t0, ms(10), 10_000, PIECE, |_| us(40));
        assert!(!p.quick(), "pages found in memory say nothing of the disk");
        for i in 0..10_000 {
            let read = ReadDone { at: t + ms(10) * i, took: us(300), bytes: PIECE, first: false };
            assert_eq!(p.finished(read), None);
        }
        assert!(!p.quick(), "a transfer's later reads were asked ahead for");
    }

    #[test]
    fn a_read_is_timed_by_the_pieces_it_moved() {
        let mut p = DiskPace::default();
        let (_, t) = feed(&mut p, Instant::now(), ms(100), 120, 4 * PIECE, |_| us(1900));
        assert!(p.quick(), "512 KiB in 1.9 ms: quick for its four pieces");
        feed(&mut p, t, ms(100), 60, PIECE + 1, |_| ms(5));
        assert!(!p.quick(), "two pieces begun in 5 ms: slow");
    }

    #[test]
    fn a_quick_disk_near_the_mark_stays_quick() {
        let mut p = DiskPace::default();
        let (told, t) = feed(&mut p, Instant::now(), ms(100), 120, 1, |_| us(300));
        assert_eq!(told, [true], "turned quick once");
        let (told, _) =
            feed(&mut p, t, ms(10), 200, 1, |i| if i % 2 == 0 { ms(6) } else { us(300) });
        assert_eq!((told, p.quick()), (vec![], true), "half slow: still quick");
    }

    #[test]
    fn new_reads_go_first_only_on_a_slow_disk_with_time_to_spare() {
        let pace = |took: Duration, queued: bool| {
            let (mut p, t0) = (DiskPace::default(), Instant::now());
            for i in 0..200 {
                p.started(queued);
                let _ =
                    p.finished(ReadDone { at: t0 + ms(50) * i, took, bytes: PIECE, first: true });
            }
            p.new_reads_first()
        };
        assert!(pace(ms(8), false), "slow, time to spare: pieces ahead would delay new reads");
        assert!(!pace(ms(8), true), "slow and saturated: the pieces are the transfer's share");
        assert!(!pace(us(300), false), "quick: pieces ahead cost new reads little");
        assert!(!pace(us(300), true));
        assert!(DiskPace::default().new_reads_first(), "nothing measured: as for a slow disk");
    }
}
