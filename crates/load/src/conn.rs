//! One client connection: its non-blocking socket, the requests it carries, and moving bytes.
//!
//! A connection knows nothing of modes or schedules; the event loop decides what to send and
//! when, and this module only performs it: opening the socket, queueing request bytes, writing
//! what the socket takes (the rest waits for the next writable edge), and reading until the
//! socket is drained while checking every response. Outcomes are reported as enums and the
//! event loop decides what they mean for the run.
//!
//! Invariant: `in_flight` holds the requests written (or queued to be written) and not yet
//! answered, oldest first, so responses match them in order (HTTP/1.1 pipelining).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SendFlags, SocketFlags, SocketType};

use crate::response::{BadResponse, Feed, Response, ResponseParser};
use crate::stats::ErrorKind;

/// A request waiting for its response.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// Index into the workload.
    pub target: u32,
    /// Where latency is measured from: the send time (closed loop) or the intended send time
    /// on the schedule (open loop).
    pub start: Instant,
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Non-blocking connect in progress; queued requests are written once it completes.
    Connecting,
    /// Established and carrying requests.
    Open,
    /// All answered and a `Connection: close` was exchanged: waiting for the server's FIN so
    /// the TIME_WAIT state lands on the server.
    AwaitingClose,
}

/// How many more requests a connection may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// A session with this many requests left (`--requests-per-conn`, `--close`).
    Limited(u32),
    /// Keep-alive without a per-connection limit.
    Unlimited,
}

/// What a read pass found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The socket is drained and the connection is still usable.
    Open,
    /// The server closed the connection cleanly between responses.
    PeerClosed,
    /// The connection is broken: the requests still in flight fail with this kind.
    Failed(ErrorKind, String),
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    /// The socket (closing it also removes it from the epoll set).
    pub fd: OwnedFd,
    /// Distinguishes this connection from earlier ones that used the same slot.
    pub generation: u32,
    /// Life-cycle phase.
    pub phase: Phase,
    /// When the connect started, or when waiting for the FIN started.
    pub since: Instant,
    /// Requests sent and not yet answered, oldest first.
    pub in_flight: VecDeque<Pending>,
    /// Requests this connection may still carry.
    pub quota: Quota,
    /// A response said `Connection: close`: nothing more may be sent.
    pub server_closing: bool,
    /// We sent `Connection: close`: nothing more may be sent.
    pub sent_close: bool,
    /// Counts toward the thread's connection limit (every phase but `AwaitingClose`).
    pub counted: bool,
    /// Whether the connection sits on the open loop's list of idle connections.
    pub listed_idle: bool,
    /// Whether it sits on the open loop's list of busy connections with pipeline room.
    pub listed_busy: bool,
    /// Request bytes not yet accepted by the socket, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    parser: ResponseParser,
}

/// Starts a non-blocking connect to `addr`; completion is reported as writability.
pub fn start_connect(addr: &SocketAddr) -> Result<OwnedFd, Errno> {
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = net::socket_with(family, SocketType::STREAM, flags, None)?;
    net::sockopt::set_tcp_nodelay(&fd, true)?;
    match net::connect(&fd, addr) {
        Ok(()) | Err(Errno::INPROGRESS) => Ok(fd),
        Err(e) => Err(e),
    }
}

impl Conn {
    /// A connection whose connect was started at `now`; `bodyless`: its requests are `HEAD`s.
    pub fn new(fd: OwnedFd, generation: u32, quota: Quota, now: Instant, bodyless: bool) -> Conn {
        Conn {
            fd,
            generation,
            phase: Phase::Connecting,
            since: now,
            in_flight: VecDeque::new(),
            quota,
            server_closing: false,
            sent_close: false,
            counted: true,
            listed_idle: false,
            listed_busy: false,
            out: Vec::new(),
            out_pos: 0,
            parser: ResponseParser::new(bodyless),
        }
    }

    /// The result of the non-blocking connect, once the socket reported an event.
    pub fn connect_result(&self) -> Result<(), Errno> {
        net::sockopt::socket_error(&self.fd)?
    }

    /// Whether another request may be queued here, with `depth` requests allowed in flight.
    pub fn has_room(&self, depth: usize) -> bool {
        self.phase != Phase::AwaitingClose
            && !self.server_closing
            && !self.sent_close
            && self.quota != Quota::Limited(0)
            && self.in_flight.len() < depth
    }

    /// Queues a request: `head` then `end` (which ends the headers, maybe with a close).
    pub fn enqueue(&mut self, request: Pending, head: &[u8], end: &[u8], close: bool) {
        if let Quota::Limited(n) = &mut self.quota {
            *n = n.saturating_sub(1);
        }
        self.sent_close |= close;
        self.out.extend_from_slice(head);
        self.out.extend_from_slice(end);
        self.in_flight.push_back(request);
    }

    /// Writes queued bytes until done or the socket is full (the rest goes on the next
    /// writable edge). Does nothing while connecting.
    pub fn flush(&mut self) -> Result<(), Errno> {
        if self.phase != Phase::Open {
            return Ok(());
        }
        while self.out_pos < self.out.len() {
            match net::send(&self.fd, &self.out[self.out_pos..], SendFlags::NOSIGNAL) {
                Ok(n) => self.out_pos += n,
                Err(Errno::INTR) => {}
                Err(Errno::WOULDBLOCK) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Ok(())
    }

    /// Reads until the socket is drained, handing each complete response with its request to
    /// `done` (with the time it was read). `hangup` says the event reported the peer's FIN, so
    /// reading must go on to the end of the stream.
    pub fn read(
        &mut self,
        scratch: &mut [u8],
        hangup: bool,
        done: &mut impl FnMut(Pending, &Response, Instant),
    ) -> ReadOutcome {
        loop {
            match rustix::io::read(&self.fd, &mut *scratch) {
                Ok(0) => return self.on_eof(done),
                Ok(n) => {
                    let now = Instant::now();
                    if let Err(bad) = self.consume(&scratch[..n], now, done) {
                        return ReadOutcome::Failed(ErrorKind::BadResponse, bad.to_string());
                    }
                    // Edge-triggered: a short read means the socket was drained, and any
                    // later byte raises a new edge.
                    if n < scratch.len() && !hangup {
                        return ReadOutcome::Open;
                    }
                }
                Err(Errno::INTR) => {}
                Err(Errno::WOULDBLOCK) => return ReadOutcome::Open,
                Err(e) => return ReadOutcome::Failed(ErrorKind::Reset, e.to_string()),
            }
        }
    }

    /// Matches the bytes of one read with the requests in flight.
    fn consume(
        &mut self,
        mut data: &[u8],
        now: Instant,
        done: &mut impl FnMut(Pending, &Response, Instant),
    ) -> Result<(), BadResponse> {
        while !data.is_empty() && !self.server_closing {
            let Some(&request) = self.in_flight.front() else {
                return Err(BadResponse::Unsolicited);
            };
            match self.parser.feed(data)? {
                Feed::NeedMore => return Ok(()),
                Feed::Complete { consumed, response } => {
                    data = &data[consumed..];
                    self.in_flight.pop_front();
                    self.server_closing = !response.keep_alive;
                    done(request, &response, now);
                }
            }
        }
        Ok(())
    }

    /// The server closed its side.
    fn on_eof(&mut self, done: &mut impl FnMut(Pending, &Response, Instant)) -> ReadOutcome {
        match self.parser.on_eof() {
            Ok(None) => ReadOutcome::PeerClosed,
            Ok(Some(response)) => {
                if let Some(request) = self.in_flight.pop_front() {
                    done(request, &response, Instant::now());
                }
                self.server_closing = true;
                ReadOutcome::PeerClosed
            }
            Err(bad) => ReadOutcome::Failed(ErrorKind::BadResponse, bad.to_string()),
        }
    }
}
