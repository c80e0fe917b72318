//! Jobs for the same thing wait for the first instead of queueing again.
//!
//! After a cold start a popular file is asked for many times while its first resolve still
//! waits in the metadata lane: in arrival order each later request joined the back of the
//! queue with a resolve of its own, and waited the whole backlog again although the first
//! resolve was about to warm the kernel's caches for it. (Measured on the emulated one-arm
//! disk at 243 req/s: 15–25 % of the requests that waited over half a second in the lane had
//! a resolve of the same path ahead of them.) A server of blocking threads gets this for free
//! — the kernel makes a second lookup of a name wait for the first — so AMPED does it too: a
//! job whose key matches one queued or running is held as that job's *follower*; once the
//! first has run, its followers run on the same thread straight away (each its own job, now
//! served from warm caches, so every request still gets an answer of its own), never later
//! than their turn in the queue would have come.
//!
//! This module keeps only the bookkeeping (which keys are in the lane, who follows them); the
//! lane ([`super::metadata_lane`]) decides when to ask — only for a job that will wait, so a
//! lane that keeps up pays no lock for it. Keys are hashes: two paths with one hash would only
//! make a job run right after an unrelated one, never give it another's answer.

use crate::cache::lock;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Keys of jobs queued or running, each with the jobs that follow it.
pub struct Coalescer<T> {
    leaders: Mutex<HashMap<u64, Vec<T>>>,
    /// How many keys `leaders` holds, readable without the lock.
    count: AtomicUsize,
}

impl<T> Default for Coalescer<T> {
    fn default() -> Self {
        Coalescer { leaders: Mutex::default(), count: AtomicUsize::new(0) }
    }
}

impl<T> Coalescer<T> {
    /// Whether any job leads now (if not, a job can follow none).
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Offers a job with `key`: `Some(job)` back when no job with that key is in the lane (it
    /// leads: queue it, and call [`Coalescer::finished`] once it has run); `None` when it was
    /// taken as a follower of the one that is.
    pub fn offer(&self, key: u64, job: T) -> Option<T> {
        let mut leaders = lock(&self.leaders);
        match leaders.entry(key) {
            Entry::Occupied(mut e) => {
                e.get_mut().push(job);
                None
            }
            Entry::Vacant(e) => {
                e.insert(Vec::new());
                self.count.store(leaders.len(), Ordering::Release);
                Some(job)
            }
        }
    }

    /// The leader with `key` has run: its followers, in the order they came, to run now. A
    /// job with that key offered from now on leads again.
    pub fn finished(&self, key: u64) -> Vec<T> {
        let mut leaders = lock(&self.leaders);
        let followers = leaders.remove(&key).unwrap_or_default();
        self.count.store(leaders.len(), Ordering::Release);
        followers
    }

    /// Keys in the lane now.
    #[cfg(test)]
    pub fn leaders(&self) -> usize {
        lock(&self.leaders).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_job_of_a_key_leads_and_later_ones_follow_it_in_order() {
        let (a, b) = (10, 20);
        let c = Coalescer::default();
        assert!(!c.any());
        assert_eq!(c.offer(a, 1), Some(1), "nothing with key a in the lane: it leads");
        assert_eq!(c.offer(b, 2), Some(2), "another key leads on its own");
        assert_eq!(c.offer(a, 3), None);
        assert_eq!(c.offer(a, 4), None);
        assert_eq!((c.leaders(), c.any()), (2, true));
        assert_eq!(c.finished(a), vec![3, 4], "followers in the order they came");
        assert_eq!(c.offer(a, 5), Some(5), "after its leader ran, key a leads anew");
        assert_eq!(c.finished(b), Vec::<i32>::new(), "a leader nobody followed");
        assert_eq!(c.finished(a), Vec::<i32>::new());
        assert_eq!((c.leaders(), c.any()), (0, false), "nothing left behind");
    }
}
