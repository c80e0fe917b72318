//! `parse_request`: framing and limits for one request head, on top of httparse.
//!
//! httparse does the byte-level grammar; it does not bound the head size, and it reports any
//! version other than 1.0/1.1 as a plain syntax error. Those decisions (431, 414, 505) are made
//! here, before and after handing the bytes to httparse. Field meaning lives in `headers.rs`.

use crate::error::HttpError;
use crate::headers::{HeaderFields, RequestLine};
use crate::request::{Limits, RequestHead, Version};

/// Header slots kept on the stack; larger `max_headers` limits fall back to the heap.
const INLINE_HEADERS: usize = 64;

/// Parse one request head from the start of `buf`.
///
/// - `Ok(None)`: incomplete, read more and call again with the grown buffer.
/// - `Ok(Some(head))`: complete; the head occupies `buf[..head.head_len]` and whatever follows
///   (a body or the next pipelined request) starts at `head_len`.
/// - `Err(e)`: answer `e.status()` and close.
///
/// Leading empty lines before the request line are skipped (RFC 9112 §2.2) and counted in
/// `head_len` and against `max_head_bytes`. A head that has not completed within
/// `max_head_bytes` is `HeadTooLarge`; a request line longer than `max_uri_bytes` (complete or
/// not) is `UriTooLong`.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Option<RequestHead>, HttpError> {
    // Only look at what the limit allows: a head completing past it is as bad as one that never
    // completes, and this keeps httparse's work per call bounded.
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let skipped = leading_empty_lines(window);
    let rest = &window[skipped..];
    let line = request_line(rest);
    if line.map_or(rest.len(), <[u8]>::len) > limits.max_uri_bytes {
        return Err(HttpError::UriTooLong);
    }
    let limit_reached = buf.len() >= limits.max_head_bytes;
    match parse_head(rest, skipped, limits, limit_reached, line) {
        // RFC 9110 §2.5: a 1.x request with a minor version above 1 is answered as 1.1 (the
        // highest minor version we speak). httparse knows only 1.0 and 1.1, so the head is
        // parsed again from a copy whose version reads HTTP/1.1 (same length, same offsets).
        Err(HttpError::VersionNotSupported) if line.is_some_and(is_later_minor) => {
            let line_len = line.map_or(0, <[u8]>::len);
            let mut copy = rest.to_vec();
            copy[line_len - 1] = b'1';
            parse_head(&copy, skipped, limits, limit_reached, line)
        }
        other => other,
    }
}

/// True for a request line ending in `HTTP/1.d` with d > 1.
fn is_later_minor(line: &[u8]) -> bool {
    matches!(line, [.., b' ', b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if (b'2'..=b'9').contains(minor))
}

/// httparse over the head in `rest` (which starts `skipped` bytes into the buffer).
fn parse_head(
    rest: &[u8],
    skipped: usize,
    limits: &Limits,
    limit_reached: bool,
    line: Option<&[u8]>,
) -> Result<Option<RequestHead>, HttpError> {
    let mut inline = [httparse::EMPTY_HEADER; INLINE_HEADERS];
    let mut heap = Vec::new();
    let slots: &mut [httparse::Header<'_>] = if limits.max_headers <= INLINE_HEADERS {
        &mut inline[..limits.max_headers]
    } else {
        heap.resize(limits.max_headers, httparse::EMPTY_HEADER);
        &mut heap
    };
    let mut req = httparse::Request::new(slots);
    match req.parse(rest) {
        Ok(httparse::Status::Complete(n)) => build(&req, skipped + n).map(Some),
        Ok(httparse::Status::Partial) if limit_reached => Err(HttpError::HeadTooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HttpError::HeadTooLarge),
        Err(httparse::Error::Version) => match line {
            Some(line) => Err(classify_bad_version(line)),
            // httparse rejects "HTTP/2" before the line ends; wait for the whole line to tell
            // 505 from 400.
            None if limit_reached => Err(HttpError::HeadTooLarge),
            None => Ok(None),
        },
        Err(e) => Err(HttpError::BadRequest(describe(e))),
    }
}

/// Turns httparse's borrowed, complete request into our owned head.
fn build(req: &httparse::Request<'_, '_>, head_len: usize) -> Result<RequestHead, HttpError> {
    let version = match req.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => return Err(HttpError::VersionNotSupported),
    };
    let line = RequestLine {
        method_raw: req.method.unwrap_or_default().to_owned(),
        target: req.path.unwrap_or_default().to_owned(),
        version,
    };
    let mut fields = HeaderFields::default();
    for h in req.headers.iter() {
        fields.absorb(h.name, h.value)?;
    }
    fields.into_head(line, head_len)
}

/// Number of bytes taken by leading CRLF / bare LF lines (the same rule httparse applies).
fn leading_empty_lines(buf: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match buf.get(i..) {
            Some([b'\r', b'\n', ..]) => i += 2,
            Some([b'\n', ..]) => i += 1,
            _ => return i,
        }
    }
}

/// The request line without its line ending, if the line is complete.
fn request_line(rest: &[u8]) -> Option<&[u8]> {
    let lf = rest.iter().position(|&b| b == b'\n')?;
    let line = &rest[..lf];
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

/// httparse only knows 1.0 and 1.1. A line of the form `method SP target SP HTTP/d.d` with any
/// other digits is a version we understand to be unsupported (505); anything else is malformed.
fn classify_bad_version(line: &[u8]) -> HttpError {
    let mut parts = line.split(|&b| b == b' ');
    let well_formed = matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(m), Some(t), Some([b'H', b'T', b'T', b'P', b'/', major, b'.', minor]), None)
            if !m.is_empty() && !t.is_empty() && major.is_ascii_digit() && minor.is_ascii_digit()
    );
    if well_formed {
        HttpError::VersionNotSupported
    } else {
        HttpError::BadRequest("malformed request line")
    }
}

/// A log-friendly description of an httparse error.
fn describe(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Token => "invalid token in request line",
        httparse::Error::Version => "invalid HTTP version",
        httparse::Error::Status => "invalid status",
        httparse::Error::TooManyHeaders => "too many headers",
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
