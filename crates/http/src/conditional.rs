//! Validators and conditional requests (RFC 9110 §8.8, §13): ETag construction, If-None-Match /
//! If-Modified-Since (→ 304) and If-Range (→ honour Range or not).
//!
//! Times compare at one-second resolution because that is all an HTTP-date can carry; a file
//! modified within the same second as the client's copy is treated as unchanged (the ETag,
//! which includes nanoseconds, is the precise validator and takes precedence when sent).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::date::unix_seconds;

/// Whether a conditional GET/HEAD should be answered 304 Not Modified.
///
/// If-None-Match takes precedence (RFC 9110 §13.2.2): when present, it alone decides, by weak
/// comparison against `etag`; "*" matches any existing representation. Only when it is absent is
/// If-Modified-Since evaluated: an unparsable date is ignored, otherwise the answer is 304 when
/// `last_modified` (truncated to seconds) is not after the date.
pub fn is_not_modified(
    if_none_match: Option<&str>,
    if_modified_since: Option<&str>,
    etag: &str,
    last_modified: SystemTime,
) -> bool {
    if let Some(list) = if_none_match {
        return list.trim() == "*" || any_tag(list, |tag| opaque(tag) == opaque(etag));
    }
    match if_modified_since.map(|d| httpdate::parse_http_date(d.trim())) {
        Some(Ok(since)) => unix_seconds(last_modified) <= unix_seconds(since),
        _ => false,
    }
}

/// If-Range (RFC 9110 §13.1.5): whether the Range header should be honoured. An entity-tag must
/// match `etag` strongly (a weak tag never matches); an HTTP-date must equal `last_modified` to
/// the second. Anything else means "send the whole representation".
pub fn if_range_allows(if_range: &str, etag: &str, last_modified: SystemTime) -> bool {
    let value = if_range.trim();
    if value.starts_with("W/") || etag.starts_with("W/") {
        return false;
    }
    if value.starts_with('"') {
        return value == etag;
    }
    httpdate::parse_http_date(value)
        .is_ok_and(|date| unix_seconds(date) == unix_seconds(last_modified))
}

/// Strong ETag from file identity: `"{ino:x}-{size:x}-{mtime_nanos:x}"`, quotes included.
/// Inode + size + nanosecond mtime changes whenever the file is replaced or rewritten.
pub fn make_etag(ino: u64, size: u64, mtime: SystemTime) -> String {
    let nanos = mtime.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("\"{ino:x}-{size:x}-{nanos:x}\"")
}

/// The opaque-tag of an entity-tag: the quoted part, without any weakness prefix.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

/// Walks an entity-tag list (`#entity-tag`, RFC 9110 §8.8.3), returning true as soon as `hit`
/// accepts one. Tags are found by their quotes, so commas inside a tag do not split it; a
/// malformed remainder ends the walk without a match.
fn any_tag(list: &str, mut hit: impl FnMut(&str) -> bool) -> bool {
    let mut rest = list;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return false;
        }
        let prefix = if rest.starts_with("W/") { 2 } else { 0 };
        if !rest[prefix..].starts_with('"') {
            return false;
        }
        let Some(close) = rest[prefix + 1..].find('"') else {
            return false;
        };
        let end = prefix + 1 + close + 1;
        if hit(&rest[..end]) {
            return true;
        }
        rest = &rest[end..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const ETAG: &str = "\"1a-2b-3c\"";

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    /// 1994-11-06 08:49:37 UTC.
    const T: u64 = 784_111_777;
    const T_DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn not_modified_cases() {
        let modified = at(T, 500_000_000);
        let cases: &[(&str, Option<&str>, Option<&str>, bool)] = &[
            ("no conditionals", None, None, false),
            ("inm exact", Some(ETAG), None, true),
            ("inm other", Some("\"zz\""), None, false),
            ("inm star", Some("*"), None, true),
            ("inm weak matches strong", Some("W/\"1a-2b-3c\""), None, true),
            ("inm list", Some("\"x\", W/\"y\",\"1a-2b-3c\""), None, true),
            ("inm list no match", Some("\"x\", \"y\""), None, false),
            ("inm comma inside tag", Some("\"a,b\", \"1a-2b-3c\""), None, true),
            ("inm unquoted", Some("1a-2b-3c"), None, false),
            ("inm empty", Some(""), None, false),
            ("inm wins over matching ims", Some("\"zz\""), Some(T_DATE), false),
            ("inm wins over old ims", Some(ETAG), Some("Thu, 01 Jan 1970 00:00:00 GMT"), true),
            ("ims equal second", None, Some(T_DATE), true),
            ("ims newer than file", None, Some("Sun, 06 Nov 1994 08:49:38 GMT"), true),
            ("ims older than file", None, Some("Sun, 06 Nov 1994 08:49:36 GMT"), false),
            ("ims garbage", None, Some("yesterday"), false),
            ("ims rfc850 form", None, Some("Sunday, 06-Nov-94 08:49:37 GMT"), true),
            ("ims asctime form", None, Some("Sun Nov  6 08:49:37 1994"), true),
        ];
        for (name, inm, ims, expected) in cases {
            assert_eq!(is_not_modified(*inm, *ims, ETAG, modified), *expected, "{name}");
        }
    }

    #[test]
    fn weak_own_etag_still_compares_weakly() {
        assert!(is_not_modified(Some(ETAG), None, "W/\"1a-2b-3c\"", at(T, 0)));
    }

    #[test]
    fn if_range_cases() {
        let modified = at(T, 999);
        let cases: &[(&str, &str, bool)] = &[
            ("strong match", ETAG, true),
            ("strong mismatch", "\"other\"", false),
            ("weak never matches", "W/\"1a-2b-3c\"", false),
            ("date equal", T_DATE, true),
            ("date older", "Sun, 06 Nov 1994 08:49:36 GMT", false),
            ("date newer", "Sun, 06 Nov 1994 08:49:38 GMT", false),
            ("garbage", "whenever", false),
            ("empty", "", false),
        ];
        for (name, value, expected) in cases {
            assert_eq!(if_range_allows(value, ETAG, modified), *expected, "{name}");
        }
    }

    #[test]
    fn etag_format() {
        let cases = [
            ((1, 2, at(0, 3)), "\"1-2-3\""),
            ((0xabc, 4096, at(1, 0)), "\"abc-1000-3b9aca00\""),
            ((7, 0, UNIX_EPOCH - Duration::from_secs(1)), "\"7-0-0\""),
        ];
        for ((ino, size, mtime), expected) in cases {
            assert_eq!(make_etag(ino, size, mtime), expected);
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn arbitrary_headers_never_panic(inm in any::<Option<String>>(), ims in any::<Option<String>>(), secs in 0u64..4_000_000_000) {
                let t = at(secs, 0);
                let etag = make_etag(1, 2, t);
                is_not_modified(inm.as_deref(), ims.as_deref(), &etag, t);
                if let Some(v) = &inm {
                    if_range_allows(v, &etag, t);
                }
            }

            #[test]
            fn own_etag_always_matches(ino: u64, size: u64, secs in 0u64..4_000_000_000, nanos in 0u32..1_000_000_000) {
                let t = at(secs, nanos);
                let etag = make_etag(ino, size, t);
                prop_assert!(is_not_modified(Some(&etag), None, &etag, t));
                prop_assert!(if_range_allows(&etag, &etag, t));
                let date = crate::date::fmt_http_date(t);
                prop_assert!(is_not_modified(None, Some(&date), &etag, t));
                prop_assert!(if_range_allows(&date, &etag, t));
            }
        }
    }
}
