//! The line files of a workload other than access logs: URL lists (`ampload --urls`, which
//! amplab writes for every disk-bound run) and weighted traces (`ampload --trace`).
//!
//! **The line rule** (shared with [`crate::clf`]): a line is trimmed of surrounding whitespace
//! (a CRLF file reads as an LF one); a blank line or one starting with `#` carries nothing.
//!
//! * URL list: one request target a line, as written (a path, or an absolute URL that the
//!   reader resolves); [`url_list`] writes one.
//! * Trace: `PATH [WEIGHT]`, whitespace-separated, where the weight is a positive finite
//!   number; a third column is an error.

/// What a line holds under the line rule: `None` for a blank or comment line.
pub fn content(line: &str) -> Option<&str> {
    let line = line.trim();
    (!line.is_empty() && !line.starts_with('#')).then_some(line)
}

/// A URL list of `targets`, in order: each on a line of its own, ended by `\n`.
pub fn url_list<T: AsRef<str>>(targets: impl IntoIterator<Item = T>) -> String {
    let mut text = String::new();
    for target in targets {
        text.push_str(target.as_ref());
        text.push('\n');
    }
    text
}

/// One trace line read: the path as written and its weight, if it has one.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceLine<'a> {
    /// The first column.
    pub path: &'a str,
    /// The second column, a positive finite number.
    pub weight: Option<f64>,
}

/// Reads one trace line: `Ok(None)` for a blank or comment line, an error (the reason) for a
/// weight that is not a positive number or a third column.
pub fn trace_line(line: &str) -> Result<Option<TraceLine<'_>>, String> {
    let Some(line) = content(line) else {
        return Ok(None);
    };
    let mut fields = line.split_whitespace();
    let path = fields.next().unwrap_or_default();
    let weight = match fields.next() {
        None => None,
        Some(w) => match w.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Some(v),
            _ => return Err(format!("weight {w:?} is not a positive number")),
        },
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected third column {extra:?}"));
    }
    Ok(Some(TraceLine { path, weight }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_and_comment_lines_carry_nothing() {
        for line in ["", "   ", "\t\r", "# a comment", "  # indented comment", "#/a 1"] {
            assert_eq!(content(line), None, "{line:?}");
        }
        assert_eq!(content("  /a.html \r"), Some("/a.html"));
        assert_eq!(content("http://h/x#frag"), Some("http://h/x#frag"));
    }

    #[test]
    fn a_written_url_list_reads_back_line_for_line() {
        let targets = ["/a.html", "/dir/", "/%7Euser/b?c=d"];
        let text = url_list(targets);
        assert_eq!(text, "/a.html\n/dir/\n/%7Euser/b?c=d\n");
        let read: Vec<&str> = text.lines().filter_map(content).collect();
        assert_eq!(read, targets);
        assert_eq!(url_list(Vec::<String>::new()), "");
    }

    #[test]
    fn reads_trace_paths_and_weights() {
        let line = |path, weight| Ok(Some(TraceLine { path, weight }));
        assert_eq!(trace_line("/a"), line("/a", None));
        assert_eq!(trace_line("/b\t2.5"), line("/b", Some(2.5)));
        assert_eq!(trace_line("  /c   7 \r"), line("/c", Some(7.0)));
        assert_eq!(trace_line("# /x 1"), Ok(None));
        assert_eq!(trace_line(""), Ok(None));
    }

    #[test]
    fn refuses_bad_weights_and_extra_columns() {
        for line in ["/a 0", "/a -1", "/a x", "/a inf", "/a NaN"] {
            let err = trace_line(line).unwrap_err();
            assert!(
                err.starts_with("weight ") && err.ends_with("is not a positive number"),
                "{err}"
            );
        }
        assert_eq!(trace_line("/a 1 2"), Err("unexpected third column \"2\"".into()));
    }
}
