//! Response-head encoding into a caller-owned, reusable `Vec<u8>`, plus the small HTML bodies
//! amped generates itself (error pages; escaping for directory listings).
//!
//! The writer appends and never clears, so a connection can encode several pipelined responses
//! into one output buffer and send them with one write. It performs no validation beyond debug
//! assertions: header names and values come from the server, never verbatim from a request.

use crate::date::http_date_now;
use crate::status::StatusCode;

/// Appends one response head to a byte buffer.
pub struct HeadWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> HeadWriter<'a> {
    /// Appends "HTTP/1.1 {code} {reason}\r\n". Always HTTP/1.1, even to 1.0 clients: the version
    /// names what the server speaks (RFC 9110 §6.2). Does not clear `buf`.
    pub fn new(buf: &'a mut Vec<u8>, status: StatusCode) -> Self {
        buf.extend_from_slice(b"HTTP/1.1 ");
        buf.extend_from_slice(itoa::Buffer::new().format(status.as_u16()).as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(status.reason().as_bytes());
        buf.extend_from_slice(b"\r\n");
        HeadWriter { buf }
    }

    /// Appends "name: value\r\n". The value must not contain CR or LF.
    pub fn header(&mut self, name: &str, value: &[u8]) -> &mut Self {
        debug_assert!(!value.iter().any(|&b| b == b'\r' || b == b'\n'), "CR/LF in {name}");
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// Appends "name: {value}\r\n" with the number formatted by itoa (no allocation).
    pub fn header_u64(&mut self, name: &str, value: u64) -> &mut Self {
        let mut digits = itoa::Buffer::new();
        self.header(name, digits.format(value).as_bytes())
    }

    /// Appends lines that are already "k: v\r\n"-formatted (e.g. from a header cache).
    pub fn raw(&mut self, preformatted_lines: &[u8]) -> &mut Self {
        debug_assert!(preformatted_lines.is_empty() || preformatted_lines.ends_with(b"\r\n"));
        self.buf.extend_from_slice(preformatted_lines);
        self
    }

    /// Appends "Date: {now}\r\n" (IMF-fixdate) from the per-thread date cache.
    pub fn date(&mut self) -> &mut Self {
        self.header("Date", &http_date_now())
    }

    /// Appends the empty line that ends the head.
    pub fn finish(&mut self) {
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// Small HTML error body, e.g. for 404:
/// `<!DOCTYPE html><html><head><title>404 Not Found</title></head><body><h1>404 Not Found</h1></body></html>\n`
pub fn error_body(status: StatusCode) -> Vec<u8> {
    let title = format!("{} {}", status.as_u16(), status.reason());
    format!(
        "<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>\n"
    )
    .into_bytes()
}

/// HTML-escapes text (& < > " ') so file names are safe in directory listings, in element
/// content and in quoted attribute values alike.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_bytes_exactly() {
        let mut buf = Vec::new();
        HeadWriter::new(&mut buf, StatusCode::PARTIAL_CONTENT)
            .header("Content-Type", b"text/plain; charset=utf-8")
            .header_u64("Content-Length", 1234)
            .raw(b"Accept-Ranges: bytes\r\nETag: \"1-2-3\"\r\n")
            .header("Content-Range", b"bytes 0-1233/5000")
            .finish();
        assert_eq!(
            buf,
            b"HTTP/1.1 206 Partial Content\r\n\
              Content-Type: text/plain; charset=utf-8\r\n\
              Content-Length: 1234\r\n\
              Accept-Ranges: bytes\r\n\
              ETag: \"1-2-3\"\r\n\
              Content-Range: bytes 0-1233/5000\r\n\
              \r\n"
        );
    }

    #[test]
    fn status_lines() {
        let cases = [
            (StatusCode::OK, "HTTP/1.1 200 OK\r\n\r\n"),
            (StatusCode::NOT_MODIFIED, "HTTP/1.1 304 Not Modified\r\n\r\n"),
            (StatusCode::VERSION_NOT_SUPPORTED, "HTTP/1.1 505 HTTP Version Not Supported\r\n\r\n"),
            (StatusCode::BAD_REQUEST, "HTTP/1.1 400 Bad Request\r\n\r\n"),
        ];
        for (status, expected) in cases {
            let mut buf = Vec::new();
            HeadWriter::new(&mut buf, status).finish();
            assert_eq!(String::from_utf8(buf).unwrap(), expected);
        }
    }

    #[test]
    fn appends_without_clearing() {
        let mut buf = b"previous".to_vec();
        HeadWriter::new(&mut buf, StatusCode::OK).header_u64("Content-Length", 0).finish();
        assert_eq!(buf, b"previousHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    }

    #[test]
    fn date_header_shape() {
        let mut buf = Vec::new();
        HeadWriter::new(&mut buf, StatusCode::OK).date().finish();
        let text = String::from_utf8(buf).unwrap();
        let date = text.strip_prefix("HTTP/1.1 200 OK\r\nDate: ").unwrap();
        let date = date.strip_suffix("\r\n\r\n").unwrap();
        assert_eq!(date.len(), 29);
        assert!(date.ends_with(" GMT"), "{date}");
    }

    #[test]
    fn error_body_exactly() {
        assert_eq!(
            String::from_utf8(error_body(StatusCode::NOT_FOUND)).unwrap(),
            "<!DOCTYPE html><html><head><title>404 Not Found</title></head>\
             <body><h1>404 Not Found</h1></body></html>\n"
        );
    }

    #[test]
    fn escapes_html() {
        let cases = [
            ("plain.txt", "plain.txt"),
            ("a&b", "a&amp;b"),
            ("<script>alert('x')</script>", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            ("say \"hi\"", "say &quot;hi&quot;"),
            ("ünïcödé", "ünïcödé"),
        ];
        for (input, expected) in cases {
            assert_eq!(html_escape(input), expected);
        }
    }
}
