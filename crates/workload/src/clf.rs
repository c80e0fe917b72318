//! Common Log Format (and Combined) access-log lines:
//! `host ident user [date] "METHOD target PROTOCOL" status bytes ["referer" "agent"]`.
//!
//! **The tolerance rule** (one for ampload's `--clf` and amplab's `--clf` replays). Real logs
//! are messy (the NASA 1995 logs are the classic example), so a line is accepted when its
//! *structure* is there, whatever quirks it carries:
//!
//! * required: three fields before the date (host, ident, user), a `[dd/Mon/yyyy:HH:MM:SS]`
//!   date with or without a `+zzzz` zone, a request whose method is upper-case letters and
//!   whose target is a path (`/…`) or an absolute `http(s)://` URL, a status of three digits
//!   between 100 and 599, and a byte count or `-`;
//! * tolerated: no protocol (`"GET /htbin/wais.pl"`, HTTP/0.9 style), quotes or spaces inside
//!   the target, a request that was never quoted, the Combined format's referer and agent, a
//!   trailing CR;
//! * skipped silently: blank lines and `#` comments (the line rule of [`crate::lists`]);
//! * anything else is rejected with its line number and the reason (no date, a request with
//!   no target, a status that is not a number…), never fatal: the caller counts and reports.
//!
//! What a caller then does with a well-formed line is its own policy: ampload replays GET
//! lines whose target it can send as is, amplab builds files from the paths answered 200.

use std::fmt;

/// One parsed access-log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The client, as written.
    pub host: String,
    /// The date as written inside the brackets.
    pub date: String,
    /// `GET`, `POST`… (upper-case letters).
    pub method: String,
    /// The request target as written (may contain spaces or quotes).
    pub target: String,
    /// `HTTP/1.0` etc.; `None` for HTTP/0.9-style request lines.
    pub protocol: Option<String>,
    /// The response status (100–599).
    pub status: u16,
    /// Response bytes; `None` for `-`.
    pub bytes: Option<u64>,
}

/// Why a line was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// A whole log: the lines read and the lines rejected.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// The well-formed lines, in order.
    pub entries: Vec<Entry>,
    /// The rejected lines, in order.
    pub errors: Vec<LineError>,
}

/// Parses every line of `text`; blank lines and `#` comments are skipped silently.
pub fn parse_log(text: &str) -> Log {
    let mut log = Log::default();
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(e)) => log.entries.push(e),
            Ok(None) => {}
            Err(reason) => log.errors.push(LineError { line: i + 1, reason }),
        }
    }
    log
}

/// Parses one line: `Ok(None)` for a blank or comment line.
pub fn parse_line(line: &str) -> Result<Option<Entry>, String> {
    let Some(line) = crate::lists::content(line) else {
        return Ok(None);
    };
    let open = line.find('[').ok_or("no [date]")?;
    let close = open + line[open..].find(']').ok_or("unterminated [date]")?;
    let fields: Vec<&str> = line[..open].split_whitespace().collect();
    if fields.len() != 3 {
        return Err(format!(
            "expected host, ident and user before the date, found {}",
            fields.len()
        ));
    }
    let date = &line[open + 1..close];
    check_date(date)?;
    let rest = line[close + 1..].trim_start();
    let (request, status, bytes) = if let Some(quoted) = rest.strip_prefix('"') {
        split_quoted(quoted)?
    } else {
        split_unquoted(rest)?
    };
    let (method, target, protocol) = split_request(&request)?;
    Ok(Some(Entry {
        host: fields[0].to_string(),
        date: date.to_string(),
        method,
        target,
        protocol,
        status: parse_status(status)?,
        bytes: parse_bytes(bytes)?,
    }))
}

/// The path a request target names: an absolute `scheme://host/path` target without its
/// scheme and host (`/` when it names no path), any other target as written. Query and
/// fragment are kept.
pub fn target_path(target: &str) -> &str {
    match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    }
}

/// `dd/Mon/yyyy:HH:MM:SS[ +zzzz]`.
fn check_date(date: &str) -> Result<(), String> {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let bad = || format!("bad date {date:?}");
    let (stamp, zone) = match date.split_once(' ') {
        Some((s, z)) => (s, Some(z)),
        None => (date, None),
    };
    let b = stamp.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() == 20
        && digits(0..2)
        && b[2] == b'/'
        && MONTHS.contains(&&stamp[3..6])
        && b[6] == b'/'
        && digits(7..11)
        && b[11] == b':'
        && digits(12..14)
        && b[14] == b':'
        && digits(15..17)
        && b[17] == b':'
        && digits(18..20);
    if !shape {
        return Err(bad());
    }
    if let Some(z) = zone {
        let z = z.as_bytes();
        let ok =
            z.len() == 5 && (z[0] == b'+' || z[0] == b'-') && z[1..].iter().all(u8::is_ascii_digit);
        if !ok {
            return Err(bad());
        }
    }
    Ok(())
}

/// After the opening quote: the request ends at the first `"` followed by ` STATUS BYTES`
/// (so quotes inside the target are kept).
fn split_quoted(s: &str) -> Result<(String, &str, &str), String> {
    for (i, _) in s.match_indices('"') {
        let mut tail = s[i + 1..].split_whitespace();
        if let (Some(status), Some(bytes)) = (tail.next(), tail.next())
            && looks_like_status(status)
            && (bytes == "-" || bytes.bytes().all(|c| c.is_ascii_digit()))
        {
            return Ok((s[..i].to_string(), status, bytes));
        }
    }
    Err("unterminated request (no closing quote before status and bytes)".into())
}

/// An unquoted request: `METHOD target [PROTOCOL] status bytes`.
fn split_unquoted(s: &str) -> Result<(String, &str, &str), String> {
    let tokens: Vec<&str> = s.split_whitespace().collect();
    // The status is the first 3-digit token after at least a method and a target.
    let at = (2..tokens.len())
        .find(|&i| looks_like_status(tokens[i]) && i + 1 < tokens.len())
        .ok_or("no request, status and bytes after the date")?;
    Ok((tokens[..at].join(" "), tokens[at], tokens[at + 1]))
}

fn looks_like_status(t: &str) -> bool {
    t.len() == 3 && t.bytes().all(|c| c.is_ascii_digit())
}

/// `METHOD target [PROTOCOL]`; a target with spaces keeps them.
fn split_request(request: &str) -> Result<(String, String, Option<String>), String> {
    let tokens: Vec<&str> = request.split_whitespace().collect();
    let method = *tokens.first().ok_or("empty request")?;
    if !method.bytes().all(|c| c.is_ascii_uppercase()) {
        return Err(format!("bad method {method:?}"));
    }
    let (target_tokens, protocol) = match tokens.last() {
        Some(p) if tokens.len() >= 3 && p.starts_with("HTTP/") => {
            (&tokens[1..tokens.len() - 1], Some(p.to_string()))
        }
        _ => (&tokens[1..], None),
    };
    if target_tokens.is_empty() {
        return Err(format!("request {request:?} has no target"));
    }
    let target = target_tokens.join(" ");
    if !(target.starts_with('/') || target.starts_with("http://") || target.starts_with("https://"))
    {
        return Err(format!("target {target:?} is neither a path nor an absolute URL"));
    }
    Ok((method.to_string(), target, protocol))
}

fn parse_status(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(code) if (100..=599).contains(&code) => Ok(code),
        _ => Err(format!("bad status {s:?}")),
    }
}

fn parse_bytes(s: &str) -> Result<Option<u64>, String> {
    if s == "-" {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|_| format!("bad byte count {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Entry {
        parse_line(line).unwrap_or_else(|e| panic!("{line}: {e}")).expect("an entry")
    }

    #[test]
    fn reads_real_world_lines() {
        type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, u16, Option<u64>);
        let cases: &[Case] = &[
            (
                r#"199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245"#,
                "GET",
                "/history/apollo/",
                Some("HTTP/1.0"),
                200,
                Some(6245),
            ),
            (
                r#"unicomp6.unicomp.net - - [01/Jul/1995:00:00:06 -0400] "GET /shuttle/countdown/ HTTP/1.0" 304 0"#,
                "GET",
                "/shuttle/countdown/",
                Some("HTTP/1.0"),
                304,
                Some(0),
            ),
            (
                r#"d104.aa.net - - [01/Jul/1995:00:00:13 -0400] "GET /shuttle/countdown/count.gif HTTP/1.0" 404 -"#,
                "GET",
                "/shuttle/countdown/count.gif",
                Some("HTTP/1.0"),
                404,
                None,
            ),
            // HTTP/0.9-style request line without a protocol (common in the NASA logs).
            (
                r#"pipe1.nyc.pipeline.com - - [01/Jul/1995:00:22:43 -0400] "GET /shuttle/missions/sts-71/movies/sts-71-mir-dock.mpg" 200 946425"#,
                "GET",
                "/shuttle/missions/sts-71/movies/sts-71-mir-dock.mpg",
                None,
                200,
                Some(946425),
            ),
            // A quote inside the target.
            (
                r#"a.b.c - - [02/Jul/1995:10:00:00 -0400] "GET /images/"ksclogo.gif HTTP/1.0" 404 -"#,
                "GET",
                "/images/\"ksclogo.gif",
                Some("HTTP/1.0"),
                404,
                None,
            ),
            // A space inside the target.
            (
                r#"h - - [02/Jul/1995:10:00:00 -0400] "GET /a b.html HTTP/1.0" 200 10"#,
                "GET",
                "/a b.html",
                Some("HTTP/1.0"),
                200,
                Some(10),
            ),
            // Combined format, with a user name and an absolute-URI target.
            (
                r#"10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET http://example.com/apache_pb.gif HTTP/1.1" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#,
                "GET",
                "http://example.com/apache_pb.gif",
                Some("HTTP/1.1"),
                200,
                Some(2326),
            ),
            // No quotes at all (some old NCSA-style writers), and no time zone.
            (
                "h - - [01/Jul/1995:00:00:01] GET /index.html HTTP/1.0 200 512",
                "GET",
                "/index.html",
                Some("HTTP/1.0"),
                200,
                Some(512),
            ),
            (
                "h - - [01/Jul/1995:00:00:01 +0000] \"HEAD / HTTP/1.1\" 200 -\r",
                "HEAD",
                "/",
                Some("HTTP/1.1"),
                200,
                None,
            ),
        ];
        for &(line, method, target, protocol, status, bytes) in cases {
            let e = ok(line);
            assert_eq!(
                (e.method.as_str(), e.target.as_str(), e.protocol.as_deref(), e.status, e.bytes),
                (method, target, protocol, status, bytes),
                "{line}"
            );
        }
    }

    #[test]
    fn rejects_bad_lines_with_a_reason() {
        let cases = [
            ("garbage", "no [date]"),
            ("h - - [01/Jul/1995:00:00:01 -0400 \"GET / HTTP/1.0\" 200 1", "unterminated [date]"),
            ("h - - [1/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1", "bad date"),
            ("h - - [01/Foo/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1", "bad date"),
            (
                "h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 2000 1",
                "unterminated request",
            ),
            (
                "h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 12x",
                "unterminated request",
            ),
            ("h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0", "unterminated request"),
            ("h - - [01/Jul/1995:00:00:01 -0400] \"-\" 400 0", "bad method"),
            ("h - - [01/Jul/1995:00:00:01 -0400] \"GET\" 400 0", "has no target"),
            (
                "h - - [01/Jul/1995:00:00:01 -0400] \"GET index.html HTTP/1.0\" 200 1",
                "neither a path",
            ),
            ("h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 999 1", "bad status"),
            (
                "h - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1",
                "expected host, ident and user",
            ),
        ];
        for (line, why) in cases {
            let err = parse_line(line).expect_err(line);
            assert!(err.contains(why), "{line}: {err}");
        }
    }

    #[test]
    fn absolute_targets_are_reduced_to_their_path() {
        let cases = [
            ("/a/b.html?x=1", "/a/b.html?x=1"),
            ("http://example.com/x.gif?y=1", "/x.gif?y=1"),
            ("https://h:8080/", "/"),
            ("http://h", "/"),
            ("a.html", "a.html"),
        ];
        for (target, path) in cases {
            assert_eq!(target_path(target), path, "{target}");
        }
    }

    #[test]
    fn whole_logs_report_line_numbers() {
        let text = "# a comment\n\
            h - - [01/Jul/1995:00:00:01 -0400] \"GET /a HTTP/1.0\" 200 5\n\
            \n\
            broken line\n\
            h - - [01/Jul/1995:00:00:02 -0400] \"GET /b HTTP/1.0\" 200 7\n";
        let log = parse_log(text);
        assert_eq!(log.entries.len(), 2);
        assert_eq!(log.errors, vec![LineError { line: 4, reason: "no [date]".into() }]);
        assert_eq!(log.errors[0].to_string(), "line 4: no [date]");
    }

    #[test]
    fn the_committed_heavy_tail_trace_parses_whole() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/traces/heavy-tail.clf");
        let log = parse_log(&std::fs::read_to_string(path).unwrap());
        assert_eq!((log.entries.len(), log.errors.len()), (10_000, 0), "{:?}", log.errors.first());
        assert!(log.entries.iter().all(|e| e.method == "GET" && e.status == 200));
    }
}
