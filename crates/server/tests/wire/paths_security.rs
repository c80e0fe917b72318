//! Request-target translation: index files, redirects, percent-decoding, query strings, and
//! everything hostile: traversal, encodings, NUL, symlinks, dotfiles. Nothing outside ROOT ever
//! leaks (the server's temp dir holds [`SECRET_MARKER`] files next to the root).

use crate::common::*;
use std::os::unix::fs::symlink;
use std::path::Path;

fn fill_tree(root: &Path) {
    write(root, "index.html", "root index");
    write(root, "hello.txt", "hello");
    write(root, "sub/index.html", "sub index");
    write(root, "sub/page.txt", "sub page");
    write(root, "noindex/file.txt", "in noindex");
    write(root, "a/b/deep.txt", "deep");
    write(root, "a b.txt", "space name");
    write(root, "été.txt", "utf8 name");
    write(root, "100%.txt", "percent name");
    write(root, "q?.txt", "question mark");
    write(root, "a+b.txt", "plus name");
    write(root, "%2e%2e/inner.txt", "literal percent dir");
    write(root, ".env", "DOTENV=1");
    write(root, ".git/config", "[core]");
    write(root, "sub/.hidden", "hidden");
}

arch_tests! {
    /// `/` and `/dir/` serve index.html of that directory.
    fn index_files(arch) {
        let s = Server::start(arch, &[], fill_tree);
        assert_eq!(s.get("/").assert_status(200).body, b"root index");
        assert_eq!(s.get("/sub/").assert_status(200).body, b"sub index");
        assert_eq!(s.get("/sub/page.txt").assert_status(200).body, b"sub page");
        assert_eq!(s.get("/a/b/deep.txt").assert_status(200).body, b"deep");
    }

    /// A directory without index.html: 404 by default.
    fn directory_without_index_404(arch) {
        let s = Server::start(arch, &[], fill_tree);
        let r = s.get("/noindex/");
        r.assert_status(404);
        assert!(!contains(&r.body, b"file.txt"), "listing shown without --listing");
        s.get("/a/").assert_status(404);
    }

    /// `--listing`: an HTML listing with the entries, names HTML-escaped.
    fn directory_listing(arch) {
        let s = Server::start(arch, &["--listing"], |root| {
            fill_tree(root);
            write(root, "noindex/<script>&x.txt", "evil name");
            write(root, "noindex/q\"uote's.txt", "quotes");
        });
        let r = s.get("/noindex/");
        r.assert_status(200);
        assert!(r.must("content-type").starts_with("text/html"), "{r:?}");
        let body = r.text();
        assert!(body.contains("file.txt"), "{body}");
        assert!(body.contains("&lt;script&gt;&amp;x.txt"), "name not escaped: {body}");
        assert!(!body.contains("<script>"), "raw <script> in listing: {body}");
        assert!(!body.contains("q\"uote"), "raw quote in listing (breaks href): {body}");
        // a link in the listing leads to the file
        let start = body.find("href=\"f").expect("no href to file.txt") + 6;
        let href = &body[start..start + body[start..].find('"').unwrap()];
        let target = if href.starts_with('/') { href.to_string() } else { format!("/noindex/{href}") };
        assert_eq!(s.get(&target).assert_status(200).body, b"in noindex", "href {href:?}");
        // index.html still wins over the listing
        assert_eq!(s.get("/sub/").assert_status(200).body, b"sub index");
    }

    /// `/dir` without the slash: 301 to `/dir/`.
    fn directory_redirect_301(arch) {
        let s = Server::start(arch, &[], fill_tree);
        let r = s.get("/sub");
        r.assert_status(301);
        assert_eq!(r.must("location"), "/sub/");
        assert_eq!(r.content_length() as usize, r.body.len());
        let r = s.get("/a/b");
        r.assert_status(301);
        assert_eq!(r.must("location"), "/a/b/");
        let r = s.get("/sub?x=1");
        r.assert_status(301);
        assert!(r.must("location").starts_with("/sub/"), "{r:?}");
    }

    /// The Location of a redirect is percent-encoded: a directory name with a space or CR LF
    /// cannot break or inject header lines.
    fn redirect_location_encoded(arch) {
        let s = Server::start(arch, &[], |root| {
            fill_tree(root);
            std::fs::create_dir(root.join("a dir")).unwrap();
            std::fs::create_dir(root.join("x\r\nSet-Cookie: evil=1")).unwrap();
        });
        let r = s.get("/a%20dir");
        r.assert_status(301);
        assert_eq!(r.must("location"), "/a%20dir/");
        let resp = raw(s.addr, get_req("/x%0D%0ASet-Cookie:%20evil=1").as_bytes());
        let r = split_responses(&resp);
        assert_eq!(r.len(), 1, "{:?}", String::from_utf8_lossy(&resp));
        r[0].assert_status(301);
        assert_eq!(r[0].header("set-cookie"), None, "header injected via Location");
        let location = r[0].must("location");
        assert!(!location.contains(' ') && location.ends_with('/'), "{location:?}");
    }

    /// Percent-encoded names are decoded once; a double-encoded segment is a literal name.
    fn percent_decoding(arch) {
        let s = Server::start(arch, &[], fill_tree);
        assert_eq!(s.get("/a%20b.txt").assert_status(200).body, b"space name");
        assert_eq!(s.get("/%C3%A9t%C3%A9.txt").assert_status(200).body, b"utf8 name");
        assert_eq!(s.get("/%68ello.txt").assert_status(200).body, b"hello");
        assert_eq!(s.get("/100%25.txt").assert_status(200).body, b"percent name");
        assert_eq!(s.get("/q%3F.txt").assert_status(200).body, b"question mark");
        assert_eq!(s.get("/a+b.txt").assert_status(200).body, b"plus name");
        s.get("/a+b%20.txt").assert_status(404);
        assert_eq!(s.get("/%252e%252e/inner.txt").assert_status(200).body, b"literal percent dir");
        s.get("/%252e%252e/secret.txt").assert_status(404);
    }

    /// Malformed percent-escapes: 400 (or 404), never a crash.
    fn bad_percent_escapes(arch) {
        let mut s = Server::start(arch, &[], fill_tree);
        for target in ["/%zz.txt", "/hello.txt%", "/hello.txt%4"] {
            let r = s.get(target);
            assert!(matches!(r.status, 400 | 404), "{target}: {r:?}");
        }
        s.assert_alive();
    }

    /// Query strings are ignored.
    fn query_ignored(arch) {
        let s = Server::start(arch, &[], fill_tree);
        assert_eq!(s.get("/hello.txt?v=1").assert_status(200).body, b"hello");
        assert_eq!(s.get("/hello.txt?").assert_status(200).body, b"hello");
        assert_eq!(s.get("/sub/?a=b&c=../../secret.txt").assert_status(200).body, b"sub index");
    }

    /// Traversal attempts in every encoding: 400 or 404, never the secret.
    fn traversal_never_leaks(arch) {
        let mut s = Server::start(arch, &[], fill_tree);
        let targets = [
            "/../secret.txt",
            "/../../secret.txt",
            "/a/../../secret.txt",
            "/a/b/../../../secret.txt",
            "/./../secret.txt",
            "//../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E/secret.txt",
            "/.%2e/secret.txt",
            "/%2e./secret.txt",
            "/%252e%252e/secret.txt",
            "/a/..%2f..%2fsecret.txt",
            "/a/%2e%2e%2f%2e%2e%2fsecret.txt",
            "/%2e%2e%2fsecret.txt",
            "/..%2fsecret.txt",
            "/..\\secret.txt",
            "/a\\..\\..\\secret.txt",
            "/..%5csecret.txt",
            "/a/..%5c..%5csecret.txt",
            "/%2e%2e%5csecret.txt",
            "/..%c0%afsecret.txt",
            "/../rootx/secret.txt",
            "/../outside/inner.txt",
            "/secret.txt%00.html",
            "/%00../secret.txt",
            "/hello.txt%00",
            "../secret.txt",
            "secret.txt",
            "http://test/../secret.txt",
            "http://test/%2e%2e/secret.txt",
        ];
        for target in targets {
            let resp = raw(s.addr, get_req(target).as_bytes());
            assert!(!contains(&resp, SECRET_MARKER.as_bytes()), "{target} leaked the secret");
            let r = split_responses(&resp);
            assert_eq!(r.len(), 1, "{target}: {:?}", String::from_utf8_lossy(&resp));
            assert!(matches!(r[0].status, 400 | 404), "{target}: status {}", r[0].status);
        }
        s.assert_alive();
        assert_eq!(s.get("/hello.txt").assert_status(200).body, b"hello");
    }

    /// Absolute-form targets inside the root are served like origin-form ones.
    fn absolute_form_target(arch) {
        let s = Server::start(arch, &[], fill_tree);
        let r = request_once(s.addr, get_req("http://test/hello.txt").as_bytes());
        assert_eq!(r.assert_status(200).body, b"hello");
    }

    /// A symlink inside ROOT pointing outside: 404 by default, even for a directory link and
    /// a sibling whose name merely extends the root's.
    fn symlink_outside_404(arch) {
        let s = Server::start(arch, &[], |root| {
            fill_tree(root);
            symlink("../secret.txt", root.join("rel-link.txt")).unwrap();
            symlink(root.parent().unwrap().join("secret.txt"), root.join("abs-link.txt")).unwrap();
            symlink("../rootx/secret.txt", root.join("sibling-link.txt")).unwrap();
            symlink("../outside", root.join("outdir")).unwrap();
            symlink("../../secret.txt", root.join("sub/up-link.txt")).unwrap();
        });
        for target in ["/rel-link.txt", "/abs-link.txt", "/sibling-link.txt", "/outdir/inner.txt", "/outdir/", "/sub/up-link.txt"] {
            let resp = raw(s.addr, get_req(target).as_bytes());
            assert!(!contains(&resp, SECRET_MARKER.as_bytes()), "{target} leaked the secret");
            let r = split_responses(&resp);
            assert_eq!(r.len(), 1, "{target}");
            assert_eq!(r[0].status, 404, "{target}");
        }
    }

    /// `--follow-outside-symlinks` serves them.
    fn symlink_outside_followed_on_request(arch) {
        let s = Server::start(arch, &["--follow-outside-symlinks"], |root| {
            fill_tree(root);
            symlink("../secret.txt", root.join("rel-link.txt")).unwrap();
            symlink("../outside", root.join("outdir")).unwrap();
        });
        assert_eq!(s.get("/rel-link.txt").assert_status(200).body, SECRET_MARKER.as_bytes());
        assert_eq!(s.get("/outdir/inner.txt").assert_status(200).body, SECRET_MARKER.as_bytes());
        // `..` is still refused
        assert!(!contains(&raw(s.addr, get_req("/../secret.txt").as_bytes()), SECRET_MARKER.as_bytes()));
    }

    /// A symlink pointing inside ROOT is served.
    fn symlink_inside_served(arch) {
        let s = Server::start(arch, &[], |root| {
            fill_tree(root);
            symlink("hello.txt", root.join("alias.txt")).unwrap();
            symlink("../hello.txt", root.join("sub/up-alias.txt")).unwrap();
            symlink("sub", root.join("subalias")).unwrap();
        });
        assert_eq!(s.get("/alias.txt").assert_status(200).body, b"hello");
        assert_eq!(s.get("/sub/up-alias.txt").assert_status(200).body, b"hello");
        assert_eq!(s.get("/subalias/page.txt").assert_status(200).body, b"sub page");
    }

    /// Dotfiles and dot-directories: 404 by default, also percent-encoded.
    fn dotfiles_hidden_by_default(arch) {
        let s = Server::start(arch, &[], fill_tree);
        for target in ["/.env", "/.git/config", "/.git/", "/.git", "/sub/.hidden", "/%2eenv", "/%2Egit/config"] {
            let r = s.get(target);
            assert_eq!(r.status, 404, "{target}: {r:?}");
            for secret in [&b"DOTENV"[..], b"[core]", b"hidden"] {
                assert!(!contains(&r.body, secret), "{target} served a dotfile");
            }
        }
    }

    /// `--dotfiles` serves them.
    fn dotfiles_served_with_option(arch) {
        let s = Server::start(arch, &["--dotfiles"], fill_tree);
        assert_eq!(s.get("/.env").assert_status(200).body, b"DOTENV=1");
        assert_eq!(s.get("/.git/config").assert_status(200).body, b"[core]");
        assert_eq!(s.get("/sub/.hidden").assert_status(200).body, b"hidden");
    }

    /// Odd names: a file with a trailing slash, an over-long segment, a symlink loop, a name
    /// with a NUL: 4xx, never a crash.
    fn odd_paths_4xx(arch) {
        let mut s = Server::start(arch, &[], |root| {
            fill_tree(root);
            symlink("loop", root.join("loop")).unwrap();
            symlink("b-loop", root.join("a-loop")).unwrap();
            symlink("a-loop", root.join("b-loop")).unwrap();
        });
        let long = format!("/{}", "n".repeat(300));
        for target in ["/hello.txt/", "/hello.txt/x", "/loop", "/a-loop", "/loop/x", long.as_str(), "/sub/%00"] {
            let r = s.get(target);
            assert!((400..500).contains(&r.status), "{target}: {r:?}");
        }
        s.assert_alive();
        assert_eq!(s.get("/hello.txt").assert_status(200).body, b"hello");
    }

    /// A FIFO in the root is not served and does not block the server (opening it for reading
    /// would block forever).
    fn fifo_does_not_block(arch) {
        let s = Server::start(arch, &[], |root| {
            fill_tree(root);
            let ok = std::process::Command::new("mkfifo").arg(root.join("pipe")).status().unwrap();
            assert!(ok.success(), "mkfifo failed");
        });
        let mut c = s.conn();
        c.send(get_req("/pipe"));
        // Meanwhile another client is served promptly.
        let start = std::time::Instant::now();
        assert_eq!(s.get("/hello.txt").assert_status(200).body, b"hello");
        assert!(start.elapsed() < std::time::Duration::from_secs(2), "server blocked on a FIFO");
        let r = c.response();
        assert!(matches!(r.status, 403 | 404), "FIFO: {r:?}");
    }
}
