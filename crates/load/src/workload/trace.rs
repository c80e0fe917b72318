//! `--trace FILE`: one path per line, optionally followed by a weight.
//!
//! Format: `PATH [WEIGHT]`, whitespace-separated; blank lines and `#` comments are skipped
//! (read by [`amped_workload::lists`]). The second column is a **weight** (a positive number), not a timestamp: when any line has
//! one, requests are drawn at random with probability proportional to the weight (lines without
//! one weigh 1); when no line has one, the paths are replayed in file order, cycling. Timing
//! comes from the run's mode (`--rate`, or closed loop), never from the file. Any bad line is
//! fatal.

use super::{Entry, LineError};
use crate::target::Url;
use amped_workload::lists;

/// Parses one line of a trace.
pub fn parse_line(line: &str, base: &Url) -> Result<Option<Entry>, LineError> {
    let Some(read) = lists::trace_line(line).map_err(LineError::Fatal)? else {
        return Ok(None);
    };
    let path = base.join(read.path).map_err(|e| LineError::Fatal(e.to_string()))?;
    Ok(Some(Entry { path, weight: read.weight }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Option<Entry>, LineError> {
        parse_line(line, &Url::parse("http://h/").unwrap())
    }

    #[test]
    fn reads_paths_and_weights() {
        assert_eq!(parse("/a").unwrap(), Some(Entry { path: "/a".into(), weight: None }));
        assert_eq!(parse("/b\t2.5").unwrap(), Some(Entry { path: "/b".into(), weight: Some(2.5) }));
        assert_eq!(parse("  /c   7 ").unwrap().unwrap().weight, Some(7.0));
        assert!(parse("# /x 1").unwrap().is_none());
    }

    #[test]
    fn refuses_bad_lines() {
        for line in ["/a 0", "/a -1", "/a x", "/a 1 2", "a 1", "/a inf"] {
            assert!(matches!(parse(line), Err(LineError::Fatal(_))), "{line}");
        }
    }
}
