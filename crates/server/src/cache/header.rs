//! The response-header cache (Flash §5.3): file version → the pre-encoded header lines every
//! 200/206/304 for that file shares (Server, Content-Type, Content-Encoding, Vary,
//! Last-Modified, ETag, Accept-Ranges, Cache-Control and the configured extra headers).
//! Building them costs a MIME lookup, a rule match and formatting passes; a hit is one hash
//! lookup and a copy. Keyed by path and checked against the file's identity, so a changed file
//! rebuilds its header and no separate invalidation is needed.
//!
//! What else decides the lines is the [`HeadContext`]: the content coding the file is sent
//! with, whether the URL has pre-compressed variants (Vary), and which Cache-Control rule the
//! URL path matched. One file reached through URLs with different rules (`/a/` and
//! `/a/index.html`) keeps one entry per context, so no rule leaks from one URL to another.

use super::FileEntry;
use crate::config::ResponseOptions;
use amped_http::Encoding;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

type Version = (u64, u64, u64, SystemTime);

/// Contexts kept per file; more (an unusual set of rules) evict the oldest.
const CONTEXTS_PER_FILE: usize = 4;

/// Everything besides the file itself that shapes its header lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeadContext {
    /// The file is a pre-compressed variant sent with this Content-Encoding.
    pub encoding: Option<Encoding>,
    /// The URL has pre-compressed variants: the answer depends on Accept-Encoding.
    pub vary: bool,
    /// Index of the Cache-Control rule the URL path matched.
    pub cache_rule: Option<usize>,
}

type Entry = (HeadContext, Version, Arc<[u8]>);

/// Path → (context, file version, header lines), a few contexts per path.
pub struct HeaderCache {
    map: LruCache<PathBuf, Vec<Entry>>,
}

impl HeaderCache {
    /// A cache of at most `entries` files.
    pub fn new(entries: usize) -> Self {
        HeaderCache { map: LruCache::new(NonZeroUsize::new(entries.max(1)).unwrap()) }
    }

    /// The header lines for `f` in `ctx`, if cached for this version of the file.
    pub fn get(&mut self, f: &FileEntry, ctx: HeadContext) -> Option<Arc<[u8]>> {
        let v = version(f);
        let list = self.map.get(&f.path)?;
        list.iter().find(|(c, ver, _)| *c == ctx && *ver == v).map(|(_, _, l)| l.clone())
    }

    /// Stores the header lines for `f` in `ctx`.
    pub fn put(&mut self, f: &FileEntry, ctx: HeadContext, lines: Arc<[u8]>) {
        let v = version(f);
        let list = self.map.get_or_insert_mut(f.path.clone(), Vec::new);
        list.retain(|(c, ver, _)| *c != ctx && *ver == v);
        if list.len() >= CONTEXTS_PER_FILE {
            list.remove(0);
        }
        list.push((ctx, v, lines));
    }
}

fn version(f: &FileEntry) -> Version {
    (f.dev, f.ino, f.size, f.mtime)
}

/// The strong ETag of `f` sent with `encoding`: each variant has its own (RFC 9110 §8.8.3:
/// a different representation, a different tag), even if it were a hard link to another.
pub fn etag(f: &FileEntry, encoding: Option<Encoding>) -> String {
    let mut tag = f.etag();
    if let Some(e) = encoding {
        tag.insert_str(tag.len() - 1, &format!("-{}", e.token()));
    }
    tag
}

/// Encodes the header lines shared by every response carrying (part of) `f` in `ctx`;
/// `server` is the `Server` header's value (`None`: no such header).
pub fn file_header_lines(
    f: &FileEntry,
    ctx: HeadContext,
    opts: &ResponseOptions,
    server: Option<&str>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(192 + opts.common_headers.len());
    let mut line = |name: &str, value: &str| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    };
    if let Some(name) = server {
        line("Server", name);
    }
    match ctx.encoding {
        // A variant has the type of the file it encodes (app.js.br is JavaScript).
        Some(e) => {
            let original = e.original_of(&f.path);
            line("Content-Type", &amped_http::content_type_for(&original));
            line("Content-Encoding", e.token());
        }
        None => line("Content-Type", &amped_http::content_type_for(&f.path)),
    }
    if ctx.vary {
        line("Vary", "Accept-Encoding");
    }
    line("Last-Modified", &amped_http::fmt_http_date(f.mtime));
    line("ETag", &etag(f, ctx.encoding));
    line("Accept-Ranges", "bytes");
    if let Some((_, value)) = ctx.cache_rule.and_then(|i| opts.cache_control.get(i)) {
        line("Cache-Control", value);
    }
    out.extend_from_slice(&opts.common_headers);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_do_not_leak_into_each_other() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("app.js.br");
        std::fs::write(&p, "compressed").unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let m = f.metadata().unwrap();
        let entry = FileEntry::new(p.clone(), f, &m, None);
        let opts = ResponseOptions {
            cache_control: vec![("/a/*".into(), "max-age=60".into())],
            common_headers: b"X-A: 1\r\n".to_vec(),
            ..ResponseOptions::default()
        };
        let br = HeadContext { encoding: Some(Encoding::Brotli), vary: true, cache_rule: Some(0) };
        let text = String::from_utf8(file_header_lines(&entry, br, &opts, Some("amped"))).unwrap();
        assert!(text.contains("Content-Type: text/javascript; charset=utf-8\r\n"), "{text}");
        for want in ["Content-Encoding: br\r\n", "Vary: Accept-Encoding\r\n", "-br\"\r\n"] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
        assert!(text.contains("Cache-Control: max-age=60\r\nX-A: 1\r\n"), "{text}");
        let plain = HeadContext::default();
        let text =
            String::from_utf8(file_header_lines(&entry, plain, &opts, Some("amped"))).unwrap();
        assert!(!text.contains("Cache-Control") && !text.contains("Vary"), "{text}");
        let mut c = HeaderCache::new(4);
        c.put(&entry, br, b"br\r\n".as_slice().into());
        assert!(c.get(&entry, plain).is_none(), "another context misses");
        c.put(&entry, plain, b"plain\r\n".as_slice().into());
        assert_eq!(&*c.get(&entry, br).unwrap(), b"br\r\n");
        assert_eq!(&*c.get(&entry, plain).unwrap(), b"plain\r\n");
        assert_ne!(etag(&entry, None), etag(&entry, Some(Encoding::Brotli)));
    }

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
        let opts = ResponseOptions::default();
        let plain = HeadContext::default();
        let lines = file_header_lines(&v1, plain, &opts, Some("amped"));
        let text = String::from_utf8(lines.clone()).unwrap();
        assert!(text.contains("Content-Type: text/html; charset=utf-8\r\n"), "{text}");
        assert!(text.contains("ETag: \""));
        let mut c = HeaderCache::new(4);
        c.put(&v1, plain, lines.into());
        assert!(c.get(&v1, plain).is_some());
        std::fs::write(&p, "version two").unwrap();
        assert!(c.get(&open(&p), plain).is_none());
    }
}
