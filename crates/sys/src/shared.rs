//! Counters shared between processes: an array of `AtomicU64` in a memory file (`memfd`)
//! mapped `MAP_SHARED`, so the `mp` workers — separate processes, re-executed after `fork`
//! — add to counters their parent (and every other worker) sees. The parent creates the file
//! and hands its descriptor to each worker, which maps the same pages.
//!
//! A mapping lives as long as the process (the slice is `'static`): servers create one at
//! start-up and keep it.

use rustix::fs::{MemfdFlags, ftruncate, memfd_create};
use rustix::mm::{MapFlags, ProtFlags, mmap};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU64;

/// Creates a zeroed shared array of `len` counters; returns the descriptor to pass to other
/// processes (close-on-exec: keep it open across `exec` explicitly) and this process's view.
pub fn create_counters(len: usize) -> io::Result<(OwnedFd, &'static [AtomicU64])> {
    let fd = memfd_create("amped-stats", MemfdFlags::CLOEXEC)?;
    ftruncate(&fd, bytes(len)? as u64)?;
    let counters = map_counters(fd.as_fd(), len)?;
    Ok((fd, counters))
}

/// Maps the shared array of `len` counters inherited as descriptor `fd` (checked to be at
/// least that large). The descriptor stays open (the mapping does not need it).
pub fn adopt_counters(fd: RawFd, len: usize) -> io::Result<&'static [AtomicU64]> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the borrow is used only for the fstat and mmap below, which fail with EBADF (no
    // harm) if `fd` is not open; nothing closes it meanwhile.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let size = rustix::fs::fstat(borrowed)?.st_size;
    if size < bytes(len)? as i64 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "shared counters too small"));
    }
    map_counters(borrowed, len)
}

fn bytes(len: usize) -> io::Result<usize> {
    len.checked_mul(size_of::<AtomicU64>())
        .filter(|&b| b > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad counter count"))
}

fn map_counters(fd: BorrowedFd<'_>, len: usize) -> io::Result<&'static [AtomicU64]> {
    let size = bytes(len)?;
    // SAFETY: a fresh mapping (null hint) of `size` bytes of the memory file, which is at
    // least that large (created so, or checked); it aliases no Rust object of this process.
    let ptr = unsafe {
        mmap(
            std::ptr::null_mut(),
            size,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }?;
    // SAFETY: the mapping is page-aligned (so aligned for AtomicU64), `size` bytes long, zero
    // or written only through atomics (every process maps it as AtomicU64s), and never
    // unmapped, so the slice is valid for 'static. Other processes writing concurrently is
    // what atomics are for.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU64>(), len) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_share_the_counters() {
        let (fd, a) = create_counters(4).unwrap();
        let b = adopt_counters(fd.as_raw_fd(), 4).unwrap();
        a[2].fetch_add(5, Ordering::Relaxed);
        assert_eq!(b[2].load(Ordering::Relaxed), 5);
        assert_eq!(b[0].load(Ordering::Relaxed), 0);
        assert!(adopt_counters(fd.as_raw_fd(), 1 << 20).is_err(), "larger than the file");
        assert!(adopt_counters(-1, 4).is_err());
    }
}
