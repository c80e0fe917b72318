//! Reading file data around the page cache (`O_DIRECT`) into memory backed by a huge page.
//!
//! A block device takes a direct read as one request per run of physically contiguous
//! memory: into ordinary 4 KiB pages a 4 MiB read leaves as 1 MiB requests or smaller (a
//! request holds at most 256 separate pages), into one 2 MiB huge page as a single 2 MiB
//! request. Where every request counts — an IOPS-capped volume — that is the difference. Direct
//! reads also bring nothing into the page cache, so no read-ahead window is read and then
//! reclaimed unused, and nothing that was read can be taken back before it is sent.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The alignment direct reads keep, in the file and in memory: the page size, which every
/// common block device's logical block size divides.
pub const ALIGN: u64 = 4096;

/// The size of a huge page (and of a [`HugeBuf`]).
pub const HUGE: usize = 2 << 20;

/// Whether a file on device `dev` (its `st_dev`) lives on a block device, where a direct read
/// becomes one large disk request. Not where the device number is anonymous (major 0: FUSE,
/// NFS, tmpfs, overlayfs, btrfs subvolumes): there a direct read goes to the file system in its
/// own pieces — FUSE's of 128 KiB — with no read-ahead, slower than through the page cache.
pub fn on_block_device(dev: u64) -> bool {
    libc::major(dev) != 0
}

/// Opens `path` for direct reads. Fails where the file system has no direct I/O (`EINVAL`
/// from tmpfs, for example): the caller then reads through the page cache.
pub fn open_direct(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT | libc::O_NOATIME)
        .open(path)
        .or_else(|_| std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path))
}

/// [`HUGE`] bytes aligned to a huge-page boundary, advised as huge-page memory and touched, so
/// that (if the kernel had a huge page to give) one direct read into it is one disk request.
pub struct HugeBuf {
    /// The allocation: [`HUGE`] bytes more than needed, so an aligned run fits.
    mem: Vec<u8>,
    /// Where the aligned run starts in `mem`.
    start: usize,
}

impl std::fmt::Debug for HugeBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeBuf").field("start", &self.start).finish()
    }
}

impl Default for HugeBuf {
    fn default() -> Self {
        HugeBuf::new()
    }
}

impl HugeBuf {
    /// Allocates and touches the buffer (2 MiB of memory, 4 MiB of address space).
    pub fn new() -> HugeBuf {
        let mut mem = vec![0u8; 2 * HUGE];
        let start = (HUGE - mem.as_ptr() as usize % HUGE) % HUGE;
        let run = &mut mem[start..start + HUGE];
        advise_huge(run);
        // Touch every page after the advice, so the faults take the huge page now.
        for page in run.chunks_mut(ALIGN as usize) {
            page[0] = 1;
        }
        std::hint::black_box(&mut mem);
        HugeBuf { mem, start }
    }

    /// The aligned bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.mem[self.start..self.start + HUGE]
    }

    /// The aligned bytes, to read into.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.mem[self.start..self.start + HUGE]
    }
}

/// `madvise(MADV_HUGEPAGE)` on `run`; a kernel without transparent huge pages refuses, which
/// leaves ordinary pages (direct reads still work, in smaller requests).
fn advise_huge(run: &mut [u8]) {
    // SAFETY: the advice concerns memory this slice borrows mutably for the call; it changes
    // only how the kernel backs the pages, never their contents or the mapping itself.
    let _ = unsafe {
        rustix::mm::madvise(run.as_mut_ptr().cast(), run.len(), rustix::mm::Advice::LinuxHugepage)
    };
}

/// Huge pages lent to one read at a time and kept for the next once given back: at most
/// `limit` exist or are promised at once. The server sets the limit (`huge_pool.rs`); the ring
/// can own a lent page while the kernel reads into it.
#[derive(Debug)]
pub struct Pool {
    limit: usize,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    free: Vec<HugeBuf>,
    /// Pages made, or promised to a borrower who makes it on first use.
    counted: usize,
}

impl Pool {
    /// A pool of at most `limit` pages.
    pub const fn new(limit: usize) -> Pool {
        Pool { limit, state: Mutex::new(PoolState { free: Vec::new(), counted: 0 }) }
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        // The lock guards no invariant a panic could break half-way.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A free page, or the right to make one (made by [`Lent::bytes_mut`], outside the pool's
    /// lock: finding and clearing a huge page takes the kernel a while); `None` when `limit`
    /// are lent.
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

/// A page lent by a [`Pool`]; back to it when dropped.
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

/// Opens the file `file` has open a second time, for direct reads, through /proc/self/fd: the
/// same inode whatever became of its path, and no path walk on the disk (the inode is held
/// open). Fails without /proc or where the file system has no direct I/O.
pub fn reopen_direct(file: &File) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    open_direct(Path::new(&path))
}

/// The aligned read that brings `len` bytes of a file from `offset` into one huge page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The file offset the read starts at (aligned).
    pub start: u64,
    /// Where the wanted bytes begin in the page.
    pub skip: usize,
    /// Bytes to read (whole blocks, at most [`HUGE`]).
    pub want: usize,
}

impl Span {
    /// The span for `len` bytes from `offset` (fewer if they do not fit: see [`room_from`]).
    pub fn of(offset: u64, len: u64) -> Span {
        let skip = offset % ALIGN;
        let want = (skip + len).next_multiple_of(ALIGN).min(HUGE as u64);
        Span { start: offset - skip, skip: skip as usize, want: want as usize }
    }
}

/// Bytes from `offset` on that one huge page read from the aligned offset below holds.
pub fn room_from(offset: u64) -> u64 {
    HUGE as u64 - offset % ALIGN
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_span_starts_aligned_below_and_never_passes_a_huge_page() {
        let s = Span::of(ALIGN + 10, 100);
        assert_eq!(s, Span { start: ALIGN, skip: 10, want: ALIGN as usize });
        let full = Span::of(ALIGN + 10, room_from(ALIGN + 10));
        assert_eq!((full.start, full.want), (ALIGN, HUGE));
        assert_eq!(full.want - full.skip, room_from(ALIGN + 10) as usize);
        assert_eq!(Span::of(0, 10 * HUGE as u64).want, HUGE, "one huge page at most");
    }

    #[test]
    fn pages_are_lent_up_to_the_limit_and_come_back_when_dropped() {
        let p: &'static Pool = Box::leak(Box::new(Pool::new(2)));
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

    #[test]
    fn a_direct_read_into_the_buffer_gets_the_file_bytes() {
        // Under /var/tmp: /tmp may be a tmpfs, which has no direct I/O.
        let dir = std::path::PathBuf::from(format!("/var/tmp/amped-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let bytes: Vec<u8> = (0..HUGE / 2 + 12_345).map(|i| (i % 253) as u8).collect();
        std::fs::File::create(&path).unwrap().write_all(&bytes).unwrap();
        let plain = std::fs::File::open(&path).unwrap();
        let Ok(file) = reopen_direct(&plain) else {
            std::fs::remove_dir_all(&dir).unwrap();
            return; // no direct I/O on this file system
        };
        let mut buf = HugeBuf::new();
        assert_eq!(buf.bytes_mut().as_ptr() as usize % HUGE, 0, "aligned to a huge page");
        let n = crate::files::read_at(&file, buf.bytes_mut(), ALIGN).unwrap();
        assert_eq!(
            n,
            bytes.len() - ALIGN as usize,
            "up to the end of the file, which is not aligned"
        );
        assert!(buf.bytes()[..n] == bytes[ALIGN as usize..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
