//! The caches (path, header, file) never serve stale data beyond the documented bound:
//! metadata is revalidated at most once a second, so after [`STALENESS`] a changed, grown,
//! truncated, deleted, re-created or replaced file is served as it now is. With the caches off
//! the change is visible at once. A file truncated while it is being sent must not crash the
//! server.

use crate::common::*;
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::path::Path;
use std::thread;
use std::time::Duration;

/// The documented staleness bound (1 s) plus a margin.
const STALENESS: Duration = Duration::from_millis(1100);
const NO_CACHES: [&str; 3] = ["--no-path-cache", "--no-header-cache", "--no-file-cache"];

/// GET `/f.txt` and assert it now has exactly `expect`; returns the ETag.
fn expect_body(s: &Server, step: &str, expect: &[u8]) -> String {
    // On a fresh connection and on a keep-alive one, to catch per-connection state too.
    let r = s.get("/f.txt");
    assert_eq!(r.status, 200, "{step}: {r:?}");
    assert_eq!(r.content_length() as usize, expect.len(), "{step}: Content-Length");
    assert!(
        r.body == expect,
        "{step}: stale body {:?}",
        String::from_utf8_lossy(&r.body[..r.body.len().min(64)])
    );
    let mut c = s.conn();
    c.send(req("HEAD", "/f.txt", "") + &req("GET", "/f.txt", ""));
    let h = c.head_response();
    assert_eq!(h.content_length() as usize, expect.len(), "{step}: HEAD Content-Length");
    assert!(c.response().body == expect, "{step}: stale body on keep-alive");
    r.must("etag").to_string()
}

/// Change /f.txt in every way and check what is served after `wait` each time.
fn change_sequence(s: &Server, wait: Duration) {
    let path = s.path("f.txt");
    let v1 = b"version one\n".to_vec();
    let etag1 = expect_body(s, "initial", &v1);

    let v2 = b"the second version, longer\n".to_vec();
    std::fs::write(&path, &v2).unwrap();
    thread::sleep(wait);
    let etag2 = expect_body(s, "modified", &v2);
    assert_ne!(etag1, etag2, "ETag unchanged after modification");
    // the old ETag no longer yields 304
    let r = request_once(
        s.addr,
        req("GET", "/f.txt", &format!("If-None-Match: {etag1}\r\nConnection: close\r\n"))
            .as_bytes(),
    );
    assert_eq!(r.status, 200, "old ETag still matches: {r:?}");

    // same size, different content (after a second, so the mtime differs visibly)
    thread::sleep(wait);
    let v3 = b"THE SECOND VERSION, LONGER\n".to_vec();
    std::fs::write(&path, &v3).unwrap();
    thread::sleep(wait);
    expect_body(s, "same-size rewrite", &v3);

    let mut v4 = v3.clone();
    v4.extend(pseudo_random(300_000, 5));
    std::fs::write(&path, &v4).unwrap();
    thread::sleep(wait);
    expect_body(s, "grown", &v4);

    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(5).unwrap();
    drop(f);
    thread::sleep(wait);
    expect_body(s, "truncated", &v4[..5]);

    std::fs::remove_file(&path).unwrap();
    thread::sleep(wait);
    let r = s.get("/f.txt");
    assert_eq!(r.status, 404, "deleted file still served: {r:?}");

    let v5 = b"re-created!\n".to_vec();
    std::fs::write(&path, &v5).unwrap();
    thread::sleep(wait);
    expect_body(s, "re-created", &v5);

    // atomic replace by rename (a new inode), as deploy tools do
    let v6 = b"replaced by rename, a new inode\n".to_vec();
    let tmp = s.path("f.txt.tmp");
    std::fs::write(&tmp, &v6).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    thread::sleep(wait);
    expect_body(s, "renamed over", &v6);

    // a new file appears where a 404 was served
    assert_eq!(s.get("/late.txt").status, 404);
    std::fs::write(s.path("late.txt"), "late").unwrap();
    thread::sleep(wait);
    assert_eq!(s.get("/late.txt").assert_status(200).body, b"late");
}

fn fill(root: &Path) {
    write(root, "f.txt", "version one\n");
}

arch_tests! {
    /// With the caches on: every change is served within the staleness bound.
    fn changes_visible_with_caches(arch) {
        let s = Server::start(arch, &[], fill);
        change_sequence(&s, STALENESS);
    }

    /// With the caches off: every change is visible at once.
    fn changes_visible_without_caches(arch) {
        let s = Server::start(arch, &NO_CACHES, fill);
        change_sequence(&s, Duration::ZERO);
    }

    /// 300 distinct files, fetched twice (pipelined): always the right body (cache keys and
    /// eviction are correct).
    fn many_files_right_bodies(arch) {
        let s = Server::start(arch, &[], |root| {
            for i in 0..300 {
                write(root, &format!("d{}/f{i}.txt", i % 7), format!("<{i}>").repeat(i % 50 + 1));
            }
        });
        for round in 0..2 {
            let mut c = s.conn();
            let all: String = (0..300).map(|i| req("GET", &format!("/d{}/f{i}.txt", i % 7), "")).collect();
            c.send(all);
            for i in 0..300 {
                let r = c.response();
                r.assert_status(200);
                assert_eq!(r.text(), format!("<{i}>").repeat(i % 50 + 1), "round {round}, file {i}");
            }
        }
    }

    /// Truncating a file while it is being sent: the connection ends (the server cannot send
    /// the promised length), and the server keeps running and serving.
    fn truncated_while_sending(arch) {
        let len = 20 << 20;
        let mut s = Server::start(arch, &[], |root| write(root, "big.bin", pseudo_random(len, 3)));
        let mut stream = TcpStream::connect(s.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::Write::write_all(&mut stream, req("GET", "/big.bin", "").as_bytes()).unwrap();
        let mut first = vec![0u8; 65536];
        let n = stream.read(&mut first).unwrap();
        assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&first[..n.min(200)]));
        let f = std::fs::OpenOptions::new().write(true).open(s.path("big.bin")).unwrap();
        f.set_len(1000).unwrap();
        drop(f);
        let mut total = n;
        let mut chunk = vec![0u8; 256 * 1024];
        let ended = loop {
            match stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(k) => total += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break false,
                Err(_) => break true,
            }
        };
        // Either everything had already been read into memory (then the connection may stay
        // open for keep-alive) or the server must close; never hang with a short body.
        assert!(ended || total >= len, "connection hangs after truncation ({total} bytes)");
        s.assert_alive();
        thread::sleep(STALENESS);
        let r = s.get("/big.bin");
        r.assert_status(200);
        assert!(r.body == pseudo_random(len, 3)[..1000], "truncated file served wrongly");
        s.assert_alive();
    }

    /// A file cut in place after the file cache took its entry, asked for again within the
    /// revalidation second: the server may promise the length it knew, but it answers — a
    /// status line, then the current bytes (all of them, or a body cut short and the
    /// connection closed) — and never closes without a word, whether the file now ends before
    /// the first byte (0) or within the first chunk (1000). A short answer drops the stale
    /// entry: the very next request, still within that second, gets the file as it now is,
    /// whole and with its own length.
    fn truncated_after_caching_is_answered(arch) {
        let len = 1 << 20;
        let s = Server::start(arch, &[], |root| write(root, "big.bin", pseudo_random(len, 9)));
        for cut in [0, 1000] {
            std::fs::write(s.path("big.bin"), pseudo_random(len, 9)).unwrap();
            thread::sleep(STALENESS);
            // Both requests on one connection, so that under the architectures with a cache
            // per process or instance (mp, --instances) the cache that took the entry is the
            // one that meets the shorter file.
            let mut c = s.conn();
            c.send(req("GET", "/big.bin", ""));
            assert!(c.response().assert_status(200).body == pseudo_random(len, 9), "cut {cut}: before");
            let f = std::fs::OpenOptions::new().write(true).open(s.path("big.bin")).unwrap();
            f.set_len(cut as u64).unwrap();
            drop(f);
            let (head, body) = answer_until_closed_on(c.stream, "/big.bin");
            assert!(head.starts_with("HTTP/1.1 200"), "cut {cut}: no answer, got {head:?}");
            let promised: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("cut {cut}: no Content-Length in {head:?}"));
            assert!(promised == cut || promised == len, "cut {cut}: promised {promised}");
            assert!(body.len() <= cut, "cut {cut}: {} bytes sent past the end", body.len());
            if promised == cut {
                assert_eq!(body.len(), cut, "cut {cut}: the current version, but not whole");
            }
            assert!(body == pseudo_random(len, 9)[..body.len()], "cut {cut}: wrong bytes");
            let r = s.get("/big.bin");
            r.assert_status(200);
            assert_eq!(r.content_length() as usize, cut, "cut {cut}: the next request's length");
            assert!(r.body == pseudo_random(len, 9)[..cut], "cut {cut}: the next request's body");
        }
    }

    /// Every optimization switched off, alone or together, still serves exact bytes: whole
    /// files small and large, ranges, HEAD, keep-alive.
    fn optimizations_off_still_correct(arch) {
        let big = pseudo_random(8 << 20, 77);
        let switch_sets: [&[&str]; 5] = [
            &["--no-zero-copy"],
            &["--no-residency-test"],
            &["--no-file-cache"],
            &NO_CACHES,
            &["--no-path-cache", "--no-header-cache", "--no-file-cache", "--no-zero-copy", "--no-residency-test"],
        ];
        for switches in switch_sets {
            let s = Server::start(arch, switches, |root| {
                write(root, "big.bin", &big);
                write(root, "small.txt", "small");
            });
            let mut c = s.conn();
            c.send(
                req("GET", "/big.bin", "")
                    + &req("GET", "/small.txt", "")
                    + &req("HEAD", "/big.bin", "")
                    + &req("GET", "/big.bin", "Range: bytes=4000000-4000999\r\n")
                    + &req("GET", "/big.bin", ""),
            );
            let r = c.response();
            assert!(r.assert_status(200).body == big, "{switches:?}: big body differs");
            assert_eq!(c.response().assert_status(200).body, b"small", "{switches:?}");
            assert_eq!(c.head_response().content_length(), big.len() as u64, "{switches:?}");
            let r = c.response();
            assert!(r.assert_status(206).body == big[4_000_000..4_001_000], "{switches:?}: range");
            assert!(c.response().assert_status(200).body == big, "{switches:?}: repeat differs");
        }
    }
}

/// Sends `GET path` with `Connection: close` on `stream` (an open connection with nothing
/// unread on it) and reads until the server closes (a hang fails): the head's text and the
/// body bytes that came.
fn answer_until_closed_on(mut stream: TcpStream, path: &str) -> (String, Vec<u8>) {
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    std::io::Write::write_all(&mut stream, get_req(path).as_bytes()).unwrap();
    let mut all = Vec::new();
    match stream.read_to_end(&mut all) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{path}: not closed after {} bytes: {e}", all.len()),
    }
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").map_or(all.len(), |i| i + 4);
    let body = all.split_off(split);
    (String::from_utf8_lossy(&all).into_owned(), body)
}
