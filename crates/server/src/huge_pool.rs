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

use amped_sys::direct::HugeBuf;
use std::sync::{Mutex, MutexGuard};

/// Huge pages (2 MiB each) a process may have lent or free at once: the copy budget's worth.
pub const PAGES: usize = (crate::copy_budget::LIMIT / amped_sys::direct::HUGE as u64) as usize;

/// Pages free to lend, and how many exist or are lent out.
#[derive(Debug)]
pub struct Pool {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<HugeBuf>,
    /// Pages made, or promised to a borrower who makes it on first use.
    counted: usize,
}

/// The process's pool.
static POOL: Pool = Pool::new(PAGES);

/// A page for one trip, from the process's pool, if one is free or may still be made.
pub fn lend() -> Option<Lent> {
    POOL.lend()
}

impl Pool {
    /// A pool of at most `limit` pages.
    pub const fn new(limit: usize) -> Pool {
        Pool { limit, state: Mutex::new(State { free: Vec::new(), counted: 0 }) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The lock guards no invariant a panic could break half-way.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A free page, or the right to make one (made by [`Lent::bytes_mut`], outside the pool's
    /// lock: finding and clearing a huge page takes the kernel a while); `None` when all
    /// [`Pool::new`]'s `limit` are lent.
    pub fn lend(&'static self) -> Option<Lent> {
        let mut state = self.state();
        if let Some(page) = state.free.pop() {
            return Some(Lent { page: Some(page), pool: self });
        }
        (state.counted < self.limit).then(|| {
            state.counted += 1;
            Lent { page: None, pool: self }
        })
    }

    /// Pages free now.
    pub fn free(&self) -> usize {
        self.state().free.len()
    }
}

/// A page lent to one trip; back to the pool when dropped.
#[derive(Debug)]
pub struct Lent {
    page: Option<HugeBuf>,
    pool: &'static Pool,
}

impl Lent {
    /// The page's bytes, to read into; the page is made first if it was not yet.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.page.get_or_insert_with(HugeBuf::new).bytes_mut()
    }

    /// The page's bytes (none if it was never made).
    pub fn bytes(&self) -> &[u8] {
        self.page.as_ref().map_or(&[], HugeBuf::bytes)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let mut state = self.pool.state();
        match self.page.take() {
            Some(page) => state.free.push(page),
            None => state.counted -= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(limit: usize) -> &'static Pool {
        Box::leak(Box::new(Pool::new(limit)))
    }

    #[test]
    fn pages_are_lent_up_to_the_limit_and_come_back_when_dropped() {
        let p = pool(2);
        let mut a = p.lend().expect("first");
        let b = p.lend().expect("second");
        assert!(p.lend().is_none(), "never more than the limit");
        a.bytes_mut()[0] = 7;
        drop(a);
        assert_eq!(p.free(), 1, "a made page is kept");
        let again = p.lend().expect("the page given back");
        assert_eq!(again.bytes()[0], 7, "the same page, not a new one");
        drop(b);
        assert_eq!(p.free(), 0, "a page never made is not kept, only its place freed");
        let _c = p.lend().expect("its place");
        assert!(p.lend().is_none());
    }
}
