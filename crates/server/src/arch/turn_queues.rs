//! The order in which file reads reach a busy disk, shared by AMPED's read lane
//! ([`super::read_lane`]) and io_uring's disk gate ([`super::uring`]): two queues — first
//! reads of new responses in arrival order, and reads of transfers under way (part of the body
//! already sent) oldest response first — served in turn, so neither kind holds the disk from
//! the other for more than one read per slot. Equal ages keep the order they were queued in.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Reads waiting, new responses' and transfers' in turn.
pub(crate) struct TurnQueues<T> {
    /// First reads of responses, in arrival order.
    fresh: BinaryHeap<Reverse<Aged<T>>>,
    /// Reads of transfers under way, oldest response first.
    continuing: BinaryHeap<Reverse<Aged<T>>>,
    /// The next take prefers `continuing`.
    continuing_turn: bool,
    next_seq: u64,
}

impl<T> TurnQueues<T> {
    pub fn new() -> TurnQueues<T> {
        TurnQueues {
            fresh: BinaryHeap::new(),
            continuing: BinaryHeap::new(),
            continuing_turn: false,
            next_seq: 0,
        }
    }

    /// Queues `item` of a response that began at `since` (`continues`: part of its body was
    /// sent). A caller wanting transfers served round-robin gives them the time they queue.
    pub fn push(&mut self, since: Instant, continues: bool, item: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let queue = if continues { &mut self.continuing } else { &mut self.fresh };
        queue.push(Reverse(Aged { since, seq, item }));
    }

    /// The next item: from the queue whose turn it is, else from the other.
    pub fn take(&mut self) -> Option<T> {
        self.take_where(|_| true)
    }

    /// As [`TurnQueues::take`], passing over the transfers' items `may_read` refuses (they
    /// keep their places); a turn of the transfers with none it allows goes to new responses.
    pub fn take_where(&mut self, may_read: impl Fn(&T) -> bool) -> Option<T> {
        if self.continuing_turn {
            if let Some(Reverse(q)) = self.take_continuing(&may_read) {
                self.continuing_turn = false;
                return Some(q.item);
            }
            // Nothing the transfers may read: new responses go, and the turn stays.
            return self.fresh.pop().map(|Reverse(q)| q.item);
        }
        if let Some(Reverse(q)) = self.fresh.pop() {
            self.continuing_turn = true;
            return Some(q.item);
        }
        self.take_continuing(&may_read).map(|Reverse(q)| q.item)
    }

    /// The oldest transfer item `may_read` allows, out of its queue.
    fn take_continuing(&mut self, may_read: &impl Fn(&T) -> bool) -> Option<Reverse<Aged<T>>> {
        let mut passed = Vec::new();
        let mut found = None;
        while let Some(q) = self.continuing.pop() {
            if may_read(&q.0.item) {
                found = Some(q);
                break;
            }
            passed.push(q);
        }
        self.continuing.extend(passed);
        found
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.fresh.len() + self.continuing.len()
    }

    /// Whether a read of a transfer under way waits.
    pub fn transfers_wait(&self) -> bool {
        !self.continuing.is_empty()
    }
}

/// An item ordered by the age of the response it serves, then by when it was queued.
struct Aged<T> {
    since: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Aged<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.since, self.seq) == (other.since, other.seq)
    }
}
impl<T> Eq for Aged<T> {}
impl<T> PartialOrd for Aged<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Aged<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.since, self.seq).cmp(&(other.since, other.seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn new_responses_and_transfers_take_turns_oldest_transfer_first() {
        let mut q = TurnQueues::new();
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        q.push(t0 + ms(30), false, 1);
        q.push(t0 + ms(31), false, 2);
        q.push(t0 + ms(32), false, 3);
        q.push(t0 + ms(5), true, 11);
        q.push(t0 + ms(5), true, 12);
        q.push(t0, true, 13);
        assert_eq!(q.len(), 6);
        assert!(q.transfers_wait());
        let order: Vec<u64> = std::iter::from_fn(|| q.take()).collect();
        assert_eq!(order, [1, 13, 2, 11, 3, 12], "in turn; oldest transfer first; ties in order");
        assert!(!q.transfers_wait() && q.len() == 0);
        q.push(t0, false, 4);
        q.push(t0, false, 5);
        assert_eq!((q.take(), q.take()), (Some(4), Some(5)), "one kind alone goes without waiting");
    }

    #[test]
    fn transfers_refused_keep_their_places_and_give_their_turn_to_new_responses() {
        let mut q = TurnQueues::new();
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        q.push(t0, true, 10); // the oldest transfer, refused below
        q.push(t0 + ms(1), true, 11);
        q.push(t0 + ms(9), false, 1);
        q.push(t0 + ms(9), false, 2);
        let not_10 = |x: &u64| *x != 10;
        assert_eq!(q.take_where(not_10), Some(1), "new responses' turn");
        assert_eq!(q.take_where(not_10), Some(11), "the oldest transfer allowed");
        assert_eq!(q.take_where(not_10), Some(2));
        assert_eq!(q.take_where(not_10), None, "only a refused transfer waits");
        assert_eq!(q.len(), 1);
        assert_eq!(q.take(), Some(10), "still queued, first once allowed");
    }
}
