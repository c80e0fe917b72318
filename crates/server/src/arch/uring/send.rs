//! A response on its way out through the ring: the ring operations for the pieces the send
//! plan names ([`crate::send_plan`], shared with [`crate::transmit`]).
//!
//! Heads and in-memory bodies leave in one gather `sendmsg` (Flash §5.4's gather write).
//! File bodies are read through the ring into a buffer (`IORING_OP_READ`), a chunk at a time,
//! and each chunk leaves with a `sendmsg` — the first one together with the head, `MSG_MORE`
//! while chunks remain. There is no `sendfile` in io_uring; `IORING_OP_SPLICE` would be the
//! zero-copy path, but the kernel always runs splice on an io-wq worker thread, and a splice
//! into a full socket blocks that worker: a slow client would pin a kernel thread, which is
//! what the ring is meant to avoid. Read + send stays fully asynchronous (see
//! docs/ARCHITECTURE.md, "Why read + send, not splice"), so `--no-zero-copy` changes nothing here.

use crate::disk::ask_ahead;
use crate::fill_size::FillSize;
use crate::pipeline::{Body, Response};
use crate::send_plan::{HeadGoes, Piece, SendPlan};
use amped_sys::uring::{Chunk, Gather};
use std::ops::Range;
use std::sync::Arc;

/// Largest file chunk read and sent in one round while the body is in memory.
pub(super) const CHUNK: usize = 128 << 10;

/// Largest read of a response that met the disk (as much as one of AMPED's pipe fills): its
/// reads grow to this ([`crate::fill_size`]), so a large transfer queues at the disk gate
/// fewer times.
const MAX_COLD_READ: u64 = 1 << 20;

/// What to do next for a response.
pub(super) enum Next {
    /// Send this gather list (`more`: further chunks follow).
    Send(Gather, bool),
    /// Read up to `max` bytes of `file` at `offset` into `buf` (empty, with capacity).
    Read { file: Arc<crate::cache::FileEntry>, offset: u64, max: usize, buf: Vec<u8> },
    /// All sent.
    Done,
}

/// A response being sent: the send plan ([`crate::send_plan`]) decides which bytes go next,
/// this only turns its pieces into ring operations.
#[derive(Debug)]
pub(super) struct Sending {
    /// The response (its head moved into the gather list).
    pub resp: Response,
    /// When sending began (the disk gate's order).
    pub since: std::time::Instant,
    /// The read in flight holds one of the disk gate's slots, since then.
    pub cold_read: Option<ColdStarted>,
    /// A read of this response found its chunk not in memory: from then on its reads take
    /// the disk gate and ask ahead. Held until the response ends, it counts this response
    /// among the file's cold transfers (`--share-large-reads`).
    met_disk: Option<crate::cache::file::ColdTransfer>,
    /// The file offset up to which the disk was asked ahead (`--fill-ahead`; 0: not yet).
    asked_to: u64,
    /// How much its next read from the disk takes.
    fill: FillSize,
    /// Which bytes go next.
    plan: SendPlan,
    /// The unsent bytes in hand (head, in-memory body or the chunk read); `None` while the
    /// ring holds them.
    gather: Option<Gather>,
    /// The direct read in flight, if one is.
    pub direct_read: Option<DirectRead>,
}

/// A read holding one of the disk gate's slots: when it started, and whether no ask-ahead had
/// covered any of its response before it (so its time is the disk's, see
/// [`crate::arch::disk_pace`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct ColdStarted {
    pub at: std::time::Instant,
    pub first: bool,
}

/// A direct read in flight: of which file, from which offset, and the bytes asked for from
/// there (the page is read from the aligned offset below) — what a read through the page cache
/// needs to take its place if it fails.
#[derive(Debug)]
pub(super) struct DirectRead {
    pub file: Arc<crate::cache::FileEntry>,
    pub offset: u64,
    pub len: usize,
}

impl Sending {
    /// Starts sending `resp`.
    #[inline]
    pub fn new(mut resp: Response) -> Sending {
        // The head leaves with the first chunk read: one gather send for both.
        let plan = SendPlan::new(&resp, HeadGoes::WithFirstChunk);
        let head = std::mem::take(&mut resp.head);
        let (body, body_range) = match &resp.body {
            Body::Memory(bytes, r) => (Chunk::Shared(bytes.clone()), r.clone()),
            Body::None | Body::File { .. } => (Chunk::Empty, 0..0),
        };
        Sending {
            resp,
            since: std::time::Instant::now(),
            cold_read: None,
            met_disk: None,
            asked_to: 0,
            fill: FillSize::default(),
            plan,
            gather: Some(Gather { head, head_from: 0, body, body_range }),
            direct_read: None,
        }
    }

    /// Body bytes sent so far (for the access log).
    #[inline]
    pub fn body_sent(&self) -> u64 {
        self.plan.body_sent()
    }

    /// The file whose body this response sent to its end, if it was a file response (the
    /// page policy may let its pages go).
    pub fn sent_whole_file(&self) -> Option<&Arc<crate::cache::FileEntry>> {
        self.plan.whole_file_sent(&self.resp.body)
    }

    /// The next operation, taking the gather list or the chunk buffer out for the ring.
    /// `spare` supplies a read buffer when none is at hand.
    #[inline]
    pub fn next(&mut self, spare: impl FnOnce() -> Vec<u8>) -> Next {
        let Some(mut g) = self.gather.take() else { return Next::Done };
        match (self.plan.next(&self.resp.body, CHUNK as u64), &self.resp.body) {
            (Piece::File { pos, len, .. }, Body::File { file, .. }) => {
                // The chunk in hand is sent (or there is none yet): read the next one. The
                // head, if still unsent, waits and leaves with it.
                let mut buf = match std::mem::replace(&mut g.body, Chunk::Empty) {
                    Chunk::Owned(v) => v,
                    _ => spare(),
                };
                buf.clear();
                let file = file.clone();
                self.gather = Some(g);
                Next::Read { file, offset: pos, max: len as usize, buf }
            }
            (Piece::Gather | Piece::Head { more: false }, _) => Next::Send(g, false),
            (Piece::InHand { more } | Piece::Head { more }, _) => Next::Send(g, more),
            (Piece::Done | Piece::File { .. }, _) => {
                self.gather = Some(g);
                Next::Done
            }
        }
    }

    /// How many bytes the read at `offset` takes, now that it goes to the disk: growing trip by
    /// trip ([`crate::fill_size`]), at most the rest of the body.
    pub fn cold_read_len(&mut self, offset: u64, first_fill: u64) -> usize {
        let remaining = self.body_rest(offset);
        self.fill.take(remaining, MAX_COLD_READ, first_fill) as usize
    }

    /// How many bytes a direct read at `offset` takes ([`FillSize::direct_trip`]).
    pub fn direct_read_len(&mut self, offset: u64) -> usize {
        self.fill.direct_trip(self.body_rest(offset), offset) as usize
    }

    /// The direct read asked for at `offset` for `len` bytes moved `n` bytes into `page` from
    /// the aligned offset below: the chunk in hand is the part from `offset` (fewer bytes where
    /// the file ended; none cuts the response short, as in [`Sending::chunk_read`]).
    pub fn page_read(&mut self, page: amped_sys::direct::Lent, n: usize, offset: u64, len: usize) {
        let Some(g) = self.gather.as_mut() else {
            self.plan.end_early();
            return;
        };
        let skip = amped_sys::direct::Span::of(offset, len as u64).skip;
        let end = n.min(skip + len);
        g.body_range = if end <= skip {
            self.plan.end_early();
            0..0
        } else {
            self.plan.moved_in(end - skip);
            skip..end
        };
        g.body = Chunk::Page(page);
    }

    /// Bytes of the file body from `offset` to its end.
    pub fn body_rest(&self, offset: u64) -> u64 {
        let Body::File { offset: start, len, .. } = &self.resp.body else { return 0 };
        (start + len).saturating_sub(offset)
    }

    /// A read of `file` for this response found its chunk not in memory (or one before it
    /// did): every further read takes the disk gate, and the response counts among the file's
    /// cold transfers until it ends.
    pub fn meets_disk(&mut self, file: &Arc<crate::cache::FileEntry>) {
        if self.met_disk.is_none() {
            self.met_disk = Some(crate::cache::file::ColdTransfer::start(file.clone()));
        }
    }

    /// Whether the disk has been asked ahead for any of this response ([`Sending::ask_ahead`]):
    /// its reads from then on may find pages on their way.
    pub fn asked_ahead(&self) -> bool {
        self.asked_to > 0
    }

    /// Whether a read of this response has found its chunk not in memory.
    #[inline]
    pub fn met_disk(&self) -> bool {
        self.met_disk.is_some()
    }

    /// What to ask the disk for ahead of the read at `offset` (`--fill-ahead`, see
    /// [`crate::disk::ask_ahead`]): the piece read and `pieces` pieces after it, within the body, each only once,
    /// once the response has met the disk ([`Sending::met_disk`]): a file all in memory never
    /// asks.
    pub fn ask_ahead(&mut self, offset: u64, pieces: u64) -> Range<u64> {
        let Body::File { offset: start, len, .. } = &self.resp.body else { return 0..0 };
        if !self.met_disk() {
            return 0..0;
        }
        let r = ask_ahead::range(offset, start + len, pieces, self.asked_to);
        self.asked_to = self.asked_to.max(r.end);
        r
    }

    /// A chunk of `n` bytes was read into `buf`. Zero means the file ended before the length
    /// the head promised (it shrank since its metadata was taken) or the read failed: the
    /// response is cut short. What is in hand still goes — above all the head, if it has not
    /// left yet (it waits for the first chunk here, while the other architectures send it
    /// before the body) — and then the connection closes ([`Sending::closes_after`]), so the
    /// client sees the same answer as under the other architectures, a body shorter than its
    /// `Content-Length`, and never a close without a word.
    pub fn chunk_read(&mut self, buf: Vec<u8>, n: usize) {
        let Some(g) = self.gather.as_mut() else {
            self.plan.end_early();
            return;
        };
        g.body_range = if n == 0 {
            self.plan.end_early();
            0..0
        } else {
            self.plan.moved_in(n);
            0..buf.len()
        };
        g.body = Chunk::Owned(buf);
    }

    /// The connection closes once this response is done: the response says so, or its body
    /// was cut short.
    pub fn closes_after(&self) -> bool {
        self.resp.close || self.plan.ended_early()
    }

    /// `n` bytes of `g` were sent.
    #[inline]
    pub fn sent(&mut self, mut g: Gather, n: usize) {
        g.advance(n);
        self.plan.sent(n);
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
    use crate::cache::FileEntry;

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

    #[test]
    fn a_transfer_asks_ahead_once_it_met_the_disk_and_never_when_in_memory() {
        let p = ask_ahead::PIECE;
        let mut warm = Sending::new(file_response(20 * p));
        assert!((0..20).all(|i| warm.ask_ahead(i * p, 3).is_empty()), "all in memory");
        let mut cold = Sending::new(file_response(20 * p));
        let Body::File { file, .. } = &cold.resp.body else { unreachable!("a file response") };
        cold.meets_disk(&file.clone());
        assert!(cold.ask_ahead(0, 0).is_empty(), "too young to ask (no pieces)");
        assert_eq!(
            cold.ask_ahead(p, 3),
            p..5 * p,
            "the first read old enough asks, its own piece too"
        );
        assert_eq!(cold.ask_ahead(2 * p, 3), 5 * p..6 * p, "then every read, each piece once");
        assert!(cold.ask_ahead(19 * p, 3).is_empty(), "nothing past the body");
    }

    #[test]
    fn reads_from_the_disk_grow_and_a_short_body_goes_in_one() {
        let k = 1 << 10;
        let mut big = Sending::new(file_response(100 << 20));
        let lens: Vec<usize> =
            (0..5).map(|i| big.cold_read_len(i << 20, crate::fill_size::FIRST_FILL)).collect();
        assert_eq!(lens, [128 * k, 256 * k, 512 * k, 1024 * k, 1024 * k]);
        let mut small = Sending::new(file_response(200 * k as u64));
        assert_eq!(
            small.cold_read_len(0, crate::fill_size::FIRST_FILL),
            200 * k,
            "a cold 200 KiB body in one read"
        );
        assert_eq!(
            small.cold_read_len(150 * k as u64, crate::fill_size::FIRST_FILL),
            50 * k,
            "never past the body"
        );
    }

    #[test]
    fn direct_reads_take_a_huge_page_from_the_first_and_never_cross_one() {
        let (k, huge) = (1 << 10, amped_sys::direct::HUGE);
        let mut big = Sending::new(file_response(100 << 20));
        assert_eq!(big.direct_read_len(0), huge, "no growing trips around the page cache");
        assert_eq!(big.direct_read_len(3), huge - 3, "ends where the next read is aligned");
        let mut small = Sending::new(file_response(300 * k as u64));
        assert_eq!(small.direct_read_len(0), 300 * k, "never past the body");
    }
}
