//! Which cold files are cold *again*: the page policy's evidence that memory is short.
//!
//! A file found not in the page cache is either read for the first time since the cache was
//! empty (a compulsory miss: the disk must be read whatever the memory) or was read before and
//! has been evicted since (a refault: the memory could not keep it). Only the second says the
//! data set is larger than memory. Taking every miss as pressure, as the page policy did, kept
//! it "under pressure" for as long as any file was still being read for the first time — on a
//! data set that fits in memory, the whole warm-up and the long tail of rarely asked files
//! after it — and large files were read around the page cache all that time, so they never
//! became cached (a set of small files and three popular 40 MB files in 128 MiB behind the
//! IOPS cap: amped 5 200–6 000 Mb/s, h2o, which leaves it to the page cache, 8 200, amped
//! without direct reads 11 000; docs/BENCHMARKS.md §3b, session 25).
//!
//! The kernel tells refaults apart with shadow entries left where an evicted page was; this
//! does the same at the grain of a file, for the files whose misses are evidence: a fixed table
//! of fingerprints of (device, inode) of every file known to have been in the page cache — sent
//! to its end (every page of it was there then), or its small body read. A file found cold
//! whose fingerprint is there was in memory and is gone again: a refault. The chunks of a
//! file's first transfer are not marked before it ends, so they are not taken for refaults of
//! each other. A slot taken over by another file forgets the first (its next miss counts as a
//! first one): the table errs towards less evidence, never more.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots in the table (a power of two): files found cold whose second miss is recognised.
const SLOTS: usize = 1 << 16;

/// The files known to have been in the page cache (shared by a server instance's threads).
#[derive(Debug)]
pub struct WasCached {
    slots: Box<[AtomicU64]>,
}

impl Default for WasCached {
    fn default() -> Self {
        WasCached { slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl WasCached {
    /// The file `(dev, ino)` was in the page cache whole (sent to its end, or read into
    /// memory). Writes only when the slot holds another file, so files sent again and again
    /// cost a read.
    pub fn mark(&self, dev: u64, ino: u64) {
        let fp = fingerprint(dev, ino);
        let slot = self.slot(fp);
        if slot.load(Ordering::Relaxed) != fp {
            slot.store(fp, Ordering::Relaxed);
        }
    }

    /// The file `(dev, ino)`, found not in the page cache, had been in it: a refault.
    pub fn refault(&self, dev: u64, ino: u64) -> bool {
        let fp = fingerprint(dev, ino);
        self.slot(fp).load(Ordering::Relaxed) == fp
    }

    fn slot(&self, fp: u64) -> &AtomicU64 {
        &self.slots[(fp as usize) & (SLOTS - 1)]
    }
}

/// A nonzero 64-bit mix of a file's identity (splitmix64's finaliser over both numbers).
fn fingerprint(dev: u64, ino: u64) -> u64 {
    let mut x = ino ^ dev.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_known_to_have_been_cached_refaults() {
        let seen = WasCached::default();
        assert!(!seen.refault(2049, 17), "read for the first time");
        assert!(!seen.refault(2049, 17), "nor is its second chunk a refault");
        seen.mark(2049, 17);
        assert!(seen.refault(2049, 17), "sent whole, and cold again");
        seen.mark(2049, 17);
        assert!(seen.refault(2049, 17));
        assert!(!seen.refault(2049, 18), "another file");
        assert!(!seen.refault(2050, 17), "the same inode on another device");
    }

    #[test]
    fn many_files_are_told_apart() {
        let seen = WasCached::default();
        (0..10_000u64).for_each(|ino| seen.mark(7, ino));
        let again = (0..10_000u64).filter(|&ino| seen.refault(7, ino)).count();
        assert!(again >= 8_000, "most are remembered: {again}");
        let strangers = (10_000..20_000u64).filter(|&ino| seen.refault(7, ino)).count();
        assert_eq!(strangers, 0, "no file never marked is taken for one");
    }
}
