//! A response on its way out through the ring: what to submit next for it.
//!
//! Heads and in-memory bodies leave in one gather `sendmsg` (Flash §5.4's gather write).
//! File bodies are read through the ring into a buffer (`IORING_OP_READ`), a chunk at a time,
//! and each chunk leaves with a `sendmsg` — the first one together with the head, `MSG_MORE`
//! while chunks remain. There is no `sendfile` in io_uring; `IORING_OP_SPLICE` would be the
//! zero-copy path, but the kernel always runs splice on an io-wq worker thread, and a splice
//! into a full socket blocks that worker: a slow client would pin a kernel thread, which is
//! what the ring is meant to avoid. Read + send stays fully asynchronous (see
//! docs/ARCHITECTURE.md, "Why read + send, not splice"), so `--no-zero-copy` changes nothing here.

use crate::cache::FileEntry;
use crate::pipeline::{Body, Response};
use amped_sys::uring::{Chunk, Gather};
use std::sync::Arc;

/// Largest file chunk read and sent in one round.
pub(super) const CHUNK: usize = 128 << 10;

/// The part of a file body not read yet.
#[derive(Debug)]
struct FileLeft {
    file: Arc<FileEntry>,
    next: u64,
    end: u64,
}

/// What to do next for a response.
pub(super) enum Next {
    /// Send this gather list (`more`: further chunks follow).
    Send(Gather, bool),
    /// Read up to `max` bytes of `file` at `offset` into `buf` (empty, with capacity).
    Read { file: Arc<FileEntry>, offset: u64, max: usize, buf: Vec<u8> },
    /// All sent.
    Done,
}

/// A response being sent.
#[derive(Debug)]
pub(super) struct Sending {
    /// The response (its head moved into the gather list).
    pub resp: Response,
    /// Body bytes sent so far (for the access log).
    pub body_sent: u64,
    /// When sending began (the disk gate's order).
    pub since: std::time::Instant,
    /// The read in flight holds one of the disk gate's slots.
    pub cold_read: bool,
    /// The unsent bytes; `None` while the ring holds them.
    gather: Option<Gather>,
    file: Option<FileLeft>,
    /// The file ended before the length the head promised: what is in hand still goes, then
    /// the connection closes.
    cut_short: bool,
}

impl Sending {
    /// Starts sending `resp`.
    pub fn new(mut resp: Response) -> Sending {
        let head = std::mem::take(&mut resp.head);
        let (body, body_range, file) = match &resp.body {
            Body::None => (Chunk::Empty, 0..0, None),
            Body::Memory(bytes, r) => (Chunk::Shared(bytes.clone()), r.clone(), None),
            Body::File { file, offset, len } => (
                Chunk::Empty,
                0..0,
                Some(FileLeft { file: file.clone(), next: *offset, end: offset + len }),
            ),
        };
        Sending {
            resp,
            body_sent: 0,
            since: std::time::Instant::now(),
            cold_read: false,
            gather: Some(Gather { head, head_from: 0, body, body_range }),
            file,
            cut_short: false,
        }
    }

    /// The next operation, taking the gather list or the chunk buffer out for the ring.
    /// `spare` supplies a read buffer when none is at hand.
    #[inline]
    pub fn next(&mut self, spare: impl FnOnce() -> Vec<u8>) -> Next {
        let Some(mut g) = self.gather.take() else { return Next::Done };
        let file_left = self.file.as_ref().filter(|f| f.next < f.end);
        if let Some(f) = file_left
            && g.body_range.is_empty()
        {
            // The chunk in hand is sent (or there is none yet): read the next one. The head,
            // if still unsent, waits and leaves with it.
            let mut buf = match std::mem::replace(&mut g.body, Chunk::Empty) {
                Chunk::Owned(v) => v,
                _ => spare(),
            };
            buf.clear();
            let max = ((f.end - f.next) as usize).min(CHUNK);
            let (file, offset) = (f.file.clone(), f.next);
            self.gather = Some(g);
            return Next::Read { file, offset, max, buf };
        }
        if g.remaining() > 0 {
            return Next::Send(g, file_left.is_some());
        }
        self.gather = Some(g);
        Next::Done
    }

    /// A chunk of `n` bytes was read into `buf`. Zero means the file ended before the length
    /// the head promised (it shrank since its metadata was taken) or the read failed: the
    /// response is cut short. What is in hand still goes — above all the head, if it has not
    /// left yet (it waits for the first chunk here, while the other architectures send it
    /// before the body) — and then the connection closes ([`Sending::closes_after`]), so the
    /// client sees the same answer as under the other architectures, a body shorter than its
    /// `Content-Length`, and never a close without a word.
    pub fn chunk_read(&mut self, buf: Vec<u8>, n: usize) {
        let (Some(g), Some(f)) = (self.gather.as_mut(), self.file.as_mut()) else {
            self.cut_short = true;
            return;
        };
        if n == 0 {
            g.body = Chunk::Owned(buf);
            g.body_range = 0..0;
            self.file = None;
            self.cut_short = true;
            return;
        }
        f.next += n as u64;
        g.body_range = 0..buf.len();
        g.body = Chunk::Owned(buf);
    }

    /// The connection closes once this response is done: the response says so, or its body
    /// was cut short.
    pub fn closes_after(&self) -> bool {
        self.resp.close || self.cut_short
    }

    /// `n` bytes of `g` were sent.
    #[inline]
    pub fn sent(&mut self, mut g: Gather, n: usize) {
        self.body_sent += g.advance(n) as u64;
        self.gather = Some(g);
    }

    /// Gives the gather list back after a failed send.
    pub fn restore(&mut self, g: Gather) {
        self.gather = Some(g);
    }

    /// The chunk buffer, for reuse by the next file response.
    #[inline]
    pub fn into_buffer(self) -> Option<Vec<u8>> {
        match self.gather?.body {
            Chunk::Owned(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 200 for `size` bytes of a file (any open file: the plan never reads it itself).
    fn file_response(size: u64) -> Response {
        let path = std::env::current_exe().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        let file = Arc::new(FileEntry::new(path, file, &meta, None));
        Response {
            head: b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
            body: Body::File { file, offset: 0, len: size },
            close: false,
            status: 200,
            log: None,
            timeline: None,
        }
    }

    /// Plays the ring: reads return `reads` in turn (bytes found), sends take everything.
    /// Returns the bytes sent, in order, and whether the connection closes after.
    fn play(size: u64, reads: &[usize]) -> (Vec<Vec<u8>>, bool) {
        let mut out = Sending::new(file_response(size));
        let (mut reads, mut sent) = (reads.iter(), Vec::new());
        loop {
            match out.next(|| Vec::with_capacity(CHUNK)) {
                Next::Read { max, mut buf, .. } => {
                    let n = (*reads.next().expect("no more reads expected")).min(max);
                    buf.resize(n, b'x');
                    out.chunk_read(buf, n);
                }
                Next::Send(g, _) => {
                    let [head, body] = g.unsent();
                    sent.push([head, body].concat());
                    let n = g.remaining();
                    out.sent(g, n);
                }
                Next::Done => return (sent, out.closes_after()),
            }
        }
    }

    #[test]
    fn a_whole_file_goes_with_the_head_and_keeps_the_connection() {
        let (sent, close) = play(10, &[10]);
        assert_eq!(sent, [b"HTTP/1.1 200 OK\r\n\r\nxxxxxxxxxx".to_vec()]);
        assert!(!close);
    }

    #[test]
    fn a_file_empty_before_the_first_byte_still_gets_its_head_then_closes() {
        let (sent, close) = play(10, &[0]);
        assert_eq!(sent, [b"HTTP/1.1 200 OK\r\n\r\n".to_vec()]);
        assert!(close, "a body cut short must close the connection");
    }

    #[test]
    fn a_file_shorter_than_promised_sends_what_it_has_then_closes() {
        let size = CHUNK as u64 + 10;
        let (sent, close) = play(size, &[CHUNK, 0]);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].len(), "HTTP/1.1 200 OK\r\n\r\n".len() + CHUNK);
        assert!(close);
    }
}
