//! Table-driven tests and the "never escapes the root" proptest for `normalize_target`.

use super::*;

/// Expected result: the URL path the target normalises to, or the error.
fn ok(url_path: &str) -> Result<&str, TargetError> {
    Ok(url_path)
}

#[test]
fn normalisation_cases() {
    use TargetError::*;
    let cases: &[(&str, &str, Result<&str, TargetError>)] = &[
        ("root", "/", ok("/")),
        ("file", "/index.html", ok("/index.html")),
        ("dir", "/a/b/", ok("/a/b/")),
        ("query dropped", "/a/b?q=1&r=/../..", ok("/a/b")),
        ("fragment dropped", "/a#frag", ok("/a")),
        ("dot and empty segments", "/a/./b//c/", ok("/a/b/c/")),
        ("dotdot inside", "/a/b/../c", ok("/a/c")),
        ("trailing dotdot is a dir", "/a/b/..", ok("/a/")),
        ("trailing dot is a dir", "/a/.", ok("/a/")),
        ("back to root", "/a/..", ok("/")),
        ("traversal", "/../etc/passwd", Err(EscapesRoot)),
        ("encoded traversal", "/%2e%2e/%2e%2e/etc/passwd", Err(EscapesRoot)),
        ("mixed-case encoded dotdot", "/%2E./x", Err(EscapesRoot)),
        ("climb after descent", "/a/%2e%2e/%2e%2e/x", Err(EscapesRoot)),
        ("double-encoded is literal", "/%252e%252e/x", ok("/%252e%252e/x")),
        ("encoded backslash", "/a%5c..%5cb", Err(Backslash)),
        ("raw backslash", "/a\\b", Err(Backslash)),
        ("nul", "/a%00b", Err(NulByte)),
        ("encoded slash", "/a%2fb", Err(EncodedSlash)),
        ("encoded slash uppercase", "/..%2F..", Err(EncodedSlash)),
        ("absolute form", "http://h/a/b?q", ok("/a/b")),
        ("absolute form https upper", "HTTPS://h:443/x/", ok("/x/")),
        ("absolute form no path", "http://h", ok("/")),
        ("absolute form query only", "http://h?x=/etc", ok("/")),
        ("absolute traversal", "http://h/../x", Err(EscapesRoot)),
        ("asterisk", "*", Err(NotOriginForm)),
        ("authority form", "example.com:443", Err(NotOriginForm)),
        ("relative", "a/b", Err(NotOriginForm)),
        ("other scheme", "ftp://h/a", Err(NotOriginForm)),
        ("empty", "", Err(NotOriginForm)),
        ("bad escape", "/%zz", Err(BadEncoding)),
        ("truncated escape", "/a%2", Err(BadEncoding)),
        ("lone percent", "/100%", Err(BadEncoding)),
        ("invalid utf-8", "/%ff%fe", Err(BadEncoding)),
        ("utf-8 decoded and re-encoded", "/caf%C3%A9", ok("/caf%C3%A9")),
        ("space re-encoded", "/a%20b", ok("/a%20b")),
        ("sub-delims kept", "/a+b=c;d@e:f", ok("/a+b=c;d@e:f")),
        ("encoded question mark", "/what%3f", ok("/what%3F")),
        ("crlf stays encoded", "/a%0d%0aSet-Cookie:x", ok("/a%0D%0ASet-Cookie:x")),
        ("three dots is a name", "/.../x", ok("/.../x")),
    ];
    for (name, raw, expected) in cases {
        let got = normalize_target(raw).map(|t| t.to_url_path());
        assert_eq!(got.as_deref().map_err(|e| *e), *expected, "{name}: {raw:?}");
    }
}

#[test]
fn segments_and_paths() {
    let t = normalize_target("/docs/./caf%C3%A9/../read%20me.txt?x").unwrap();
    assert_eq!(t.segments, ["docs", "read me.txt"]);
    assert!(!t.trailing_slash);
    assert_eq!(t.to_rel_path(), PathBuf::from("docs/read me.txt"));
    assert_eq!(t.to_url_path(), "/docs/read%20me.txt");

    let root = normalize_target("/").unwrap();
    assert!(root.segments.is_empty() && root.trailing_slash);
    assert_eq!(root.to_rel_path(), PathBuf::new());
}

#[test]
fn dot_segments_are_flagged() {
    let cases = [
        ("/.git/config", true),
        ("/a/.env", true),
        ("/a/b.c", false),
        ("/%2egit/x", true),
        ("/", false),
    ];
    for (raw, expected) in cases {
        assert_eq!(normalize_target(raw).unwrap().has_dot_segment(), expected, "{raw}");
    }
}

#[test]
fn errors_are_all_400() {
    use TargetError::*;
    for e in [NotOriginForm, BadEncoding, NulByte, Backslash, EscapesRoot, EncodedSlash] {
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(!e.to_string().is_empty());
    }
}

mod never_escapes_root {
    use super::*;
    use proptest::prelude::*;
    use std::path::{Component, Path};

    /// The invariant: either an error, or segments that can only ever name something below root.
    fn check(raw: &str) -> Result<(), TestCaseError> {
        let Ok(t) = normalize_target(raw) else {
            return Ok(());
        };
        for s in &t.segments {
            prop_assert!(!s.is_empty() && s != "." && s != "..", "segment {s:?} from {raw:?}");
            prop_assert!(!s.contains(['/', '\\', '\0']), "segment {s:?} from {raw:?}");
        }
        let root = Path::new("/srv/www");
        let joined = root.join(t.to_rel_path());
        let rest = joined.strip_prefix(root).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(
            rest.components().all(|c| matches!(c, Component::Normal(_))),
            "{raw:?} -> {joined:?}"
        );
        prop_assert_eq!(rest.components().count(), t.segments.len());
        // Re-encoding is stable: the URL path normalises to itself.
        let again =
            normalize_target(&t.to_url_path()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again.segments, t.segments);
        Ok(())
    }

    /// Pieces that traversal attempts are made of.
    fn piece() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "..",
            ".",
            "%2e%2e",
            "%2E.",
            ".%2e",
            "..%2f",
            "%2e%2e%2f",
            "%5c",
            "..%5c",
            "a",
            "b.txt",
            "%00",
            "/",
            "\\",
            "%252e%252e",
            "%",
            "%c0%ae",
            "?",
            "#",
            "%2F",
            ";",
            ".git",
            "%",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn any_string(raw in any::<String>()) {
            check(&raw)?;
            check(&format!("/{raw}"))?;
        }

        #[test]
        fn built_from_pieces(pieces in prop::collection::vec(piece(), 0..12), absolute in any::<bool>()) {
            let mut raw = String::from(if absolute { "http://host/" } else { "/" });
            for p in pieces {
                raw.push_str(p);
                raw.push('/');
            }
            check(&raw)?;
            check(raw.trim_end_matches('/'))?;
        }

        #[test]
        fn path_like_strings(raw in "/[a-z./%25cCeE0-9\\\\]{0,40}") {
            check(&raw)?;
        }
    }
}
