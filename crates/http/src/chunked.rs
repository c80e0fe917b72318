//! Reading past a chunked request body (RFC 9112 §7.1) without keeping it: a GET or HEAD may
//! carry a body the server ignores, and the connection stays usable only if the body's end is
//! found exactly where every other HTTP/1.1 implementation finds it.
//!
//! The grammar is applied strictly, because a lenient reader is how request smuggling starts
//! (a proxy in front and this server disagreeing where the body ends):
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size   = 1*HEXDIG                 (at most 15 digits here)
//! chunk-ext    = *( BWS ";" ... )         (skipped: visible characters, SP, HTAB)
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! ```
//!
//! Every line must end in CRLF (a bare LF or CR is an error), whitespace after the size is
//! allowed only before a `;`, trailer lines may not start with whitespace (no obs-fold), and
//! control characters are refused everywhere outside chunk data. The bytes read (framing
//! included) are counted against a limit: past it, or as soon as a chunk size announces more,
//! the body is too large (413).

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkedError {
    /// The framing is invalid (answer 400 or close).
    Malformed(&'static str),
    /// More bytes than the limit (413).
    TooLarge,
}

/// Where the reader is in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size (`digits` read so far, `size` their value).
    Size { digits: u8, size: u64 },
    /// Whitespace after the size: only a `;` may follow.
    SizeSpace { size: u64 },
    /// A chunk extension, up to CR.
    Ext { size: u64 },
    /// The LF ending a size line.
    SizeLf { size: u64 },
    /// Chunk data still to skip.
    Data { left: u64 },
    /// The CR after chunk data.
    DataCr,
    /// The LF after chunk data.
    DataLf,
    /// The start of a trailer line, or the CR of the final empty line.
    TrailerStart,
    /// Inside a trailer line, up to CR.
    Trailer,
    /// The LF ending a trailer line.
    TrailerLf,
    /// The LF ending the body.
    LastLf,
    /// The body is over.
    Done,
}

/// Reads through one chunked body, discarding it.
#[derive(Clone, Debug)]
pub struct ChunkedDiscard {
    state: State,
    read: u64,
    limit: u64,
}

impl ChunkedDiscard {
    /// A reader for a body of at most `limit` bytes on the wire.
    pub fn new(limit: u64) -> Self {
        ChunkedDiscard { state: State::Size { digits: 0, size: 0 }, read: 0, limit }
    }

    /// Consumes the body's bytes from the front of `buf`: returns how many belong to the body
    /// and whether it ended there (what follows is the next request).
    pub fn feed(&mut self, buf: &[u8]) -> Result<(usize, bool), ChunkedError> {
        let mut i = 0;
        while i < buf.len() && self.state != State::Done {
            if let State::Data { left } = self.state {
                let n = left.min((buf.len() - i) as u64);
                i += n as usize;
                self.count(n)?;
                self.state = if n == left { State::DataCr } else { State::Data { left: left - n } };
                continue;
            }
            self.state = step(self.state, buf[i])?;
            i += 1;
            self.count(1)?;
            if let State::Data { left } = self.state
                && self.read.saturating_add(left) > self.limit
            {
                // Announced beyond the limit: refused now, not after reading up to it.
                return Err(ChunkedError::TooLarge);
            }
        }
        Ok((i, self.state == State::Done))
    }

    /// True once the whole body has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn count(&mut self, n: u64) -> Result<(), ChunkedError> {
        self.read += n;
        if self.read > self.limit { Err(ChunkedError::TooLarge) } else { Ok(()) }
    }
}

/// Most hex digits in a chunk size (15 keeps the value below 2^60: no overflow).
const MAX_SIZE_DIGITS: u8 = 15;

fn step(state: State, b: u8) -> Result<State, ChunkedError> {
    use ChunkedError::Malformed;
    Ok(match state {
        State::Size { digits, size } => match (hex(b), b) {
            (Some(_), _) if digits == MAX_SIZE_DIGITS => {
                return Err(Malformed("chunk size too long"));
            }
            (Some(v), _) => State::Size { digits: digits + 1, size: size << 4 | v },
            (None, _) if digits == 0 => return Err(Malformed("chunk size expected")),
            (None, b'\r') => State::SizeLf { size },
            (None, b';') => State::Ext { size },
            (None, b' ' | b'\t') => State::SizeSpace { size },
            _ => return Err(Malformed("invalid chunk size")),
        },
        State::SizeSpace { size } => match b {
            b' ' | b'\t' => State::SizeSpace { size },
            b';' => State::Ext { size },
            _ => return Err(Malformed("whitespace after chunk size")),
        },
        State::Ext { size } => match b {
            b'\r' => State::SizeLf { size },
            b'\t' => State::Ext { size },
            _ if is_ctl(b) => return Err(Malformed("control character in chunk extension")),
            _ => State::Ext { size },
        },
        State::SizeLf { size } => match (b, size) {
            (b'\n', 0) => State::TrailerStart,
            (b'\n', left) => State::Data { left },
            _ => return Err(Malformed("chunk size line without CRLF")),
        },
        State::Data { .. } | State::Done => unreachable!("handled by feed"),
        State::DataCr if b == b'\r' => State::DataLf,
        State::DataLf if b == b'\n' => State::Size { digits: 0, size: 0 },
        State::DataCr | State::DataLf => return Err(Malformed("chunk data without CRLF")),
        State::TrailerStart => match b {
            b'\r' => State::LastLf,
            b' ' | b'\t' => return Err(Malformed("folded trailer line")),
            _ if is_ctl(b) => return Err(Malformed("control character in trailer")),
            _ => State::Trailer,
        },
        State::Trailer => match b {
            b'\r' => State::TrailerLf,
            b'\t' => State::Trailer,
            _ if is_ctl(b) => return Err(Malformed("control character in trailer")),
            _ => State::Trailer,
        },
        State::TrailerLf if b == b'\n' => State::TrailerStart,
        State::LastLf if b == b'\n' => State::Done,
        State::TrailerLf | State::LastLf => return Err(Malformed("trailer line without CRLF")),
    })
}

fn hex(b: u8) -> Option<u64> {
    (b as char).to_digit(16).map(u64::from)
}

fn is_ctl(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a feed returns: bytes used and whether the body ended, or why it was refused.
    type Fed = Result<(usize, bool), ChunkedError>;

    /// Feeds `input` whole and byte by byte; both must agree.
    fn run(input: &[u8], limit: u64) -> Fed {
        let whole = ChunkedDiscard::new(limit).feed(input);
        let mut d = ChunkedDiscard::new(limit);
        let mut used = 0;
        let mut split = Ok((0, false));
        for b in input {
            match d.feed(std::slice::from_ref(b)) {
                Ok((n, done)) => {
                    used += n;
                    split = Ok((used, done));
                    if done {
                        break;
                    }
                }
                Err(e) => {
                    split = Err(e);
                    break;
                }
            }
        }
        assert_eq!(whole, split, "{:?}", String::from_utf8_lossy(input));
        whole
    }

    #[test]
    fn bodies_end_where_the_grammar_says() {
        use ChunkedError::*;
        let ok = |n: usize| Ok((n, true));
        let cases: Vec<(&str, &[u8], Fed)> = vec![
            ("empty body", b"0\r\n\r\n", ok(5)),
            ("one chunk", b"5\r\nhello\r\n0\r\n\r\n", ok(15)),
            ("next request kept", b"1\r\na\r\n0\r\n\r\nGET / HTTP/1.1", ok(11)),
            ("hex sizes", b"A\r\n0123456789\r\n0\r\n\r\n", ok(20)),
            ("upper and lower hex", b"a\r\n0123456789\r\n00\r\n\r\n", ok(21)),
            ("extension", b"3;name=value\r\nabc\r\n0;x\r\n\r\n", ok(26)),
            ("space before extension", b"3 ;e\r\nabc\r\n0\r\n\r\n", ok(16)),
            ("trailer", b"0\r\nX-T: 1\r\n\r\n", ok(13)),
            ("incomplete size", b"5", Ok((1, false))),
            ("incomplete data", b"5\r\nhel", Ok((6, false))),
            ("incomplete trailer", b"0\r\n", Ok((3, false))),
            ("bare lf after size", b"5\nhello\r\n0\r\n\r\n", Err(Malformed("invalid chunk size"))),
            (
                "bare lf after data",
                b"5\r\nhello\n0\r\n\r\n",
                Err(Malformed("chunk data without CRLF")),
            ),
            (
                "data longer than size",
                b"3\r\nhello\r\n0\r\n\r\n",
                Err(Malformed("chunk data without CRLF")),
            ),
            ("no digits", b"\r\n\r\n", Err(Malformed("chunk size expected"))),
            ("sign", b"+5\r\nhello\r\n0\r\n\r\n", Err(Malformed("chunk size expected"))),
            ("0x prefix", b"0x5\r\nhello\r\n0\r\n\r\n", Err(Malformed("invalid chunk size"))),
            ("space then digit", b"5 5\r\n", Err(Malformed("whitespace after chunk size"))),
            ("leading space", b" 5\r\n", Err(Malformed("chunk size expected"))),
            ("overflowing size", b"10000000000000000\r\n", Err(Malformed("chunk size too long"))),
            (
                "nul in extension",
                b"1;\x00\r\na\r\n",
                Err(Malformed("control character in chunk extension")),
            ),
            (
                "lf in extension",
                b"1;a\nb\r\n",
                Err(Malformed("control character in chunk extension")),
            ),
            ("folded trailer", b"0\r\nX: 1\r\n 2\r\n\r\n", Err(Malformed("folded trailer line"))),
            ("bare lf ending", b"0\r\n\n", Err(Malformed("control character in trailer"))),
            (
                "bare cr in trailer",
                b"0\r\nX: 1\rY\r\n\r\n",
                Err(Malformed("trailer line without CRLF")),
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(run(input, 1 << 20), want, "{name}");
        }
    }

    #[test]
    fn the_limit_counts_framing_and_data() {
        let body = b"5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(run(body, body.len() as u64), Ok((body.len(), true)));
        assert_eq!(run(body, body.len() as u64 - 1), Err(ChunkedError::TooLarge));
        let mut d = ChunkedDiscard::new(100);
        assert_eq!(d.feed(b"5e\r\n"), Ok((4, false)), "4 + 94 = 98 bytes: within");
        assert_eq!(d.feed(&[b'x'; 94]), Ok((94, false)));
        assert_eq!(d.feed(b"\r\n"), Ok((2, false)), "100 bytes: at the limit");
        assert_eq!(d.feed(b"0"), Err(ChunkedError::TooLarge), "one more is not");
        assert_eq!(
            ChunkedDiscard::new(100).feed(b"ffff\r\n"),
            Err(ChunkedError::TooLarge),
            "announced"
        );
    }
}
