//! Checking HTTP/1.x responses as they stream in, without keeping their bodies.
//!
//! A load generator that counts garbage as success is useless, so every response is checked:
//! the status line and headers must parse, the status must be 100..=599, the body must be
//! exactly as long as `Content-Length` or the chunked framing says, and bytes that arrive when
//! no request is outstanding are an error. Bodies are only counted. The parser is fed whatever
//! each `read` returned and says how much of it belonged to the current response, so pipelined
//! responses can share one read.

use std::fmt;

use crate::chunked::ChunkedDecoder;

/// Longest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most header fields accepted in one head.
const MAX_HEADERS: usize = 64;

/// A complete, valid response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Response {
    /// Final status code.
    pub status: u16,
    /// Bytes on the wire: heads (interim ones too) plus body framing and payload.
    pub bytes: u64,
    /// Payload bytes of the body.
    pub body_bytes: u64,
    /// Whether the connection may carry another request afterwards.
    pub keep_alive: bool,
}

/// Why a response was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadResponse {
    /// The status line or a header field does not parse.
    Malformed,
    /// The head is longer than [`MAX_HEAD`] or has more than 64 fields.
    HeadTooLarge,
    /// The status code is outside 100..=599.
    Status(u16),
    /// `101 Switching Protocols`, never asked for.
    Upgrade,
    /// `Content-Length` is not a number, or several disagree.
    ContentLength,
    /// Both `Content-Length` and `Transfer-Encoding` (a response-splitting smell).
    BothLengths,
    /// The chunked framing is broken.
    Chunked,
    /// The connection closed before the response was complete.
    Truncated,
    /// Bytes arrived while no request was outstanding.
    Unsolicited,
}

impl fmt::Display for BadResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadResponse::Malformed => f.write_str("malformed status line or header"),
            BadResponse::HeadTooLarge => f.write_str("response head too large"),
            BadResponse::Status(code) => write!(f, "invalid status code {code}"),
            BadResponse::Upgrade => f.write_str("unexpected 101 Switching Protocols"),
            BadResponse::ContentLength => f.write_str("invalid or conflicting Content-Length"),
            BadResponse::BothLengths => f.write_str("both Content-Length and Transfer-Encoding"),
            BadResponse::Chunked => f.write_str("invalid chunked encoding"),
            BadResponse::Truncated => f.write_str("connection closed mid-response"),
            BadResponse::Unsolicited => f.write_str("bytes received with no request outstanding"),
        }
    }
}

/// What [`ResponseParser::feed`] made of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// All input belonged to an unfinished response.
    NeedMore,
    /// A response ended after `consumed` bytes of the input.
    Complete { consumed: usize, response: Response },
}

/// Where the current response stands.
#[derive(Debug, Clone)]
enum State {
    /// Reading a head; partial heads wait in `head_buf`.
    Head,
    /// Body with this many bytes left (Content-Length).
    Sized(u64),
    /// Chunked body.
    Chunked(ChunkedDecoder),
    /// Body delimited by the connection closing (no length given).
    UntilClose,
}

/// How a head says its body is delimited.
enum Framing {
    Sized(u64),
    Chunked,
    UntilClose,
}

/// Streaming checker for the responses on one connection.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    /// Bytes of a head that spans reads (empty in the common case).
    head_buf: Vec<u8>,
    /// The response being read.
    current: Response,
    /// Responses carry no body whatever their head says (answers to `HEAD`).
    bodyless: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        ResponseParser::new(false)
    }
}

impl ResponseParser {
    /// A parser for the responses to requests whose method is `HEAD` (`bodyless`) or not.
    pub fn new(bodyless: bool) -> Self {
        ResponseParser {
            state: State::Head,
            head_buf: Vec::new(),
            current: Response::default(),
            bodyless,
        }
    }

    /// True between responses: no byte of a next response has been seen.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && self.head_buf.is_empty() && self.current.bytes == 0
    }

    /// Consumes `input` up to the end of the current response.
    pub fn feed(&mut self, input: &[u8]) -> Result<Feed, BadResponse> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            let body_done = match &mut self.state {
                State::Head => match self.feed_head(rest)? {
                    Some(n) => {
                        used += n;
                        continue;
                    }
                    None => return Ok(Feed::NeedMore),
                },
                State::Sized(left) => {
                    let take = (*left).min(rest.len() as u64);
                    *left -= take;
                    used += take as usize;
                    self.current.bytes += take;
                    self.current.body_bytes += take;
                    *left == 0
                }
                State::Chunked(decoder) => {
                    let progress = decoder.feed(rest).map_err(|_| BadResponse::Chunked)?;
                    used += progress.consumed;
                    self.current.bytes += progress.consumed as u64;
                    self.current.body_bytes += progress.payload;
                    progress.done
                }
                State::UntilClose => {
                    self.current.bytes += rest.len() as u64;
                    self.current.body_bytes += rest.len() as u64;
                    false
                }
            };
            if !body_done {
                return Ok(Feed::NeedMore);
            }
            let response = self.finish();
            return Ok(Feed::Complete { consumed: used, response });
        }
    }

    /// The peer closed the connection: completes a close-delimited body, or reports a response
    /// cut short. `Ok(None)` when no response was in progress.
    pub fn on_eof(&mut self) -> Result<Option<Response>, BadResponse> {
        match self.state {
            State::UntilClose => Ok(Some(self.finish())),
            _ if self.is_idle() => Ok(None),
            _ => Err(BadResponse::Truncated),
        }
    }

    /// Ends the current response and gets ready for the next.
    fn finish(&mut self) -> Response {
        self.state = State::Head;
        std::mem::take(&mut self.current)
    }

    /// Reads head bytes. `Some(n)`: a head ended after `n` bytes of `input` and the state now
    /// says how to read its body (or it was an interim 1xx head). `None`: all input consumed.
    fn feed_head(&mut self, input: &[u8]) -> Result<Option<usize>, BadResponse> {
        if input.is_empty() {
            return Ok(None);
        }
        let held = self.head_buf.len();
        let parsed = if held == 0 {
            parse_head(input)?
        } else {
            self.head_buf.extend_from_slice(input);
            parse_head(&self.head_buf)?
        };
        let Some((head_len, status, framing, keep_alive)) = parsed else {
            if held == 0 {
                self.head_buf.extend_from_slice(input);
            }
            if self.head_buf.len() > MAX_HEAD {
                return Err(BadResponse::HeadTooLarge);
            }
            return Ok(None);
        };
        self.head_buf.clear();
        self.current.bytes += head_len as u64;
        if status < 200 {
            return Ok(Some(head_len - held));
        }
        self.current.status = status;
        let framing = if self.bodyless { Framing::Sized(0) } else { framing };
        self.current.keep_alive = keep_alive && !matches!(framing, Framing::UntilClose);
        self.state = match framing {
            Framing::Sized(n) => State::Sized(n),
            Framing::Chunked => State::Chunked(ChunkedDecoder::default()),
            Framing::UntilClose => State::UntilClose,
        };
        Ok(Some(head_len - held))
    }
}

/// Parses a complete head: (length, status, framing, keep-alive), or `None` if incomplete.
fn parse_head(bytes: &[u8]) -> Result<Option<(usize, u16, Framing, bool)>, BadResponse> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(BadResponse::HeadTooLarge),
        Err(_) => return Err(BadResponse::Malformed),
    };
    let status = response.code.unwrap_or(0);
    match status {
        101 => return Err(BadResponse::Upgrade),
        100..=599 => {}
        _ => return Err(BadResponse::Status(status)),
    }
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let mut close = false;
    let mut keep_alive_token = false;
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = parse_length(header.value)?;
            if length.is_some_and(|old| old != n) {
                return Err(BadResponse::ContentLength);
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = header.value.rsplit(|&b| b == b',').next().unwrap_or_default();
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in header.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let keep_alive = !close && (response.version == Some(1) || keep_alive_token);
    let framing = match (status, chunked, length) {
        (100..=199 | 204 | 304, _, _) => Framing::Sized(0),
        (_, Some(_), Some(_)) => return Err(BadResponse::BothLengths),
        (_, Some(true), None) => Framing::Chunked,
        (_, Some(false), None) | (_, None, None) => Framing::UntilClose,
        (_, None, Some(n)) => Framing::Sized(n),
    };
    Ok(Some((head_len, status, framing, keep_alive)))
}

/// A Content-Length value: a comma-separated list of identical decimal numbers (RFC 9110 §8.6).
fn parse_length(value: &[u8]) -> Result<u64, BadResponse> {
    let mut result = None;
    for part in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
        if part.is_empty() || part.len() > 18 || !part.iter().all(u8::is_ascii_digit) {
            return Err(BadResponse::ContentLength);
        }
        let n = part.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        if result.is_some_and(|old| old != n) {
            return Err(BadResponse::ContentLength);
        }
        result = Some(n);
    }
    result.ok_or(BadResponse::ContentLength)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in `step`-byte reads, then EOF if `eof`; returns the responses seen.
    fn run(wire: &[u8], step: usize, eof: bool) -> Result<Vec<Response>, BadResponse> {
        let mut parser = ResponseParser::default();
        let mut out = Vec::new();
        for mut piece in wire.chunks(step) {
            while !piece.is_empty() {
                match parser.feed(piece)? {
                    Feed::NeedMore => break,
                    Feed::Complete { consumed, response } => {
                        out.push(response);
                        piece = &piece[consumed..];
                    }
                }
            }
        }
        if eof {
            out.extend(parser.on_eof()?);
        }
        Ok(out)
    }

    fn ok(status: u16, bytes: usize, body: u64, keep_alive: bool) -> Response {
        Response { status, bytes: bytes as u64, body_bytes: body, keep_alive }
    }

    #[test]
    fn answers_to_head_have_no_body_whatever_the_length_says() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut parser = ResponseParser::new(true);
        let Ok(Feed::Complete { consumed, response }) = parser.feed(wire) else { panic!() };
        assert_eq!((response.status, response.body_bytes, response.keep_alive), (200, 0, true));
        let Ok(Feed::Complete { response, .. }) = parser.feed(&wire[consumed..]) else { panic!() };
        assert_eq!(response.status, 404);
        assert!(parser.is_idle());
    }

    #[test]
    fn accepts_valid_responses_split_anywhere() {
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        let http10 = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        let http10_ka = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx";
        let no_body = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n";
        let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let cases: &[(&[u8], Response)] = &[
            (sized, ok(200, sized.len(), 5, true)),
            (chunked, ok(404, chunked.len(), 3, true)),
            (close, ok(200, close.len(), 0, false)),
            (http10, ok(200, http10.len(), 1, false)),
            (http10_ka, ok(200, http10_ka.len(), 1, true)),
            (no_body, ok(304, no_body.len(), 0, true)),
            (interim, ok(204, interim.len(), 0, true)),
        ];
        for &(wire, want) in cases {
            for step in [1, 5, wire.len()] {
                assert_eq!(
                    run(wire, step, false),
                    Ok(vec![want]),
                    "{:?} step {step}",
                    String::from_utf8_lossy(wire)
                );
            }
        }
    }

    #[test]
    fn splits_pipelined_responses() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".as_slice();
        let wire = [one, one, one].concat();
        for step in [1, 7, wire.len()] {
            assert_eq!(run(&wire, step, false).unwrap().len(), 3, "step {step}");
        }
    }

    #[test]
    fn reads_close_delimited_bodies_to_eof() {
        let wire = b"HTTP/1.0 200 OK\r\n\r\nsome body";
        assert_eq!(run(wire, 4, true), Ok(vec![ok(200, wire.len(), 9, false)]));
    }

    #[test]
    fn refuses_bad_responses() {
        let cases: &[(&[u8], bool, BadResponse)] = &[
            (b"garbage\r\n\r\n", false, BadResponse::Malformed),
            (b"HTTP/1.1 2000 OK\r\n\r\n", false, BadResponse::Malformed),
            (b"HTTP/1.1 099 Low\r\n\r\n", false, BadResponse::Status(99)),
            (b"HTTP/1.1 600 High\r\n\r\n", false, BadResponse::Status(600)),
            (b"HTTP/1.1 101 Switching\r\n\r\n", false, BadResponse::Upgrade),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, BadResponse::ContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", false, BadResponse::ContentLength),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false,
                BadResponse::ContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                false,
                BadResponse::BothLengths,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                false,
                BadResponse::Chunked,
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true, BadResponse::Truncated),
            (b"HTTP/1.1 200 O", true, BadResponse::Truncated),
        ];
        for &(wire, eof, want) in cases {
            for step in [1, wire.len()] {
                assert_eq!(
                    run(wire, step, eof),
                    Err(want),
                    "{:?} step {step}",
                    String::from_utf8_lossy(wire)
                );
            }
        }
    }

    #[test]
    fn refuses_oversized_heads() {
        let mut wire = b"HTTP/1.1 200 OK\r\n".to_vec();
        while wire.len() <= MAX_HEAD {
            wire.extend_from_slice(b"X-Filler: 0123456789012345678901234567890123456789\r\n");
        }
        let err = run(&wire, 4096, false).unwrap_err();
        assert!(matches!(err, BadResponse::HeadTooLarge), "{err:?}");
    }

    #[test]
    fn idle_only_between_responses() {
        let mut parser = ResponseParser::default();
        assert!(parser.is_idle());
        assert_eq!(
            parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab"),
            Ok(Feed::NeedMore)
        );
        assert!(!parser.is_idle());
        assert!(matches!(parser.feed(b"c"), Ok(Feed::Complete { consumed: 1, .. })));
        assert!(parser.is_idle());
        assert_eq!(parser.on_eof(), Ok(None));
    }
}
