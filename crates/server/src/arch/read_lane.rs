//! The read lane's queue: jobs that move file data, new requests and transfers under way
//! served in turn ([`super::turn_queues`], the order io_uring's disk gate keeps too).
//!
//! A single FIFO of jobs serves a large file badly when the disk is the bottleneck: each of
//! its chunks joins the back of the queue, behind every request that arrived since its
//! previous chunk, so a 50 MB transfer queues again and again and can wait past any timeout.
//! Serving the oldest response first instead lets a few long transfers that began earlier take
//! every helper until they end, so small requests arriving meanwhile starve (measured: the p95
//! of a heavy-tailed trace 2.3× FIFO's). So the lane keeps two queues — first chunks of new
//! responses, in arrival order, and chunks of transfers under way — and helpers take from them
//! in turn: neither kind can hold the disk from the other for more than one job per helper. A
//! connection has at most one job queued, so one large file takes at most one helper at a time.
//!
//! Among transfers under way the order is `--transfer-order`: `oldest` (the default) serves
//! the response that began first, so long transfers end sooner; `fair` queues each transfer's
//! next chunk behind those already waiting, so transfers share their turns round-robin. On a
//! heavy-tailed trace `fair` halved the p99 (a medium response's later chunks no longer wait
//! behind every long transfer that began before it) but cost 15-20 % of the throughput and let
//! the longest transfers time out (docs/BENCHMARKS.md §3b). Equal keys keep submission order.
//!
//! With `--transfers-at-once N` at most N transfers under way read at once
//! ([`super::transfer_leases`]); the others keep their places in that order.
//!
//! How many helpers may be at the disk at once is [`DiskConcurrency`]'s bound (deeper while
//! a deeper queue moves more), so that on a disk serving one read at a time the order above is
//! the order the disk sees, rather than its own first-come queue. A helper past the bound
//! waits. The bound is never below `--helpers`: a read stuck on a dead disk or network file
//! system holds one helper, the others go on.

use super::disk_charge::DiskCharge;
use super::disk_concurrency::DiskConcurrency;
use super::disk_pace::{DiskPace, ReadDone};
use super::transfer_leases::{HOLD_FOR, TransferLeases};
use super::turn_queues::TurnQueues;
use crate::config::TransferOrder;
use crate::pipeline::Job;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// A blocking queue of `(token, job)`: new requests and transfers under way in turn.
pub struct ReadLane {
    state: Mutex<State>,
    ready: Condvar,
    order: TransferOrder,
}

struct State {
    /// New responses' first chunks and transfers' chunks, in turn.
    queues: TurnQueues<(u64, Job)>,
    closed: bool,
    /// Jobs being run by helpers now.
    in_service: usize,
    /// How many may be.
    bound: DiskConcurrency,
    /// What the disk's finished reads tell the page policy.
    charge: DiskCharge,
    /// Which transfers under way may read now.
    leases: TransferLeases,
    /// Whether the jobs taken keep leaving others waiting, and how long they take.
    pace: DiskPace,
}

impl ReadLane {
    /// An empty lane serving transfers under way in `order`, `bound` jobs at a time.
    pub fn new(order: TransferOrder, bound: DiskConcurrency) -> ReadLane {
        let charge = DiskCharge::off();
        let leases = TransferLeases::new(0);
        let state = State {
            queues: TurnQueues::new(),
            closed: false,
            in_service: 0,
            bound,
            charge,
            leases,
            pace: DiskPace::default(),
        };
        ReadLane { state: Mutex::new(state), ready: Condvar::new(), order }
    }

    /// The same lane, its finished reads also feeding `charge`.
    pub fn watched_by(self, charge: DiskCharge) -> ReadLane {
        self.lock().charge = charge;
        self
    }

    /// The same lane, at most `n` transfers under way reading at once (0: any number).
    pub fn transfers_at_once(self, n: usize) -> ReadLane {
        self.lock().leases = TransferLeases::new(n);
        self
    }

    /// The most helpers the lane can use at once.
    pub fn max_helpers(&self) -> usize {
        self.lock().bound.max()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job` for `token`; a job without an age counts as beginning now.
    pub fn push(&self, token: u64, job: Job) {
        let continues = job.continues();
        let since = match job.since() {
            Some(since) if !(continues && self.order == TransferOrder::Fair) => since,
            _ => Instant::now(),
        };
        let mut st = self.lock();
        st.queues.push(since, continues, (token, job));
        drop(st);
        self.ready.notify_one();
    }

    /// The next job, waiting for one and for a place under the bound; `None` once the lane
    /// is closed (jobs still queued then are dropped: their connections are going away with
    /// the loop). The caller runs it and then calls [`ReadLane::finished`].
    pub fn pop(&self) -> Option<(u64, Job)> {
        let mut st = self.lock();
        loop {
            if st.closed {
                return None;
            }
            let now = Instant::now();
            if st.in_service < st.bound.limit() {
                let State { queues, leases, .. } = &mut *st;
                if let Some((token, job)) =
                    queues.take_where(|(token, _)| leases.may_read(*token, now))
                {
                    if job.continues() {
                        leases.reading(token, now);
                    }
                    st.in_service += 1;
                    let others_wait = st.queues.len() > 0;
                    st.pace.started(others_wait);
                    let n = st.in_service;
                    st.charge.reads_at_disk(now, n);
                    return Some((token, job));
                }
            }
            st = if st.leases.limits() && st.queues.len() > 0 {
                // Transfers wait for a place that frees itself with time.
                self.ready.wait_timeout(st, HOLD_FOR).unwrap_or_else(|e| e.into_inner()).0
            } else {
                self.ready.wait(st).unwrap_or_else(|e| e.into_inner())
            };
        }
    }

    /// A job of `token` taken with [`ReadLane::pop`] has run: `read` says for how long and
    /// what it moved from the disk.
    pub fn finished(&self, token: u64, read: ReadDone) {
        let bytes = read.bytes;
        let mut st = self.lock();
        if let Some(quick) = st.pace.finished(read) {
            DiskPace::tell(quick, "read lane");
        }
        st.in_service = st.in_service.saturating_sub(1);
        let (before, waiting) = (st.bound.limit(), st.queues.len());
        let now = Instant::now();
        st.leases.read_done(token, now);
        st.bound.finished(now, bytes, waiting);
        let n = st.in_service;
        st.charge.reads_at_disk(now, n);
        let grew = st.bound.limit() > before;
        drop(st);
        if grew {
            self.ready.notify_all();
        } else {
            self.ready.notify_one();
        }
    }

    /// Whether a chunk of a transfer under way waits for a helper.
    pub fn transfers_wait(&self) -> bool {
        self.lock().queues.transfers_wait()
    }

    /// Whether new requests' reads should go before a transfer's pieces asked ahead: the
    /// disk has time to spare and is slow ([`DiskPace::new_reads_first`]).
    pub fn new_reads_first(&self) -> bool {
        self.lock().pace.new_reads_first()
    }

    /// Jobs waiting.
    pub fn len(&self) -> usize {
        self.lock().queues.len()
    }

    /// The bound on jobs at the disk at once, now.
    pub fn bound(&self) -> usize {
        self.lock().bound.limit()
    }

    /// Whether no job waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wakes every waiting helper and makes them return.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::FileEntry;
    use std::sync::Arc;
    use std::time::Duration;

    /// A first read finished at `at` after `took`.
    fn done(at: Instant, took: Duration, bytes: u64) -> ReadDone {
        ReadDone { at, took, bytes, first: true }
    }

    fn read_job(since: Instant, continues: bool) -> Job {
        let path = std::env::current_exe().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let entry = Arc::new(FileEntry::new(path, file, &meta, None));
        let reading = crate::cache::file::ReadInFlight::start(entry);
        Job::ReadAhead { reading, offset: 0, len: 1, since, continues }
    }

    #[test]
    fn new_reads_go_first_while_slow_jobs_leave_nobody_waiting() {
        let lane = ReadLane::new(TransferOrder::Oldest, DiskConcurrency::fixed(4));
        let (t0, slow, quick) =
            (Instant::now(), Duration::from_millis(8), Duration::from_micros(300));
        // One slow job at a time, nobody behind it: a slow disk with time to spare.
        let at = |token: u64| t0 + Duration::from_millis(50) * token as u32;
        for token in 0..100 {
            lane.push(token, read_job(t0, false));
            lane.pop().unwrap();
            lane.finished(token, done(at(token), slow, 1));
        }
        assert!(lane.new_reads_first(), "pieces asked ahead would delay new reads");
        // Quick jobs for ten seconds, still nobody behind: pieces ahead cost little.
        for token in 100..300 {
            lane.push(token, read_job(t0, false));
            lane.pop().unwrap();
            lane.finished(token, done(at(token), quick, 1));
        }
        assert!(!lane.new_reads_first(), "a quick disk");
        // Slow again, and a backlog that never drains: every job taken leaves others waiting.
        for token in 300..600 {
            lane.push(token, read_job(t0, token % 2 == 0));
        }
        for _ in 0..200 {
            let (token, _) = lane.pop().unwrap();
            lane.finished(token, done(at(token), slow, 1));
        }
        assert!(!lane.new_reads_first(), "saturated: every read found a queue");
    }

    #[test]
    fn new_requests_and_transfers_under_way_take_turns() {
        let lane = ReadLane::new(TransferOrder::Oldest, DiskConcurrency::fixed(64));
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Three new requests, in arrival order, and three transfers under way that began
        // earlier, the oldest last.
        lane.push(1, read_job(t0 + ms(30), false));
        lane.push(2, read_job(t0 + ms(31), false));
        lane.push(3, read_job(t0 + ms(32), false));
        lane.push(11, read_job(t0 + ms(5), true));
        lane.push(12, read_job(t0 + ms(5), true));
        lane.push(13, read_job(t0, true));
        assert_eq!(lane.len(), 6);
        let order: Vec<u64> = (0..6).map(|_| lane.pop().unwrap().0).collect();
        assert_eq!(order, [1, 13, 2, 11, 3, 12], "in turn; oldest transfer first; ties in order");
        assert!(lane.is_empty());
        // One kind alone is served without waiting for the other.
        lane.push(4, read_job(t0, false));
        lane.push(5, read_job(t0, false));
        assert_eq!((lane.pop().unwrap().0, lane.pop().unwrap().0), (4, 5));
    }

    #[test]
    fn fair_order_serves_transfers_under_way_in_the_order_they_queued() {
        let lane = ReadLane::new(TransferOrder::Fair, DiskConcurrency::fixed(64));
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // A small response's last chunk queues after a long transfer that began long before:
        // in fair order it is not kept behind it, nor behind older transfers queued later.
        lane.push(21, read_job(t0 + ms(40), true));
        lane.push(22, read_job(t0, true));
        lane.push(23, read_job(t0 + ms(10), true));
        let order: Vec<u64> = (0..3).map(|_| lane.pop().unwrap().0).collect();
        assert_eq!(order, [21, 22, 23]);
        // New requests still take turns with them, in arrival order.
        lane.push(31, read_job(t0 + ms(50), false));
        lane.push(24, read_job(t0, true));
        lane.push(32, read_job(t0 + ms(60), false));
        let order: Vec<u64> = (0..3).map(|_| lane.pop().unwrap().0).collect();
        assert_eq!(order, [31, 24, 32]);
    }

    #[test]
    fn helpers_past_the_bound_wait_for_a_job_to_finish() {
        let lane = Arc::new(ReadLane::new(TransferOrder::Oldest, DiskConcurrency::fixed(2)));
        let t0 = Instant::now();
        for token in 1..=3 {
            lane.push(token, read_job(t0, false));
        }
        // Job 1 is stuck (a dead disk): it holds its slot, and job 2 goes beside it.
        assert_eq!(lane.pop().unwrap().0, 1);
        assert_eq!(lane.pop().unwrap().0, 2);
        let third = {
            let lane = lane.clone();
            std::thread::spawn(move || (lane.pop().unwrap().0, Instant::now()))
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!third.is_finished(), "two jobs at the disk at a time");
        let freed = Instant::now();
        lane.finished(1, done(Instant::now(), Duration::ZERO, 4096));
        let (token, at) = third.join().unwrap();
        assert_eq!(token, 3);
        assert!(at.duration_since(freed) < Duration::from_millis(100), "the next one goes");
    }

    #[test]
    fn one_transfer_at_once_reads_until_it_stops_coming_back() {
        let lane = Arc::new(
            ReadLane::new(TransferOrder::Oldest, DiskConcurrency::fixed(64)).transfers_at_once(1),
        );
        let t0 = Instant::now();
        lane.push(1, read_job(t0, true));
        lane.push(2, read_job(t0, true));
        assert_eq!(lane.pop().unwrap().0, 1, "the oldest transfer reads");
        let second = {
            let lane = lane.clone();
            std::thread::spawn(move || (lane.pop().unwrap().0, Instant::now()))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!second.is_finished(), "transfer 2 waits while 1 reads");
        lane.finished(1, done(Instant::now(), Duration::ZERO, 4096));
        lane.push(1, read_job(t0, true)); // 1 sent its chunk and comes back at once
        let freed = Instant::now();
        let (token, at) = second.join().unwrap();
        assert_eq!(token, 1, "1 keeps its place");
        lane.finished(1, done(Instant::now(), Duration::ZERO, 4096)); // its last chunk: it does not come back
        let waited = {
            let lane = lane.clone();
            std::thread::spawn(move || (lane.pop().unwrap().0, Instant::now()))
        };
        let (token2, at2) = waited.join().unwrap();
        assert_eq!(token2, 2, "2 reads once 1's place lapsed");
        assert!(at2.duration_since(at) >= HOLD_FOR && at2.duration_since(freed) < 10 * HOLD_FOR);
    }

    #[test]
    fn close_releases_a_waiting_helper() {
        let lane = Arc::new(ReadLane::new(TransferOrder::Oldest, DiskConcurrency::fixed(64)));
        let waiter = {
            let lane = lane.clone();
            std::thread::spawn(move || lane.pop().is_none())
        };
        std::thread::sleep(Duration::from_millis(20));
        lane.close();
        assert!(waiter.join().unwrap(), "pop returns None once closed");
    }
}
