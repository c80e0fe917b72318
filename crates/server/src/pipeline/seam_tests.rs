//! The pipeline's seam tested in process, without a socket: request bytes go in, the [`Step`]s
//! that come out are recorded, and every [`Job`] is run inline (as SPED runs them) and its
//! result fed back through [`Pipeline::resume`]. Each case is a row of a table: the files of a
//! document root, then acts — bytes a client sends, or a change to the tree — each with the
//! steps it must produce, written as `job` (a resolve job ran), `STATUS BODY` (a response),
//! `more` (the pipeline wants more bytes) or `close` (the pipeline said so, or the response
//! said to close after it).
//!
//! The wire suite (`tests/wire/`) checks the same behaviour over sockets under every
//! architecture; these rows pin down what the pipeline itself decides, including when it asks
//! for a job and when it does not.

use super::{Body, ConnState, Job, Pipeline, Step};
use crate::access_log::AccessLogger;
use crate::config::{Args, Config};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What happens between two checks.
enum Act {
    /// The client sends these bytes (`{etag}` stands for the last response's ETag).
    Send(&'static str),
    /// The file is rewritten in place (same inode, new size and content).
    Rewrite(&'static str, &'static str),
    /// Another file is renamed over this one (a new inode).
    RenameOver(&'static str, &'static str),
}

use Act::*;

/// One row: the tree (a `*.bin` file gets [`FILLER`] bytes before its content), whether every cache entry is stale at once, and the acts with the
/// steps each must produce.
struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// `revalidate_after` of zero: every cached entry is stale on its next use.
    always_stale: bool,
    acts: &'static [(Act, &'static [&'static str])],
}

const GET_A: &str = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";

const CASES: &[Case] = &[
    Case {
        name: "a miss runs one job, the hit that follows none",
        files: &[("a.txt", "alpha")],
        always_stale: false,
        acts: &[
            (Send(GET_A), &["job", "200 alpha", "more"]),
            (Send(GET_A), &["200 alpha", "more"]),
        ],
    },
    Case {
        name: "pipelined requests are answered in order from one buffer",
        files: &[("a.txt", "alpha"), ("b.txt", "bravo")],
        always_stale: false,
        acts: &[(
            Send(
                "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n\
                 GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            ),
            &["job", "200 alpha", "job", "200 bravo", "job", "404 *", "close"],
        )],
    },
    Case {
        name: "a stale direct translation of an unchanged file is renewed without a job",
        files: &[("a.txt", "alpha")],
        always_stale: true,
        acts: &[
            (Send(GET_A), &["job", "200 alpha", "more"]),
            (Send(GET_A), &["200 alpha", "more"]),
        ],
    },
    Case {
        name: "a file rewritten in place is re-resolved and its new content served",
        files: &[("a.txt", "alpha")],
        always_stale: true,
        acts: &[
            (Send(GET_A), &["job", "200 alpha", "more"]),
            (Rewrite("a.txt", "alpha, longer"), &[]),
            (Send(GET_A), &["job", "200 alpha, longer", "more"]),
        ],
    },
    Case {
        name: "a file renamed over is re-resolved (new inode, same size)",
        files: &[("a.txt", "alpha")],
        always_stale: true,
        acts: &[
            (Send(GET_A), &["job", "200 alpha", "more"]),
            (RenameOver("a.txt", "omega"), &[]),
            (Send(GET_A), &["job", "200 omega", "more"]),
        ],
    },
    Case {
        name: "a stale index-file translation goes back through a job",
        files: &[("d/index.html", "index")],
        always_stale: true,
        acts: &[
            (Send("GET /d/ HTTP/1.1\r\nHost: t\r\n\r\n"), &["job", "200 index", "more"]),
            (Send("GET /d/ HTTP/1.1\r\nHost: t\r\n\r\n"), &["job", "200 index", "more"]),
        ],
    },
    Case {
        name: "a matching validator gets 304 with no body",
        files: &[("a.txt", "alpha")],
        always_stale: false,
        acts: &[
            (Send(GET_A), &["job", "200 alpha", "more"]),
            (
                Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n"),
                &["304 ", "more"],
            ),
            (
                Send(
                    "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT\r\n\r\n",
                ),
                &["304 ", "more"],
            ),
            (
                Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n\r\n"),
                &["200 alpha", "more"],
            ),
        ],
    },
    Case {
        name: "ranges: 206 with the bytes asked for, 416 past the end",
        files: &[("a.txt", "alpha")],
        always_stale: false,
        acts: &[
            (
                Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1-3\r\n\r\n"),
                &["job", "206 lph", "more"],
            ),
            (
                Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-2\r\n\r\n"),
                &["206 ha", "more"],
            ),
            (Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=9-\r\n\r\n"), &["416 *", "more"]),
        ],
    },
    Case {
        name: "a range of a file too large to keep in memory comes from the file",
        files: &[("big.bin", "ABCDE")],
        always_stale: false,
        acts: &[(
            Send("GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=20000-20004\r\n\r\n"),
            &["job", "206 ABCDE", "more"],
        )],
    },
    Case {
        name: "a request body is discarded, also when it arrives in pieces",
        files: &[("a.txt", "alpha"), ("b.txt", "bravo")],
        always_stale: false,
        acts: &[
            (
                Send("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n01234"),
                &["job", "200 alpha", "more"],
            ),
            (Send("56789GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n"), &["job", "200 bravo", "more"]),
        ],
    },
    Case {
        name: "a chunked request body is discarded before the next request",
        files: &[("a.txt", "alpha"), ("b.txt", "bravo")],
        always_stale: false,
        acts: &[
            (
                Send(
                    "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
                ),
                &["job", "200 alpha", "more"],
            ),
            (
                Send("0\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n"),
                &["job", "200 bravo", "more"],
            ),
        ],
    },
    Case {
        name: "a head arriving in pieces waits for the rest; HEAD has no body",
        files: &[("a.txt", "alpha")],
        always_stale: false,
        acts: &[
            (Send("HEAD /a.txt HTTP/1.1\r\nHo"), &["more"]),
            (Send("st: t\r\n\r\n"), &["job", "200 ", "more"]),
        ],
    },
    Case {
        name: "a malformed request is answered 400 and the connection closed",
        files: &[],
        always_stale: false,
        acts: &[(Send("GET /a b c\r\n\r\n"), &["400 *", "close"])],
    },
];

/// Bytes written before the content of a `*.bin` file: more than the 16 KiB the file cache
/// keeps in memory, so its body is sent from the file.
const FILLER: usize = 20_000;

/// A pipeline over a temporary root, driven like an architecture with inline jobs.
struct Seam {
    root: tempfile::TempDir,
    p: Pipeline,
    c: ConnState,
    etag: String,
}

impl Seam {
    fn new(files: &[(&str, &str)], always_stale: bool) -> Seam {
        let root = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = root.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let filler = if name.ends_with(".bin") { FILLER } else { 0 };
            std::fs::write(&path, format!("{}{content}", ".".repeat(filler))).unwrap();
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800)).unwrap();
        }
        let args = Args { root: Some(root.path().into()), ..Default::default() };
        let mut cfg = Config::resolve(args).unwrap();
        if always_stale {
            cfg.revalidate_after = Duration::ZERO;
        }
        let p = Pipeline::new(Arc::new(cfg), Default::default(), AccessLogger::off());
        let c = ConnState::new("127.0.0.1:9".parse().unwrap());
        Seam { root, p, c, etag: String::new() }
    }

    /// Feeds `bytes` and records every step until the pipeline wants more or closes.
    fn send(&mut self, bytes: &str) -> Vec<String> {
        self.c.received(bytes.replace("{etag}", &self.etag).as_bytes());
        let mut seen = Vec::new();
        let mut step = self.p.next(&mut self.c, false);
        for _ in 0..32 {
            step = match step {
                Step::Block(job) => {
                    seen.push(
                        if matches!(job, Job::Resolve { .. }) { "job" } else { "read" }.into(),
                    );
                    let done = self.p.run_job(job);
                    self.p.resume(&mut self.c, done)
                }
                Step::Respond(r) => {
                    let head = String::from_utf8(r.head.clone()).unwrap();
                    if let Some(tag) = header(&head, "etag") {
                        self.etag = tag.to_string();
                    }
                    seen.push(format!("{} {}", r.status, body_text(&r.body, r.status)));
                    if r.close {
                        // The architecture closes once this response is sent.
                        seen.push("close".into());
                        return seen;
                    }
                    self.p.next(&mut self.c, false)
                }
                Step::NeedMore => {
                    seen.push("more".into());
                    return seen;
                }
                Step::Close => {
                    seen.push("close".into());
                    return seen;
                }
            };
        }
        panic!("no end after 32 steps: {seen:?}")
    }

    fn act(&mut self, act: &Act) -> Vec<String> {
        match *act {
            Send(bytes) => return self.send(bytes),
            Rewrite(name, content) => std::fs::write(self.root.path().join(name), content).unwrap(),
            RenameOver(name, content) => {
                let tmp = self.root.path().join(".new");
                std::fs::write(&tmp, content).unwrap();
                std::fs::rename(&tmp, self.root.path().join(name)).unwrap();
            }
        }
        Vec::new()
    }
}

/// The body as text; an error page's is `*` (its wording is respond.rs's business).
fn body_text(body: &Body, status: u16) -> String {
    if status >= 400 {
        return "*".into();
    }
    match body {
        Body::None => String::new(),
        Body::Memory(bytes, range) => String::from_utf8_lossy(&bytes[range.clone()]).into(),
        Body::File { file, offset, len } => {
            let mut buf = vec![0u8; *len as usize];
            let n = amped_sys::files::read_at(&file.file, &mut buf, *offset).unwrap();
            String::from_utf8_lossy(&buf[..n]).into()
        }
    }
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn the_seam_table() {
    let mut failures = String::new();
    for case in CASES {
        let mut seam = Seam::new(case.files, case.always_stale);
        for (i, (act, want)) in case.acts.iter().enumerate() {
            let got = seam.act(act);
            if got != *want {
                let _ = writeln!(failures, "{} (act {i}): want {want:?}, got {got:?}", case.name);
                break;
            }
        }
    }
    assert!(failures.is_empty(), "\n{failures}");
}

#[test]
fn partial_responses_say_which_bytes() {
    let mut seam = Seam::new(&[("a.txt", "alpha")], false);
    seam.c.received(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=9-\r\n\r\n");
    let Step::Block(job) = seam.p.next(&mut seam.c, false) else { panic!("a miss blocks") };
    let done = seam.p.run_job(job);
    let Step::Respond(r) = seam.p.resume(&mut seam.c, done) else { panic!("an answer") };
    let head = String::from_utf8(r.head).unwrap();
    assert_eq!(header(&head, "content-range"), Some("bytes */5"), "{head}");
    seam.c.received(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=1-3\r\n\r\n");
    let Step::Respond(r) = seam.p.next(&mut seam.c, false) else { panic!("a cache hit") };
    let head = String::from_utf8(r.head).unwrap();
    assert_eq!(header(&head, "content-range"), Some("bytes 1-3/5"), "{head}");
    assert_eq!(header(&head, "content-length"), Some("3"), "{head}");
}
