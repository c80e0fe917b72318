//! Cold file reads under io_uring: at most the disk-concurrency bound on the disk at once
//! (adapted to the disk's throughput unless `--disk-concurrency` fixes it, see
//! [`crate::arch::disk_concurrency`]), the others waiting in user space, oldest response first.
//!
//! Without a gate every connection's read goes to the kernel at once, and the disk serves them
//! in arrival order: behind a saturated disk each chunk of a large file queues behind every
//! request that arrived since its previous chunk, so a large transfer can wait minutes (the
//! same unfairness [`crate::arch::read_lane`] removes for AMPED's helpers). Reads of pages
//! already in memory (the residency test says so) never wait here: they complete during
//! submission.

use crate::arch::disk_concurrency::DiskConcurrency;
use crate::arch::read_lane::Aged;
use crate::cache::FileEntry;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A read waiting for a disk slot.
pub(super) struct ColdRead {
    /// The connection's token.
    pub token: u64,
    /// The file, offset and most bytes to read (the buffer is taken when the read starts).
    pub file: Arc<FileEntry>,
    pub offset: u64,
    pub max: usize,
}

/// How far ahead of newer work an older response's job may go (one queue here): pure oldest-first would let long transfers starve new requests, pure FIFO
/// queues a large file's every chunk behind everything newer.
pub(crate) const MAX_HEAD_START: Duration = Duration::from_millis(500);

/// The ordering key of a read queued at `now` for a response that began at `since`: its start,
/// but never more than [`MAX_HEAD_START`] before `now`.
pub(crate) fn queue_key(since: Option<Instant>, now: Instant) -> Instant {
    let floor = now.checked_sub(MAX_HEAD_START).unwrap_or(now);
    since.map_or(now, |s| s.max(floor))
}

/// The gate: slots in use and the reads waiting for one.
pub(super) struct DiskGate {
    bound: DiskConcurrency,
    in_flight: usize,
    seq: u64,
    waiting: BinaryHeap<Reverse<Aged<ColdRead>>>,
}

impl DiskGate {
    /// A gate letting `bound` cold reads run at once.
    pub fn new(bound: DiskConcurrency) -> DiskGate {
        DiskGate { bound, in_flight: 0, seq: 0, waiting: BinaryHeap::new() }
    }

    /// Takes a slot if one is free (then the caller submits the read).
    pub fn try_start(&mut self) -> bool {
        let free = self.in_flight < self.bound.limit();
        self.in_flight += usize::from(free);
        free
    }

    /// Queues a read of the response that began at `since` until a slot frees.
    pub fn wait(&mut self, since: Instant, read: ColdRead) {
        self.seq += 1;
        let key = queue_key(Some(since), Instant::now());
        self.waiting.push(Reverse(Aged::new(key, self.seq, read)));
    }

    /// A cold read finished, having moved `bytes`: its slot frees, and the bound learns
    /// from it.
    pub fn finished(&mut self, bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.bound.finished(Instant::now(), bytes, self.waiting.len());
    }

    /// A slot taken for a read that was abandoned (its connection went): it frees.
    pub fn released(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The oldest waiting read, with a slot taken for it, if a slot is free.
    pub fn next(&mut self) -> Option<ColdRead> {
        if self.in_flight >= self.bound.limit() {
            return None;
        }
        let Reverse(w) = self.waiting.pop()?;
        self.in_flight += 1;
        Some(w.item)
    }

    /// Reads waiting for a slot.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn read(token: u64) -> ColdRead {
        let path = std::env::current_exe().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let file = Arc::new(FileEntry::new(path, file, &meta, None));
        ColdRead { token, file, offset: 0, max: 1 }
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
    fn slots_are_bounded_and_waiting_reads_start_oldest_first() {
        let mut gate = DiskGate::new(DiskConcurrency::fixed(2));
        assert!(gate.try_start() && gate.try_start());
        assert!(!gate.try_start(), "third read must wait");
        let t0 = Instant::now();
        gate.wait(t0 + Duration::from_millis(5), read(1));
        gate.wait(t0, read(2));
        gate.wait(t0 + Duration::from_millis(5), read(3));
        assert_eq!(gate.waiting(), 3);
        assert!(gate.next().is_none(), "no slot free yet");
        gate.finished(1);
        assert_eq!(gate.next().map(|r| r.token), Some(2), "the oldest response first");
        assert!(gate.next().is_none());
        gate.finished(1);
        gate.released();
        assert_eq!(gate.next().map(|r| r.token), Some(1), "equal ages in arrival order");
        assert_eq!(gate.next().map(|r| r.token), Some(3));
        assert!(gate.next().is_none() && gate.waiting() == 0);
    }
}
