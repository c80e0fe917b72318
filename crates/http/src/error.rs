//! `HttpError`: every way a request head can be rejected, each mapped to exactly one status.
//!
//! The mapping lives in `HttpError::status` and nowhere else, so the server never has to decide
//! which number a parse failure deserves.

use crate::status::StatusCode;

/// Why a request head was rejected. The server answers with `status()` and closes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HttpError {
    /// 400: malformed request line or header, bad or duplicate Content-Length, Transfer-Encoding
    /// together with Content-Length, missing Host on 1.1, several or invalid Host headers.
    /// The text says which, for the error log.
    BadRequest(&'static str),
    /// 414: the request line is longer than `Limits::max_uri_bytes`.
    UriTooLong,
    /// 431: the head did not complete within `Limits::max_head_bytes`, or had too many headers.
    HeadTooLarge,
    /// 505: a well-formed `HTTP/x.y` whose major version is not 1.
    VersionNotSupported,
    /// 501: a Transfer-Encoding with a coding before `chunked` (gzip, deflate…) that amped
    /// does not decode.
    UnsupportedTransferCoding,
}

impl HttpError {
    /// The one status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HttpError::UriTooLong => StatusCode::URI_TOO_LONG,
            HttpError::HeadTooLarge => StatusCode::HEADER_FIELDS_TOO_LARGE,
            HttpError::VersionNotSupported => StatusCode::VERSION_NOT_SUPPORTED,
            HttpError::UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
        }
    }

    /// A short human-readable explanation for logs (not the status reason phrase).
    pub fn reason(&self) -> &'static str {
        match self {
            HttpError::BadRequest(why) => why,
            HttpError::UriTooLong => "request line too long",
            HttpError::HeadTooLarge => "request head too large",
            HttpError::VersionNotSupported => "HTTP version not supported",
            HttpError::UnsupportedTransferCoding => "transfer coding not supported",
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status(), self.reason())
    }
}

impl std::error::Error for HttpError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_one_status() {
        let cases = [
            (HttpError::BadRequest("missing Host"), 400, "400 Bad Request: missing Host"),
            (HttpError::UriTooLong, 414, "414 URI Too Long: request line too long"),
            (
                HttpError::HeadTooLarge,
                431,
                "431 Request Header Fields Too Large: request head too large",
            ),
            (
                HttpError::VersionNotSupported,
                505,
                "505 HTTP Version Not Supported: HTTP version not supported",
            ),
        ];
        for (err, code, text) in cases {
            assert_eq!(err.status().as_u16(), code);
            assert_eq!(err.to_string(), text);
        }
    }
}
