//! `--urls FILE`: one absolute URL or one path per line.
//!
//! Blank lines and lines starting with `#` are skipped (the line rule of
//! [`amped_workload::lists`], whose `url_list` writes the lists amplab runs). Paths are joined
//! onto the base URL (see [`Url::join`]); absolute URLs must name the base URL's server, since
//! one run drives one server. Any bad line is fatal: a URL list written by hand should not
//! change the workload silently through a typo.

use super::{Entry, LineError};
use crate::target::Url;
use amped_workload::lists;

/// Parses one line of a URL list.
pub fn parse_line(line: &str, base: &Url) -> Result<Option<Entry>, LineError> {
    let Some(line) = lists::content(line) else {
        return Ok(None);
    };
    let path = if line.contains("://") {
        let url = Url::parse(line).map_err(|e| LineError::Fatal(e.to_string()))?;
        if !url.same_server(base) {
            return Err(LineError::Fatal(format!(
                "{line} is on another server than {}; one run drives one server",
                base.host_header()
            )));
        }
        url.path
    } else {
        base.join(line).map_err(|e| LineError::Fatal(e.to_string()))?
    };
    Ok(Some(Entry { path, weight: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Option<Entry>, LineError> {
        parse_line(line, &Url::parse("http://h:8080/base/").unwrap())
    }

    #[test]
    fn reads_paths_urls_and_skips_comments() {
        assert_eq!(parse("/a.html").unwrap().unwrap().path, "/base/a.html");
        assert_eq!(parse("  http://h:8080/x?y  ").unwrap().unwrap().path, "/x?y");
        assert!(parse("").unwrap().is_none());
        assert!(parse("# comment").unwrap().is_none());
    }

    #[test]
    fn refuses_other_servers_and_non_paths() {
        assert!(matches!(parse("http://other:8080/x"), Err(LineError::Fatal(_))));
        assert!(matches!(parse("http://h:8081/x"), Err(LineError::Fatal(_))));
        assert!(matches!(parse("a.html"), Err(LineError::Fatal(_))));
        assert!(matches!(parse("https://h:8080/x"), Err(LineError::Fatal(_))));
    }
}
