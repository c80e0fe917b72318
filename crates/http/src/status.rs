//! The status-code table: every status amped can send, with its RFC 9110 reason phrase.
//!
//! Statuses live in one place so the request parser, the target normaliser and the server all map
//! their outcomes onto the same numbers and the same wording (hyper's `role.rs` habit).

/// An HTTP status code. A plain newtype so it is `Copy` and cheap to pass around.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub struct StatusCode(pub u16);

impl StatusCode {
    /// 200 OK.
    pub const OK: StatusCode = StatusCode(200);
    /// 204 No Content (a CORS preflight answered).
    pub const NO_CONTENT: StatusCode = StatusCode(204);
    /// 206 Partial Content (a satisfiable single Range).
    pub const PARTIAL_CONTENT: StatusCode = StatusCode(206);
    /// 301 Moved Permanently (directory without trailing slash).
    pub const MOVED_PERMANENTLY: StatusCode = StatusCode(301);
    /// 304 Not Modified (conditional GET/HEAD matched).
    pub const NOT_MODIFIED: StatusCode = StatusCode(304);
    /// 400 Bad Request.
    pub const BAD_REQUEST: StatusCode = StatusCode(400);
    /// 403 Forbidden.
    pub const FORBIDDEN: StatusCode = StatusCode(403);
    /// 404 Not Found.
    pub const NOT_FOUND: StatusCode = StatusCode(404);
    /// 405 Method Not Allowed (a known method other than GET/HEAD).
    pub const METHOD_NOT_ALLOWED: StatusCode = StatusCode(405);
    /// 408 Request Timeout.
    pub const REQUEST_TIMEOUT: StatusCode = StatusCode(408);
    /// 413 Content Too Large (RFC 9110 name; formerly "Payload Too Large").
    pub const PAYLOAD_TOO_LARGE: StatusCode = StatusCode(413);
    /// 414 URI Too Long.
    pub const URI_TOO_LONG: StatusCode = StatusCode(414);
    /// 416 Range Not Satisfiable.
    pub const RANGE_NOT_SATISFIABLE: StatusCode = StatusCode(416);
    /// 429 Too Many Requests (RFC 6585: a per-client limit).
    pub const TOO_MANY_REQUESTS: StatusCode = StatusCode(429);
    /// 431 Request Header Fields Too Large.
    pub const HEADER_FIELDS_TOO_LARGE: StatusCode = StatusCode(431);
    /// 500 Internal Server Error.
    pub const INTERNAL_SERVER_ERROR: StatusCode = StatusCode(500);
    /// 501 Not Implemented (an unknown method token).
    pub const NOT_IMPLEMENTED: StatusCode = StatusCode(501);
    /// 503 Service Unavailable.
    pub const SERVICE_UNAVAILABLE: StatusCode = StatusCode(503);
    /// 505 HTTP Version Not Supported.
    pub const VERSION_NOT_SUPPORTED: StatusCode = StatusCode(505);

    /// The RFC 9110 reason phrase; codes outside the table get a generic phrase by class, so a
    /// status line is always well-formed.
    pub fn reason(self) -> &'static str {
        known_reason(self.0).unwrap_or(match self.0 / 100 {
            1 => "Informational",
            2 => "Success",
            3 => "Redirection",
            4 => "Client Error",
            _ => "Server Error",
        })
    }

    /// The numeric code.
    pub fn as_u16(self) -> u16 {
        self.0
    }
}

/// Reason phrases from RFC 9110 §15 for the codes amped may send.
fn known_reason(code: u16) -> Option<&'static str> {
    Some(match code {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => return None,
    })
}

impl std::fmt::Display for StatusCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0, self.reason())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_of_the_statuses_amped_sends() {
        let cases = [
            (StatusCode::OK, "OK"),
            (StatusCode::PARTIAL_CONTENT, "Partial Content"),
            (StatusCode::MOVED_PERMANENTLY, "Moved Permanently"),
            (StatusCode::NOT_MODIFIED, "Not Modified"),
            (StatusCode::BAD_REQUEST, "Bad Request"),
            (StatusCode::FORBIDDEN, "Forbidden"),
            (StatusCode::NOT_FOUND, "Not Found"),
            (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
            (StatusCode::REQUEST_TIMEOUT, "Request Timeout"),
            (StatusCode::PAYLOAD_TOO_LARGE, "Content Too Large"),
            (StatusCode::URI_TOO_LONG, "URI Too Long"),
            (StatusCode::RANGE_NOT_SATISFIABLE, "Range Not Satisfiable"),
            (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests"),
            (StatusCode::HEADER_FIELDS_TOO_LARGE, "Request Header Fields Too Large"),
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
            (StatusCode::NOT_IMPLEMENTED, "Not Implemented"),
            (StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable"),
            (StatusCode::VERSION_NOT_SUPPORTED, "HTTP Version Not Supported"),
            (StatusCode(299), "Success"),
            (StatusCode(499), "Client Error"),
            (StatusCode(599), "Server Error"),
        ];
        for (status, reason) in cases {
            assert_eq!(status.reason(), reason, "{}", status.as_u16());
        }
    }

    #[test]
    fn display_is_code_and_reason() {
        assert_eq!(StatusCode::NOT_FOUND.to_string(), "404 Not Found");
    }
}
