//! `--clf FILE`: a Common Log Format access log replayed as a trace.
//!
//! CLF: `host ident user [date] "METHOD TARGET VERSION" status bytes` (Combined Log Format
//! lines, with referer and user agent after, are accepted too). The GET targets are replayed in
//! file order, cycling, joined onto the base URL; an absolute `http://host/path` target keeps
//! its path. Other methods are skipped and counted; malformed lines are reported with their
//! line number, skipped and counted (real logs hold junk, so these are not fatal).

use super::{Entry, LineError};
use crate::target::Url;

/// Parses one access-log line.
pub fn parse_line(line: &str, base: &Url) -> Result<Option<Entry>, LineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let request = request_field(line).ok_or_else(|| bad("not a Common Log Format line"))?;
    let mut words = request.split(' ').filter(|w| !w.is_empty());
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return Err(bad("request field has no target"));
    };
    match words.next() {
        None => {}
        Some(v) if v.starts_with("HTTP/") && words.next().is_none() => {}
        Some(_) => return Err(bad("request target holds a space")),
    }
    if method != "GET" {
        return Err(LineError::NotGet);
    }
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    base.join(path).map(|path| Some(Entry { path, weight: None })).map_err(|e| bad(&e.to_string()))
}

fn bad(why: &str) -> LineError {
    LineError::Skip(why.to_string())
}

/// The quoted request of a CLF line, after checking the `[date]` field that precedes it.
fn request_field(line: &str) -> Option<&str> {
    let open_date = line.find(" [")?;
    let close_date = open_date + line[open_date..].find("] \"")?;
    let after = &line[close_date + 3..];
    let end = after.find('"')?;
    let rest = after[end + 1..].trim_start();
    let status = rest.split(' ').next()?;
    if status != "-" && !(status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    Some(&after[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Option<Entry>, LineError> {
        parse_line(line, &Url::parse("http://h/").unwrap())
    }

    #[test]
    fn reads_get_lines() {
        let cases = [
            (
                r#"199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245"#,
                "/history/apollo/",
            ),
            (
                r#"h - - [01/Jul/1995:00:00:06 -0400] "GET /shuttle/countdown/" 200 -"#,
                "/shuttle/countdown/",
            ),
            (
                r#"h - frank [10/Oct/2000:13:55:36 -0700] "GET http://x.org/a.gif HTTP/1.1" 304 0"#,
                "/a.gif",
            ),
            (
                r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /b?c=d HTTP/1.1" 200 2326 "http://r/" "Mozilla/4.08""#,
                "/b?c=d",
            ),
        ];
        for (line, path) in cases {
            assert_eq!(parse(line).unwrap().unwrap().path, path, "{line}");
        }
        assert!(parse("   ").unwrap().is_none());
    }

    #[test]
    fn skips_other_methods_and_junk() {
        let post = r#"h - - [01/Jul/1995:00:00:01 -0400] "POST /cgi HTTP/1.0" 200 1"#;
        assert_eq!(parse(post), Err(LineError::NotGet));
        let junk = [
            "garbage",
            r#"h - - 01/Jul/1995 "GET /a HTTP/1.0" 200 1"#,
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0 200 1"#,
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a b HTTP/1.0" 200 1"#,
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET" 200 1"#,
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET a.html HTTP/1.0" 200 1"#,
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" OK 1"#,
        ];
        for line in junk {
            assert!(matches!(parse(line), Err(LineError::Skip(_))), "{line}");
        }
    }
}
