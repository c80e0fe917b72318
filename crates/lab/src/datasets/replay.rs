//! A user's access log turned into a replayable workload: a generated file set in which every
//! path the log fetched successfully exists with the size the log recorded, and the log's GET
//! requests, in order, as a URL list.
//!
//! Targets are reduced to their path (scheme, host, query and fragment dropped) and
//! percent-decoded to name the file; `dir/` names `dir/index.html`. Paths with `..`, NUL or an
//! encoded `/` are dropped, and so is a path that would need a file and a directory of the same
//! name. A path never answered 200 in the log is not created, so it gets 404 again.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;

use super::{Noise, make_dir, marker_matches, write_marker};
use amped_workload::clf::{self, LineError};

/// The workload built from a log.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    pub root: PathBuf,
    /// Request targets (re-encoded paths), in log order.
    #[serde(skip)]
    pub urls: Vec<String>,
    pub requests: usize,
    pub files: usize,
    pub bytes: u64,
    pub lines_rejected: usize,
    /// The first rejected lines, `line N: reason`.
    pub first_rejections: Vec<String>,
    pub skipped_methods: usize,
    pub skipped_paths: usize,
}

/// Reads `log_path`, builds (or reuses) its file set under `parent`, and returns the workload.
pub fn build(log_path: &Path, parent: &Path, seed: u64) -> io::Result<Replay> {
    let bytes = std::fs::read(log_path)?;
    let text = String::from_utf8_lossy(&bytes);
    let log = clf::parse_log(&text);
    let plan = plan(&log.entries);
    let digest = fnv1a(&bytes);
    let root = parent.join(format!("clf-{digest:016x}-s{seed}"));
    let marker = parent.join(format!("clf-{digest:016x}-s{seed}.params.json"));
    let params = json!({"log_fnv1a": format!("{digest:016x}"), "seed": seed, "files": plan.files.len(), "format": 1});
    if !(marker_matches(&marker, &params) && root.is_dir()) {
        let _ = std::fs::remove_file(&marker);
        make_dir(&root)?;
        let noise = Noise::new(seed);
        let mut rng = super::rng(seed);
        for (rel, size) in &plan.files {
            let path = root.join(OsStr::from_bytes(rel));
            if let Some(dir) = path.parent() {
                make_dir(dir)?;
            }
            noise.write_file(&path, *size, &mut rng)?;
        }
        write_marker(&marker, &params)?;
    }
    Ok(Replay {
        root,
        requests: plan.urls.len(),
        urls: plan.urls,
        files: plan.files.len(),
        bytes: plan.files.values().sum(),
        lines_rejected: log.errors.len(),
        first_rejections: log.errors.iter().take(10).map(LineError::to_string).collect(),
        skipped_methods: plan.skipped_methods,
        skipped_paths: plan.skipped_paths,
    })
}

/// What to create and what to request, before touching the disk.
#[derive(Debug, Default)]
pub struct Plan {
    /// Relative file path (bytes) → size.
    pub files: BTreeMap<Vec<u8>, u64>,
    pub urls: Vec<String>,
    pub skipped_methods: usize,
    pub skipped_paths: usize,
}

/// Plans the file set and the URL list for `entries`.
pub fn plan(entries: &[clf::Entry]) -> Plan {
    let mut plan = Plan::default();
    let mut sizes: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut requests: Vec<(Vec<u8>, String)> = Vec::new();
    for e in entries {
        if e.method != "GET" {
            plan.skipped_methods += 1;
            continue;
        }
        let Some((file, url)) = normalise(&e.target) else {
            plan.skipped_paths += 1;
            continue;
        };
        if e.status == 200 {
            let size = sizes.entry(file.clone()).or_insert(0);
            *size = (*size).max(e.bytes.unwrap_or(0));
        }
        requests.push((file, url));
    }
    // Drop files whose path runs through another file (`/a` and `/a/b`): keep the shorter.
    let mut kept: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for (file, size) in sizes {
        let blocked = file
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == b'/')
            .any(|(i, _)| kept.contains_key(&file[..i]));
        if !blocked {
            kept.insert(file, size);
        }
    }
    for (file, url) in requests {
        let conflicting = file
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == b'/')
            .any(|(i, _)| kept.contains_key(&file[..i]));
        if conflicting {
            plan.skipped_paths += 1;
        } else {
            plan.urls.push(url);
        }
    }
    plan.files = kept;
    plan
}

/// A target's file (relative, decoded) and the URL path to request, or `None` if unusable.
pub fn normalise(target: &str) -> Option<(Vec<u8>, String)> {
    let path = clf::target_path(target).split(['?', '#']).next().unwrap_or("/");
    let decoded = percent_decode(path)?;
    let mut segments: Vec<&[u8]> = Vec::new();
    for seg in decoded.split(|&c| c == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => return None,
            s if s.contains(&0) => return None,
            s => segments.push(s),
        }
    }
    let is_dir = decoded.ends_with(b"/") || segments.is_empty();
    let mut file = segments.join(&b'/');
    let mut url = String::from("/");
    url.push_str(&segments.iter().map(|s| encode(s)).collect::<Vec<_>>().join("/"));
    if is_dir {
        if !segments.is_empty() {
            file.push(b'/');
            url.push('/');
        }
        file.extend_from_slice(b"index.html");
    }
    Some((file, url))
}

/// Percent-decodes; `None` for an encoded `/` or a malformed escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            let v = u8::from_str_radix(hex, 16).ok()?;
            if v == b'/' {
                return None;
            }
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Percent-encodes everything but unreserved characters.
fn encode(segment: &[u8]) -> String {
    let mut out = String::with_capacity(segment.len());
    for &c in segment {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// FNV-1a, to name a log's file set by its content.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_targets() {
        let n = |t: &str| normalise(t).map(|(f, u)| (String::from_utf8(f).unwrap(), u));
        assert_eq!(n("/a/b.html"), Some(("a/b.html".into(), "/a/b.html".into())));
        assert_eq!(
            n("/history/apollo/"),
            Some(("history/apollo/index.html".into(), "/history/apollo/".into()))
        );
        assert_eq!(n("/"), Some(("index.html".into(), "/".into())));
        assert_eq!(n("http://example.com/x.gif?y=1"), Some(("x.gif".into(), "/x.gif".into())));
        assert_eq!(n("/a b.html"), Some(("a b.html".into(), "/a%20b.html".into())));
        assert_eq!(n("/%7Euser/"), Some(("~user/index.html".into(), "/~user/".into())));
        assert_eq!(
            n("/images/\"ksclogo.gif"),
            Some(("images/\"ksclogo.gif".into(), "/images/%22ksclogo.gif".into()))
        );
        assert_eq!(n("/a/../../etc/passwd"), None);
        assert_eq!(n("/a%2Fb"), None);
        assert_eq!(n("/a%zz"), None);
        assert_eq!(n("/a%00b"), None);
    }

    #[test]
    fn plans_files_and_requests() {
        let log = clf::parse_log(
            "h - - [01/Jul/1995:00:00:01 -0400] \"GET /a.html HTTP/1.0\" 200 100\n\
             h - - [01/Jul/1995:00:00:02 -0400] \"GET /a.html HTTP/1.0\" 304 0\n\
             h - - [01/Jul/1995:00:00:03 -0400] \"GET /a.html/x HTTP/1.0\" 200 5\n\
             h - - [01/Jul/1995:00:00:04 -0400] \"POST /cgi HTTP/1.0\" 200 5\n\
             h - - [01/Jul/1995:00:00:05 -0400] \"GET /gone.gif HTTP/1.0\" 404 -\n\
             h - - [01/Jul/1995:00:00:06 -0400] \"GET /d/ HTTP/1.0\" 200 300\n",
        );
        let p = plan(&log.entries);
        let files: Vec<(String, u64)> =
            p.files.iter().map(|(f, s)| (String::from_utf8(f.clone()).unwrap(), *s)).collect();
        assert_eq!(files, vec![("a.html".into(), 100), ("d/index.html".into(), 300)]);
        assert_eq!(p.urls, vec!["/a.html", "/a.html", "/gone.gif", "/d/"]);
        assert_eq!((p.skipped_methods, p.skipped_paths), (1, 1));
    }

    #[test]
    fn builds_a_matching_file_set() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        std::fs::write(
            &log,
            "h - - [01/Jul/1995:00:00:01 -0400] \"GET /x/y.gif HTTP/1.0\" 200 1234\nnot a line\n",
        )
        .unwrap();
        let r = build(&log, dir.path(), 1).unwrap();
        assert_eq!(std::fs::metadata(r.root.join("x/y.gif")).unwrap().len(), 1234);
        assert_eq!((r.requests, r.files, r.bytes, r.lines_rejected), (1, 1, 1234, 1));
        assert_eq!(r.first_rejections, vec!["line 2: no [date]"]);
    }
}
