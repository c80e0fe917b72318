//! Header-field semantics for a request head: which fields amped reads and how each is validated.
//!
//! `parse.rs` owns framing and size limits; this module owns meaning. It folds the header lines
//! httparse produced into one `HeaderFields`, rejecting the combinations RFC 9112 calls faulty
//! framing (duplicate or non-numeric Content-Length, Content-Length with Transfer-Encoding,
//! missing or repeated Host), because a proxy in front of us could read such a message
//! differently and smuggle a second request past it.

use crate::error::HttpError;
use crate::request::{Method, RequestHead, Version};

/// The parsed request line, as handed over from `parse.rs`.
pub(crate) struct RequestLine {
    /// Method token as sent.
    pub method_raw: String,
    /// Raw request-target.
    pub target: String,
    /// Protocol version.
    pub version: Version,
}

/// Accumulates the header fields amped cares about, one field line at a time.
#[derive(Default)]
pub(crate) struct HeaderFields {
    host: Option<String>,
    content_length: Option<u64>,
    transfer_encoding: Option<String>,
    connection_close: bool,
    connection_keep_alive: bool,
    if_none_match: Option<String>,
    if_modified_since: Option<String>,
    range: Option<String>,
    if_range: Option<String>,
    user_agent: Option<String>,
    referer: Option<String>,
    accept_encoding: Option<String>,
    origin: Option<String>,
    access_control_request_method: Option<String>,
    access_control_request_headers: Option<String>,
}

impl HeaderFields {
    /// Folds one field line in. Names are compared case-insensitively (RFC 9110 §5.1).
    pub(crate) fn absorb(&mut self, name: &str, value: &[u8]) -> Result<(), HttpError> {
        let value = trim_ows(value);
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if is("host") {
            if self.host.is_some() {
                return Err(HttpError::BadRequest("multiple Host headers"));
            }
            if !is_valid_host(value) {
                return Err(HttpError::BadRequest("invalid Host header"));
            }
            self.host = Some(text(value));
        } else if is("content-length") {
            if self.content_length.is_some() {
                // Even equal duplicates are rejected: simpler, and no legitimate client sends them.
                return Err(HttpError::BadRequest("duplicate Content-Length"));
            }
            self.content_length = Some(parse_content_length(value)?);
        } else if is("transfer-encoding") {
            // A list-valued field: several lines are one list.
            match &mut self.transfer_encoding {
                Some(joined) => {
                    joined.push(',');
                    joined.push_str(&text(value));
                }
                None => self.transfer_encoding = Some(text(value)),
            }
        } else if is("connection") {
            for token in value.split(|&b| b == b',').map(trim_ows) {
                self.connection_close |= token.eq_ignore_ascii_case(b"close");
                self.connection_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if is("if-none-match") {
            list(&mut self.if_none_match, value);
        } else if is("if-modified-since") {
            first(&mut self.if_modified_since, value);
        } else if is("range") {
            first(&mut self.range, value);
        } else if is("if-range") {
            first(&mut self.if_range, value);
        } else if is("user-agent") {
            first(&mut self.user_agent, value);
        } else if is("referer") {
            first(&mut self.referer, value);
        } else if is("accept-encoding") {
            list(&mut self.accept_encoding, value);
        } else if is("origin") {
            first(&mut self.origin, value);
        } else if is("access-control-request-method") {
            first(&mut self.access_control_request_method, value);
        } else if is("access-control-request-headers") {
            list(&mut self.access_control_request_headers, value);
        }
        Ok(())
    }

    /// Applies the whole-message rules and builds the owned head.
    pub(crate) fn into_head(
        self,
        line: RequestLine,
        head_len: usize,
    ) -> Result<RequestHead, HttpError> {
        if self.transfer_encoding.is_some() && self.content_length.is_some() {
            return Err(HttpError::BadRequest("both Transfer-Encoding and Content-Length"));
        }
        let chunked = match &self.transfer_encoding {
            None => false,
            Some(_) if line.version == Version::Http10 => {
                // RFC 9112 §6.1: faulty framing in a 1.0 message (no 1.0 client sends it).
                return Err(HttpError::BadRequest("Transfer-Encoding in HTTP/1.0"));
            }
            Some(te) => only_chunked(te)?,
        };
        if line.version == Version::Http11 && self.host.is_none() {
            return Err(HttpError::BadRequest("missing Host header"));
        }
        let keep_alive = match line.version {
            Version::Http11 => !self.connection_close,
            Version::Http10 => self.connection_keep_alive && !self.connection_close,
        };
        Ok(RequestHead {
            method: Method::from_token(&line.method_raw),
            method_raw: line.method_raw,
            target: line.target,
            version: line.version,
            head_len,
            host: self.host,
            keep_alive,
            content_length: self.content_length,
            chunked,
            if_none_match: self.if_none_match,
            if_modified_since: self.if_modified_since,
            range: self.range,
            if_range: self.if_range,
            user_agent: self.user_agent,
            referer: self.referer,
            accept_encoding: self.accept_encoding,
            origin: self.origin,
            access_control_request_method: self.access_control_request_method,
            access_control_request_headers: self.access_control_request_headers,
        })
    }
}

/// Content-Length = 1*DIGIT (RFC 9110 §8.6); no sign, no list, no whitespace inside.
fn parse_content_length(value: &[u8]) -> Result<u64, HttpError> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::BadRequest("invalid Content-Length"));
    }
    value.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)
            .and_then(|acc| acc.checked_add(u64::from(d - b'0')))
            .ok_or(HttpError::BadRequest("Content-Length too large"))
    })
}

/// The request body's framing from a Transfer-Encoding list: true when it is exactly
/// `chunked` (any case). `chunked` not last is faulty framing (400, RFC 9112 §6.3); another
/// coding before it is one amped does not decode (501); an empty element is malformed (400).
fn only_chunked(te: &str) -> Result<bool, HttpError> {
    let codings: Vec<&str> = te.split(',').map(|c| c.trim_matches([' ', '\t'])).collect();
    let is_chunked = |c: &&str| c.eq_ignore_ascii_case("chunked");
    match codings.split_last() {
        Some((last, rest))
            if is_chunked(last) && !rest.iter().any(|c| c.is_empty() || is_chunked(c)) =>
        {
            if rest.is_empty() { Ok(true) } else { Err(HttpError::UnsupportedTransferCoding) }
        }
        _ => Err(HttpError::BadRequest("Transfer-Encoding without chunked last")),
    }
}

/// `Host = uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2): a reg-name or IPv4
/// address, or an IP literal in brackets, then an optional port made of digits only. An empty
/// value is allowed (RFC 9112 §3.2: the target has no authority).
fn is_valid_host(v: &[u8]) -> bool {
    let (host, port) = match v.strip_prefix(b"[") {
        Some(rest) => match rest.iter().position(|&b| b == b']') {
            Some(end)
                if rest[..end].iter().all(|&b| b.is_ascii_hexdigit() || b".:vV".contains(&b)) =>
            {
                (&rest[..0], &rest[end + 1..])
            }
            _ => return false,
        },
        None => match v.iter().position(|&b| b == b':') {
            Some(colon) => (&v[..colon], &v[colon..]),
            None => (v, &v[v.len()..]),
        },
    };
    let port_ok = match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    port_ok && host.iter().all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b))
}

/// Keeps the first occurrence of a singleton field; later duplicates are ignored.
fn first(slot: &mut Option<String>, value: &[u8]) {
    if slot.is_none() {
        *slot = Some(text(value));
    }
}

/// Folds one line of a list-valued field in: several lines mean the same as one line joined
/// with ", " (RFC 9110 §5.3).
fn list(slot: &mut Option<String>, value: &[u8]) {
    match slot {
        Some(joined) => {
            joined.push_str(", ");
            joined.push_str(&text(value));
        }
        None => *slot = Some(text(value)),
    }
}

/// Field values may carry obs-text (RFC 9110 §5.5); the fields we keep are ASCII in practice,
/// so a lossy conversion only affects values nobody could have meant.
fn text(value: &[u8]) -> String {
    String::from_utf8_lossy(value).into_owned()
}

/// Strips optional whitespace (SP / HTAB) from both ends.
fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_values() {
        let cases: [(&str, &[u8], Result<u64, HttpError>); 7] = [
            ("zero", b"0", Ok(0)),
            ("plain", b"1234", Ok(1234)),
            ("max", b"18446744073709551615", Ok(u64::MAX)),
            (
                "overflow",
                b"18446744073709551616",
                Err(HttpError::BadRequest("Content-Length too large")),
            ),
            ("negative", b"-1", Err(HttpError::BadRequest("invalid Content-Length"))),
            ("list", b"5, 5", Err(HttpError::BadRequest("invalid Content-Length"))),
            ("empty", b"", Err(HttpError::BadRequest("invalid Content-Length"))),
        ];
        for (name, input, expected) in cases {
            assert_eq!(parse_content_length(input), expected, "{name}");
        }
    }

    #[test]
    fn trims_optional_whitespace_only() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
    }
}
