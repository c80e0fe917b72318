//! The shape of every request a run sends: the method (`--method`) and the extra header fields
//! (`-H 'Name: value'`), checked once so nothing typed on the command line can break the
//! request's framing. No request carries a body.

/// Header fields ampload writes itself, which `-H` may not set: it frames requests without a
/// body and decides when a connection closes (`Host` may be overridden).
const RESERVED: [&str; 4] = ["content-length", "transfer-encoding", "connection", "expect"];

/// Method and extra header fields of every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShape {
    /// `GET`, `HEAD`, … (an HTTP token).
    pub method: String,
    /// Extra fields in command-line order; a `Host` here replaces the URL's.
    pub headers: Vec<(String, String)>,
}

impl Default for RequestShape {
    fn default() -> Self {
        RequestShape { method: "GET".into(), headers: Vec::new() }
    }
}

/// A token character (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl RequestShape {
    /// Checks `--method` and every `-H`; the error is one line.
    pub fn new(method: &str, headers: &[String]) -> Result<RequestShape, String> {
        if method.is_empty() || !method.bytes().all(is_tchar) {
            return Err(format!("--method {method:?} is not an HTTP method (like GET or HEAD)"));
        }
        let headers = headers.iter().map(|h| parse_header(h)).collect::<Result<_, _>>()?;
        Ok(RequestShape { method: method.to_string(), headers })
    }

    /// Whether responses have no body whatever their headers say (`HEAD`).
    pub fn bodyless_responses(&self) -> bool {
        self.method == "HEAD"
    }

    /// `METHOD target HTTP/1.1`, `Host`, the extra fields, each line ended by CRLF (without the
    /// final blank line).
    pub fn head(&self, target: &str, host: &str) -> String {
        let host = self
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("host"))
            .map_or(host, |(_, value)| value.as_str());
        let mut head = format!("{} {target} HTTP/1.1\r\nHost: {host}\r\n", self.method);
        for (name, value) in self.headers.iter().filter(|(n, _)| !n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head
    }
}

/// Parses `Name: value` (or `Name:value`).
fn parse_header(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("-H {text:?}: expected 'Name: value'"));
    };
    let value = value.trim_matches([' ', '\t']);
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(format!("-H {text:?}: {name:?} is not a header name"));
    }
    if RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)) {
        return Err(format!(
            "-H {text:?}: ampload sets {name} itself (requests have no body; see --close and -k)"
        ));
    }
    if !value.bytes().all(|b| b == b'\t' || (0x20..=0x7e).contains(&b)) {
        return Err(format!("-H {text:?}: the value holds a control or non-ASCII character"));
    }
    if name.eq_ignore_ascii_case("host") && value.is_empty() {
        return Err(format!("-H {text:?}: an empty Host"));
    }
    Ok((name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_heads_with_method_and_headers() {
        let s = RequestShape::new(
            "HEAD",
            &["Accept-Encoding: gzip".into(), "host:example.org".into(), "X-Empty:".into()],
        )
        .unwrap();
        assert!(s.bodyless_responses());
        assert_eq!(
            s.head("/a", "127.0.0.1:80"),
            "HEAD /a HTTP/1.1\r\nHost: example.org\r\nAccept-Encoding: gzip\r\nX-Empty: \r\n"
        );
        assert_eq!(RequestShape::default().head("/", "h"), "GET / HTTP/1.1\r\nHost: h\r\n");
    }

    #[test]
    fn refuses_what_would_break_framing() {
        let bad = |m: &str, h: &str| RequestShape::new(m, &[h.to_string()]).unwrap_err();
        assert!(bad("G ET", "A: b").contains("not an HTTP method"));
        assert!(bad("", "A: b").contains("not an HTTP method"));
        assert!(bad("GET", "no colon").contains("expected 'Name: value'"));
        assert!(bad("GET", "Bad Name: x").contains("not a header name"));
        assert!(bad("GET", "Content-Length: 5").contains("sets Content-Length itself"));
        assert!(bad("GET", "connection: keep-alive").contains("itself"));
        assert!(bad("GET", "A: b\r\nX: y").contains("control"));
        assert!(bad("GET", "Host: ").contains("empty Host"));
    }
}
