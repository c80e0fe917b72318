//! Pre-compressed variants (`--precompressed`): `file.br` / `file.zst` / `file.gz` served
//! beside `file` as the client's Accept-Encoding allows, with Content-Encoding, Vary, an ETag
//! of their own, and ranges and conditionals that apply to the variant sent.

use crate::common::*;
use std::collections::HashSet;
use std::path::Path;
use std::thread;
use std::time::Duration;

const PRE: &[&str] = &["--precompressed", "br,zst,gz"];
/// Larger than the file cache's in-memory limit, so bodies go out with sendfile / ring reads.
const BIG: usize = 100_000;

/// The contents stand in for compressed data: what matters is which file was sent.
fn fill(root: &Path) {
    write(root, "app.js", "console.log('plain');\n");
    write(root, "app.js.br", "BROTLI-BYTES");
    write(root, "app.js.zst", "ZSTD-BYTES");
    write(root, "app.js.gz", "GZIP-BYTES");
    write(root, "big.css", pseudo_random(BIG, 1));
    write(root, "big.css.gz", pseudo_random(BIG, 2));
    write(root, "plain.txt", "no variants here");
}

/// GET `path` on `c` (keep-alive) with an optional Accept-Encoding.
fn get_enc(c: &mut Conn, path: &str, accept: Option<&str>, extra: &str) -> Response {
    let ae = accept.map(|a| format!("Accept-Encoding: {a}\r\n")).unwrap_or_default();
    c.send(req("GET", path, &format!("{ae}{extra}")));
    c.response()
}

/// The variant a response carries, checked against the file it must come from.
fn expect_variant(r: &Response, coding: Option<&str>, body: &[u8], what: &str) {
    r.assert_status(200);
    assert_eq!(r.header("content-encoding"), coding, "{what}: {r:?}");
    assert_eq!(r.body, body, "{what}: wrong file sent");
    assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{what}: Vary");
}

arch_tests! {
    /// Accept-Encoding picks the variant (q-values, q=0, identity, `*`); every answer from a
    /// URL with variants carries Vary and the original's Content-Type; each variant has its
    /// own strong ETag; a file without variants has no Vary. Asked twice on one connection,
    /// so both the first (translating) and the cached path are covered.
    fn variants_follow_accept_encoding(arch) {
        let s = Server::start(arch, PRE, fill);
        let cases: &[(Option<&str>, Option<&str>, &[u8])] = &[
            (Some("gzip, deflate, br, zstd"), Some("br"), b"BROTLI-BYTES"),
            (Some("gzip"), Some("gzip"), b"GZIP-BYTES"),
            (Some("zstd;q=1, br;q=0.5"), Some("zstd"), b"ZSTD-BYTES"),
            (Some("br;q=0, gzip;q=0.8"), Some("gzip"), b"GZIP-BYTES"),
            (Some("*"), Some("br"), b"BROTLI-BYTES"),
            (Some("gzip;q=0.5, identity"), None, b"console.log('plain');\n"),
            (Some("identity"), None, b"console.log('plain');\n"),
            (Some("deflate"), None, b"console.log('plain');\n"),
            (None, None, b"console.log('plain');\n"),
        ];
        let mut etags = HashSet::new();
        let mut c = s.conn();
        for round in 0..2 {
            for (ae, coding, body) in cases {
                let what = format!("round {round}, Accept-Encoding {ae:?}");
                let r = get_enc(&mut c, "/app.js", *ae, "");
                expect_variant(&r, *coding, body, &what);
                assert!(r.must("content-type").contains("javascript"), "{what}: {r:?}");
                etags.insert((coding.map(str::to_owned), r.must("etag").to_string()));
            }
        }
        let distinct: HashSet<_> = etags.iter().map(|(_, e)| e.clone()).collect();
        assert_eq!(etags.len(), 4, "one ETag per variant, stable: {etags:?}");
        assert_eq!(distinct.len(), 4, "no two variants share an ETag: {etags:?}");
        assert!(etags.iter().all(|(_, e)| e.starts_with('"') && !e.starts_with("W/")));
        // Large bodies (sent from the descriptor) too.
        let r = get_enc(&mut c, "/big.css", Some("gzip, br"), "");
        expect_variant(&r, Some("gzip"), &pseudo_random(BIG, 2), "big gzip");
        assert!(r.must("content-type").starts_with("text/css"), "{r:?}");
        let r = get_enc(&mut c, "/big.css", Some("br"), "");
        expect_variant(&r, None, &pseudo_random(BIG, 1), "big without a br variant");
        // HEAD describes the variant it would send.
        c.send(req("HEAD", "/app.js", "Accept-Encoding: gzip\r\n"));
        let h = c.head_response();
        assert_eq!(h.header("content-encoding"), Some("gzip"));
        assert_eq!(h.content_length(), 10);
        // No variants, no Vary; a variant asked for by name is just a file.
        let r = get_enc(&mut c, "/plain.txt", Some("gzip, br"), "");
        assert_eq!(r.assert_status(200).header("vary"), None, "{r:?}");
        assert_eq!(r.header("content-encoding"), None);
        let r = get_enc(&mut c, "/app.js.gz", Some("gzip"), "");
        assert_eq!(r.assert_status(200).body, b"GZIP-BYTES");
        assert_eq!(r.header("content-encoding"), None, "the .gz file itself: {r:?}");
    }

    /// Conditionals and ranges apply to the variant sent: its ETag gives 304 (repeating Vary,
    /// ETag, Content-Encoding and Cache-Control), another variant's ETag does not, a range is
    /// a range of the compressed bytes, If-Range with another variant's ETag sends it whole.
    fn conditionals_and_ranges_per_variant(arch) {
        let mut args = PRE.to_vec();
        args.extend(["--cache-control", "*.js=public, max-age=60"]);
        let s = Server::start(arch, &args, fill);
        let mut c = s.conn();
        let gz_tag = get_enc(&mut c, "/app.js", Some("gzip"), "").must("etag").to_string();
        let br_tag = get_enc(&mut c, "/app.js", Some("br"), "").must("etag").to_string();
        let inm = format!("If-None-Match: {gz_tag}\r\n");
        let r = get_enc(&mut c, "/app.js", Some("gzip"), &inm);
        assert_eq!(r.status, 304, "{r:?}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some(gz_tag.as_str()));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        assert_eq!(r.header("cache-control"), Some("public, max-age=60"));
        let r = get_enc(&mut c, "/app.js", Some("br"), &inm);
        expect_variant(&r, Some("br"), b"BROTLI-BYTES", "gzip's ETag asked of br");
        let r = get_enc(&mut c, "/app.js", None, &inm);
        expect_variant(&r, None, b"console.log('plain');\n", "gzip's ETag asked of identity");
        let r = get_enc(&mut c, "/app.js", Some("gzip"), "Range: bytes=2-5\r\n");
        assert_eq!(r.assert_status(206).body, b"IP-B");
        assert_eq!(r.header("content-range"), Some("bytes 2-5/10"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let r = get_enc(&mut c, "/app.js", Some("gzip"), &format!("Range: bytes=0-1\r\nIf-Range: {br_tag}\r\n"));
        expect_variant(&r, Some("gzip"), b"GZIP-BYTES", "If-Range with br's ETag");
        let r = get_enc(&mut c, "/app.js", Some("gzip"), "Range: bytes=10-\r\n");
        assert_eq!(r.status, 416, "past the end of the 10-byte variant: {r:?}");
        assert_eq!(r.header("content-range"), Some("bytes */10"));
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let r = get_enc(&mut c, "/big.css", Some("gzip"), "Range: bytes=99990-\r\n");
        assert_eq!(r.assert_status(206).body, &pseudo_random(BIG, 2)[99_990..]);
    }

    /// Off by default: Accept-Encoding changes nothing and no Vary is sent. With the option
    /// but every cache off (each request translates and opens afresh) the variants still
    /// follow Accept-Encoding; a variant deleted or created shows within the staleness bound,
    /// and one deleted under a cached translation is replaced by the file at once.
    fn off_by_default_caches_off_and_changes(arch) {
        let s = Server::start(arch, &[], fill);
        let r = s.get("/app.js");
        assert_eq!(r.header("vary"), None);
        let mut c = s.conn();
        let r = get_enc(&mut c, "/app.js", Some("gzip, br"), "");
        assert_eq!(r.assert_status(200).header("content-encoding"), None, "{r:?}");
        assert_eq!(r.header("vary"), None);
        drop(s);

        let mut args = PRE.to_vec();
        args.extend(["--no-path-cache", "--no-file-cache", "--no-header-cache"]);
        let s = Server::start(arch, &args, fill);
        let mut c = s.conn();
        expect_variant(&get_enc(&mut c, "/app.js", Some("gzip"), ""), Some("gzip"), b"GZIP-BYTES", "no caches");
        expect_variant(&get_enc(&mut c, "/app.js", Some("zstd"), ""), Some("zstd"), b"ZSTD-BYTES", "no caches");
        drop(s);

        // A variant deleted while its translation is still cached: the file is sent instead
        // (whether the next request finds the translation fresh or re-translates).
        let mut args = PRE.to_vec();
        args.push("--no-file-cache");
        let s = Server::start(arch, &args, fill);
        let mut c = s.conn();
        expect_variant(&get_enc(&mut c, "/app.js", Some("br"), ""), Some("br"), b"BROTLI-BYTES", "before");
        std::fs::remove_file(s.path("app.js.br")).unwrap();
        expect_variant(&get_enc(&mut c, "/app.js", Some("br"), ""), None, b"console.log('plain');\n", "br deleted");
        drop(s);

        let s = Server::start(arch, PRE, fill);
        let mut c = s.conn();
        expect_variant(&get_enc(&mut c, "/app.js", Some("gzip"), ""), Some("gzip"), b"GZIP-BYTES", "before");
        assert_eq!(get_enc(&mut c, "/plain.txt", Some("gzip"), "").header("vary"), None);
        std::fs::remove_file(s.path("app.js.gz")).unwrap();
        write(&s.root, "plain.txt.gz", "PLAIN-GZ");
        thread::sleep(Duration::from_millis(1300));
        expect_variant(&get_enc(&mut c, "/app.js", Some("gzip"), ""), None, b"console.log('plain');\n", "gz deleted");
        expect_variant(&get_enc(&mut c, "/plain.txt", Some("gzip"), ""), Some("gzip"), b"PLAIN-GZ", "gz created");
    }
}
