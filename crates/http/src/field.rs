//! Checks on header fields a server operator configures (`--add-header`, Cache-Control rules,
//! CORS origins): a name must be a token and a value visible text, so no configured value can
//! end a header line early and inject another (RFC 9110 §5.1, §5.5).

/// `tchar` of RFC 9110 §5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether `name` is a valid field name (a non-empty token).
pub fn is_field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

/// Whether `value` is a valid field value: printable ASCII, spaces and tabs inside, no
/// leading or trailing whitespace, no control characters (CR, LF, NUL …), not empty.
pub fn is_field_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|&b| b != b' ' && b != b'\t');
    edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes.iter().all(|&b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
}

/// Whether a URL path matches a glob: `*` stands for any run of characters (`/` included, so
/// `/assets/*` covers the whole tree below), `?` for exactly one; everything else is literal.
pub fn glob_matches(pattern: &str, path: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), path.as_bytes());
    let (mut pi, mut si) = (0, 0);
    // Where the last `*` was and how much of `path` it has swallowed so far.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    // Let the last `*` take one more character and retry.
                    star = Some((sp, ss + 1));
                    pi = sp + 1;
                    si = ss + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values() {
        for (name, ok) in [
            ("X-Frame-Options", true),
            ("x_custom.1", true),
            ("", false),
            ("Bad Name", false),
            ("Bad:Name", false),
            ("Bad\r\nName", false),
        ] {
            assert_eq!(is_field_name(name), ok, "{name:?}");
        }
        for (value, ok) in [
            ("public, max-age=31536000, immutable", true),
            ("a\tb", true),
            ("x", true),
            ("", false),
            (" leading", false),
            ("trailing ", false),
            ("a\r\nInjected: 1", false),
            ("a\nb", false),
            ("nul\0", false),
            ("caf\u{e9}", false),
        ] {
            assert_eq!(is_field_value(value), ok, "{value:?}");
        }
    }

    #[test]
    fn globs() {
        let cases = [
            ("/assets/*", "/assets/app.js", true),
            ("/assets/*", "/assets/js/app.js", true),
            ("/assets/*", "/assets/", true),
            ("/assets/*", "/assets", false),
            ("/assets/*", "/other/assets/x", false),
            ("*.html", "/index.html", true),
            ("*.html", "/index.htm", false),
            ("/*.css", "/a/b/c.css", true),
            ("/img/*.png", "/img/a.png", true),
            ("/img/*.png", "/img/a.png.gz", false),
            ("/file?.txt", "/file1.txt", true),
            ("/file?.txt", "/file.txt", false),
            ("/exact", "/exact", true),
            ("/exact", "/exact/", false),
            ("*", "/anything", true),
            ("**", "/", true),
            ("/a*b*c", "/aXXbYYc", true),
            ("/a*b*c", "/aXXbYY", false),
            ("", "", true),
            ("", "/", false),
        ];
        for (pattern, path, want) in cases {
            assert_eq!(glob_matches(pattern, path), want, "{pattern:?} vs {path:?}");
        }
    }
}
