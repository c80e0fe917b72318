//! The memory-residency test (Flash §5.7): "would reading these file pages block on the
//! disk?", answered without blocking and without touching the data.
//!
//! Primary mechanism: `cachestat(2)` (Linux ≥ 6.5), which counts the page-cache pages of a
//! byte range of an open descriptor. It suits the sendfile path (New Flash keeps descriptors,
//! not mappings), costs one syscall, copies nothing and needs no mapping. Flash's original
//! `mincore(2)` on a mapping is the fallback for older kernels. `preadv2(RWF_NOWAIT)` was not
//! chosen: it answers only by reading (copying) the data, and a short read says "partly".

use crate::debox::{About, Call};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};

const PAGE: u64 = 4096;
const SYS_CACHESTAT: libc::c_long = 451;

static CACHESTAT_MISSING: AtomicBool = AtomicBool::new(false);

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// True when every page of `file[offset .. offset+len]` is in the page cache.
/// `len` must not reach past the end of the file (the caller knows the size).
#[track_caller]
pub fn is_resident(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    crate::debox::around(Call::Cachestat, About::Fd(file.as_fd()), || {
        test_resident(file, offset, len)
    })
}

fn test_resident(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    let (cached, pages) = count_resident(file, offset, len)?;
    Ok(cached >= pages)
}

/// How many of the pages of `file[offset .. offset+len]` are in the page cache, and how many
/// pages the range has. `len` must not reach past the end of the file.
#[track_caller]
pub fn resident_pages(file: &File, offset: u64, len: u64) -> io::Result<(u64, u64)> {
    crate::debox::around(Call::Cachestat, About::Fd(file.as_fd()), || {
        count_resident(file, offset, len)
    })
}

fn count_resident(file: &File, offset: u64, len: u64) -> io::Result<(u64, u64)> {
    if len == 0 {
        return Ok((0, 0));
    }
    let first = offset / PAGE;
    let last = (offset + len - 1) / PAGE;
    let pages = last - first + 1;
    if !CACHESTAT_MISSING.load(Ordering::Relaxed) {
        match cachestat(file, first * PAGE, pages * PAGE) {
            Ok(cached) => return Ok((cached.min(pages), pages)),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                CACHESTAT_MISSING.store(true, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    Ok((mincore_count(file, first * PAGE, pages)?, pages))
}

fn cachestat(file: &File, off: u64, len: u64) -> io::Result<u64> {
    let range = CachestatRange { off, len };
    let mut out = Cachestat::default();
    // SAFETY: cachestat reads `range` and writes one `struct cachestat` into `out`; both are
    // live, properly laid out (#[repr(C)], the kernel's field order) for the whole call.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut out as *mut Cachestat,
            0u32,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(out.nr_cache) }
}

fn mincore_count(file: &File, off: u64, pages: u64) -> io::Result<u64> {
    let len = (pages * PAGE) as usize;
    // SAFETY: a fresh private read-only mapping of an open file; we never dereference it (no
    // SIGBUS risk), only pass it to mincore, and unmap it before returning.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages as usize];
    // SAFETY: `addr..addr+len` is the mapping made above; `vec` has one byte per page.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly the mapping created above, which nothing else references.
    unsafe { libc::munmap(addr, len) };
    if rc < 0 {
        return Err(err);
    }
    Ok(vec.iter().filter(|b| *b & 1 == 1).count() as u64)
}

/// Drops the file's pages from the page cache (`posix_fadvise(DONTNEED)`): how tests and the
/// lab make a file cold without root. Dirty pages are not dropped, so sync first.
#[track_caller]
pub fn evict(file: &File) -> io::Result<()> {
    crate::debox::around(Call::Fadvise, About::Fd(file.as_fd()), || {
        rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn evicted_file_is_not_resident_and_read_brings_it_back() {
        let dir = std::env::temp_dir().join(format!("amped-res-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        let _ = std::fs::read(&path).unwrap();
        assert!(is_resident(&f, 0, 1 << 20).unwrap());
        evict(&f).unwrap();
        assert!(!is_resident(&f, 0, 1 << 20).unwrap());
        assert_eq!(mincore_count(&f, 0, 256).unwrap(), 0);
        assert_eq!(resident_pages(&f, 0, 1 << 20).unwrap(), (0, 256));
        let mut half = vec![0u8; 1 << 19];
        std::io::Read::read_exact(&mut &f, &mut half).unwrap();
        let (cached, pages) = resident_pages(&f, 0, 1 << 20).unwrap();
        assert!((128..=256).contains(&cached) && pages == 256, "half read: {cached}/{pages}");
        assert_eq!(mincore_count(&f, 0, 128).unwrap(), 128, "the half read is there");
        let _ = std::fs::read(&path).unwrap();
        assert!(is_resident(&f, 4096, 10).unwrap());
        assert!(is_resident(&f, 0, 0).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
