//! `--redirect-http`: the plain listener beside an HTTPS server answers every request with a
//! 301 to the same host, path and query over https. The host comes from the request (its
//! `Host` field, or the authority of an absolute-form target), the port is the HTTPS
//! listener's (left out when it is 443).

use super::{Pipeline, Request, Step};
use amped_http::StatusCode;

impl Pipeline {
    /// Makes this the pipeline of a redirect listener: every request is answered with a 301
    /// to https on `port`.
    pub fn redirecting_to_https(mut self, port: u16) -> Self {
        self.redirect_https = Some(port);
        self
    }

    /// The 301 to the https URL of `req` (400 when the request names no usable host).
    pub(super) fn https_redirect(&self, req: &Request, port: u16) -> Step {
        match https_location(req.head.host.as_deref(), &req.head.target, port) {
            Some(location) => {
                let extra = format!("Location: {location}\r\n");
                let status = StatusCode::MOVED_PERMANENTLY;
                Step::Respond(self.error_with(req, status, extra.as_bytes(), false))
            }
            None => Step::Respond(self.error(req, StatusCode::BAD_REQUEST)),
        }
    }
}

/// `https://HOST[:PORT]/path?query` for a request to `target` with `Host: host`; `None` when
/// no valid host name or address is given.
fn https_location(host: Option<&str>, target: &str, port: u16) -> Option<String> {
    let (host, path) = match target.strip_prefix("http://") {
        // Absolute form (`GET http://example.com/a?b HTTP/1.1`): its authority wins.
        Some(rest) => {
            let at = rest.find(['/', '?']).unwrap_or(rest.len());
            let path = &rest[at..];
            (&rest[..at], if path.starts_with('/') { path.to_string() } else { format!("/{path}") })
        }
        None if target.starts_with('/') => (host?, target.to_string()),
        None => return None, // `*` or an authority: nothing to redirect to
    };
    let name = host_without_port(host)?;
    let port = if port == 443 { String::new() } else { format!(":{port}") };
    Some(format!("https://{name}{port}{path}"))
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`), if it is a
/// plain name or address (nothing that could change the URL's meaning, like `@` or `/`).
fn host_without_port(host: &str) -> Option<&str> {
    let name =
        if host.starts_with('[') { &host[..=host.find(']')?] } else { host.split(':').next()? };
    let fine = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':');
    (!name.is_empty() && name.bytes().all(fine)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::https_location;

    #[test]
    fn the_location_keeps_host_path_and_query() {
        let cases: &[(Option<&str>, &str, u16, Option<&str>)] = &[
            (Some("example.com"), "/a/b?x=1&y", 443, Some("https://example.com/a/b?x=1&y")),
            (Some("example.com:8080"), "/", 8443, Some("https://example.com:8443/")),
            (Some("[::1]:80"), "/%20x", 443, Some("https://[::1]/%20x")),
            (Some("127.0.0.1"), "/?q", 4443, Some("https://127.0.0.1:4443/?q")),
            (Some("ignored"), "http://other.org:81/p?q", 443, Some("https://other.org/p?q")),
            (None, "http://other.org?q", 443, Some("https://other.org/?q")),
            (None, "/a", 443, None),
            (Some("evil.com/x@"), "/a", 443, None),
            (Some(""), "/a", 443, None),
            (Some("example.com"), "*", 443, None),
        ];
        for &(host, target, port, want) in cases {
            assert_eq!(https_location(host, target, port).as_deref(), want, "{host:?} {target}");
        }
    }
}
