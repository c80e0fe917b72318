//! The huge pages direct reads go into (`--direct-io-above`), lent to one trip at a time: a
//! helper reads the file's bytes into a page, the loop writes them to the socket from it, and
//! the page goes back to the pool once they are sent. A process makes at most [`PAGES`] of
//! them — as many as the copy budget ([`crate::copy_budget`]) lets direct trips hold at once,
//! so a trip finds one free but in a race with a closing connection — and keeps those it made.
//! A trip that finds none reads into a buffer of its own (ordinary pages: a disk request per
//! 1 MiB instead of per 2 MiB).
//!
//! Why lent pages, not one page per helper with the bytes copied out of it (session 17's
//! version): under a memory cgroup every byte of these is taken from the page cache. With
//! `auto` disk depth (up to 16 helpers) the helpers' pages were 32 MiB of a 128 MiB limit and
//! the buffers the bytes were copied into up to 32 MiB more; lent pages are only as many as
//! trips hold at once, and nothing is copied. Measured on the heavy-tailed log under the IOPS
//! cap (docs/BENCHMARKS.md §3b, session 18): 2 722–2 814 Mb/s against session 17's 2 603–2 628;
//! a pool of 4 pages, the rest in buffers of their own, lost that and more (2 369–2 377).

use amped_sys::direct::{Lent, Pool};

/// Huge pages (2 MiB each) a process may have lent or free at once: the copy budget's worth.
pub const PAGES: usize = (crate::copy_budget::LIMIT / amped_sys::direct::HUGE as u64) as usize;

/// The process's pool.
static POOL: Pool = Pool::new(PAGES);

/// A page for one trip, from the process's pool, if one is free or may still be made.
pub fn lend() -> Option<Lent> {
    POOL.lend()
}
