//! Flash's application-level caches, each in a module of its own and each switchable:
//!
//! * [`path::PathCache`] — URL path → translation result (Flash §5.2);
//! * [`file::FileCache`] — canonical path → open descriptor, metadata and, for small files,
//!   the body itself (New Flash's descriptor cache replacing Flash's mapped chunks, §5.4);
//! * [`header::HeaderCache`] — file version → pre-encoded response header lines (Flash §5.3);
//! * [`pages::PagePolicy`] — not a cache of amped's own but its policy over the kernel's page
//!   cache: under memory pressure large files give their pages back to small ones.
//!
//! **Freshness.** Every entry remembers when its metadata was last checked against the file
//! system. An entry older than `revalidate_after` (1 s) is *stale* and is revalidated before
//! use, so a change to the tree is visible at most one second later:
//!
//! * a stale open file is checked with `fstat` on its descriptor ([`FileEntry::unchanged`]):
//!   the inode is in memory while the file is open, so this cannot wait for the disk and runs
//!   in the event loop. Still linked, same inode, size and mtime → the entry is renewed;
//!   edited, grown, truncated, deleted or renamed over → it is dropped and re-resolved by a job;
//! * a stale translation is renewed the same way when it maps the URL straight onto that file
//!   (no symlink, no index file: `root/url == file`); any other stale translation (redirects,
//!   404s, index files, symlinks) goes back through a blocking job (helper in AMPED), which
//!   re-translates and re-opens. If the file's identity is unchanged the old entry is kept (with
//!   its body and header) and only its check time renewed; otherwise it is replaced.
//!
//! The header cache needs no clock of its own: it is keyed by file identity, so a changed file
//! simply misses (Flash: headers are regenerated when the file changes).
//!
//! **Consistency (New Flash's lesson).** A hit in the path cache never implies the file is
//! open or its data resident: a file-cache miss always goes through a job, and data residency
//! is tested separately before each send.

pub mod file;
pub mod header;
pub mod pages;
pub mod path;
pub mod refaults;

use crate::config::Config;
use std::sync::Mutex;

pub use file::{FileCache, FileEntry, FileLookup};
pub use header::HeaderCache;
pub use pages::PagePolicy;
pub use path::{PathCache, PathLookup};

/// The caches of one server instance (shared by its threads; uncontended in event loops);
/// `T` is what the path cache keeps for a URL path.
pub struct Caches<T> {
    /// Path translations, if enabled.
    pub paths: Option<Mutex<PathCache<T>>>,
    /// Open files, if enabled.
    pub files: Option<Mutex<FileCache>>,
    /// Response headers, if enabled.
    pub headers: Option<Mutex<HeaderCache>>,
    /// What stays in the kernel's page cache ([`pages`]).
    pub pages: PagePolicy,
}

impl<T: Clone> Caches<T> {
    /// Builds the caches the configuration turns on.
    pub fn new(cfg: &Config) -> Caches<T> {
        let ttl = cfg.revalidate_after;
        Caches {
            paths: cfg
                .opt
                .path_cache
                .then(|| Mutex::new(PathCache::new(cfg.path_cache_entries, ttl))),
            files: cfg.opt.file_cache.then(|| {
                Mutex::new(FileCache::new(cfg.file_cache_entries, cfg.file_cache_bytes, ttl))
            }),
            headers: cfg
                .opt
                .header_cache
                .then(|| Mutex::new(HeaderCache::new(cfg.file_cache_entries))),
            pages: PagePolicy::with_direct(cfg.page_yield_above, cfg.opt.direct_io_above)
                .with_evidence(cfg.refault_test, cfg.keep_cached_large)
                .sharing_large_reads(cfg.share_large_reads),
        }
    }
}

/// Locks a cache mutex, recovering from poisoning (a cache holds no invariant a panic could
/// break half-way that a later lookup would trust: at worst an entry is missing).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
