//! HTTP/1.1 message handling: methods, headers, keep-alive, pipelining, malformed requests,
//! request bodies on GET/HEAD.

use crate::common::*;
use std::path::Path;
use std::time::Duration;

const HELLO: &str = "hello, world\n";

fn fill_basic(root: &Path) {
    write(root, "hello.txt", HELLO);
    write(root, "index.html", "<h1>index</h1>\n");
    write(root, "a.txt", "AAAA");
    write(root, "b.txt", "BBBBBBBB");
    write(root, "c.txt", "CCCCCCCCCCCC");
    write(root, "pic.png", pseudo_random(300, 7));
    write(root, "blob.unknownext", "?");
}

fn assert_http_date(value: &str) {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    assert_eq!(value.len(), 29, "not an IMF-fixdate: {value:?}");
    assert!(
        value.ends_with(" GMT") && value.as_bytes()[3] == b',',
        "not an IMF-fixdate: {value:?}"
    );
}

arch_tests! {
    /// A plain GET carries every header the spec lists and exactly the file's bytes.
    fn get_file_headers(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let r = s.get("/hello.txt");
        r.assert_status(200);
        assert_eq!(r.version, "HTTP/1.1");
        assert_eq!(r.body, HELLO.as_bytes());
        assert_eq!(r.content_length(), HELLO.len() as u64);
        assert_eq!(r.must("content-type"), "text/plain; charset=utf-8");
        assert_eq!(r.must("server"), "amped");
        assert_eq!(r.must("accept-ranges"), "bytes");
        assert_http_date(r.must("date"));
        assert_http_date(r.must("last-modified"));
        let etag = r.must("etag");
        assert!(etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'), "ETag {etag:?}");
        assert!(!etag.starts_with("W/"), "weak ETag {etag:?}");
        for name in ["content-length", "date", "server", "etag"] {
            assert_eq!(r.header_count(name), 1, "{name} repeated");
        }
        let mtime = std::fs::metadata(s.path("hello.txt")).unwrap().modified().unwrap();
        assert_eq!(r.must("last-modified"), http_date(mtime), "Last-Modified is not the mtime");
    }

    /// Date is the current time (within a couple of seconds) and advances.
    fn date_header_is_current(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let near = |d: &str| {
            let now = std::time::SystemTime::now();
            (-2i64..=2).any(|k| {
                let t = if k < 0 { now - Duration::from_secs(k.unsigned_abs()) } else { now + Duration::from_secs(k as u64) };
                http_date(t) == d
            })
        };
        let d1 = s.get("/hello.txt").must("date").to_string();
        assert!(near(&d1), "Date {d1:?} is not now ({})", http_date(std::time::SystemTime::now()));
        std::thread::sleep(Duration::from_millis(1300));
        let d2 = s.get("/hello.txt").must("date").to_string();
        assert_ne!(d1, d2, "Date did not advance");
        assert!(near(&d2), "Date {d2:?} is not now");
    }

    /// `.html` and `/` (index.html) get text/html with charset; binary types per mime_guess.
    fn content_types(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let r = s.get("/");
        r.assert_status(200);
        assert_eq!(r.body, b"<h1>index</h1>\n");
        assert_eq!(r.must("content-type"), "text/html; charset=utf-8");
        let r = s.get("/index.html");
        assert_eq!(r.must("content-type"), "text/html; charset=utf-8");
        let r = s.get("/blob.unknownext");
        r.assert_status(200);
        assert_eq!(r.must("content-type"), "application/octet-stream");
        let r = s.get("/pic.png");
        r.assert_status(200);
        assert_eq!(r.must("content-type"), "image/png");
        assert_eq!(r.body, pseudo_random(300, 7));
    }

    /// HEAD: same headers as GET, no body; the connection stays in sync (pipelined HEAD, GET).
    fn head_same_headers_no_body(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send(req("HEAD", "/hello.txt", "") + &req("GET", "/hello.txt", "Connection: close\r\n"));
        let head = c.head_response();
        let get = c.response();
        head.assert_status(200);
        get.assert_status(200);
        assert_eq!(get.body, HELLO.as_bytes());
        for name in ["content-length", "content-type", "etag", "last-modified", "accept-ranges", "server"] {
            assert_eq!(head.header(name), get.header(name), "HEAD and GET differ in {name}");
        }
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty(), "HEAD sent a body: {:?}", String::from_utf8_lossy(c.pending()));
    }

    /// Known methods other than GET/HEAD: 405 with `Allow: GET, HEAD`.
    fn known_methods_405(arch) {
        let s = Server::start(arch, &[], fill_basic);
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"] {
            let r = request_once(s.addr, format!(
                "{method} /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ).as_bytes());
            assert_eq!(r.status, 405, "{method}: {r:?}");
            assert_eq!(r.header("allow"), Some("GET, HEAD"), "{method}");
            assert_eq!(r.content_length() as usize, r.body.len(), "{method}");
        }
    }

    /// An unknown method token: 501.
    fn unknown_method_501(arch) {
        let s = Server::start(arch, &[], fill_basic);
        for method in ["FOO", "BREW", "get"] {
            let r = request_once(s.addr, req(method, "/hello.txt", "Connection: close\r\n").as_bytes());
            assert_eq!(r.status, 501, "{method}: {r:?}");
        }
    }

    /// Error responses carry a small HTML body with a correct Content-Length.
    fn not_found_404_html(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let r = s.get("/missing.txt");
        r.assert_status(404);
        assert!(!r.body.is_empty(), "404 without body");
        assert_eq!(r.content_length() as usize, r.body.len());
        assert!(r.must("content-type").starts_with("text/html"), "{r:?}");
        assert_eq!(r.must("server"), "amped");
        assert_http_date(r.must("date"));
        // keep-alive survives a 404
        let mut c = s.conn();
        c.send(req("GET", "/missing.txt", "") + &req("GET", "/a.txt", ""));
        c.response().assert_status(404);
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
    }

    /// HTTP/1.1 keeps the connection open by default.
    fn keepalive_default_http11(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        for (path, body) in [("/a.txt", &b"AAAA"[..]), ("/b.txt", b"BBBBBBBB"), ("/a.txt", b"AAAA")] {
            c.send(req("GET", path, ""));
            let r = c.response();
            r.assert_status(200);
            assert_eq!(r.body, body);
            assert!(!r.connection_has("close"), "{r:?}");
        }
        c.assert_silent_for(Duration::from_millis(300));
    }

    /// HTTP/1.0 without keep-alive: answered (as HTTP/1.1) and closed. Host is not required.
    fn http10_closes_by_default(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send("GET /hello.txt HTTP/1.0\r\n\r\n");
        let r = c.response();
        r.assert_status(200);
        assert_eq!(r.version, "HTTP/1.1");
        assert_eq!(r.body, HELLO.as_bytes());
        c.assert_closed(Duration::from_secs(3));
    }

    /// HTTP/1.0 with `Connection: keep-alive`: the response says so and the connection is reused.
    fn http10_keepalive(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        for _ in 0..2 {
            c.send("GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
            let r = c.response();
            r.assert_status(200);
            assert_eq!(r.body, b"AAAA");
            assert!(r.connection_has("keep-alive"), "{r:?}");
        }
        c.assert_silent_for(Duration::from_millis(300));
    }

    /// `Connection: close`: the response says so and the server closes.
    fn connection_close(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send(req("GET", "/a.txt", "Connection: close\r\n"));
        let r = c.response();
        r.assert_status(200);
        assert!(r.connection_has("close"), "{r:?}");
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty());
    }

    /// Pipelined requests in one write (GET, 404, HEAD, GET) are answered in order.
    fn pipelined_in_order(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send([
            req("GET", "/a.txt", ""),
            req("GET", "/nope.txt", ""),
            req("GET", "/b.txt", ""),
            req("HEAD", "/c.txt", ""),
            req("GET", "/c.txt", "Connection: close\r\n"),
        ].concat());
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        c.response().assert_status(404);
        assert_eq!(c.response().assert_status(200).body, b"BBBBBBBB");
        let h = c.head_response();
        h.assert_status(200);
        assert_eq!(h.content_length(), 12);
        assert_eq!(c.response().assert_status(200).body, b"CCCCCCCCCCCC");
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty());
    }

    /// 100 pipelined requests for distinct files in one write (more than one read buffer).
    fn pipelined_many(arch) {
        let s = Server::start(arch, &[], |root| {
            for i in 0..100 {
                write(root, &format!("f{i}.txt"), format!("file number {i}\n").repeat(i + 1));
            }
        });
        let mut c = s.conn();
        let all: String = (0..100).map(|i| req("GET", &format!("/f{i}.txt"), "")).collect();
        c.send(all);
        for i in 0..100 {
            let r = c.response();
            r.assert_status(200);
            assert_eq!(r.text(), format!("file number {i}\n").repeat(i + 1), "response {i}");
        }
    }

    /// HTTP/1.1 without Host: 400.
    fn missing_host_400(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let r = request_once(s.addr, b"GET /hello.txt HTTP/1.1\r\nConnection: close\r\n\r\n");
        r.assert_status(400);
        assert!(!contains(&r.body, HELLO.as_bytes()));
        // RFC 9110 §7.2: more than one Host is a 400 too
        let r = request_once(s.addr, b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
        r.assert_status(400);
    }

    /// A malformed request line: 400 and close.
    fn malformed_request_line_400(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let cases: [&[u8]; 5] = [
            b"GARBAGE\r\n\r\n",
            b"GET /hello.txt HTTP/1.1 extra\r\nHost: test\r\n\r\n",
            b"GET /hello.txt FOO/1.1\r\nHost: test\r\n\r\n",
            b"G\x01T /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n",
            b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nBad Header Line\r\n\r\n",
        ];
        for case in cases {
            let mut c = s.conn();
            c.send(case);
            let r = c.response();
            assert_eq!(r.status, 400, "{:?}: {r:?}", String::from_utf8_lossy(case));
            c.assert_closed(Duration::from_secs(3));
        }
    }

    /// HTTP/2.0 or HTTP/3.0 in a request line: 505 (a later 1.x is served as 1.1: framing.rs).
    fn unsupported_version_505(arch) {
        let s = Server::start(arch, &[], fill_basic);
        for version in ["HTTP/2.0", "HTTP/0.9", "HTTP/3.0"] {
            let r = request_once(
                s.addr,
                format!("GET /hello.txt {version}\r\nHost: test\r\n\r\n").as_bytes(),
            );
            assert_eq!(r.status, 505, "{version}: {r:?}");
        }
    }

    /// A head over --max-head-bytes: 431 (default 8192 and a small configured limit).
    fn head_too_large_431(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let big = format!("X-Big: {}\r\n", "x".repeat(9000));
        let r = request_once(s.addr, req("GET", "/hello.txt", &big).as_bytes());
        r.assert_status(431);
        let many: String = (0..500).map(|i| format!("X-H{i}: 0123456789\r\n")).collect();
        let r = request_once(s.addr, req("GET", "/hello.txt", &many).as_bytes());
        r.assert_status(431);

        let s = Server::start(arch, &["--max-head-bytes", "1024"], fill_basic);
        let r = request_once(s.addr, req("GET", "/hello.txt", &format!("X-A: {}\r\nConnection: close\r\n", "a".repeat(500))).as_bytes());
        r.assert_status(200);
        assert_eq!(r.body, HELLO.as_bytes());
        let r = request_once(s.addr, req("GET", "/hello.txt", &format!("X-A: {}\r\n", "a".repeat(2000))).as_bytes());
        r.assert_status(431);
    }

    /// A request line over --max-uri-bytes: 414 (default 4096 and a small configured limit).
    fn uri_too_long_414(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let long = format!("/{}", "a".repeat(5000));
        let r = request_once(s.addr, req("GET", &long, "Connection: close\r\n").as_bytes());
        r.assert_status(414);

        let s = Server::start(arch, &["--max-uri-bytes", "100"], fill_basic);
        let r = request_once(s.addr, req("GET", &format!("/{}", "b".repeat(200)), "").as_bytes());
        r.assert_status(414);
        let r = request_once(s.addr, req("GET", &format!("/{}", "b".repeat(40)), "").as_bytes());
        r.assert_status(404);
        let r = request_once(s.addr, req("GET", "/hello.txt?x=1", "").as_bytes());
        r.assert_status(200);
    }

    /// A GET with a Content-Length body: the body is discarded, not parsed as a request, and
    /// the next pipelined request is answered.
    fn get_body_discarded_in_sync(arch) {
        let s = Server::start(arch, &[], fill_basic);
        // The body itself looks like a request for /b.txt; it must not be answered.
        let smuggled = "GET /b.txt HTTP/1.1\r\nHost: test\r\n\r\n";
        let mut c = s.conn();
        c.send(format!(
            "GET /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{smuggled}{}",
            smuggled.len(),
            req("GET", "/c.txt", "Connection: close\r\n"),
        ));
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        assert_eq!(c.response().assert_status(200).body, b"CCCCCCCCCCCC");
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty(), "smuggled request answered: {:?}", String::from_utf8_lossy(c.pending()));
    }

    /// A body just under --max-discard-body (default 65536) is discarded too; HEAD as well.
    fn large_body_discarded(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let body = "z".repeat(60_000);
        let mut c = s.conn();
        c.send(format!(
            "HEAD /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{body}{}",
            body.len(),
            req("GET", "/b.txt", "Connection: close\r\n"),
        ));
        c.head_response().assert_status(200);
        assert_eq!(c.response().assert_status(200).body, b"BBBBBBBB");
        c.assert_closed(Duration::from_secs(3));
        assert!(c.pending().is_empty());
    }

    /// A Content-Length over --max-discard-body: 413 and close.
    fn body_too_large_413(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send("GET /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 100000\r\n\r\n");
        c.response().assert_status(413);
        c.assert_closed(Duration::from_secs(3));

        let s = Server::start(arch, &["--max-discard-body", "10"], fill_basic);
        let mut c = s.conn();
        c.send("GET /a.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\n");
        c.response().assert_status(413);
        c.assert_closed(Duration::from_secs(3));
    }

    /// Request framing the server refuses: 400 and close (no request smuggling).
    fn bad_framing_400(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let cases = [
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: 4\r\nContent-Length: 4\r\n",
            "Content-Length: 4\r\nContent-Length: 5\r\n",
            "Content-Length: abc\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: +4\r\n",
            "Content-Length: 4, 4\r\n",
            "Content-Length : 4\r\n", // RFC 9112 §5.1: whitespace before the colon
            "Transfer-Encoding: identity\r\n",
            "Transfer-Encoding: chunked, identity\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        ];
        for case in cases {
            let mut c = s.conn();
            c.send(req("GET", "/a.txt", case) + "0\r\n\r\n" + &req("GET", "/b.txt", ""));
            let r = c.response();
            assert_eq!(r.status, 400, "{case:?}: {r:?}");
            c.assert_closed(Duration::from_secs(3));
            assert!(!contains(c.pending(), b"BBBBBBBB"), "{case:?}: answered the next request");
        }
    }

    /// Requests split across many small writes (mid-line, mid-CRLF, mid-body) are assembled.
    fn request_split_across_writes(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.stream.set_nodelay(true).unwrap();
        let all = req("GET", "/a.txt", "Content-Length: 5\r\n") + "hello" + &req("GET", "/b.txt", "") + &req("HEAD", "/c.txt", "");
        for chunk in all.as_bytes().chunks(3) {
            c.send(chunk);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        assert_eq!(c.response().assert_status(200).body, b"BBBBBBBB");
        assert_eq!(c.head_response().assert_status(200).content_length(), 12);
        c.assert_silent_for(Duration::from_millis(300));
    }

    /// A client that half-closes after its request still gets the whole response.
    fn half_close_still_answered(arch) {
        let s = Server::start(arch, &[], |root| {
            fill_basic(root);
            write(root, "mid.bin", pseudo_random(300_000, 1));
        });
        let mut c = s.conn();
        c.send(req("GET", "/mid.bin", ""));
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        let r = c.response();
        assert!(r.assert_status(200).body == pseudo_random(300_000, 1), "body differs");
        c.assert_closed(Duration::from_secs(3));
    }

    /// 2000 pipelined requests written while the client reads concurrently: the server applies
    /// back-pressure instead of losing or reordering responses.
    fn pipelined_flood(arch) {
        let s = Server::start(arch, &[], |root| write(root, "ten.bin", pseudo_random(10_000, 2)));
        let mut c = s.conn();
        let mut writer = c.stream.try_clone().unwrap();
        let n = 2000;
        let t = std::thread::spawn(move || {
            let one = req("GET", "/ten.bin", "");
            for _ in 0..n / 100 {
                std::io::Write::write_all(&mut writer, one.repeat(100).as_bytes()).unwrap();
            }
        });
        let expect = pseudo_random(10_000, 2);
        for i in 0..n {
            let r = c.response();
            assert!(r.status == 200 && r.body == expect, "response {i} wrong");
        }
        t.join().unwrap();
    }

    /// An empty file: 200 with Content-Length 0; any range of it is unsatisfiable.
    fn empty_file(arch) {
        let s = Server::start(arch, &[], |root| write(root, "empty.txt", ""));
        let mut c = s.conn();
        c.send(req("GET", "/empty.txt", "") + &req("GET", "/empty.txt", "Range: bytes=0-\r\n"));
        let r = c.response();
        r.assert_status(200);
        assert_eq!(r.content_length(), 0);
        let r = c.response();
        r.assert_status(416);
        assert_eq!(r.must("content-range"), "bytes */0");
    }

    /// HEAD of a missing file: 404 without a body; the connection stays in sync.
    fn head_404_no_body(arch) {
        let s = Server::start(arch, &[], fill_basic);
        let mut c = s.conn();
        c.send(req("HEAD", "/missing.txt", "") + &req("GET", "/a.txt", ""));
        c.head_response().assert_status(404);
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
    }
}
