//! Cold file reads under io_uring: at most the disk-concurrency bound on the disk at once
//! (adapted to the disk's throughput unless `--disk-concurrency` fixes it, see
//! [`crate::arch::disk_concurrency`]), the others waiting in user space in the read lane's
//! order ([`crate::arch::turn_queues`]: new responses and transfers under way in turn, the
//! oldest transfer first).
//!
//! Without a gate every connection's read goes to the kernel at once, and the disk serves them
//! in arrival order: behind a saturated disk each chunk of a large file queues behind every
//! request that arrived since its previous chunk, so a large transfer can wait minutes (the
//! same unfairness [`crate::arch::read_lane`] removes for AMPED's helpers). A response's reads
//! of pages already in memory (the residency test says so) never wait here — until one of its
//! reads has found the disk: from then on all of them take the gate, because the kernel's
//! read-ahead puts a transfer's next pages in flight, the residency test counts pages in flight
//! as present, and reads let past the gate that way shared the disk among every transfer at
//! once, outside this order.

use super::send::ColdStarted;
use crate::arch::disk_concurrency::DiskConcurrency;
use crate::arch::disk_pace::{DiskPace, ReadDone};
use crate::arch::turn_queues::TurnQueues;
use crate::cache::FileEntry;
use crate::config::TransferOrder;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A read waiting for a disk slot.
pub(super) struct ColdRead {
    /// The connection's token.
    pub token: u64,
    /// The file and offset to read; how much, and whether around the page cache, is decided
    /// when the read starts (and the buffer taken then).
    pub file: Arc<FileEntry>,
    pub offset: u64,
}

/// The gate: slots in use and the reads waiting for one.
pub(super) struct DiskGate {
    bound: DiskConcurrency,
    order: TransferOrder,
    in_flight: usize,
    waiting: TurnQueues<ColdRead>,
    /// Set while a read of a transfer under way waits (the metadata lane's slow gate reads it).
    transfers_wait: Arc<AtomicBool>,
    /// Whether the reads started keep leaving others waiting, and how long they take.
    pace: DiskPace,
}

impl DiskGate {
    /// A gate letting `bound` cold reads run at once, transfers under way in `order`.
    pub fn new(bound: DiskConcurrency, order: TransferOrder) -> DiskGate {
        let transfers_wait = Arc::new(AtomicBool::new(false));
        DiskGate {
            bound,
            order,
            in_flight: 0,
            waiting: TurnQueues::new(),
            transfers_wait,
            pace: DiskPace::default(),
        }
    }

    /// A flag set while a read of a transfer under way waits here, for the helpers' metadata
    /// lane ([`crate::arch::slow_gate`]: slow resolves go one at a time then).
    pub fn transfers_wait_flag(&self) -> Arc<AtomicBool> {
        self.transfers_wait.clone()
    }

    fn note_waiting(&self) {
        self.transfers_wait.store(self.waiting.transfers_wait(), Ordering::Relaxed);
    }

    /// Takes a slot if one is free (then the caller submits the read).
    pub fn try_start(&mut self) -> bool {
        let free = self.in_flight < self.bound.limit();
        self.in_flight += usize::from(free);
        if free {
            self.pace.started(false);
        }
        free
    }

    /// Queues a read of the response that began at `since` until a slot frees (`continues`:
    /// part of its body was sent; `--transfer-order fair` queues those by arrival).
    pub fn wait(&mut self, since: Instant, continues: bool, read: ColdRead) {
        let fair = continues && self.order == TransferOrder::Fair;
        self.waiting.push(if fair { Instant::now() } else { since }, continues, read);
        self.note_waiting();
    }

    /// A cold read `started` finished, having moved `bytes`: its slot frees, and the bound
    /// and the pace learn from it.
    pub fn finished(&mut self, started: ColdStarted, bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let now = Instant::now();
        let took = now.saturating_duration_since(started.at);
        let read = ReadDone { at: now, took, bytes, first: started.first };
        if let Some(quick) = self.pace.finished(read) {
            DiskPace::tell(quick, "disk gate");
        }
        self.bound.finished(now, bytes, self.waiting.len());
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
        let read = self.waiting.take()?;
        self.note_waiting();
        self.pace.started(self.waiting.len() > 0);
        self.in_flight += 1;
        Some(read)
    }

    /// Whether new requests' reads should go before a transfer's pieces asked ahead: the
    /// disk has time to spare and is slow ([`DiskPace::new_reads_first`]).
    pub fn new_reads_first(&self) -> bool {
        self.pace.new_reads_first()
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
        ColdRead { token, file, offset: 0 }
    }

    #[test]
    fn slots_are_bounded_and_waiting_reads_start_oldest_first() {
        let mut gate = DiskGate::new(DiskConcurrency::fixed(2), TransferOrder::Oldest);
        assert!(gate.try_start() && gate.try_start());
        assert!(!gate.try_start(), "third read must wait");
        let t0 = Instant::now();
        let flag = gate.transfers_wait_flag();
        assert!(!flag.load(Ordering::Relaxed));
        gate.wait(t0 + Duration::from_millis(5), true, read(1));
        gate.wait(t0, true, read(2));
        gate.wait(t0 + Duration::from_millis(5), true, read(3));
        assert!(flag.load(Ordering::Relaxed), "transfers wait: the metadata lane is told");
        assert_eq!(gate.waiting(), 3);
        assert!(gate.next().is_none(), "no slot free yet");
        gate.finished(ColdStarted { at: Instant::now(), first: true }, 1);
        assert_eq!(gate.next().map(|r| r.token), Some(2), "the oldest transfer first");
        assert!(gate.next().is_none());
        gate.finished(ColdStarted { at: Instant::now(), first: true }, 1);
        gate.released();
        assert_eq!(gate.next().map(|r| r.token), Some(1), "equal ages in arrival order");
        assert_eq!(gate.next().map(|r| r.token), Some(3));
        assert!(gate.next().is_none() && gate.waiting() == 0);
        assert!(!flag.load(Ordering::Relaxed), "none waits any more");
    }
}
