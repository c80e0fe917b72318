//! The parsed form of a request head: method, version, limits and the owned `RequestHead`.
//!
//! Everything here is plain data. The head owns its strings so the connection can reuse or
//! compact its read buffer as soon as the head is parsed (pipelined requests follow it).

/// The request method. Known methods other than GET/HEAD get 405 from the server; `Unknown`
/// (any other token) gets 501 (RFC 9110 §9.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
    /// PATCH.
    Patch,
    /// TRACE.
    Trace,
    /// CONNECT.
    Connect,
    /// Any other (syntactically valid) token; the original is in `RequestHead::method_raw`.
    Unknown,
}

impl Method {
    /// Classifies a method token. Methods are case-sensitive (RFC 9110 §9.1), so `get` is Unknown.
    pub fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            _ => Method::Unknown,
        }
    }

    /// The canonical token ("GET", ...); `Unknown` gives "-" (use `method_raw` for logs).
    pub fn as_str(&self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Unknown => "-",
        }
    }
}

/// The protocol version of a request. Only 1.0 and 1.1 get this far; others are 505.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Version {
    /// HTTP/1.0: close by default.
    Http10,
    /// HTTP/1.1: persistent by default, Host required.
    Http11,
}

impl Version {
    /// "HTTP/1.0" or "HTTP/1.1".
    pub fn as_str(&self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// Size limits applied while parsing a head; exceeding them maps to 414 or 431.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// Most bytes a head may take, including leading empty lines and the final CRLFCRLF.
    pub max_head_bytes: usize,
    /// Most bytes the request line may take (excluding its CRLF); longer is 414.
    pub max_uri_bytes: usize,
    /// Most header fields a head may carry; more is 431.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_head_bytes: 8192, max_uri_bytes: 4096, max_headers: 64 }
    }
}

/// A parsed request head. Owned (Strings), so it can outlive the read buffer.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RequestHead {
    /// The classified method.
    pub method: Method,
    /// The method token as sent, for the access log.
    pub method_raw: String,
    /// The raw request-target as sent (still percent-encoded); see `normalize_target`.
    pub target: String,
    /// The protocol version.
    pub version: Version,
    /// Bytes of the head including leading empty lines and the final CRLFCRLF; the next
    /// pipelined request (or the body) starts at this offset.
    pub head_len: usize,
    /// The Host header value, if sent (always present for HTTP/1.1).
    pub host: Option<String>,
    /// Whether the connection may persist after this response: HTTP/1.1 unless `Connection: close`;
    /// HTTP/1.0 only with `Connection: keep-alive` (and no `close`).
    pub keep_alive: bool,
    /// Content-Length, if sent (validated: digits only, at most one).
    pub content_length: Option<u64>,
    /// Transfer-Encoding was present (any value). Never together with `content_length`.
    pub chunked: bool,
    /// If-None-Match; several field lines are joined with ", " (it is a list).
    pub if_none_match: Option<String>,
    /// If-Modified-Since (first field line).
    pub if_modified_since: Option<String>,
    /// Range (first field line).
    pub range: Option<String>,
    /// If-Range (first field line).
    pub if_range: Option<String>,
    /// User-Agent, for the access log.
    pub user_agent: Option<String>,
    /// Referer, for the access log.
    pub referer: Option<String>,
    /// Accept-Encoding; several field lines are joined with ", " (it is a list).
    pub accept_encoding: Option<String>,
    /// Origin (CORS).
    pub origin: Option<String>,
    /// Access-Control-Request-Method (CORS preflight).
    pub access_control_request_method: Option<String>,
    /// Access-Control-Request-Headers (CORS preflight); several lines joined with ", ".
    pub access_control_request_headers: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_tokens_round_trip() {
        let cases = [
            ("GET", Method::Get, "GET"),
            ("HEAD", Method::Head, "HEAD"),
            ("POST", Method::Post, "POST"),
            ("PUT", Method::Put, "PUT"),
            ("DELETE", Method::Delete, "DELETE"),
            ("OPTIONS", Method::Options, "OPTIONS"),
            ("PATCH", Method::Patch, "PATCH"),
            ("TRACE", Method::Trace, "TRACE"),
            ("CONNECT", Method::Connect, "CONNECT"),
            ("get", Method::Unknown, "-"),
            ("BREW", Method::Unknown, "-"),
        ];
        for (token, method, canonical) in cases {
            assert_eq!(Method::from_token(token), method, "{token}");
            assert_eq!(method.as_str(), canonical, "{token}");
        }
    }

    #[test]
    fn version_strings() {
        assert_eq!(Version::Http10.as_str(), "HTTP/1.0");
        assert_eq!(Version::Http11.as_str(), "HTTP/1.1");
    }

    #[test]
    fn default_limits() {
        let l = Limits::default();
        assert_eq!((l.max_head_bytes, l.max_uri_bytes, l.max_headers), (8192, 4096, 64));
    }
}
