//! Custom error pages (`--error-page STATUS=/PATH`) and the SPA fallback (`--spa-fallback`).

use crate::common::*;
use std::path::Path;

const NOT_FOUND_PAGE: &str = "<h1>Nothing here</h1>\n";
const FORBIDDEN_PAGE: &str = "<h1>Not for you</h1>\n";
const APP: &str = "<!DOCTYPE html><div id=app></div>\n";

fn fill(root: &Path) {
    write(root, "errors/404.html", NOT_FOUND_PAGE);
    write(root, "errors/403.html", FORBIDDEN_PAGE);
    write(root, "index.html", APP);
    write(root, "real.txt", "a real file");
    std::fs::create_dir(root.join("dir")).unwrap();
    let ok = std::process::Command::new("mkfifo").arg(root.join("pipe")).status().unwrap();
    assert!(ok.success(), "mkfifo failed");
}

const PAGES: &[&str] =
    &["--error-page", "404=/errors/404.html", "--error-page", "403=/errors/403.html"];

arch_tests! {
    /// A 404 or 403 answers with the configured page and its own status, whole and with
    /// the page's Content-Type, whatever the conditionals or ranges sent; HEAD gets the
    /// head only; the connection stays usable.
    fn custom_pages_keep_their_status(arch) {
        let s = Server::start(arch, PAGES, fill);
        let mut c = s.conn();
        for _ in 0..2 {
            c.send(req("GET", "/missing.html", ""));
            let r = c.response();
            assert_eq!(r.assert_status(404).text(), NOT_FOUND_PAGE);
            assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
            assert_eq!(r.header("etag"), None, "no validator for a missing resource: {r:?}");
            c.send(req("GET", "/pipe", ""));
            assert_eq!(c.response().assert_status(403).text(), FORBIDDEN_PAGE);
        }
        c.send(req("GET", "/.hidden", ""));
        assert_eq!(c.response().assert_status(404).text(), NOT_FOUND_PAGE);
        c.send(req("HEAD", "/missing.html", ""));
        let h = c.head_response();
        assert_eq!(h.assert_status(404).content_length() as usize, NOT_FOUND_PAGE.len());
        let page_tag = s.get("/errors/404.html").must("etag").to_string();
        c.send(req("GET", "/missing.html", &format!("If-None-Match: {page_tag}\r\nRange: bytes=0-3\r\n")));
        assert_eq!(c.response().assert_status(404).text(), NOT_FOUND_PAGE, "no 304/206 for an error");
        c.send(req("GET", "/real.txt", "Connection: close\r\n"));
        assert_eq!(c.response().assert_status(200).body, b"a real file");
        // The page itself is still an ordinary file at its own URL.
        assert_eq!(s.get("/errors/404.html").assert_status(200).text(), NOT_FOUND_PAGE);
    }

    /// A configured page that does not exist (or is a directory) falls back to the built-in
    /// page with the right status.
    fn missing_page_falls_back_to_built_in(arch) {
        let s = Server::start(
            arch,
            &["--error-page", "404=/no/such/page.html", "--error-page", "403=/dir"],
            fill,
        );
        let r = s.get("/missing");
        assert!(r.assert_status(404).text().contains("404 Not Found"), "{r:?}");
        let r = s.get("/pipe");
        assert!(r.assert_status(403).text().contains("403 Forbidden"), "{r:?}");
    }

    /// `--spa-fallback`: a GET/HEAD of a path with no file is answered 200 with the fallback
    /// file — conditionals honoured, HEAD without a body — while real files, redirects and
    /// other methods are unchanged; a missing fallback gives the 404 page.
    fn spa_fallback_answers_routes(arch) {
        let mut args = PAGES.to_vec();
        args.extend(["--spa-fallback", "/index.html"]);
        let s = Server::start(arch, &args, fill);
        let mut c = s.conn();
        c.send(req("GET", "/users/42/settings", ""));
        let r = c.response();
        assert_eq!(r.assert_status(200).text(), APP);
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        let etag = r.must("etag").to_string();
        c.send(req("GET", "/another/route", &format!("If-None-Match: {etag}\r\n")));
        let r = c.response();
        assert_eq!(r.status, 304, "{r:?}");
        assert_eq!(r.header("etag"), Some(etag.as_str()));
        c.send(req("HEAD", "/route", ""));
        let h = c.head_response();
        assert_eq!(h.assert_status(200).content_length() as usize, APP.len());
        c.send(req("GET", "/real.txt", ""));
        assert_eq!(c.response().assert_status(200).body, b"a real file");
        c.send(req("GET", "/dir", ""));
        assert_eq!(c.response().assert_status(301).header("location"), Some("/dir/"));
        c.send(req("GET", "/pipe", ""));
        assert_eq!(c.response().assert_status(403).text(), FORBIDDEN_PAGE, "403 is no route");
        c.send(req("DELETE", "/route", "Connection: close\r\n"));
        assert_eq!(c.response().status, 405);
        drop(s);

        let s = Server::start(arch, &args, |root| {
            fill(root);
            std::fs::remove_file(root.join("index.html")).unwrap();
        });
        assert_eq!(s.get("/route").assert_status(404).text(), NOT_FOUND_PAGE, "fallback missing");
    }
}
