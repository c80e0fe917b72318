//! The response-header cache (Flash §5.3): file version → the pre-encoded header lines every
//! 200/206/304 for that file shares (Server, Content-Type, Last-Modified, ETag,
//! Accept-Ranges). Building them costs a MIME lookup and two formatting passes; a hit is one
//! hash lookup and a copy. Keyed by path and checked against the file's identity, so a changed
//! file rebuilds its header and no separate invalidation is needed.

use super::FileEntry;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

type Version = (u64, u64, u64, SystemTime);

/// Path → (file version, header lines).
pub struct HeaderCache {
    map: LruCache<PathBuf, (Version, Arc<[u8]>)>,
}

impl HeaderCache {
    /// A cache of at most `entries` headers.
    pub fn new(entries: usize) -> Self {
        HeaderCache { map: LruCache::new(NonZeroUsize::new(entries.max(1)).unwrap()) }
    }

    /// The header lines for `f`, if cached for this version of the file.
    pub fn get(&mut self, f: &FileEntry) -> Option<Arc<[u8]>> {
        match self.map.get(&f.path) {
            Some((v, lines)) if *v == version(f) => Some(lines.clone()),
            _ => None,
        }
    }

    /// Stores the header lines for `f`.
    pub fn put(&mut self, f: &FileEntry, lines: Arc<[u8]>) {
        self.map.put(f.path.clone(), (version(f), lines));
    }
}

fn version(f: &FileEntry) -> Version {
    (f.dev, f.ino, f.size, f.mtime)
}

/// Encodes the header lines shared by every response carrying (part of) `f`.
pub fn file_header_lines(f: &FileEntry) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    let mut line = |name: &str, value: &str| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    };
    line("Server", crate::SERVER_NAME);
    line("Content-Type", &amped_http::content_type_for(&f.path));
    line("Last-Modified", &amped_http::fmt_http_date(f.mtime));
    line("ETag", &f.etag());
    line("Accept-Ranges", "bytes");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_misses() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("page.html");
        std::fs::write(&p, "v1").unwrap();
        let open = |p: &std::path::Path| {
            let f = std::fs::File::open(p).unwrap();
            let m = f.metadata().unwrap();
            FileEntry::new(p.to_path_buf(), f, &m, None)
        };
        let v1 = open(&p);
        let lines = file_header_lines(&v1);
        let text = String::from_utf8(lines.clone()).unwrap();
        assert!(text.contains("Content-Type: text/html; charset=utf-8\r\n"), "{text}");
        assert!(text.contains("ETag: \""));
        let mut c = HeaderCache::new(4);
        c.put(&v1, lines.into());
        assert!(c.get(&v1).is_some());
        std::fs::write(&p, "version two").unwrap();
        assert!(c.get(&open(&p)).is_none());
    }
}
