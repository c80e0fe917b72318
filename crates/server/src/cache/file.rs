//! The file cache: canonical path → [`FileEntry`] (an open descriptor, its metadata, and for
//! small files the body in memory). New Flash replaced Flash's mapped-chunk cache with open
//! descriptors because `sendfile` needs them; keeping them open also means a hit needs no
//! `open`/`stat` in the event loop at all. LRU within an entry cap (descriptors) and a byte
//! budget (in-memory bodies). Entries are `Arc`s: eviction drops only the cache's reference,
//! so a response in flight keeps its descriptor until it is sent.

use amped_sys::files::FileStat;
use lru::LruCache;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// A file's mode and owner: a change to either (`chmod 000`, `chmod 640` under `--user`,
/// `chown`) may take the file away from the server's user, so it invalidates the cached open
/// descriptor, which would otherwise keep serving what the server can no longer open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl Access {
    /// Mode and owner from `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Access {
        Access { mode: meta.mode(), uid: meta.uid(), gid: meta.gid() }
    }
}

/// An open file and what a response needs to know about it.
#[derive(Debug)]
pub struct FileEntry {
    /// Canonical path (the cache key, and the header-cache key).
    pub path: PathBuf,
    /// The open descriptor bodies are sent from.
    pub file: File,
    /// Size at open time (a small body's length when `body` is set).
    pub size: u64,
    /// Modification time.
    pub mtime: SystemTime,
    /// Inode number.
    pub ino: u64,
    /// Device number.
    pub dev: u64,
    /// Who may read it, as of the last check.
    pub access: Access,
    /// The whole body, for files up to `--small-file-bytes` when the file cache is on.
    pub body: Option<Arc<[u8]>>,
    /// Reads of its pages under way on helpers ([`ReadInFlight`]).
    reads: AtomicU32,
    /// Responses under way that met the disk with it ([`ColdTransfer`]).
    cold_transfers: AtomicU32,
    /// The same file opened for direct reads (`--direct-io-above`), once one was wanted;
    /// `None` inside where it cannot be (a file system without direct I/O).
    direct: OnceLock<Option<File>>,
}

/// A read of a file's pages under way on a helper: a fill or read-ahead job holds one from the
/// moment it is asked for until it has run. While any is held, a residency test of that file
/// cannot be trusted — the kernel counts a page as cached from the moment its read starts, so
/// a second response of the same file would find the pages "resident" and its `sendfile`
/// would wait on the loop for the helper's read (DeBox saw ~90 ms such waits behind the IOPS
/// cap, docs/BENCHMARKS.md E5 session 7). [`FileEntry::being_read`] tells the send path. The
/// mark holds the file it marks, so a job that reads a file carries it only here.
#[derive(Debug)]
pub struct ReadInFlight(Counted);

impl ReadInFlight {
    /// A read of `file`'s pages begins (it ends when this is dropped).
    pub fn start(file: Arc<FileEntry>) -> ReadInFlight {
        ReadInFlight(Counted::up(file, |f| &f.reads))
    }

    /// The file being read.
    #[inline]
    pub fn file(&self) -> &Arc<FileEntry> {
        &self.0.file
    }
}

/// A response of a file that met the disk (one of its chunks was cold), from then until the
/// response ends: held by the response. While `--share-large-reads` or more responses hold one
/// for the same file, the page policy reads it through the page cache so they share its pages
/// ([`crate::cache::pages`]).
#[derive(Debug)]
pub struct ColdTransfer {
    /// Held only to be dropped: the count goes down with it.
    _held: Counted,
}

impl ColdTransfer {
    /// A response of `file` met the disk (it stops counting when this is dropped).
    pub fn start(file: Arc<FileEntry>) -> ColdTransfer {
        ColdTransfer { _held: Counted::up(file, |f| &f.cold_transfers) }
    }
}

/// One of a file's counters, raised while this lives: the mark both kinds above are made of.
#[derive(Debug)]
struct Counted {
    file: Arc<FileEntry>,
    counter: fn(&FileEntry) -> &AtomicU32,
}

impl Counted {
    fn up(file: Arc<FileEntry>, counter: fn(&FileEntry) -> &AtomicU32) -> Counted {
        counter(&file).fetch_add(1, Ordering::AcqRel);
        Counted { file, counter }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        (self.counter)(&self.file).fetch_sub(1, Ordering::AcqRel);
    }
}

impl FileEntry {
    /// Builds an entry from an open file's metadata.
    pub fn new(
        path: PathBuf,
        file: File,
        meta: &std::fs::Metadata,
        body: Option<Arc<[u8]>>,
    ) -> Self {
        Self::from_stat(path, file, &FileStat::from(meta), body)
    }

    /// Builds an entry from an open file's metadata, however it was taken (`fstat` by a
    /// helper, `statx` on the ring).
    pub fn from_stat(path: PathBuf, file: File, st: &FileStat, body: Option<Arc<[u8]>>) -> Self {
        let size = body.as_ref().map_or(st.size, |b| b.len() as u64);
        FileEntry {
            path,
            file,
            size,
            mtime: st.mtime,
            ino: st.ino,
            dev: st.dev,
            access: Access { mode: st.mode, uid: st.uid, gid: st.gid },
            body,
            reads: AtomicU32::new(0),
            cold_transfers: AtomicU32::new(0),
            direct: OnceLock::new(),
        }
    }

    /// The file opened a second time for direct reads, on first use
    /// ([`amped_sys::direct::reopen_direct`]: the same inode, no path walk); `None` where the
    /// file system has no direct I/O (the caller reads through the page cache). Only large files
    /// read under memory pressure ever hold this second descriptor.
    pub fn direct_file(&self) -> Option<&File> {
        self.direct.get_or_init(|| amped_sys::direct::reopen_direct(&self.file).ok()).as_ref()
    }

    /// A helper is reading pages of this file for some response right now.
    #[inline]
    pub fn being_read(&self) -> bool {
        self.reads.load(Ordering::Acquire) > 0
    }

    /// How many responses under way met the disk with this file ([`ColdTransfer`]).
    #[inline]
    pub fn cold_transfers(&self) -> u32 {
        self.cold_transfers.load(Ordering::Acquire)
    }

    /// Same file, same version, same access: device, inode, size, mtime, mode and owner all
    /// equal.
    pub fn same_version(&self, other: &FileEntry) -> bool {
        self.dev == other.dev
            && self.ino == other.ino
            && self.size == other.size
            && self.mtime == other.mtime
            && self.access == other.access
    }

    /// The strong ETag of this version.
    pub fn etag(&self) -> String {
        amped_http::make_etag(self.ino, self.size, self.mtime)
    }

    /// Revalidation through the open descriptor: `fstat` reads the in-memory inode (held by the
    /// open file, so it cannot wait for the disk). True when the file is still linked and its
    /// inode, size, mtime, mode and owner are those cached. A deleted or renamed-over file has
    /// no links left; an edited, grown or truncated one has another size or mtime; a `chmod` or
    /// `chown` changes its [`Access`] — then the file is opened again (as the server's user),
    /// and a file the server may no longer read is answered 403.
    pub fn unchanged(&self) -> bool {
        match amped_sys::files::fstat(&self.file) {
            Ok(m) => {
                m.nlink() > 0
                    && m.ino() == self.ino
                    && m.len() == self.size
                    && m.modified().ok() == Some(self.mtime)
                    && Access::of(&m) == self.access
            }
            Err(_) => false,
        }
    }

    fn weight(&self) -> u64 {
        self.body.as_ref().map_or(0, |b| b.len() as u64)
    }
}

/// Result of a lookup.
pub enum FileLookup {
    /// Checked within the staleness bound: use it.
    Fresh(Arc<FileEntry>),
    /// Cached but due for revalidation ([`FileEntry::unchanged`], then [`FileCache::touch`]).
    Stale(Arc<FileEntry>),
    /// Not cached.
    Miss,
}

struct Slot {
    entry: Arc<FileEntry>,
    checked: Instant,
}

/// Canonical path → open file.
pub struct FileCache {
    map: LruCache<PathBuf, Slot>,
    max_entries: usize,
    max_bytes: u64,
    bytes: u64,
    ttl: Duration,
}

impl FileCache {
    /// A cache of at most `max_entries` descriptors and `max_bytes` of in-memory bodies.
    pub fn new(max_entries: usize, max_bytes: u64, ttl: Duration) -> Self {
        FileCache {
            map: LruCache::unbounded(),
            max_entries: max_entries.max(1),
            max_bytes,
            bytes: 0,
            ttl,
        }
    }

    /// Looks `path` up.
    pub fn get(&mut self, path: &std::path::Path, now: Instant) -> FileLookup {
        match self.map.get(path) {
            Some(s) if now.duration_since(s.checked) < self.ttl => {
                FileLookup::Fresh(s.entry.clone())
            }
            Some(s) => FileLookup::Stale(s.entry.clone()),
            None => FileLookup::Miss,
        }
    }

    /// Records a freshly opened file checked at `at` and returns the entry to use: the cached
    /// one if the file has not changed (it keeps its body and header), else `fresh`.
    pub fn put(&mut self, fresh: Arc<FileEntry>, at: Instant) -> Arc<FileEntry> {
        if let Some(slot) = self.map.get_mut(&fresh.path)
            && slot.entry.same_version(&fresh)
        {
            slot.checked = at;
            return slot.entry.clone();
        }
        if let Some(old) = self.map.pop(&fresh.path) {
            self.bytes -= old.entry.weight();
        }
        if fresh.weight() > self.max_bytes {
            // Too big for the budget: serve it, don't keep it.
            return fresh;
        }
        self.bytes += fresh.weight();
        self.map.put(fresh.path.clone(), Slot { entry: fresh.clone(), checked: at });
        while self.map.len() > self.max_entries || self.bytes > self.max_bytes {
            match self.map.pop_lru() {
                Some((_, old)) => self.bytes -= old.entry.weight(),
                None => break,
            }
        }
        fresh
    }

    /// Drops `entry` if it is still the one cached for its path (a newer one stays): a send
    /// found the file no longer as the entry says. True if it was dropped.
    pub fn forget(&mut self, entry: &Arc<FileEntry>) -> bool {
        if !self.map.peek(&entry.path).is_some_and(|slot| Arc::ptr_eq(&slot.entry, entry)) {
            return false;
        }
        if let Some(old) = self.map.pop(&entry.path) {
            self.bytes -= old.entry.weight();
        }
        true
    }

    /// Marks the entry for `path` as checked at `at`.
    pub fn touch(&mut self, path: &std::path::Path, at: Instant) {
        if let Some(slot) = self.map.get_mut(path) {
            slot.checked = at;
        }
    }

    /// Number of open files held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of bodies held in memory.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &std::path::Path, name: &str, content: &[u8], keep_body: bool) -> Arc<FileEntry> {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        let f = File::open(&p).unwrap();
        let meta = f.metadata().unwrap();
        let body = keep_body.then(|| Arc::<[u8]>::from(content));
        Arc::new(FileEntry::new(p, f, &meta, body))
    }

    #[test]
    fn byte_budget_and_entry_cap_evict_least_recently_used() {
        let d = tempfile::tempdir().unwrap();
        let now = Instant::now();
        let mut c = FileCache::new(3, 10, Duration::from_secs(1));
        c.put(entry(d.path(), "a", b"aaaa", true), now);
        c.put(entry(d.path(), "b", b"bbbb", true), now);
        assert_eq!(c.bytes(), 8);
        c.put(entry(d.path(), "c", b"cccc", true), now);
        assert_eq!(c.bytes(), 8, "a evicted to stay within 10 bytes");
        assert!(matches!(c.get(&d.path().join("a"), now), FileLookup::Miss));
        c.put(entry(d.path(), "d", b"", false), now);
        c.put(entry(d.path(), "e", b"", false), now);
        assert_eq!(c.len(), 3, "entry cap");
        let big = entry(d.path(), "big", &[0u8; 64], true);
        assert!(!Arc::ptr_eq(
            &c.put(big, now),
            &c.put(entry(d.path(), "big", &[0u8; 64], true), now)
        ));
        assert!(
            matches!(c.get(&d.path().join("big"), now), FileLookup::Miss),
            "over budget: not kept"
        );
    }

    #[test]
    fn forget_drops_only_the_entry_it_names() {
        let d = tempfile::tempdir().unwrap();
        let now = Instant::now();
        let mut c = FileCache::new(8, 1 << 20, Duration::from_secs(1));
        let old = c.put(entry(d.path(), "x", b"hello", true), now);
        let newer = c.put(entry(d.path(), "x", b"hello, world", true), now);
        assert_eq!(c.bytes(), 12);
        assert!(!c.forget(&old), "a newer entry replaced it");
        assert!(matches!(c.get(&newer.path, now), FileLookup::Fresh(_)));
        assert!(c.forget(&newer));
        assert!(matches!(c.get(&newer.path, now), FileLookup::Miss));
        assert_eq!((c.len(), c.bytes()), (0, 0));
    }

    #[test]
    fn stale_after_ttl_and_unchanged_file_keeps_old_entry() {
        let d = tempfile::tempdir().unwrap();
        let t0 = Instant::now();
        let mut c = FileCache::new(8, 1 << 20, Duration::from_secs(1));
        let first = c.put(entry(d.path(), "x", b"hello", true), t0);
        let later = t0 + Duration::from_secs(2);
        assert!(matches!(c.get(&first.path, later), FileLookup::Stale(_)));
        assert!(first.unchanged());
        // Re-open the unchanged file: the cached entry (and its body) is kept.
        let f = File::open(&first.path).unwrap();
        let meta = f.metadata().unwrap();
        let again = c.put(Arc::new(FileEntry::new(first.path.clone(), f, &meta, None)), later);
        assert!(Arc::ptr_eq(&first, &again));
        assert!(matches!(c.get(&first.path, later), FileLookup::Fresh(_)));
        // A changed file replaces it.
        std::fs::write(&first.path, b"hello, world").unwrap();
        assert!(!first.unchanged(), "size changed");
        let changed = entry(d.path(), "x", b"hello, world", true);
        let got = c.put(changed, later);
        assert_eq!(got.size, 12);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&got.path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!got.unchanged(), "mode changed");
        let reopened = entry(d.path(), "x", b"hello, world", true);
        std::fs::set_permissions(&got.path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let reopened = Arc::new(FileEntry::new(
            got.path.clone(),
            File::open(&got.path).unwrap(),
            &std::fs::metadata(&got.path).unwrap(),
            reopened.body.clone(),
        ));
        assert!(!got.same_version(&reopened), "another mode is another version");
        assert!(reopened.unchanged());
        std::fs::remove_file(&got.path).unwrap();
        assert!(!reopened.unchanged(), "deleted");
    }
}
