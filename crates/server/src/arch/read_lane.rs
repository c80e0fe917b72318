//! The read lane's queue: jobs that move file data, older responses first within a bound.
//!
//! A FIFO of jobs serves a large file badly when the disk is the bottleneck: each of its
//! chunks joins the back of the queue, behind every request that arrived since the file's
//! previous chunk, so a 50 MB transfer queues again and again and can wait minutes. Ordering
//! by when the *response* began makes a transfer in progress go ahead of newer requests — but
//! without a bound, a few long transfers that began long ago would take every helper until
//! they end. So a job is ordered by its response's start, but never more than
//! [`MAX_HEAD_START`] before the moment it is queued. A connection has at most one job queued,
//! so one large file takes at most one helper at a time. Equal keys keep submission order.

use crate::pipeline::Job;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How far ahead of newer work an older response's job may go. Pure oldest-first lets a few
/// long transfers that began long ago take every helper until they end, so small requests
/// arriving meanwhile starve (measured: p95 of a heavy-tailed trace 2.3× worse than FIFO);
/// pure FIFO queues a large file's every chunk behind everything newer. A bounded advantage
/// keeps both: a transfer under way jumps at most this much of the queue per chunk.
pub(crate) const MAX_HEAD_START: Duration = Duration::from_millis(500);

/// The ordering key of a job queued at `now` for a response that began at `since`: its start,
/// but never more than [`MAX_HEAD_START`] before `now`.
pub(crate) fn queue_key(since: Option<Instant>, now: Instant) -> Instant {
    let floor = now.checked_sub(MAX_HEAD_START).unwrap_or(now);
    since.map_or(now, |s| s.max(floor))
}

/// A blocking queue of `(token, job)` taken in [`queue_key`] order.
#[derive(Default)]
pub struct ReadLane {
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<Aged<(u64, Job)>>>,
    next_seq: u64,
    closed: bool,
}

/// An item ordered by the age of the response it serves, then by when it was queued: the
/// order of both of amped's disk queues (this lane and io_uring's disk gate).
pub(crate) struct Aged<T> {
    since: Instant,
    seq: u64,
    /// What waits.
    pub item: T,
}

impl<T> Aged<T> {
    /// `item`, serving a response that began at `since`, queued as the `seq`-th.
    pub fn new(since: Instant, seq: u64, item: T) -> Aged<T> {
        Aged { since, seq, item }
    }
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

impl ReadLane {
    /// Queues `job` for `token`; a job without an age counts as beginning now.
    pub fn push(&self, token: u64, job: Job) {
        let since = queue_key(job.since(), Instant::now());
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let seq = st.next_seq;
        st.next_seq += 1;
        st.heap.push(Reverse(Aged::new(since, seq, (token, job))));
        drop(st);
        self.ready.notify_one();
    }

    /// The oldest job, waiting for one; `None` once the lane is closed (jobs still queued
    /// then are dropped: their connections are going away with the loop).
    pub fn pop(&self) -> Option<(u64, Job)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.closed {
                return None;
            }
            if let Some(Reverse(q)) = st.heap.pop() {
                return Some(q.item);
            }
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Jobs waiting.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).heap.len()
    }

    /// Whether no job waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wakes every waiting helper and makes them return.
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::FileEntry;
    use std::sync::Arc;
    use std::time::Duration;

    fn read_job(since: Instant) -> Job {
        let path = std::env::current_exe().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let entry = Arc::new(FileEntry::new(path, file, &meta, None));
        Job::ReadAhead { file: entry, offset: 0, len: 1, since }
    }

    #[test]
    fn the_oldest_response_goes_first_and_equal_ages_keep_their_order() {
        let lane = ReadLane::default();
        let t0 = Instant::now();
        lane.push(1, read_job(t0 + Duration::from_millis(30)));
        lane.push(2, read_job(t0 + Duration::from_millis(10)));
        lane.push(3, read_job(t0 + Duration::from_millis(10)));
        lane.push(4, read_job(t0));
        assert_eq!(lane.len(), 4);
        let order: Vec<u64> = (0..4).map(|_| lane.pop().unwrap().0).collect();
        assert_eq!(order, [4, 2, 3, 1]);
        assert!(lane.is_empty());
    }

    #[test]
    fn an_old_response_jumps_at_most_the_head_start() {
        let now = Instant::now() + Duration::from_secs(10);
        let long_ago = now - Duration::from_secs(5);
        assert_eq!(queue_key(Some(long_ago), now), now - MAX_HEAD_START);
        let recent = now - Duration::from_millis(100);
        assert_eq!(queue_key(Some(recent), now), recent);
        assert_eq!(queue_key(None, now), now);
    }

    #[test]
    fn close_releases_a_waiting_helper() {
        let lane = Arc::new(ReadLane::default());
        let waiter = {
            let lane = lane.clone();
            std::thread::spawn(move || lane.pop().is_none())
        };
        std::thread::sleep(Duration::from_millis(20));
        lane.close();
        assert!(waiter.join().unwrap(), "pop returns None once closed");
    }
}
