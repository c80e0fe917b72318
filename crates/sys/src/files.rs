//! Opening the files amped serves, and the other file-system calls of the request path
//! (`stat`, `fstat`, `canonicalize`, `pread`) as thin wrappers, so that the DeBox profile
//! ([`crate::debox`]) sees them like every other syscall. Only helpers and inline jobs (and the
//! `fstat` of a cached descriptor) call these: most may wait for the disk.

use crate::debox::{About, Call, around};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The flags every file amped serves is opened with, by a blocking [`open_for_serving`] or an
/// `openat` on the ring ([`crate::uring::Ring::open`]): read-only, close-on-exec, and
/// `O_NONBLOCK` (see [`open_for_serving`]).
pub const SERVING_OPEN_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// A file's metadata as the server uses it, whether it came from `fstat` ([`fstat`]) or from a
/// `statx` on the ring, in the units `std::fs::Metadata` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub mtime: SystemTime,
    /// Inode number.
    pub ino: u64,
    /// Device number (`makedev(major, minor)`, as `MetadataExt::dev`).
    pub dev: u64,
    /// A regular file.
    pub is_file: bool,
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl From<&Metadata> for FileStat {
    fn from(m: &Metadata) -> FileStat {
        FileStat {
            size: m.len(),
            mtime: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            ino: m.ino(),
            dev: m.dev(),
            is_file: m.is_file(),
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
        }
    }
}

/// Opens `path` read-only and close-on-exec, with `O_NONBLOCK`: should the path have been
/// swapped for a FIFO since it was translated, the open must not wait for a writer. The flag
/// has no effect on reads of regular files.
#[track_caller]
pub fn open_for_serving(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::from_bits_retain(SERVING_OPEN_FLAGS as _);
    let fd =
        around(Call::Open, About::Path(path), || rustix::fs::open(path, flags, Mode::empty()))?;
    Ok(File::from(fd))
}

/// `fstat` of an open file.
#[track_caller]
pub fn fstat(file: &File) -> io::Result<Metadata> {
    around(Call::Stat, About::Fd(file.as_fd()), || file.metadata())
}

/// `stat` of a path (following symlinks).
#[track_caller]
pub fn stat(path: &Path) -> io::Result<Metadata> {
    around(Call::Stat, About::Path(path), || std::fs::metadata(path))
}

/// `realpath`: the path with every symlink and `..` resolved (a walk of `readlink`s/`stat`s).
#[track_caller]
pub fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    around(Call::Stat, About::Path(path), || std::fs::canonicalize(path))
}

/// The entries of directory `dir` (name and whether it is a directory), read whole: one
/// profiled call for the whole walk, as a listing needs them all. Entries that vanish or
/// cannot be typed while being read are left out.
#[track_caller]
pub fn read_dir(dir: &Path) -> io::Result<Vec<(std::ffi::OsString, bool)>> {
    around(Call::ReadDir, About::Path(dir), || {
        Ok(std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| Some((e.file_name(), e.file_type().ok()?.is_dir())))
            .collect())
    })
}

/// `pread` of up to `buf.len()` bytes at `pos`.
#[track_caller]
pub fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    around(Call::FileRead, About::Fd(file.as_fd()), || file.read_at(buf, pos))
}

/// Asks the kernel to start reading `len` bytes of `file` at `offset` into the page cache
/// (`posix_fadvise(WILLNEED)`) and returns without waiting for them.
#[track_caller]
pub fn will_need(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let len = std::num::NonZeroU64::new(len);
    around(Call::Fadvise, About::Fd(file.as_fd()), || {
        rustix::fs::fadvise(file, offset, len, rustix::fs::Advice::WillNeed)
    })?;
    Ok(())
}

/// Turns the kernel's read-ahead off for this open file (`posix_fadvise(RANDOM)`): its reads
/// then bring in only the pages they ask for. Waits for nothing.
#[track_caller]
pub fn no_read_ahead(file: &File) -> io::Result<()> {
    around(Call::Fadvise, About::Fd(file.as_fd()), || {
        rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random)
    })?;
    Ok(())
}

/// Reads `file` from its current position to its end, or `limit` bytes, whichever is first
/// (`read`s until end of file; counted as one call).
#[track_caller]
pub fn read_up_to(file: &File, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    around(Call::FileRead, About::Fd(file.as_fd()), || {
        let mut buf = Vec::with_capacity(limit.min(1 << 16) as usize);
        file.take(limit).read_to_end(&mut buf).map(|_| buf)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_files_and_fifos_without_waiting() {
        let dir = std::env::temp_dir().join(format!("amped-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"abc").unwrap();
        assert_eq!(open_for_serving(&dir.join("f")).unwrap().metadata().unwrap().len(), 3);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let fifo = open_for_serving(&dir.join("fifo")).unwrap(); // returns at once
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&fifo.metadata().unwrap().file_type()));
        assert!(open_for_serving(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
