//! Request-target → safe relative path. This module owns the guarantee that a URL can never name
//! a file outside the document root.
//!
//! Invariant: every `TargetPath` returned by `normalize_target` has segments that are non-empty,
//! not "." or "..", and free of '/', '\\' and NUL, so `docroot.join(to_rel_path())` only ever
//! descends (checked by a proptest below). Decoding happens exactly once, before dot-segment
//! removal, so "%2e%2e" is a ".." and is resolved, while "%252e%252e" is the literal name
//! "%2e%2e" (double-decoding is how many traversal bugs happen).

use std::path::PathBuf;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use crate::status::StatusCode;

/// A normalised request path: decoded segments plus whether the path ended in '/'.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TargetPath {
    /// Decoded, dot-free, non-empty segments.
    pub segments: Vec<String>,
    /// The path named a directory: it ended in '/', in a "." or ".." segment (RFC 3986 §5.2.4
    /// leaves a trailing slash there), or it is the root.
    pub trailing_slash: bool,
}

/// Bytes escaped again when a segment is written back into a URL: everything but pchar
/// (RFC 3986 §3.3), and '%' itself so a literal "%2e" stays literal.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

impl TargetPath {
    /// "/a/b/" style URL path, each segment percent-encoded again for output (for Location
    /// headers, logs). The root is "/".
    pub fn to_url_path(&self) -> String {
        let mut out =
            String::with_capacity(1 + self.segments.iter().map(|s| s.len() + 1).sum::<usize>());
        for segment in &self.segments {
            out.push('/');
            out.extend(utf8_percent_encode(segment, SEGMENT));
        }
        if self.trailing_slash || self.segments.is_empty() {
            out.push('/');
        }
        out
    }

    /// Relative filesystem path "a/b" (joinable onto the docroot; empty for "/").
    pub fn to_rel_path(&self) -> PathBuf {
        self.segments.iter().collect()
    }

    /// Any segment starting with '.' (dotfiles and dot-directories such as ".git").
    pub fn has_dot_segment(&self) -> bool {
        self.segments.iter().any(|s| s.starts_with('.'))
    }
}

/// Why a request-target was refused. All are answered with 400.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TargetError {
    /// Neither origin-form ("/path") nor absolute-form ("http://host/path"), e.g. "*".
    NotOriginForm,
    /// An invalid %XX escape, or the decoded bytes are not UTF-8.
    BadEncoding,
    /// A decoded NUL byte.
    NulByte,
    /// A backslash, raw or as %5C (a separator on some systems, never a name character here).
    Backslash,
    /// A ".." that would climb above the root.
    EscapesRoot,
    /// A "%2F": '/' inside a segment would blur segment boundaries.
    EncodedSlash,
}

impl TargetError {
    /// The status to answer with: always 400.
    pub fn status(&self) -> StatusCode {
        StatusCode::BAD_REQUEST
    }

    /// A short explanation for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            TargetError::NotOriginForm => "request-target is not a path",
            TargetError::BadEncoding => "bad percent-encoding in path",
            TargetError::NulByte => "NUL byte in path",
            TargetError::Backslash => "backslash in path",
            TargetError::EscapesRoot => "path escapes the document root",
            TargetError::EncodedSlash => "encoded slash in path",
        }
    }
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for TargetError {}

/// Accepts origin-form ("/path?query") and absolute-form ("http://host/path"); "*" and
/// authority-form are `NotOriginForm`. Drops query and fragment, percent-decodes exactly once,
/// rejects NUL, backslashes and encoded slashes, drops empty and "." segments and resolves ".."
/// (an escape above the root is an error, not clamped, so probes show up in the log).
pub fn normalize_target(raw: &str) -> Result<TargetPath, TargetError> {
    let path = path_part(raw)?;
    let mut segments: Vec<String> = Vec::new();
    let mut ends_in_dot = false;
    for raw_segment in path.split('/') {
        let segment = decode_segment(raw_segment)?;
        ends_in_dot = matches!(segment.as_str(), "." | "..");
        match segment.as_str() {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(TargetError::EscapesRoot);
                }
            }
            _ => segments.push(segment),
        }
    }
    let trailing_slash = path.ends_with('/') || ends_in_dot || segments.is_empty();
    Ok(TargetPath { segments, trailing_slash })
}

/// The path component of an origin-form or absolute-form target, without query or fragment.
fn path_part(raw: &str) -> Result<&str, TargetError> {
    let after_authority = if raw.starts_with('/') {
        raw
    } else {
        let rest = strip_scheme(raw).ok_or(TargetError::NotOriginForm)?;
        // The authority ends at the first '/', '?' or '#'; an absent path means "/".
        match rest.find(['/', '?', '#']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            _ => "/",
        }
    };
    let end = after_authority.find(['?', '#']).unwrap_or(after_authority.len());
    let path = &after_authority[..end];
    if path.contains('\\') {
        return Err(TargetError::Backslash);
    }
    Ok(path)
}

/// "http://" or "https://" (scheme is case-insensitive) stripped, or None.
fn strip_scheme(raw: &str) -> Option<&str> {
    ["http://", "https://"].iter().find_map(|scheme| {
        let head = raw.get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme).then(|| &raw[scheme.len()..])
    })
}

/// Percent-decodes one segment, once, and checks what it decoded to.
fn decode_segment(raw: &str) -> Result<String, TargetError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = if bytes[i] == b'%' {
            let hi = bytes.get(i + 1).and_then(|&h| hex(h));
            let lo = bytes.get(i + 2).and_then(|&l| hex(l));
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(TargetError::BadEncoding);
            };
            i += 3;
            hi << 4 | lo
        } else {
            i += 1;
            bytes[i - 1]
        };
        match b {
            0 => return Err(TargetError::NulByte),
            b'\\' => return Err(TargetError::Backslash),
            b'/' => return Err(TargetError::EncodedSlash),
            _ => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| TargetError::BadEncoding)
}

/// Value of one hex digit.
fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
