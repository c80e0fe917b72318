//! Configured response headers: Cache-Control rules by URL-path glob, custom headers,
//! security headers, CORS (Access-Control-Allow-Origin and preflight `OPTIONS`).

use crate::common::*;
use std::path::Path;

fn fill(root: &Path) {
    write(root, "index.html", "<h1>home</h1>");
    write(root, "assets/app.3f9a.js", "js");
    write(root, "assets/css/site.css", "css");
    write(root, "docs/index.html", "<h1>docs</h1>");
    write(root, "notes.txt", "notes");
}

const RULES: &[&str] = &[
    "--cache-control",
    "/assets/*=public, max-age=31536000, immutable",
    "--cache-control",
    "*.html=no-cache",
];

arch_tests! {
    /// Cache-Control comes from the first rule whose glob matches the URL path, on 200, 206
    /// and 304 alike; a file reached through two URLs (`/docs/` and `/docs/index.html`) gets
    /// each URL's own rule even with the header cache warm; error responses get none.
    fn cache_control_rules_by_url_path(arch) {
        let s = Server::start(arch, RULES, fill);
        let mut c = s.conn();
        let immutable = Some("public, max-age=31536000, immutable");
        for _ in 0..2 {
            for (path, want) in [
                ("/assets/app.3f9a.js", immutable),
                ("/assets/css/site.css", immutable),
                ("/docs/index.html", Some("no-cache")),
                ("/docs/", None),
                ("/index.html", Some("no-cache")),
                ("/", None),
                ("/notes.txt", None),
            ] {
                c.send(req("GET", path, ""));
                let r = c.response();
                assert_eq!(r.assert_status(200).header("cache-control"), want, "{path}: {r:?}");
                assert!(r.header_count("cache-control") <= 1);
            }
        }
        let etag = s.get("/assets/app.3f9a.js").must("etag").to_string();
        c.send(req("GET", "/assets/app.3f9a.js", &format!("If-None-Match: {etag}\r\n")));
        let r = c.response();
        assert_eq!((r.status, r.header("cache-control")), (304, immutable), "{r:?}");
        c.send(req("GET", "/assets/app.3f9a.js", "Range: bytes=0-0\r\n"));
        assert_eq!(c.response().assert_status(206).header("cache-control"), immutable);
        c.send(req("GET", "/assets/missing.js", ""));
        let r = c.response();
        assert_eq!((r.status, r.header("cache-control")), (404, None), "{r:?}");
    }

    /// `--add-header` and `--security-headers` reach every kind of response: file, 304,
    /// redirect, 404, 405 — each header once.
    fn custom_and_security_headers_everywhere(arch) {
        let s = Server::start(
            arch,
            &["--add-header", "X-Served-By: amped test", "--add-header", "Strict-Transport-Security: max-age=63072000", "--security-headers"],
            fill,
        );
        let mut c = s.conn();
        let etag = s.get("/notes.txt").must("etag").to_string();
        let requests = [
            (req("GET", "/notes.txt", ""), 200),
            (req("GET", "/notes.txt", &format!("If-None-Match: {etag}\r\n")), 304),
            (req("GET", "/docs", ""), 301),
            (req("GET", "/missing", ""), 404),
            (req("POST", "/notes.txt", "Content-Length: 0\r\n"), 405),
            (req("OPTIONS", "/notes.txt", "Origin: https://a.example\r\nAccess-Control-Request-Method: GET\r\n"), 405),
        ];
        for (request, status) in requests {
            c.send(&request);
            let r = c.response();
            assert_eq!(r.status, status, "{request:?}: {r:?}");
            for (name, value) in [
                ("x-served-by", "amped test"),
                ("strict-transport-security", "max-age=63072000"),
                ("x-content-type-options", "nosniff"),
                ("referrer-policy", "strict-origin-when-cross-origin"),
                ("x-frame-options", "SAMEORIGIN"),
            ] {
                assert_eq!(r.header(name), Some(value), "{request:?}: {r:?}");
                assert_eq!(r.header_count(name), 1, "{request:?}: {name} once");
            }
            assert_eq!(r.header("access-control-allow-origin"), None, "CORS is off");
        }
    }

    /// `--cors-origin`: Access-Control-Allow-Origin on every response; a preflight is answered
    /// 204 (no body, connection kept) with the allowed methods, the request headers asked
    /// about and a max age; an OPTIONS that is no preflight is still 405.
    fn cors_origin_and_preflight(arch) {
        let s = Server::start(arch, &["--cors-origin", "https://app.example"], fill);
        let mut c = s.conn();
        c.send(req("GET", "/notes.txt", "Origin: https://app.example\r\n"));
        let r = c.response();
        assert_eq!(r.assert_status(200).header("access-control-allow-origin"), Some("https://app.example"));
        let preflight = req(
            "OPTIONS",
            "/notes.txt",
            "Origin: https://app.example\r\nAccess-Control-Request-Method: GET\r\nAccess-Control-Request-Headers: x-requested-with, content-type\r\n",
        );
        c.send(preflight + &req("GET", "/missing", ""));
        let r = c.response();
        assert_eq!(r.status, 204, "{r:?}");
        assert!(r.body.is_empty() && r.header("content-length").is_none(), "{r:?}");
        assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
        assert_eq!(r.header("access-control-allow-methods"), Some("GET, HEAD, OPTIONS"));
        assert_eq!(r.header("access-control-allow-headers"), Some("x-requested-with, content-type"));
        assert_eq!(r.header("access-control-max-age"), Some("86400"));
        let r = c.response();
        assert_eq!(r.status, 404, "the pipelined request after the preflight: {r:?}");
        assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
        c.send(req("OPTIONS", "/notes.txt", "Connection: close\r\n"));
        let r = c.response();
        assert_eq!(r.status, 405, "not a preflight: {r:?}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"));
        drop(s);

        let s = Server::start(arch, &[], fill);
        let r = request_once(s.addr, req("OPTIONS", "/notes.txt", "Origin: https://app.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n").as_bytes());
        assert_eq!(r.status, 405, "without --cors-origin: {r:?}");
        assert_eq!(r.header("access-control-allow-origin"), None);
    }
}
