//! The FUSE file system: a read-only passthrough of a source directory whose disk accesses
//! (READ, LOOKUP, GETATTR) wait on the emulated [`Disk`]. Everything else (open, release,
//! readdir, readlink, statfs) is answered at once on the session thread; writes get EROFS (from
//! the kernel: the mount is read-only).
//!
//! Kernel caching stays on: file data lives in the page cache (`FOPEN_KEEP_CACHE`, so an open
//! does not drop it) and entries and attributes are cached for `ttl`, so only misses reach the
//! daemon, as only page-cache misses reach a disk.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, Request,
};

use super::model::{Disk, Done, Op};

/// The inode table: our inode numbers (1 = the source root) and the source paths they name.
/// Inodes are never forgotten (a data set has thousands of files, not millions).
#[derive(Debug)]
pub struct Nodes {
    table: RwLock<Table>,
}

#[derive(Debug)]
struct Table {
    /// `nodes[ino - 1]`.
    nodes: Vec<Node>,
    by_path: HashMap<PathBuf, u64>,
}

#[derive(Debug)]
struct Node {
    path: PathBuf,
    parent: u64,
    name: OsString,
}

impl Nodes {
    /// A table holding only the root.
    pub fn new(root: PathBuf) -> Nodes {
        let mut by_path = HashMap::new();
        by_path.insert(root.clone(), 1);
        let nodes = vec![Node { path: root, parent: 1, name: OsString::new() }];
        Nodes { table: RwLock::new(Table { nodes, by_path }) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The source path of `ino`.
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let t = self.read();
        t.nodes.get(usize::try_from(ino).ok()?.checked_sub(1)?).map(|n| n.path.clone())
    }

    /// The inode of `parent`'s entry `name` (numbered on first sight).
    pub fn intern(&self, parent: u64, name: &OsStr, path: PathBuf) -> u64 {
        if let Some(&ino) = self.read().by_path.get(&path) {
            return ino;
        }
        let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(&ino) = t.by_path.get(&path) {
            return ino;
        }
        t.nodes.push(Node { path: path.clone(), parent, name: name.to_os_string() });
        let ino = t.nodes.len() as u64;
        t.by_path.insert(path, ino);
        ino
    }

    /// Every inode but the root, with its parent and name.
    pub fn entries(&self) -> Vec<(u64, u64, OsString)> {
        let t = self.read();
        t.nodes
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, n)| (i as u64 + 1, n.parent, n.name.clone()))
            .collect()
    }

    /// The inode of an already known path.
    fn intern_known(&self, path: &Path) -> Option<u64> {
        self.read().by_path.get(path).copied()
    }
}

/// The file system handed to fuser.
pub struct SlowFs {
    disk: Disk,
    nodes: Arc<Nodes>,
    ttl: Duration,
    max_read: u32,
    files: Mutex<HashMap<u64, Arc<File>>>,
    next_fh: AtomicU64,
}

impl SlowFs {
    pub fn new(disk: Disk, nodes: Arc<Nodes>, ttl: Duration, max_read: u32) -> SlowFs {
        SlowFs {
            disk,
            nodes,
            ttl,
            max_read,
            files: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<File>>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The source path of `parent`'s entry `name`, if `name` is a plain file name.
    fn child(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        let b = name.as_bytes();
        if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
            return None;
        }
        Some(self.nodes.path(parent)?.join(name))
    }
}

/// fuser's attributes of a source file, under our inode number.
pub fn attr_of(ino: u64, md: &Metadata) -> Option<FileAttr> {
    Some(FileAttr {
        ino: INodeNo(ino),
        size: md.size(),
        blocks: md.blocks(),
        atime: time(md.atime(), md.atime_nsec()),
        mtime: time(md.mtime(), md.mtime_nsec()),
        ctime: time(md.ctime(), md.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: FileType::from_std(md.file_type())?,
        perm: (md.mode() & 0o7777) as u16,
        nlink: u32::try_from(md.nlink()).unwrap_or(u32::MAX),
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: 4096,
        flags: 0,
    })
}

fn time(secs: i64, nsec: i64) -> SystemTime {
    let nsec = u32::try_from(nsec.clamp(0, 999_999_999)).unwrap_or(0);
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs.unsigned_abs(), nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// Reads up to `len` bytes at `offset` (fewer only at the end of the file).
pub fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

fn errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_i32)
}

impl Filesystem for SlowFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Readahead no larger than one request (a 2004 disk's readahead), and room for many
        // queued background (readahead) requests.
        if let Err(max) = config.set_max_readahead(self.max_read) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(64);
        // Lookups in one directory in parallel, as a local file system does them (the FUSE
        // default serializes them per directory: concurrent first requests for files of one
        // directory then waited for each other's lookups in the kernel before reaching the
        // emulated disk, an order no real disk imposes; docs/BENCHMARKS.md §3b, session 9).
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(path) = self.child(parent.0, name) else {
            reply.error(Errno::ENOENT);
            return;
        };
        let (nodes, ttl, name) = (self.nodes.clone(), self.ttl, name.to_os_string());
        self.disk.submit(Op::Meta, move || {
            let answer = fs::symlink_metadata(&path).map_err(|e| errno(&e)).and_then(|md| {
                let ino = nodes.intern(parent.0, &name, path);
                attr_of(ino, &md).ok_or(Errno::EIO)
            });
            Done {
                bytes: 0,
                reply: Box::new(move || match answer {
                    Ok(attr) => reply.entry(&ttl, &attr, Generation(0)),
                    Err(e) => reply.error(e),
                }),
            }
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let Some(path) = self.nodes.path(ino.0) else {
            reply.error(Errno::ENOENT);
            return;
        };
        let ttl = self.ttl;
        self.disk.submit(Op::Meta, move || {
            let answer = fs::symlink_metadata(&path)
                .map_err(|e| errno(&e))
                .and_then(|md| attr_of(ino.0, &md).ok_or(Errno::EIO));
            Done {
                bytes: 0,
                reply: Box::new(move || match answer {
                    Ok(attr) => reply.attr(&ttl, &attr),
                    Err(e) => reply.error(e),
                }),
            }
        });
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.nodes.path(ino.0).map(fs::read_link) {
            Some(Ok(target)) => reply.data(target.as_os_str().as_bytes()),
            Some(Err(e)) => reply.error(errno(&e)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & o_trunc() != 0 {
            reply.error(Errno::EROFS);
            return;
        }
        let Some(path) = self.nodes.path(ino.0) else {
            reply.error(Errno::ENOENT);
            return;
        };
        match File::open(&path) {
            Ok(file) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.files().insert(fh, Arc::new(file));
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(file) = self.files().get(&fh.0).cloned() else {
            reply.error(Errno::EBADF);
            return;
        };
        self.disk.submit(Op::Read, move || match read_at(&file, offset, size as usize) {
            Ok(data) => {
                Done { bytes: data.len() as u64, reply: Box::new(move || reply.data(&data)) }
            }
            Err(e) => {
                let e = errno(&e);
                Done { bytes: 0, reply: Box::new(move || reply.error(e)) }
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.files().remove(&fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(dir) = self.nodes.path(ino.0) else {
            reply.error(Errno::ENOENT);
            return;
        };
        let mut names: Vec<(OsString, FileType)> = match fs::read_dir(&dir) {
            Ok(it) => it
                .flatten()
                .filter_map(|e| {
                    let kind = FileType::from_std(e.file_type().ok()?)?;
                    Some((e.file_name(), kind))
                })
                .collect(),
            Err(e) => {
                reply.error(errno(&e));
                return;
            }
        };
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let parent = if ino == INodeNo::ROOT {
            1
        } else {
            dir.parent().and_then(|p| self.nodes.intern_known(p)).unwrap_or(1)
        };
        let mut all = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (parent, FileType::Directory, OsString::from("..")),
        ];
        for (name, kind) in names {
            let child = self.nodes.intern(ino.0, &name, dir.join(&name));
            all.push((child, kind, name));
        }
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let Some(root) = self.nodes.path(1) else {
            reply.error(Errno::EIO);
            return;
        };
        match rustix::fs::statvfs(&root) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                u32::try_from(s.f_bsize).unwrap_or(4096),
                u32::try_from(s.f_namemax).unwrap_or(255),
                u32::try_from(s.f_frsize).unwrap_or(4096),
            ),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    // Changes (setattr, mknod, mkdir, unlink, rename, write, create, xattrs, fallocate …) never
    // reach the daemon: the mount is read-only (`MountOption::RO`), so the kernel refuses them
    // with EROFS itself (tests/slowdisk.rs checks a write).
}

/// `O_TRUNC` (the kernel passes it to open only with atomic_o_trunc, which is not requested;
/// checked anyway).
fn o_trunc() -> i32 {
    rustix::fs::OFlags::TRUNC.bits() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_inodes_once_per_path() {
        let nodes = Nodes::new("/src".into());
        assert_eq!(nodes.path(1), Some(PathBuf::from("/src")));
        let a = nodes.intern(1, OsStr::new("a"), "/src/a".into());
        let b = nodes.intern(a, OsStr::new("b"), "/src/a/b".into());
        assert_eq!((a, b), (2, 3));
        assert_eq!(nodes.intern(1, OsStr::new("a"), "/src/a".into()), 2);
        assert_eq!(nodes.path(3), Some(PathBuf::from("/src/a/b")));
        assert_eq!(nodes.path(0), None);
        assert_eq!(nodes.path(9), None);
        assert_eq!(nodes.entries(), vec![(2, 1, OsString::from("a")), (3, 2, OsString::from("b"))]);
    }

    #[test]
    fn reads_whole_ranges_and_short_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(&p, (0..=255u8).cycle().take(10_000).collect::<Vec<_>>()).unwrap();
        let f = File::open(&p).unwrap();
        let d = read_at(&f, 100, 1000).unwrap();
        assert_eq!(d.len(), 1000);
        assert_eq!(d[0], 100);
        assert_eq!(read_at(&f, 9_500, 4096).unwrap().len(), 500);
        assert!(read_at(&f, 20_000, 10).unwrap().is_empty());
        let md = fs::metadata(&p).unwrap();
        let a = attr_of(7, &md).unwrap();
        assert_eq!((a.ino, a.size, a.kind), (INodeNo(7), 10_000, FileType::RegularFile));
        assert_eq!(u32::from(a.perm), md.mode() & 0o7777);
    }
}
