//! Conditional requests (If-None-Match, If-Modified-Since, If-Range) and byte ranges.

use crate::common::*;
use std::path::Path;

const DIGITS: &str = "0123456789abcdefghij"; // 20 bytes
const BIG_LEN: usize = 1 << 20;

fn fill(root: &Path) {
    write(root, "d.txt", DIGITS);
    write(root, "big.bin", pseudo_random(BIG_LEN, 42));
}

/// GET `path` with extra header lines; Connection: close.
fn get_with(s: &Server, path: &str, headers: &str) -> Response {
    request_once(s.addr, req("GET", path, &format!("{headers}Connection: close\r\n")).as_bytes())
}

arch_tests! {
    /// If-None-Match with the current ETag (alone, in a list, or `*`): 304 without a body,
    /// keeping the connection in sync; the 304 repeats the ETag.
    fn if_none_match_304(arch) {
        let s = Server::start(arch, &[], fill);
        let first = s.get("/d.txt");
        let etag = first.must("etag").to_string();
        for inm in [etag.clone(), "*".to_string(), format!("\"nope\", {etag}")] {
            let mut c = s.conn();
            c.send(req("GET", "/d.txt", &format!("If-None-Match: {inm}\r\n")) + &req("GET", "/d.txt", "Connection: close\r\n"));
            let r = c.response();
            assert_eq!(r.status, 304, "If-None-Match: {inm}: {r:?}");
            assert!(r.body.is_empty());
            assert_eq!(r.header("etag"), Some(etag.as_str()));
            assert_eq!(c.response().assert_status(200).body, DIGITS.as_bytes());
            c.assert_closed(std::time::Duration::from_secs(3));
            assert!(c.pending().is_empty(), "304 carried a body: {:?}", String::from_utf8_lossy(c.pending()));
        }
        // HEAD too
        let mut c = s.conn();
        c.send(req("HEAD", "/d.txt", &format!("If-None-Match: {etag}\r\n")));
        assert_eq!(c.head_response().status, 304);
    }

    /// If-None-Match with another ETag: 200 with the body.
    fn if_none_match_other_200(arch) {
        let s = Server::start(arch, &[], fill);
        let r = get_with(&s, "/d.txt", "If-None-Match: \"something-else\"\r\n");
        assert_eq!(r.assert_status(200).body, DIGITS.as_bytes());
    }

    /// If-None-Match uses the weak comparison (RFC 9110 §13.1.2): `W/"tag"` matches "tag".
    fn if_none_match_weak_comparison(arch) {
        let s = Server::start(arch, &[], fill);
        let etag = s.get("/d.txt").must("etag").to_string();
        let r = get_with(&s, "/d.txt", &format!("If-None-Match: W/{etag}\r\n"));
        assert_eq!(r.status, 304, "{r:?}");
    }

    /// If-Modified-Since equal to Last-Modified: 304; an older date or garbage: 200.
    fn if_modified_since(arch) {
        let s = Server::start(arch, &[], fill);
        let lm = s.get("/d.txt").must("last-modified").to_string();
        let r = get_with(&s, "/d.txt", &format!("If-Modified-Since: {lm}\r\n"));
        assert_eq!(r.status, 304, "{r:?}");
        assert!(r.body.is_empty());
        let r = get_with(&s, "/d.txt", "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n");
        assert_eq!(r.assert_status(200).body, DIGITS.as_bytes());
        let r = get_with(&s, "/d.txt", "If-Modified-Since: not a date\r\n");
        assert_eq!(r.assert_status(200).body, DIGITS.as_bytes());
    }

    /// If-None-Match wins over If-Modified-Since.
    fn inm_wins_over_ims(arch) {
        let s = Server::start(arch, &[], fill);
        let first = s.get("/d.txt");
        let lm = first.must("last-modified").to_string();
        let r = get_with(&s, "/d.txt", "If-None-Match: \"other\"\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n");
        assert_eq!(r.assert_status(200).body, DIGITS.as_bytes());
        let r = get_with(&s, "/d.txt", &format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}\r\n"));
        assert_eq!(r.assert_status(200).body, DIGITS.as_bytes());
        let etag = first.must("etag");
        let r = get_with(&s, "/d.txt", &format!("If-None-Match: {etag}\r\nIf-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n"));
        assert_eq!(r.status, 304, "{r:?}");
    }

    /// Single byte ranges: first-last, open-ended, suffix, end clamped to the length.
    fn single_ranges_206(arch) {
        let s = Server::start(arch, &[], fill);
        let len = DIGITS.len();
        for (spec, from, to) in [("2-5", 2, 5), ("0-0", 0, 0), ("5-", 5, len - 1), ("-3", len - 3, len - 1), ("10-999", 10, len - 1), ("0-", 0, len - 1), ("-100", 0, len - 1)] {
            let r = get_with(&s, "/d.txt", &format!("Range: bytes={spec}\r\n"));
            assert_eq!(r.status, 206, "bytes={spec}: {r:?}");
            assert_eq!(r.must("content-range"), format!("bytes {from}-{to}/{len}"), "bytes={spec}");
            assert_eq!(r.body, &DIGITS.as_bytes()[from..=to], "bytes={spec}");
            assert_eq!(r.content_length() as usize, to - from + 1);
        }
    }

    /// A range deep inside a 1 MiB binary file, on a keep-alive connection with a following
    /// request (the body length must be exact).
    fn range_in_large_file(arch) {
        let s = Server::start(arch, &[], fill);
        let data = pseudo_random(BIG_LEN, 42);
        let mut c = s.conn();
        c.send(req("GET", "/big.bin", "Range: bytes=500000-599999\r\n") + &req("GET", "/big.bin", "Range: bytes=-70000\r\n") + &req("GET", "/d.txt", ""));
        let r = c.response();
        r.assert_status(206);
        assert_eq!(r.must("content-range"), format!("bytes 500000-599999/{BIG_LEN}"));
        assert!(r.body == data[500_000..600_000], "wrong bytes for 500000-599999");
        let r = c.response();
        r.assert_status(206);
        assert!(r.body == data[BIG_LEN - 70_000..], "wrong bytes for -70000");
        assert_eq!(c.response().assert_status(200).body, DIGITS.as_bytes());
    }

    /// Unsatisfiable ranges: 416 with `Content-Range: bytes */len`.
    fn unsatisfiable_416(arch) {
        let s = Server::start(arch, &[], fill);
        let len = DIGITS.len();
        for spec in [format!("{len}-"), "100-200".to_string(), format!("{len}-{}", len + 5), "-0".to_string()] {
            let r = get_with(&s, "/d.txt", &format!("Range: bytes={spec}\r\n"));
            assert_eq!(r.status, 416, "bytes={spec}: {r:?}");
            assert_eq!(r.must("content-range"), format!("bytes */{len}"));
        }
        // the connection stays usable after a 416
        let mut c = s.conn();
        c.send(req("GET", "/d.txt", "Range: bytes=50-\r\n") + &req("GET", "/d.txt", ""));
        c.response().assert_status(416);
        assert_eq!(c.response().assert_status(200).body, DIGITS.as_bytes());
    }

    /// Multiple ranges: 200 with the whole body; ranges in an unknown unit: ignored.
    fn multi_range_and_unknown_unit_200(arch) {
        let s = Server::start(arch, &[], fill);
        for range in ["bytes=0-1,3-4", "bytes=0-1, 5-", "items=0-1"] {
            let r = get_with(&s, "/d.txt", &format!("Range: {range}\r\n"));
            assert_eq!(r.status, 200, "{range}: {r:?}");
            assert_eq!(r.body, DIGITS.as_bytes());
        }
    }

    /// If-Range with the current ETag: 206; with another: 200 and the whole body.
    fn if_range(arch) {
        let s = Server::start(arch, &[], fill);
        let etag = s.get("/d.txt").must("etag").to_string();
        let r = get_with(&s, "/d.txt", &format!("Range: bytes=0-3\r\nIf-Range: {etag}\r\n"));
        r.assert_status(206);
        assert_eq!(r.body, b"0123");
        let r = get_with(&s, "/d.txt", "Range: bytes=0-3\r\nIf-Range: \"stale\"\r\n");
        r.assert_status(200);
        assert_eq!(r.body, DIGITS.as_bytes());
    }
}
