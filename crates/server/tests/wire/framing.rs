//! RFC 9110/9112 corners found by a 137-case corpus and ported peer tests: chunked request
//! bodies discarded (never a way to smuggle a request), later 1.x versions served as 1.1, Host
//! ports, bodiless error answers to HEAD, the query string kept across the directory redirect,
//! and the header-line limit.

use crate::common::*;
use std::path::Path;
use std::time::Duration;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
    write(root, "b.txt", "BBBBBBBB");
    write(root, "dir/index.html", "in dir");
}

arch_tests! {
    /// A chunked body on GET/HEAD is read and thrown away like a Content-Length one, and the
    /// request after it is answered on the same connection (any case of `chunked`, with
    /// extensions and trailers, split across writes).
    fn chunked_bodies_are_discarded(arch) {
        let s = Server::start(arch, &[], fill);
        let mut c = s.conn();
        c.send(req("GET", "/a.txt", "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        c.send(req("HEAD", "/a.txt", "transfer-encoding: CHUNKED\r\n") + "3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n");
        assert_eq!(c.head_response().assert_status(200).content_length(), 4);
        let split = req("GET", "/a.txt", "Transfer-Encoding: chunked\r\n") + "a\r\n0123456789\r\n0\r\n\r\n" + &req("GET", "/b.txt", "");
        c.stream.set_nodelay(true).unwrap();
        for piece in split.as_bytes().chunks(4) {
            c.send(piece);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        assert_eq!(c.response().assert_status(200).body, b"BBBBBBBB");
        // A request hidden inside chunk data is data, not a request.
        let hidden = req("GET", "/b.txt", "");
        c.send(req("GET", "/a.txt", "Transfer-Encoding: chunked\r\nConnection: close\r\n") + &format!("{:x}\r\n{hidden}\r\n0\r\n\r\n", hidden.len()));
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty(), "answered data as a request: {:?}", String::from_utf8_lossy(c.pending()));
    }

    /// Chunked framing that a lenient reader would read differently — or a body over
    /// --max-discard-body — is refused (400/413) and the connection closed, so no request can
    /// be smuggled after it; Transfer-Encoding with Content-Length stays 400, a coding amped
    /// does not decode is 501, Transfer-Encoding in HTTP/1.0 is 400.
    fn bad_chunked_framing_is_refused(arch) {
        let s = Server::start(arch, &["--max-discard-body", "64"], fill);
        let next = req("GET", "/b.txt", "");
        let cases: [(&str, &str, u16); 8] = [
            ("Transfer-Encoding: chunked\r\n", "5\nhello\r\n0\r\n\r\n", 400),
            ("Transfer-Encoding: chunked\r\n", "3\r\nhello\r\n0\r\n\r\n", 400),
            ("Transfer-Encoding: chunked\r\n", "0x5\r\nhello\r\n0\r\n\r\n", 400),
            ("Transfer-Encoding: chunked\r\n", "5 5\r\nhello\r\n0\r\n\r\n", 400),
            ("Transfer-Encoding: chunked\r\n", "ffff\r\n", 413),
            ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n", 400),
            ("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n", 501),
            ("Transfer-Encoding: chunked, gzip\r\n", "0\r\n\r\n", 400),
        ];
        for (headers, body, status) in cases {
            let mut c = s.conn();
            c.send(req("GET", "/a.txt", headers) + body + &next);
            let r = c.response();
            assert_eq!(r.status, status, "{headers:?} {body:?}: {r:?}");
            c.assert_closed(Duration::from_secs(3));
            assert!(!contains(c.pending(), b"BBBBBBBB"), "{headers:?} {body:?}: answered the next request");
        }
        let r = request_once(s.addr, b"GET /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        r.assert_status(400);
        // A body that goes wrong after the request was answered closes the connection unanswered.
        let mut c = s.conn();
        c.send(req("GET", "/a.txt", "Transfer-Encoding: chunked\r\n") + "5\r\nhel");
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        c.send(String::from("lo!!\r\n0\r\n\r\n") + &next);
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty(), "answered after bad framing: {:?}", String::from_utf8_lossy(c.pending()));
    }

    /// `HTTP/1.2` … `HTTP/1.9`: served as 1.1 (RFC 9110 §2.5), answered `HTTP/1.1`.
    fn later_minor_versions_are_served_as_1_1(arch) {
        let s = Server::start(arch, &[], fill);
        for version in ["HTTP/1.2", "HTTP/1.9"] {
            let r = request_once(s.addr, format!("GET /a.txt {version}\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
            assert_eq!((r.status, r.version.as_str(), r.body.as_slice()), (200, "HTTP/1.1", &b"AAAA"[..]), "{version}");
        }
        let r = request_once(s.addr, b"GET /a.txt HTTP/1.2\r\n\r\n");
        assert_eq!(r.status, 400, "a 1.x request still needs Host");
    }

    /// Host with a port that is not digits: 400; digits, an empty port or an IPv6 literal: served.
    fn host_port_must_be_numeric(arch) {
        let s = Server::start(arch, &[], fill);
        for host in ["a:asd", "a:1:2", "[::1]x", "::1"] {
            let r = request_once(s.addr, format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
            assert_eq!(r.status, 400, "Host: {host}");
        }
        for host in ["a:8080", "a:", "[::1]:80", "127.0.0.1"] {
            let r = request_once(s.addr, format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes());
            assert_eq!(r.status, 200, "Host: {host}");
        }
    }

    /// Error answers to HEAD have no body, whatever the error (400, 414, 431, 505), though they
    /// state the Content-Length a GET would get.
    fn head_errors_have_no_body(arch) {
        let s = Server::start(arch, &["--max-uri-bytes", "64"], fill);
        let long = "x".repeat(100);
        let big = format!("X-Big: {}\r\n", "y".repeat(9000));
        let cases = [
            (String::from("HEAD /a.txt HTTP/1.1\r\nHost: a:asd\r\n\r\n"), 400),
            (format!("HEAD /{long} HTTP/1.1\r\nHost: t\r\n\r\n"), 414),
            (format!("HEAD /a.txt HTTP/1.1\r\nHost: t\r\n{big}\r\n"), 431),
            (String::from("HEAD /a.txt HTTP/2.0\r\nHost: t\r\n\r\n"), 505),
        ];
        for (request, status) in cases {
            let bytes = raw(s.addr, request.as_bytes());
            let (r, used) = parse_response(&bytes, true).unwrap().unwrap_or_else(|| panic!("{status}: no response"));
            assert_eq!(r.status, status);
            assert!(r.content_length() > 0, "{status}: Content-Length as for GET");
            assert_eq!(used, bytes.len(), "{status}: a body followed the head: {:?}", String::from_utf8_lossy(&bytes));
        }
    }

    /// `/dir?x=1` redirects to `/dir/?x=1`: the query string survives the redirect.
    fn directory_redirect_keeps_the_query(arch) {
        let s = Server::start(arch, &[], fill);
        let r = s.get("/dir?x=1&y=%20");
        r.assert_status(301);
        assert_eq!(r.header("location"), Some("/dir/?x=1&y=%20"));
        assert_eq!(s.get("/dir").header("location"), Some("/dir/"), "no query, none added");
        // Cached translation, other query: still its own.
        assert_eq!(s.get("/dir?z").header("location"), Some("/dir/?z"));
    }

    /// `--max-headers N`: N header lines are served, N+1 is 431.
    fn header_line_limit_is_an_option(arch) {
        let s = Server::start(arch, &["--max-headers", "10"], fill);
        let lines = |n: usize| (0..n).map(|i| format!("X-{i}: v\r\n")).collect::<String>();
        // Host and Connection count too.
        let ok = request_once(s.addr, req("GET", "/a.txt", &(lines(8) + "Connection: close\r\n")).as_bytes());
        ok.assert_status(200);
        let r = request_once(s.addr, req("GET", "/a.txt", &(lines(9) + "Connection: close\r\n")).as_bytes());
        r.assert_status(431);
    }
}
