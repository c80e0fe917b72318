//! `--fill-ahead`: which pieces of a long transfer to ask the disk for before they are read,
//! so they wait in the disk's queue together rather than one after another. One policy, two
//! ways of asking: a helper's pipe fill advises with blocking `fadvise` calls ([`advise`],
//! from [`super::job`]), io_uring submits the same advice to its ring.

use std::fs::File;
use std::ops::Range;
use std::time::Duration;

/// The size of one piece asked for: the kernel's usual read-ahead window, which is also what
/// one `WILLNEED` advice starts at most (so a range is advised one piece per call).
pub const PIECE: u64 = 128 << 10;

/// How many pieces to ask ahead for: `--fill-ahead`'s, once the transfer has been under way
/// for `--fill-ahead-after` (so only the few long transfers take a deeper share of the disk's
/// queue, and a new response's first read does not put reads ahead of others').
pub fn pieces(fill_ahead: u64, after: Duration, age: Duration) -> u64 {
    if age >= after { fill_ahead } else { 0 }
}

/// The bytes to advise for a read at `offset`: up to `pieces` pieces after the piece being
/// read, not past `end` (the transfer's end) and not before `asked_to` (what was advised
/// already). Empty when there is nothing new to ask for.
pub fn range(offset: u64, end: u64, pieces: u64, asked_to: u64) -> Range<u64> {
    let from = (offset + PIECE).max(asked_to);
    let to = end.min(offset.saturating_add(PIECE.saturating_mul(pieces.saturating_add(1))));
    from..to.max(from)
}

/// The pieces of `range`, as (offset, length) pairs of at most [`PIECE`] bytes.
pub fn split(range: Range<u64>) -> impl Iterator<Item = (u64, u64)> {
    let end = range.end;
    range.step_by(PIECE as usize).map(move |at| (at, PIECE.min(end - at)))
}

/// Advises `range` of `file`, one piece per call (blocking: helpers only).
pub fn advise(file: &File, range: Range<u64>) {
    for (at, len) in split(range) {
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
            assert_eq!(pieces(fill_ahead, after, age), want, "{fill_ahead} {after:?} {age:?}");
        }
    }

    #[test]
    fn the_window_starts_after_the_piece_read_and_stops_at_the_end() {
        let p = PIECE;
        assert_eq!(range(0, 100 * p, 3, 0), p..4 * p);
        assert_eq!(range(0, 2 * p + 5, 7, 0), p..2 * p + 5, "not past the transfer");
        assert_eq!(range(0, 100 * p, 0, 0), p..p, "no pieces: nothing");
        assert_eq!(range(10 * p, 11 * p, 7, 0), 11 * p..11 * p, "the last piece: nothing");
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
        assert_eq!(asked, (1..20).collect::<Vec<_>>(), "every later piece once, in order");
    }

    #[test]
    fn pieces_are_split_at_most_one_window_each() {
        let p = PIECE;
        let got: Vec<_> = split(p..3 * p + 7).collect();
        assert_eq!(got, [(p, p), (2 * p, p), (3 * p, 7)]);
        assert_eq!(split(5..5).count(), 0);
    }
}
