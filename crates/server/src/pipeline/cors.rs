//! CORS preflight (`--cors-origin`): an `OPTIONS` request carrying `Origin` and
//! `Access-Control-Request-Method` asks whether a cross-origin GET may follow; amped answers
//! 204 with the methods it serves, the request headers it was asked about and how long the
//! browser may remember the answer. Other OPTIONS requests, and every OPTIONS without
//! `--cors-origin`, are answered as before (405 with `Allow`). The `Access-Control-Allow-Origin`
//! line itself is one of the configured headers every response carries.

use super::{Pipeline, Request, Response};
use amped_http::{HeadWriter, StatusCode};

/// How long (seconds) a browser may cache a preflight answer.
const MAX_AGE: &str = "86400";

impl Pipeline {
    /// Whether `req` is a CORS preflight this server answers.
    pub(super) fn is_preflight(&self, req: &Request) -> bool {
        self.cfg.response.cors_origin.is_some()
            && req.head.origin.is_some()
            && req.head.access_control_request_method.is_some()
    }

    /// The 204 answering a preflight.
    pub(super) fn preflight(&self, req: &Request) -> Response {
        let mut head = Vec::with_capacity(384);
        let mut w = HeadWriter::new(&mut head, StatusCode::NO_CONTENT);
        w.date();
        if let Some(name) = &self.cfg.server_header {
            w.header("Server", name.as_bytes());
        }
        w.raw(&self.cfg.response.common_headers)
            .header("Access-Control-Allow-Methods", b"GET, HEAD, OPTIONS");
        if let Some(asked) = req.head.access_control_request_headers.as_deref()
            && is_header_list(asked)
        {
            w.header("Access-Control-Allow-Headers", asked.as_bytes());
        }
        w.header("Access-Control-Max-Age", MAX_AGE.as_bytes());
        super::respond::connection_header(&mut w, req);
        w.finish();
        self.response(req, StatusCode::NO_CONTENT, head, super::Body::None)
    }
}

/// A comma-separated list of header names (what `Access-Control-Request-Headers` holds), safe
/// to echo back.
fn is_header_list(s: &str) -> bool {
    s.split(',').all(|name| amped_http::is_field_name(name.trim()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_header_name_lists_are_echoed() {
        for (s, ok) in [
            ("x-requested-with", true),
            ("Content-Type, X-Custom", true),
            ("a,b", true),
            ("", false),
            ("a,,b", false),
            ("a b", false),
            ("a\r\nb", false),
        ] {
            assert_eq!(super::is_header_list(s), ok, "{s:?}");
        }
    }
}
