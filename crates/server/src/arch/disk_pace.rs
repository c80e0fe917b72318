//! How the disk keeps up with the cold reads a driver starts: whether nearly every read leaves
//! others waiting (the disk sets the pace) and whether most reads come back quickly for their
//! size. AMPED's
//! read lane and io_uring's disk gate each keep one. A transfer off a block device holds back
//! its ask-ahead only while the disk has time to spare *and* is slow to read from
//! ([`DiskPace::new_reads_first`], `--fill-ahead-yields`, [`crate::disk::ask_ahead::yields`]).
//!
//! Why both: on the one-arm disk model (5 ms a read) pieces asked ahead below saturation hold
//! the arm for tens of milliseconds ahead of every small request arriving behind them, and
//! holding them back cut the p95 from 1.5–3.4 s to 44–86 ms at fixed rates. On the SSD-like
//! model (0.1 ms, 32 arms) a piece holds one arm of many for a fraction of a millisecond, so
//! holding back gained nothing there and cost the large files their read-ahead (p99.9 of the
//! large files 24–32 → 94–113 ms, docs/BENCHMARKS.md §3b, session 32). Whether a disk is the one
//! or the other shows in how long its reads take for each piece of 128 KiB they move. Measured
//! on AMPED's read lane at fixed rates (session 33): on the one-arm model a median of 29 ms
//! (10 % under 5.4 ms, 92 % over 2 ms); on the SSD-like one 0.53 ms (90 % under 1.4 ms, 4 % over
//! 2 ms). Per job, without dividing by its pieces, 27 % of the SSD-like disk's jobs took over 2 ms
//! (its 512 KiB fills), and the verdict changed every second or two.

use std::time::Duration;

/// The share of reads leaving a queue behind them above which the disk counts as saturated.
pub const SATURATED: f64 = 0.9;

/// A cold read taking longer than this for each piece of [`PIECE`] it moved is slow: a piece
/// asked ahead of others on that disk holds back whatever arrives behind it by about as long.
pub const QUICK_PIECE: Duration = Duration::from_millis(2);

/// The size of a piece: one read-ahead window, what one disk request usually moves.
pub const PIECE: u64 = 128 << 10;

/// A slow disk turns quick once fewer than this share of its reads are slow ([`QUICK_PIECE`]),
/// and a quick one slow once at least [`SLOW_FROM`] are: about the median read, so that reads
/// of pages already on their way (io_uring's gate lets them through once a transfer has met the
/// disk) do not make a slow disk look quick, with a band between so that a disk near the mark
/// does not change its verdict with every few reads.
pub const QUICK_BELOW: f64 = 0.4;
/// See [`QUICK_BELOW`].
pub const SLOW_FROM: f64 = 0.6;

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

/// What a driver's cold reads tell of the disk.
#[derive(Clone, Copy, Debug)]
pub struct DiskPace {
    /// Reads started that left others waiting behind them.
    queued: MovingShare,
    /// Reads that took longer than [`QUICK_PIECE`].
    slow: MovingShare,
    /// The verdict on them.
    quick: bool,
}

impl Default for DiskPace {
    /// Nothing measured: time to spare, and slow (a disk proves itself quick).
    fn default() -> DiskPace {
        DiskPace { queued: MovingShare(0), slow: MovingShare(1_000_000), quick: false }
    }
}

impl DiskPace {
    /// A read started; `others_wait`: reads still wait behind it.
    pub fn started(&mut self, others_wait: bool) {
        self.queued.note(others_wait);
    }

    /// A read started earlier finished, having taken `took` to move `bytes`; the new verdict
    /// where this read changed it (`Some(true)`: the disk turned quick).
    pub fn finished(&mut self, bytes: u64, took: Duration) -> Option<bool> {
        let pieces = bytes.div_ceil(PIECE).clamp(1, u64::from(u32::MAX)) as u32;
        self.slow.note(took > QUICK_PIECE * pieces);
        let quick = if self.quick {
            !self.slow.at_least(SLOW_FROM)
        } else {
            !self.slow.at_least(QUICK_BELOW)
        };
        (quick != self.quick).then(|| {
            self.quick = quick;
            quick
        })
    }

    /// Logs a notice of a verdict [`DiskPace::finished`] changed (`by`: whose reads).
    pub fn tell(quick: bool, by: &str) {
        crate::errlog::notice!(
            "{by}: most cold reads took {} {} ms a 128 KiB piece: transfers off a block device \
             ask ahead {}",
            if quick { "at most" } else { "over" },
            QUICK_PIECE.as_millis(),
            if quick { "always" } else { "only while the disk is saturated" },
        );
    }

    /// Whether nearly every recent read left others waiting: the disk, not the offered load,
    /// sets the pace, as at infinite demand.
    pub fn saturated(&self) -> bool {
        self.queued.at_least(SATURATED)
    }

    /// Whether most recent reads took at most [`QUICK_PIECE`] ([`QUICK_BELOW`]).
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

    /// Feeds `p` `n` reads of `bytes`, the `i`th taking `took(i)`.
    fn feed(p: &mut DiskPace, n: usize, bytes: u64, took: impl Fn(usize) -> Duration) {
        for i in 0..n {
            let _ = p.finished(bytes, took(i));
        }
    }

    #[test]
    fn a_disk_is_quick_once_most_of_its_reads_come_back_within_the_mark() {
        let (ms, us) = (Duration::from_millis, Duration::from_micros);
        let mut p = DiskPace::default();
        assert!(!p.quick(), "nothing measured: slow");
        feed(&mut p, 40, 1, |_| us(400));
        assert!(p.quick(), "an SSD's reads");
        feed(&mut p, 40, 1, |i| if i % 3 == 0 { ms(8) } else { ms(1) });
        assert!(p.quick(), "a third slow: the median read is quick");
        feed(&mut p, 100, 1, |i| if i % 3 == 0 { Duration::ZERO } else { ms(6) });
        assert!(!p.quick(), "a one-arm disk, a third of its reads of pages on their way");
    }

    #[test]
    fn a_read_is_timed_by_the_pieces_it_moved() {
        let mut p = DiskPace::default();
        feed(&mut p, 60, 4 * PIECE, |_| Duration::from_micros(1900));
        assert!(p.quick(), "512 KiB in 1.9 ms: quick for its four pieces");
        feed(&mut p, 60, PIECE + 1, |_| Duration::from_millis(5));
        assert!(!p.quick(), "two pieces begun in 5 ms: slow");
    }

    #[test]
    fn a_disk_near_the_mark_keeps_its_verdict_and_each_change_is_told_once() {
        let (slow, quick) = (Duration::from_millis(6), Duration::from_micros(300));
        let mut p = DiskPace::default();
        let told: Vec<_> = (0..60).filter_map(|_| p.finished(1, quick)).collect();
        assert_eq!(told, [true], "turned quick once");
        let half = |p: &mut DiskPace| {
            (0..200).filter_map(|i| p.finished(1, if i % 2 == 0 { slow } else { quick })).count()
        };
        assert_eq!((half(&mut p), p.quick()), (0, true), "half slow: still quick");
        let told: Vec<_> = (0..60).filter_map(|_| p.finished(1, slow)).collect();
        assert_eq!(told, [false], "turned slow once");
        assert_eq!((half(&mut p), p.quick()), (0, false), "half slow: still slow");
    }

    #[test]
    fn new_reads_go_first_only_on_a_slow_disk_with_time_to_spare() {
        let (ms, us) = (Duration::from_millis, Duration::from_micros);
        let pace = |took: Duration, queued: bool| {
            let mut p = DiskPace::default();
            (0..200).for_each(|_| {
                p.started(queued);
                let _ = p.finished(PIECE, took);
            });
            p.new_reads_first()
        };
        assert!(pace(ms(8), false), "slow, time to spare: pieces ahead would delay new reads");
        assert!(!pace(ms(8), true), "slow and saturated: the pieces are the transfer's share");
        assert!(!pace(us(300), false), "quick: pieces ahead cost new reads little");
        assert!(!pace(us(300), true));
        assert!(DiskPace::default().new_reads_first(), "nothing measured: as for a slow disk");
    }
}
