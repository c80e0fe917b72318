//! The pathname-translation cache (Flash §5.2): normalised URL path → what the file system
//! said about it (a file, a redirect, a listing, not found). Saves the `stat` walk, and in
//! AMPED a helper round trip, per request. LRU by entry count (Flash used 6000 entries).
//! Negative answers are cached too, under the same one-second staleness bound.
//!
//! The cache is generic over what it keeps (the server keeps a
//! [`crate::disk::translate::Translation`]): it owns the keys, the clock and the eviction, not
//! the meaning of an answer, so `cache/` stays below the code that computes the answers.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// Result of a lookup.
#[derive(Debug)]
pub enum PathLookup<T> {
    /// Checked within the staleness bound.
    Fresh(T),
    /// Cached, but older than the staleness bound: revalidate before use.
    Stale(T),
    /// Not cached.
    Miss,
}

/// URL path → translation `T`, with check times.
pub struct PathCache<T> {
    map: LruCache<String, (T, Instant)>,
    ttl: Duration,
}

impl<T: Clone> PathCache<T> {
    /// A cache of at most `entries` translations, each trusted for `ttl`.
    pub fn new(entries: usize, ttl: Duration) -> Self {
        PathCache { map: LruCache::new(NonZeroUsize::new(entries.max(1)).unwrap()), ttl }
    }

    /// Looks up the translation of `url_path`.
    pub fn get(&mut self, url_path: &str, now: Instant) -> PathLookup<T> {
        match self.map.get(url_path) {
            Some((t, at)) if now.duration_since(*at) < self.ttl => PathLookup::Fresh(t.clone()),
            Some((t, _)) => PathLookup::Stale(t.clone()),
            None => PathLookup::Miss,
        }
    }

    /// Marks the entry for `url_path` as checked at `at` (it was revalidated another way).
    pub fn touch(&mut self, url_path: &str, at: Instant) {
        if let Some((_, checked)) = self.map.get_mut(url_path) {
            *checked = at;
        }
    }

    /// Records a translation checked at `at`.
    pub fn put(&mut self, url_path: String, t: T, at: Instant) {
        self.map.put(url_path, (t, at));
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_staleness_bound_and_lru_evicts() {
        let t0 = Instant::now();
        let mut c = PathCache::new(2, Duration::from_secs(1));
        c.put("/a".into(), "file /r/a", t0);
        assert!(matches!(c.get("/a", t0 + Duration::from_millis(999)), PathLookup::Fresh(_)));
        assert!(matches!(c.get("/a", t0 + Duration::from_secs(1)), PathLookup::Stale("file /r/a")));
        c.touch("/a", t0 + Duration::from_secs(1));
        assert!(matches!(c.get("/a", t0 + Duration::from_millis(1500)), PathLookup::Fresh(_)));
        c.put("/b".into(), "not found", t0);
        c.put("/c".into(), "not found", t0);
        assert_eq!(c.len(), 2);
        assert!(matches!(c.get("/a", t0), PathLookup::Miss), "least recently used entry evicted");
        assert!(matches!(c.get("/b", t0), PathLookup::Fresh("not found")));
    }
}
