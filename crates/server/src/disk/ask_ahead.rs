//! `--fill-ahead`: which pieces of a long transfer to ask the disk for before they are read,
//! so they wait in the disk's queue together rather than one after another. One policy, two
//! ways of asking: a helper's pipe fill advises with blocking `fadvise` calls ([`advise`],
//! from [`super::job`]), io_uring submits the same advice to its ring. Each range is advised
//! whole and then piece by piece ([`calls`]), so a block device gets one large request and a
//! FUSE file system one window per piece.

use crate::config::Config;
use std::fs::File;
use std::ops::Range;
use std::time::Duration;

/// The size of one piece asked for: the kernel's usual read-ahead window, which is also what
/// one `WILLNEED` advice starts at most on a FUSE file system (hence a call per piece after
/// the whole range's; a block device takes as much per call as its read-ahead limit).
pub const PIECE: u64 = 128 << 10;

/// How many pieces to ask ahead for: `--fill-ahead`'s, once the transfer has been under way
/// for `--fill-ahead-after` (so only the few long transfers take a deeper share of the disk's
/// queue, and a new response's first read does not put reads ahead of others'), and none
/// while asking would only put the transfer ahead of new requests ([`yields`]).
pub fn pieces(fill_ahead: u64, after: Duration, age: Duration, yields: bool) -> u64 {
    if age >= after && !yields { fill_ahead } else { 0 }
}

/// How many pieces a transfer of a file on device `dev`, under way for `age`, asks ahead for
/// under `cfg` (`--fill-ahead`, `--fill-ahead-after`, `--fill-ahead-yields`), given whether the
/// driver would have new requests' reads go first (it sees the disk with time to spare and
/// slow, [`crate::arch::disk_pace::DiskPace::new_reads_first`]): the one reading of the policy
/// both drivers use.
pub fn depth(cfg: &Config, dev: u64, age: Duration, new_reads_first: bool) -> u64 {
    let yields = yields(dev, cfg.fill_ahead_yields && new_reads_first);
    pieces(cfg.fill_ahead, cfg.fill_ahead_after, age, yields)
}

/// Whether a transfer of a file on device `dev` (its `st_dev`) holds back its ask-ahead so
/// that new requests' reads go first (`new_reads_first`: not nearly every read lately found
/// others waiting, and most reads took over 2 ms, as the driver's read lane or disk gate sees
/// it; the callers pass it only with `--fill-ahead-yields on`).
///
/// On a block device the advice and the read become one large request, fewer requests for
/// the same bytes, which a disk that caps requests charges for, so asking ahead helps
/// everyone and goes on. Elsewhere (FUSE, NFS) every piece is a request of its own: asking
/// ahead gains nothing in size and puts the transfer's pieces in the disk's queue before
/// whatever request comes next. Below the disk's capacity that is the small requests arriving
/// behind them: on the one-arm disk model with 0.2 % of requests for files of 10–91 MB, at 62
/// and 114 req/s, p95 44–86 ms where asking ahead always gave 1.5–3.4 s (and yielding only while
/// new requests already waited, 140–430 ms). At the disk's capacity every read finds a queue
/// and the pieces asked ahead are the large files' share that keeps them moving, so a
/// saturated disk is asked ahead as before (yielding there too cost −40 % Mb/s on a
/// heavy-tailed log, with requests unanswered). docs/BENCHMARKS.md §3b, sessions 31–32.
pub fn yields(dev: u64, new_reads_first: bool) -> bool {
    new_reads_first && !amped_sys::direct::on_block_device(dev)
}

/// The bytes to advise for a read at `offset`: the piece being read and up to `pieces` pieces
/// after it, not past `end` (the transfer's end) and not before `asked_to` (what was advised
/// already). The read's own piece is in it so that [`calls`]' first call asks a block device
/// for the read and what follows it as one request (left out, the read and the advice were
/// two). Empty when there is nothing to ask for beyond the read's own piece.
pub fn range(offset: u64, end: u64, pieces: u64, asked_to: u64) -> Range<u64> {
    let to = end.min(offset.saturating_add(PIECE.saturating_mul(pieces.saturating_add(1))));
    let from = offset.max(asked_to);
    if to <= from.max(offset.saturating_add(PIECE)) {
        return from..from;
    }
    from..to
}

/// The pieces of `range`, as (offset, length) pairs of at most [`PIECE`] bytes.
pub fn split(range: Range<u64>) -> impl Iterator<Item = (u64, u64)> {
    let end = range.end;
    range.step_by(PIECE as usize).map(move |at| (at, PIECE.min(end - at)))
}

/// The advice calls for `range`, as (offset, length): first the whole range in one call, then
/// each piece after the first. A block device reads the whole range in as few requests as its
/// read-ahead limit allows (under an IOPS cap every request counts, and seven 128 KiB pieces
/// advised one by one were seven requests), and the pieces' calls find their pages in memory
/// or on their way and start nothing; a FUSE file system starts at most one window per call,
/// so there the whole range's call reads the first piece and each piece's call one more.
pub fn calls(range: Range<u64>) -> impl Iterator<Item = (u64, u64)> {
    let whole = (range.start < range.end).then(|| (range.start, range.end - range.start));
    whole.into_iter().chain(split(range).skip(1))
}

/// Advises `range` of `file` ([`calls`]; blocking: helpers only).
pub fn advise(file: &File, range: Range<u64>) {
    for (at, len) in calls(range) {
        let _ = amped_sys::files::will_need(file, at, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transfers_under_way_long_enough_ask_ahead() {
        let ms = Duration::from_millis;
        for (fill_ahead, after, age, want) in [
            (3, ms(0), ms(0), 3),       // with no age set, every read asks ahead
            (3, ms(1000), ms(10), 0),   // a new response does not
            (3, ms(1000), ms(999), 0),  // nor one just under the age
            (3, ms(1000), ms(1000), 3), // one that old does
            (0, ms(0), ms(5000), 0),    // with none configured, none
        ] {
            let got = pieces(fill_ahead, after, age, false);
            assert_eq!(got, want, "{fill_ahead} {after:?} {age:?}");
        }
        assert_eq!(pieces(7, ms(0), ms(5000), true), 0, "a transfer that yields asks for none");
    }

    #[test]
    fn only_a_transfer_off_a_block_device_yields_and_only_while_the_disk_has_time_to_spare() {
        let (block, fuse) = (libc::makedev(254, 0), libc::makedev(0, 57));
        assert!(yields(fuse, true), "FUSE with time to spare: its pieces would go first");
        assert!(!yields(fuse, false), "a saturated disk: the pieces are the transfer's share");
        assert!(!yields(block, true), "a block device merges the advice into one request");
        assert!(!yields(block, false));
    }

    #[test]
    fn the_window_holds_the_piece_read_and_stops_at_the_end() {
        let p = PIECE;
        assert_eq!(range(0, 100 * p, 3, 0), 0..4 * p);
        assert_eq!(range(0, 2 * p + 5, 7, 0), 0..2 * p + 5, "not past the transfer");
        assert!(range(0, 100 * p, 0, 0).is_empty(), "no pieces: nothing");
        assert!(range(10 * p, 11 * p, 7, 0).is_empty(), "the last piece alone: nothing");
        assert_eq!(range(2 * p, 100 * p, 3, 4 * p), 4 * p..6 * p, "not what was asked before");
    }

    #[test]
    fn a_streaming_transfer_asks_each_piece_once() {
        let (p, end) = (PIECE, 20 * PIECE);
        let mut asked_to = 0;
        let mut asked = Vec::new();
        for read in 0..20 {
            let r = range(read * p, end, 3, asked_to);
            asked_to = asked_to.max(r.end);
            asked.extend(split(r).map(|(at, _)| at / p));
        }
        assert_eq!(asked, (0..20).collect::<Vec<_>>(), "every piece once, in order");
    }

    #[test]
    fn pieces_are_split_at_most_one_window_each() {
        let p = PIECE;
        let got: Vec<_> = split(p..3 * p + 7).collect();
        assert_eq!(got, [(p, p), (2 * p, p), (3 * p, 7)]);
        assert_eq!(split(5..5).count(), 0);
    }

    #[test]
    fn a_range_is_advised_whole_then_piece_by_piece_after_the_first() {
        let p = PIECE;
        let got: Vec<_> = calls(p..4 * p).collect();
        assert_eq!(got, [(p, 3 * p), (2 * p, p), (3 * p, p)]);
        assert_eq!(calls(p..p + 7).collect::<Vec<_>>(), [(p, 7)], "one piece: one call");
        assert_eq!(calls(5..5).count(), 0, "nothing to ask for: no call");
    }
}
