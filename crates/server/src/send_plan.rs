//! The send plan: which bytes of a response go next, whoever moves them. Two engines execute
//! it — [`crate::transmit`] with `writev`/`send`/`sendfile`/splice on a socket (the epoll
//! loops and the blocking threads), and `arch/uring/send.rs` with reads and `sendmsg` on the
//! ring — and neither decides on its own what comes next: the plan names the next piece
//! ([`SendPlan::next`]), the engine moves it, and tells the plan what moved.
//!
//! The pieces, in order:
//! * a head and an in-memory body (a small cached file, a generated page) leave together in
//!   one gather write ([`Piece::Gather`], Flash §5.4), resumed where a partial write stopped;
//! * a file body's head leaves alone ahead of the first file byte when the engine sends file
//!   bytes without a buffer (`sendfile` cannot carry it: [`HeadGoes::Alone`]), or with the first
//!   chunk read into a buffer ([`HeadGoes::WithFirstChunk`]);
//! * file bytes already moved out of the file (into a pipe or a buffer) and not yet sent go
//!   next ([`Piece::InHand`]), all of them before anything else is read;
//! * then the next file range ([`Piece::File`]): up to the end of the range known to be in
//!   memory (tested resident, or read in by a job) when the position is inside one — so a send
//!   the socket took only part of continues with the rest of that range, without a new test —
//!   else one chunk, which the engine tests (or reads) before sending. What is known holds
//!   until the engine waits for the socket ([`SendPlan::waited`]): a slow client can take
//!   seconds to make room, and under memory pressure the kernel may reclaim the pages in the
//!   meantime, so the rest of the range is tested again before it is sent
//!   ([`InMemory::Stale`]) — a `sendfile` of reclaimed pages would wait for the disk on the
//!   loop (New Flash's race; DeBox saw it on the IOPS-capped disk, docs/BENCHMARKS.md E5);
//! * a file that ended before the length the head promised ends the plan early: what is in
//!   hand still goes (the head above all), then the connection must close
//!   ([`SendPlan::ended_early`]).

use crate::cache::FileEntry;
use crate::pipeline::{Body, Response};
use std::sync::Arc;

/// When a file body's head leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadGoes {
    /// Ahead of the first file byte, alone (`send` with `MSG_MORE`, then `sendfile`).
    Alone,
    /// With the first chunk read into a buffer (one gather send for both).
    WithFirstChunk,
}

/// What to send next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The rest of the head and of the in-memory body, in one gather write.
    Gather,
    /// The rest of the head alone; `more`: body bytes follow.
    Head {
        /// Body bytes follow.
        more: bool,
    },
    /// The file bytes in hand (with the rest of the head, if it waited for them); `more`:
    /// file bytes remain after them.
    InHand {
        /// File bytes remain after these.
        more: bool,
    },
    /// The file bytes `pos .. pos + len`: inside a range known to be in memory, else one
    /// chunk to test or read first.
    File {
        /// File position of the first byte.
        pos: u64,
        /// How many bytes.
        len: u64,
        /// What is known of their pages.
        in_memory: InMemory,
    },
    /// Everything is sent.
    Done,
}

/// What is known of a file range's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InMemory {
    /// Nothing: test (or read) them before sending.
    Untested,
    /// In memory (tested, or read in by a job) since the engine last waited: send them.
    Known,
    /// Were in memory before the engine waited for the socket: test them again (only them).
    Stale,
}

/// Where a response's sending stands. It is kept small (it lives in every busy connection
/// of the epoll loops): the body's shape is not copied in but passed to the calls that need it.
#[derive(Clone, Debug)]
pub struct SendPlan {
    /// Body bytes the socket took.
    body_sent: u64,
    /// File position up to which the pages are known to be in memory.
    resident_until: u64,
    head_len: u32,
    head_sent: u32,
    /// File bytes moved into a pipe or buffer and not sent yet (at most a pipe's or a
    /// buffer's worth).
    in_hand: u32,
    head_goes: HeadGoes,
    /// The file ended before the length the head promised.
    ended_early: bool,
    /// The engine waited for the socket since the pages up to `resident_until` were known.
    waited: bool,
}

impl SendPlan {
    /// The plan for `resp`, for an engine whose file heads go as `head_goes` says.
    #[inline]
    pub fn new(resp: &Response, head_goes: HeadGoes) -> SendPlan {
        SendPlan {
            body_sent: 0,
            resident_until: 0,
            // (A head is bounded by the configured header sizes, far below 4 GiB.)
            head_len: u32::try_from(resp.head.len()).unwrap_or(u32::MAX),
            head_sent: 0,
            in_hand: 0,
            head_goes,
            ended_early: false,
            waited: false,
        }
    }

    /// The next piece of the response whose body is `body`; file ranges are at most `chunk`
    /// bytes.
    #[inline]
    pub fn next(&self, body: &Body, chunk: u64) -> Piece {
        let head_left = self.head_sent < self.head_len;
        let (offset, len) = match body {
            Body::File { offset, len, .. } => (*offset, *len),
            Body::Memory(_, r) if head_left || self.body_sent < r.len() as u64 => {
                return Piece::Gather;
            }
            Body::None if head_left => return Piece::Gather,
            Body::Memory(..) | Body::None => return Piece::Done,
        };
        let in_hand = u64::from(self.in_hand);
        let unread = if self.ended_early { 0 } else { len - self.body_sent - in_hand };
        if head_left && self.head_goes == HeadGoes::Alone {
            return Piece::Head { more: unread + in_hand > 0 };
        }
        if in_hand > 0 {
            return Piece::InHand { more: unread > 0 };
        }
        if unread == 0 {
            return if head_left { Piece::Head { more: false } } else { Piece::Done };
        }
        let pos = offset + self.body_sent;
        let known = self.resident_until.saturating_sub(pos);
        let len = unread.min(if known > 0 { known.min(chunk) } else { chunk });
        let in_memory = match (known > 0, self.waited) {
            (false, _) => InMemory::Untested,
            (true, false) => InMemory::Known,
            (true, true) => InMemory::Stale,
        };
        Piece::File { pos, len, in_memory }
    }

    /// The socket took `n` more bytes (the head's first): returns how many were body bytes.
    #[inline]
    pub fn sent(&mut self, n: usize) -> u64 {
        let from_head = n.min((self.head_len - self.head_sent) as usize);
        self.head_sent += from_head as u32;
        let body = (n - from_head) as u64;
        self.body_sent += body;
        self.in_hand -= body.min(u64::from(self.in_hand)) as u32;
        body
    }

    /// `n` file bytes at the next position were moved into a pipe or buffer.
    pub fn moved_in(&mut self, n: usize) {
        self.in_hand += u32::try_from(n).unwrap_or(u32::MAX);
    }

    /// The pages of `len` bytes of the file body `body` from `pos` are known to be in memory
    /// (tested, or read in).
    pub fn resident(&mut self, body: &Body, pos: u64, len: u64) {
        if let Body::File { offset, len: body_len, .. } = body {
            self.resident_until = (pos + len).min(offset + body_len);
            self.waited = false;
        }
    }

    /// The engine is about to wait for the socket to take more: what is known of the pages
    /// ahead becomes [`InMemory::Stale`] until they are found in memory again.
    #[inline]
    pub fn waited(&mut self) {
        self.waited = true;
    }

    /// The file ended before the length the head promised: nothing more is read.
    pub fn end_early(&mut self) {
        self.ended_early = true;
    }

    /// The file ended early: the connection closes once what is in hand is sent.
    pub fn ended_early(&self) -> bool {
        self.ended_early
    }

    /// Head bytes sent.
    #[inline]
    pub fn head_sent(&self) -> usize {
        self.head_sent as usize
    }

    /// Body bytes sent.
    #[inline]
    pub fn body_sent(&self) -> u64 {
        self.body_sent
    }

    /// The file of the file body `body` once the plan has sent all of it (the page policy may
    /// then let its pages go); `None` before that, or for any other body. Both engines ask
    /// this, so "a file response went out to its end" is decided here only.
    pub fn whole_file_sent<'b>(&self, body: &'b Body) -> Option<&'b Arc<FileEntry>> {
        match body {
            Body::File { file, len, .. } if self.body_sent == *len => Some(file),
            _ => None,
        }
    }

    /// The file position of the next byte to send of the file body `body` (for a memory body,
    /// the count of body bytes sent).
    pub fn position(&self, body: &Body) -> u64 {
        match body {
            Body::File { offset, .. } => offset + self.body_sent,
            Body::Memory(..) | Body::None => self.body_sent,
        }
    }
}

#[cfg(test)]
#[path = "send_plan_tests.rs"]
mod tests;
