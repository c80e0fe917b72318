//! Decoder for `Transfer-Encoding: chunked` response bodies (RFC 9112 §7.1). ampload never
//! keeps a body, so the decoder only walks the framing, counting payload bytes, and says where
//! the body ends. Chunk-size lines and trailers may be split across reads at any byte.

/// Where in the chunked framing the decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a chunk size (`digits` so far).
    Size { digits: u8 },
    /// Skipping a chunk extension up to CR.
    Extension,
    /// Expecting the LF that ends a chunk-size line.
    SizeLf,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer field line, up to its LF.
    TrailerLine,
    /// Expecting the LF of the final empty line.
    FinalLf,
}

/// The framing is not valid chunked encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkError;

/// What one call to [`ChunkedDecoder::feed`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkProgress {
    /// Input bytes that belong to this body.
    pub consumed: usize,
    /// Payload bytes among them.
    pub payload: u64,
    /// Whether the body ended (the final CRLF was consumed).
    pub done: bool,
}

/// Walks one chunked body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder { state: State::Size { digits: 0 }, size: 0 }
    }
}

impl ChunkedDecoder {
    /// Consumes framing and data from `input`, stopping right after the body's end.
    pub fn feed(&mut self, input: &[u8]) -> Result<ChunkProgress, ChunkError> {
        let mut i = 0;
        let mut payload = 0;
        while i < input.len() {
            if let State::Data(left) = self.state {
                let take = left.min((input.len() - i) as u64);
                i += take as usize;
                payload += take;
                self.state = if take == left { State::DataCr } else { State::Data(left - take) };
                continue;
            }
            let byte = input[i];
            i += 1;
            if self.step(byte)? {
                return Ok(ChunkProgress { consumed: i, payload, done: true });
            }
        }
        Ok(ChunkProgress { consumed: i, payload, done: false })
    }

    /// Advances over one framing byte; true when the body is complete.
    fn step(&mut self, byte: u8) -> Result<bool, ChunkError> {
        self.state = match (self.state, byte) {
            (State::Size { digits }, _) if byte.is_ascii_hexdigit() => {
                if digits >= 15 {
                    return Err(ChunkError);
                }
                self.size = self.size * 16 + u64::from((byte as char).to_digit(16).unwrap_or(0));
                State::Size { digits: digits + 1 }
            }
            (State::Size { digits: 1.. }, b';' | b' ' | b'\t') => State::Extension,
            (State::Size { digits: 1.. } | State::Extension, b'\r') => State::SizeLf,
            (State::Extension, b) if b >= 0x20 || b == b'\t' => State::Extension,
            (State::SizeLf, b'\n') => {
                let size = std::mem::take(&mut self.size);
                if size == 0 { State::TrailerStart } else { State::Data(size) }
            }
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::Size { digits: 0 },
            (State::TrailerStart, b'\r') => State::FinalLf,
            (State::TrailerStart | State::TrailerLine, b'\n') => State::TrailerStart,
            (State::TrailerStart | State::TrailerLine, _) => State::TrailerLine,
            (State::FinalLf, b'\n') => return Ok(true),
            _ => return Err(ChunkError),
        };
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes; returns (consumed, payload) at the end.
    fn decode(wire: &[u8], step: usize) -> Result<(usize, u64), ChunkError> {
        let mut d = ChunkedDecoder::default();
        let (mut consumed, mut payload) = (0, 0);
        for piece in wire.chunks(step) {
            let p = d.feed(piece)?;
            consumed += p.consumed;
            payload += p.payload;
            if p.done {
                return Ok((consumed, payload));
            }
        }
        Err(ChunkError)
    }

    #[test]
    fn decodes_bodies_split_anywhere() {
        let cases: &[(&[u8], u64)] = &[
            (b"0\r\n\r\n", 0),
            (b"5\r\nhello\r\n0\r\n\r\n", 5),
            (b"A;ext=1\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n", 11),
            (b"3\r\nabc\r\n0\r\nTrailer: x\r\n\r\n", 3),
            (b"f\r\n0123456789abcde\r\n0;last\r\n\r\n", 15),
        ];
        for &(wire, payload) in cases {
            for step in [1, 2, 3, 7, wire.len()] {
                assert_eq!(decode(wire, step), Ok((wire.len(), payload)), "{wire:?} step {step}");
            }
        }
    }

    #[test]
    fn stops_at_the_end_of_the_body() {
        let mut d = ChunkedDecoder::default();
        let p = d.feed(b"2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n").unwrap();
        assert_eq!(p, ChunkProgress { consumed: 12, payload: 2, done: true });
    }

    #[test]
    fn refuses_bad_framing() {
        let bad: &[&[u8]] = &[
            b"x\r\n",
            b"\r\n",
            b";ext\r\n",
            b"5\nhello",
            b"2\r\nhiX",
            b"2\r\nhi\rX",
            b"1000000000000000\r\n",
            b"0\r\n\rX",
        ];
        for &wire in bad {
            assert_eq!(ChunkedDecoder::default().feed(wire), Err(ChunkError), "{wire:?}");
        }
    }
}
