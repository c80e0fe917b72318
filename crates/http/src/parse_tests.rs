//! Table-driven tests for `parse_request`, written the way a client would poke a server
//! (cases after lighttpd's `src/t/test_request.c`).

use super::*;
use crate::request::Method;

/// The parts of a head most cases check.
#[derive(Debug, PartialEq)]
struct Seen {
    method: Method,
    target: &'static str,
    version: Version,
    keep_alive: bool,
    head_len: usize,
}

/// What a case expects from `parse_request`.
#[derive(Debug, PartialEq)]
enum Expect {
    Head(Seen),
    Incomplete,
    Fail(HttpError),
}

use Expect::{Fail, Head, Incomplete};

const H10: Version = Version::Http10;
const H11: Version = Version::Http11;

fn seen(
    method: Method,
    target: &'static str,
    version: Version,
    keep_alive: bool,
    head_len: usize,
) -> Expect {
    Head(Seen { method, target, version, keep_alive, head_len })
}

fn run(input: &[u8], limits: &Limits) -> Expect {
    match parse_request(input, limits) {
        Ok(Some(h)) => Head(Seen {
            method: h.method,
            // Leaked only in tests, so cases can compare against string literals.
            target: Box::leak(h.target.into_boxed_str()),
            version: h.version,
            keep_alive: h.keep_alive,
            head_len: h.head_len,
        }),
        Ok(None) => Incomplete,
        Err(e) => Fail(e),
    }
}

fn bad(why: &'static str) -> Expect {
    Fail(HttpError::BadRequest(why))
}

#[test]
fn request_cases() {
    use Method::*;
    let cases: Vec<(&str, &[u8], Expect)> = vec![
        ("get 1.1", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", seen(Get, "/", H11, true, 27)),
        ("head 1.1", b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n", seen(Head, "/x", H11, true, 29)),
        ("get 1.0 no host", b"GET /a HTTP/1.0\r\n\r\n", seen(Get, "/a", H10, false, 19)),
        ("head 1.0", b"HEAD / HTTP/1.0\r\nHost: a\r\n\r\n", seen(Head, "/", H10, false, 28)),
        ("post is parsed", b"POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", seen(Post, "/f", H11, true, 48)),
        ("unknown method", b"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n", seen(Unknown, "/pot", H11, true, 31)),
        ("absolute form", b"GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n", seen(Get, "http://a/b", H11, true, 36)),
        ("query kept raw", b"GET /a%20b?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", seen(Get, "/a%20b?x=1", H11, true, 36)),
        ("leading crlf", b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", seen(Get, "/", H11, true, 31)),
        ("leading bare lf", b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", seen(Get, "/", H11, true, 28)),
        ("empty", b"", Incomplete),
        ("only crlf", b"\r\n", Incomplete),
        ("partial line", b"GET /index.ht", Incomplete),
        ("partial headers", b"GET / HTTP/1.1\r\nHost: a\r\n", Incomplete),
        ("partial version 2", b"GET / HTTP/2", Incomplete),
        ("missing host", b"GET / HTTP/1.1\r\n\r\n", bad("missing Host header")),
        ("duplicate host", b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", bad("multiple Host headers")),
        ("host with space", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", bad("invalid Host header")),
        ("host with slash", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", bad("invalid Host header")),
        ("empty host ok", b"GET / HTTP/1.1\r\nHost:\r\n\r\n", seen(Get, "/", H11, true, 25)),
        ("duplicate cl", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", bad("duplicate Content-Length")),
        ("negative cl", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", bad("invalid Content-Length")),
        ("non-numeric cl", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ten\r\n\r\n", bad("invalid Content-Length")),
        ("cl list", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n", bad("invalid Content-Length")),
        ("te and cl", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", bad("both Transfer-Encoding and Content-Length")),
        ("cl and te", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", bad("both Transfer-Encoding and Content-Length")),
        ("http/2.0", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Fail(HttpError::VersionNotSupported)),
        ("http/1.2 served as 1.1", b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", seen(Get, "/", H11, true, 27)),
        ("http/1.9 served as 1.1", b"HEAD /x HTTP/1.9\r\nHost: a\r\nConnection: close\r\n\r\n", seen(Head, "/x", H11, false, 48)),
        ("http/1.2 still needs host", b"GET / HTTP/1.2\r\n\r\n", bad("missing Host header")),
        ("http/1.2 partial", b"GET / HTTP/1.2\r\nHost: a\r\n", Incomplete),
        ("http/1.10", b"GET / HTTP/1.10\r\nHost: a\r\n\r\n", bad("invalid line ending")),
        ("host port digits", b"GET / HTTP/1.1\r\nHost: a:8080\r\n\r\n", seen(Get, "/", H11, true, 32)),
        ("host empty port", b"GET / HTTP/1.1\r\nHost: a:\r\n\r\n", seen(Get, "/", H11, true, 28)),
        ("host ipv6 port", b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", seen(Get, "/", H11, true, 34)),
        ("host non-numeric port", b"GET / HTTP/1.1\r\nHost: a:asd\r\n\r\n", bad("invalid Host header")),
        ("host two colons", b"GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", bad("invalid Host header")),
        ("host ipv6 unbracketed", b"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", bad("invalid Host header")),
        ("host ipv6 junk after", b"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", bad("invalid Host header")),
        ("host ipv6 unclosed", b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", bad("invalid Host header")),
        ("te chunked", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", seen(Get, "/", H11, true, 55)),
        ("te identity", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", bad("Transfer-Encoding without chunked last")),
        ("te chunked not last", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", bad("Transfer-Encoding without chunked last")),
        ("te chunked twice", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", bad("Transfer-Encoding without chunked last")),
        ("te empty element", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked\r\n\r\n", bad("Transfer-Encoding without chunked last")),
        ("te gzip then chunked", b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Fail(HttpError::UnsupportedTransferCoding)),
        ("te in 1.0", b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", bad("Transfer-Encoding in HTTP/1.0")),
        ("http/0.9", b"GET / HTTP/0.9\r\n\r\n", Fail(HttpError::VersionNotSupported)),
        ("http/10.0", b"GET / HTTP/10.0\r\n\r\n", bad("malformed request line")),
        ("lowercase version", b"GET / http/1.1\r\nHost: a\r\n\r\n", bad("malformed request line")),
        ("no version", b"GET /\r\n\r\n", bad("invalid token in request line")),
        ("extra token", b"GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", bad("invalid line ending")),
        ("garbage", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", bad("invalid token in request line")),
        ("space in target", b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", bad("malformed request line")),
        ("bad header name", b"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", bad("invalid header name")),
        ("bare lf line endings", b"GET / HTTP/1.1\nHost: a\n\n", seen(Get, "/", H11, true, 24)),
        ("obs-fold rejected", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", bad("invalid header name")),
        ("space before colon", b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", bad("invalid header name")),
        ("nul in header value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", bad("invalid header value")),
        ("lone cr in head", b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", bad("invalid line ending")),
    ];
    let limits = Limits::default();
    for (name, input, expected) in cases {
        assert_eq!(run(input, &limits), expected, "{name}");
    }
}

#[test]
fn keep_alive_matrix() {
    let cases: &[(&str, &str, bool)] = &[
        ("HTTP/1.1", "", true),
        ("HTTP/1.1", "Connection: close\r\n", false),
        ("HTTP/1.1", "Connection: Close\r\n", false),
        ("HTTP/1.1", "Connection: keep-alive\r\n", true),
        ("HTTP/1.1", "Connection: upgrade, CLOSE\r\n", false),
        ("HTTP/1.1", "Connection: keep-alive\r\nConnection: close\r\n", false),
        ("HTTP/1.1", "Connection: closed\r\n", true),
        ("HTTP/1.0", "", false),
        ("HTTP/1.0", "Connection: keep-alive\r\n", true),
        ("HTTP/1.0", "Connection: Keep-Alive\r\n", true),
        ("HTTP/1.0", "Connection: foo , keep-alive\r\n", true),
        ("HTTP/1.0", "Connection: keep-alive, close\r\n", false),
        ("HTTP/1.0", "Connection: close\r\n", false),
    ];
    for (version, extra, expected) in cases {
        let req = format!("GET / {version}\r\nHost: h\r\n{extra}\r\n");
        let head = parse_request(req.as_bytes(), &Limits::default()).unwrap().unwrap();
        assert_eq!(head.keep_alive, *expected, "{version} {extra:?}");
    }
}

#[test]
fn pipelined_requests_follow_head_len() {
    let buf = b"GET /one HTTP/1.1\r\nHost: a\r\n\r\nHEAD /two HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /thr";
    let limits = Limits::default();
    let first = parse_request(buf, &limits).unwrap().unwrap();
    assert_eq!((first.target.as_str(), first.head_len), ("/one", 30));
    let rest = &buf[first.head_len..];
    let second = parse_request(rest, &limits).unwrap().unwrap();
    assert_eq!(
        (second.method, second.target.as_str(), second.keep_alive),
        (Method::Head, "/two", false)
    );
    assert_eq!(parse_request(&rest[second.head_len..], &limits), Ok(None));
}

#[test]
fn fields_are_extracted() {
    let req = b"GET /f HTTP/1.1\r\n\
        hOsT: example.com:8080\r\n\
        If-None-Match: \"a\"\r\n\
        If-None-Match: W/\"b\"\r\n\
        If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
        Range: bytes=0-9\r\n\
        Range: bytes=5-\r\n\
        If-Range: \"a\"\r\n\
        User-Agent: curl/8.0\r\n\
        Referer: http://example.com/\r\n\
        Accept-Encoding: gzip, br\r\n\
        accept-encoding: zstd;q=0.5\r\n\
        Origin: https://app.example\r\n\
        Access-Control-Request-Method: GET\r\n\
        Access-Control-Request-Headers: x-a\r\n\
        Access-Control-Request-Headers: x-b\r\n\
        Content-Length:  0 \r\n\
        X-Unknown: ignored\r\n\r\n";
    let head = parse_request(req, &Limits::default()).unwrap().unwrap();
    assert_eq!(head.method_raw, "GET");
    assert_eq!(head.host.as_deref(), Some("example.com:8080"));
    assert_eq!(head.if_none_match.as_deref(), Some("\"a\", W/\"b\""));
    assert_eq!(head.if_modified_since.as_deref(), Some("Sun, 06 Nov 1994 08:49:37 GMT"));
    assert_eq!(head.range.as_deref(), Some("bytes=0-9"));
    assert_eq!(head.if_range.as_deref(), Some("\"a\""));
    assert_eq!(head.user_agent.as_deref(), Some("curl/8.0"));
    assert_eq!(head.referer.as_deref(), Some("http://example.com/"));
    assert_eq!(head.accept_encoding.as_deref(), Some("gzip, br, zstd;q=0.5"));
    assert_eq!(head.origin.as_deref(), Some("https://app.example"));
    assert_eq!(head.access_control_request_method.as_deref(), Some("GET"));
    assert_eq!(head.access_control_request_headers.as_deref(), Some("x-a, x-b"));
    assert_eq!(head.content_length, Some(0));
    assert!(!head.chunked);
    assert_eq!(head.head_len, req.len());

    let te = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n";
    let head = parse_request(te, &Limits::default()).unwrap().unwrap();
    assert!(head.chunked);
    assert_eq!(head.content_length, None);
}

#[test]
fn size_limits() {
    let limits = Limits { max_head_bytes: 256, max_uri_bytes: 64, max_headers: 4 };
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(100));
    let long_partial = format!("GET /{}", "a".repeat(100));
    let at_uri_limit = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(64 - 14));
    let big_header = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(300));
    let big_partial = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "b".repeat(300));
    let just_fits = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(256 - 32));
    let one_over = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(256 - 31));
    let many = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n".to_owned();
    let four = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n".to_owned();
    let crlf_flood = "\r\n".repeat(200);
    let cases: Vec<(&str, String, Expect)> = vec![
        ("long uri", long_target, Fail(HttpError::UriTooLong)),
        ("long uri, line incomplete", long_partial, Fail(HttpError::UriTooLong)),
        (
            "request line at limit",
            at_uri_limit,
            seen(Method::Get, "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", H11, true, 77),
        ),
        ("huge header", big_header, Fail(HttpError::HeadTooLarge)),
        ("huge header, incomplete", big_partial, Fail(HttpError::HeadTooLarge)),
        ("head exactly at limit", just_fits, seen(Method::Get, "/", H11, true, 256)),
        ("head one byte over", one_over, Fail(HttpError::HeadTooLarge)),
        ("too many headers", many, Fail(HttpError::HeadTooLarge)),
        ("max headers exactly", four, seen(Method::Get, "/", H11, true, 45)),
        ("endless empty lines", crlf_flood, Fail(HttpError::HeadTooLarge)),
    ];
    for (name, input, expected) in cases {
        assert_eq!(run(input.as_bytes(), &limits), expected, "{name}");
    }
}

#[test]
fn many_headers_beyond_inline_slots() {
    let limits = Limits { max_headers: 100, ..Limits::default() };
    let mut req = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
    for i in 0..98 {
        req.push_str(&format!("X-{i}: v\r\n"));
    }
    req.push_str("\r\n");
    assert!(parse_request(req.as_bytes(), &limits).unwrap().is_some());
    assert_eq!(parse_request(req.as_bytes(), &Limits::default()), Err(HttpError::HeadTooLarge));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn small_limits() -> Limits {
        Limits { max_head_bytes: 512, max_uri_bytes: 128, max_headers: 8 }
    }

    /// Well-formed requests with a few random fields.
    fn valid_request() -> impl Strategy<Value = String> {
        let method = prop::sample::select(vec!["GET", "HEAD", "POST", "BREW"]);
        let field = ("[A-Za-z][A-Za-z0-9-]{0,10}", "[ -~]{0,20}")
            .prop_filter("not a framing field", |(n, _)| {
                !["host", "content-length", "transfer-encoding"]
                    .contains(&n.to_lowercase().as_str())
            })
            .prop_map(|(n, v)| format!("{n}: {}\r\n", v.trim()));
        (0..3usize, method, "/[a-z0-9/._%-]{0,40}", prop::collection::vec(field, 0..5)).prop_map(
            |(empty_lines, method, path, fields)| {
                format!(
                    "{}{method} {path} HTTP/1.1\r\nHost: h\r\n{}\r\n",
                    "\r\n".repeat(empty_lines),
                    fields.concat()
                )
            },
        )
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_stay_in_bounds(buf in prop::collection::vec(any::<u8>(), 0..600)) {
            let limits = small_limits();
            if let Ok(Some(head)) = parse_request(&buf, &limits) {
                prop_assert!(head.head_len <= buf.len().min(limits.max_head_bytes));
                prop_assert!(buf[..head.head_len].ends_with(b"\n"));
            }
        }

        #[test]
        fn valid_requests_parse_whole_and_wait_on_every_prefix(req in valid_request()) {
            let limits = small_limits();
            let bytes = req.as_bytes();
            let head = parse_request(bytes, &limits).unwrap().unwrap();
            prop_assert_eq!(head.head_len, bytes.len());
            for cut in 0..bytes.len() {
                prop_assert_eq!(parse_request(&bytes[..cut], &limits), Ok(None), "cut at {}", cut);
            }
            // And with a pipelined follower, the first head ends in the same place.
            let mut two = bytes.to_vec();
            two.extend_from_slice(b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n");
            prop_assert_eq!(parse_request(&two, &limits).unwrap().unwrap().head_len, bytes.len());
        }
    }
}
