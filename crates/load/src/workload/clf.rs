//! `--clf FILE`: a Common Log Format access log replayed as a trace.
//!
//! Lines are read by the shared parser ([`amped_workload::clf`], whose tolerance rule amplab
//! uses too). Of the well-formed lines, the GET targets are replayed in file order, cycling,
//! joined onto the base URL; an absolute `http://host/path` target keeps its path. Other
//! methods are skipped and counted; malformed lines, and targets that cannot be sent as they
//! are (a space, a quote or a control character inside: not a URI), are reported with their
//! line number, skipped and counted (real logs hold junk, so these are not fatal).

use super::{Entry, LineError};
use crate::target::Url;
use amped_workload::clf;

/// Parses one access-log line.
pub fn parse_line(line: &str, base: &Url) -> Result<Option<Entry>, LineError> {
    let Some(logged) = clf::parse_line(line).map_err(LineError::Skip)? else {
        return Ok(None);
    };
    if logged.method != "GET" {
        return Err(LineError::NotGet);
    }
    let target = logged.target.as_str();
    if target.contains('"') {
        return Err(LineError::Skip("request target holds a quote".into()));
    }
    base.join(clf::target_path(target))
        .map(|path| Some(Entry { path, weight: None }))
        .map_err(|e| LineError::Skip(e.to_string()))
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
        assert!(parse("# a comment").unwrap().is_none());
        let unquoted = "h - - [01/Jul/1995:00:00:01] GET /index.html HTTP/1.0 200 512";
        assert_eq!(parse(unquoted).unwrap().unwrap().path, "/index.html");
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
            r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /images/"a.gif HTTP/1.0" 404 -"#,
            r#"h - - [1/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1"#,
        ];
        for line in junk {
            assert!(matches!(parse(line), Err(LineError::Skip(_))), "{line}");
        }
    }
}
