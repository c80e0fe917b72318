//! `uring`: an io_uring event loop — the modern answer to the problem AMPED solves with
//! helpers (Flash §3.4). One thread, one ring. Instead of asking "is this socket ready?" and
//! then making the call, the loop *submits* the call and the kernel completes it
//! asynchronously: accept, receive, send, and the disk work — file reads (cold pages use the
//! kernel's async buffered reads, so there is no read-ahead helper; a response whose read found
//! the disk waits for one of a few disk slots, [`disk_gate`]) and, when the path cache already
//! knows the translation, `openat` + `statx` (+ the small-body read). What still runs on
//! helper threads (AMPED's [`HelperPool`]) is a full pathname translation — `canonicalize`
//! walks and directory listings, a chain of dependent lookups with no single ring operation —
//! once per path and revalidation period thanks to the path cache. The memory each operation
//! lends the kernel is owned by [`amped_sys::uring::Ring`] until its completion, so this file
//! needs no `unsafe`.
//!
//! HTTPS ([`tls`]): a TLS connection receives ciphertext into a buffer of its own and decrypts
//! it into its request bytes; each gather list of a response is encrypted and the ciphertext
//! sent in its place (a response goes on once its ciphertext is sent); handshake messages
//! leave the same way between receives. The handshake is read under the header timeout.
//!
//! Every connection has at most one ring operation in flight. Closing a connection with one in
//! flight cancels it and waits for its completion before the descriptor is closed, so a
//! descriptor number is never reused under a pending operation. Timeouts (header, idle, send)
//! are deadlines swept every 250 ms, as in the epoll loop; `--max-connections` simply leaves
//! the accept unarmed; SIGTERM cancels the accept (closing the port), closes idle connections
//! and lets the others finish within `--shutdown-timeout`.

mod disk_gate;
mod open;
mod send;
mod tls;

use super::amped::HelperPool;
use super::conn_table::ConnTable;
use super::disk_charge::DiskCharge;
use super::disk_concurrency::DiskConcurrency;
use super::job_results::{JobRunner, ResumesJobs};
use super::lifecycle::{AcceptPause, Lifecycle, Phase, Stop, TICK};
use crate::disk::ask_ahead;
use crate::disk::translate::Translation;
use crate::pipeline::{ConnState, Job, JobDone, Pipeline, Step};
use crate::tls::TlsContext;
use amped_sys::residency;
use amped_sys::uring::{Completion, Event, OpId, Ring};
use disk_gate::{ColdRead, DiskGate};
use open::{OpenStep, Opening};
use send::{CHUNK, ColdStarted, DirectRead, Next, Sending};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tls::RingTls;

const ACCEPT: u64 = u64::MAX;
const WAKER: u64 = u64::MAX - 1;
const RING_ENTRIES: u32 = 1024;
/// Receive size for a new request head (most fit); a head already begun may take more.
const RECV_FIRST: usize = 4 << 10;
const RECV_MORE: usize = 16 << 10;
/// Chunk buffers kept for reuse.
const SPARE_BUFFERS: usize = 32;
/// A keep-alive connection idle this long gives its receive buffer back and waits with a poll
/// instead, so thousands of idle clients cost no buffer each (the epoll loops hold none either).
const DOZE_AFTER: Duration = Duration::from_millis(500);
/// Emptied receive buffers kept for waking connections.
const SPARE_RECV: usize = 64;

/// Fails with the one-line reason if the kernel refuses io_uring (checked before the server
/// announces that it listens).
pub fn check_available() -> io::Result<()> {
    open_ring(8).map(drop)
}

fn open_ring(entries: u32) -> io::Result<Ring> {
    Ring::new(entries).map_err(|e| {
        io::Error::new(e.kind(), format!("io_uring unavailable ({e}); use --arch amped"))
    })
}

/// Serves `listener` (over TLS with `tls`) with an io_uring loop until shutdown. Fails at
/// once, with a one-line reason, if the kernel refuses io_uring.
pub fn run(
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    tls: Option<Arc<TlsContext>>,
    shutdown: &Arc<AtomicBool>,
) -> io::Result<()> {
    let ring = open_ring(RING_ENTRIES)?;
    // The ring waits for connections itself; accepted sockets inherit TCP_NODELAY.
    listener.set_nonblocking(false)?;
    let _ = socket2::SockRef::from(&listener).set_tcp_nodelay(true); // (not on a Unix socket)
    let cfg = pipeline.config();
    let gate = DiskGate::new(DiskConcurrency::configured(cfg), cfg.transfer_order);
    // Nothing watches the disk's charge here: without direct reads uring's page-cache path
    // did worse on a byte-capped volume (docs/BENCHMARKS.md §3b, session 23).
    let helpers = HelperPool::start_yielding(
        pipeline.clone(),
        DiskCharge::off(),
        Some(gate.transfers_wait_flag()),
    )?;
    let mut ring_loop = UringLoop::new(pipeline, ring, helpers, gate, listener);
    ring_loop.tls = tls;
    ring_loop.run(shutdown)
}

struct Conn {
    sock: OwnedFd,
    state: ConnState,
    phase: Phase,
    deadline: Instant,
    /// What the connection is doing, with the ring operation it has in flight.
    doing: Doing,
    /// The TLS session of an HTTPS connection.
    tls: Option<Box<RingTls>>,
}

/// What a connection is doing. A variant with an `op` has that ring operation in flight (at
/// most one per connection); the others have none, except `Closing`, whose operation is
/// already cancelled. A response and an open are boxed, as is a waiting request
/// (`ConnState::pending`): an idle connection then holds only a pointer for each (≈ 1 KiB
/// less per connection).
#[derive(Debug, Default)]
enum Doing {
    /// Between two operations, while the loop decides what comes next (never left so once
    /// the loop has handled the connection's event).
    #[default]
    Deciding,
    /// Receiving request bytes. `partial`: bytes of an unfinished request had arrived when
    /// the receive was submitted (the header timeout then answers 408).
    Receiving { op: OpId, partial: bool },
    /// The header timeout cancelled the receive: answer 408 once it returns (from here the
    /// send timeout applies).
    TimingOut { op: OpId },
    /// Idle past [`DOZE_AFTER`]: the receive is cancelled, then the connection waits with a
    /// poll, holding no buffer (its next request gets one when it is readable).
    Dozing { op: OpId },
    /// Sending TLS ciphertext that belongs to no response (a handshake message, tickets).
    SendingTls { op: OpId },
    /// A job on a helper thread (no ring operation).
    AtHelper,
    /// Opening a file on the ring.
    Opening { op: OpId, opening: Box<Opening> },
    /// Sending a response: its send or file read in flight, or none while the read waits
    /// for a disk slot.
    Responding { out: Box<Sending>, op: Option<OpId> },
    /// Closing once the cancelled operation completes; the response it abandons, if any, is
    /// logged then.
    Closing { out: Option<Box<Sending>> },
}

impl Doing {
    /// The ring operation in flight that closing must cancel, if any.
    fn op(&self) -> Option<OpId> {
        match self {
            Doing::Receiving { op, .. }
            | Doing::TimingOut { op }
            | Doing::Dozing { op }
            | Doing::SendingTls { op }
            | Doing::Opening { op, .. } => Some(*op),
            Doing::Responding { op, .. } => *op,
            Doing::Deciding | Doing::AtHelper | Doing::Closing { .. } => None,
        }
    }

    /// The response under way, if any.
    fn into_response(self) -> Option<Box<Sending>> {
        match self {
            Doing::Responding { out, .. } | Doing::Closing { out: Some(out) } => Some(out),
            _ => None,
        }
    }
}

struct UringLoop {
    pipeline: Arc<Pipeline>,
    ring: Ring,
    helpers: HelperPool,
    listener: Option<TcpListener>,
    accept_op: Option<OpId>,
    accept: AcceptPause,
    conns: ConnTable<Conn>,
    draining: bool,
    spare: Vec<Vec<u8>>,
    done: Vec<(u64, JobDone)>,
    /// Cold file reads in flight and waiting.
    gate: DiskGate,
    /// Receive buffers of connections that went to sleep, for the next ones to wake.
    spare_recv: Vec<Vec<u8>>,
    /// Receive buffers freed since the last sweep.
    freed_recv: usize,
    /// Connections ended since the loop was last idle: once none is left, the spare buffers
    /// go and the heap is trimmed (a burst's buffers would otherwise stay resident).
    ended_since_idle: bool,
    /// The listener serves HTTPS with this context.
    tls: Option<Arc<TlsContext>>,
}

impl UringLoop {
    fn new(
        pipeline: Arc<Pipeline>,
        ring: Ring,
        helpers: HelperPool,
        gate: DiskGate,
        listener: TcpListener,
    ) -> Self {
        UringLoop {
            gate,
            spare_recv: Vec::new(),
            freed_recv: 0,
            ended_since_idle: false,
            tls: None,
            pipeline,
            ring,
            helpers,
            listener: Some(listener),
            accept_op: None,
            accept: AcceptPause::default(),
            conns: ConnTable::with_capacity(1024),
            draining: false,
            spare: Vec::new(),
            done: Vec::new(),
        }
    }

    fn run(mut self, shutdown: &Arc<AtomicBool>) -> io::Result<()> {
        crate::debox::set_role(crate::debox::Role::Loop);
        if let Some(w) = self.helpers.waker() {
            self.ring.poll_readable(WAKER, w);
        }
        let mut batch: Vec<Completion> = Vec::with_capacity(256);
        let mut life = Lifecycle::new(Stop::new(shutdown.clone(), self.pipeline.config()));
        loop {
            if life.shutdown_begins() {
                self.begin_drain();
            }
            if life.should_stop(self.conns.is_empty() && self.accept_op.is_none()) {
                return Ok(()); // dropping the ring cancels what is left and waits for it
            }
            self.arm_accept();
            self.ring.submit_and_wait(TICK)?;
            self.ring.completions(&mut batch);
            for c in batch.drain(..) {
                match c.token {
                    ACCEPT => self.on_accept(c.event),
                    WAKER => self.on_waker(c.more),
                    token => self.on_conn_event(token, c.event),
                }
            }
            let now = Instant::now();
            if life.sweep_due(now) {
                self.finish_jobs(); // (a missed wake-up costs a tick at most)
                self.sweep(now);
                self.pipeline.tick(now);
            }
        }
    }

    // ---- accepting ---------------------------------------------------------------------

    /// Keeps one accept armed while below the connection cap and not paused or draining.
    fn arm_accept(&mut self) {
        if self.accept_op.is_some() || self.draining {
            return;
        }
        let Some(listener) = &self.listener else { return };
        if !self.accept.may_accept(self.conns.len(), Instant::now(), &self.pipeline) {
            return;
        }
        self.accept_op = Some(self.ring.accept(ACCEPT, listener.as_fd()));
    }

    fn on_accept(&mut self, event: Event) {
        self.accept_op = None;
        let Event::Accepted(r) = event else { return };
        if self.draining {
            self.listener = None; // the port closes: new connections are refused
            return; // an accepted socket, if any, is dropped (closed) here
        }
        match r {
            Ok((sock, peer)) => self.register(sock, peer),
            // Out of descriptors: pause. ECONNABORTED and friends: the client gave up.
            Err(e) => {
                self.accept.accept_failed(&e, &self.pipeline);
            }
        }
    }

    fn register(&mut self, sock: OwnedFd, peer: Option<SocketAddr>) {
        let tls = match &self.tls {
            None => None,
            Some(ctx) => match ctx.session() {
                Ok(session) => Some(Box::new(RingTls::new(session))),
                Err(_) => return, // (the socket closes)
            },
        };
        let peer = peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let key = self.conns.insert(Conn {
            sock,
            state: ConnState::new(peer),
            phase: Phase::Head,
            deadline: Phase::Head.deadline(&self.pipeline, Instant::now()),
            doing: Doing::Deciding,
            tls,
        });
        self.pipeline.accepted();
        self.advance(key);
    }

    // ---- driving a connection ----------------------------------------------------------

    /// Asks the pipeline what comes next for a connection with nothing under way.
    fn advance(&mut self, key: usize) {
        let step = self.pipeline.next(&mut self.conns[key].state, self.draining);
        self.on_step(key, step);
    }

    fn on_step(&mut self, key: usize, step: Step) {
        match step {
            Step::Respond(resp) => self.pump(key, Box::new(Sending::new(resp))),
            Step::Block(job) => self.run_job(key, job),
            Step::NeedMore => self.receive(key),
            Step::Close => self.close(key),
        }
    }

    /// Submits the next operation of the response `out`, or finishes it.
    fn pump(&mut self, key: usize, mut out: Box<Sending>) {
        let token = self.conns.token(key);
        let spare = &mut self.spare;
        let c = &mut self.conns[key];
        let next = out.next(|| spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK)));
        match (next, c.tls.as_mut()) {
            (Next::Send(g, more), Some(tls)) => {
                // Encrypt what the session takes; its ciphertext goes out in place of `g`.
                match tls.encrypt(&g, !more && out.resp.close) {
                    Ok(n) => out.sent(g, n),
                    Err(_) => {
                        out.restore(g);
                        return self.finalize(key, Some(out));
                    }
                }
                let cipher = tls.output(self.spare_recv.pop().unwrap_or_default());
                self.send_ciphertext(key, cipher, Some(out));
            }
            (Next::Send(g, more), None) => {
                let op = self.ring.send(token, c.sock.as_fd(), g, more);
                c.doing = Doing::Responding { out, op: Some(op) };
                c.phase = Phase::Send;
                c.deadline = Phase::Send.deadline(&self.pipeline, Instant::now());
            }
            (Next::Read { file, offset, max, buf }, _) => {
                c.phase = Phase::Parked;
                // Once a transfer has met the disk, every further read of it takes the gate
                // (see disk_gate.rs: read-ahead in flight looks resident).
                let missed =
                    !residency::is_resident(&file.file, offset, max as u64).unwrap_or(true);
                if missed {
                    self.pipeline.chunk_not_resident(&file);
                }
                let cold = missed || out.met_disk();
                if cold {
                    out.meets_disk(&file);
                    // A response all in memory never gets here: no clock read on its path.
                    if !self.gate.try_start() {
                        // No buffer waits for the disk: behind a capped disk every connection
                        // may queue here, and 128 KiB each of memory they had touched put a
                        // 128 MiB server over its limit. One is taken when the read starts.
                        keep_spare(spare, buf);
                        let (since, continues) = (out.since, out.body_sent() > 0);
                        c.doing = Doing::Responding { out, op: None };
                        return self.gate.wait(since, continues, ColdRead { token, file, offset });
                    }
                    let cold = ColdStart {
                        ring: &mut self.ring,
                        pipeline: &self.pipeline,
                        spare,
                        new_reads_first: self.gate.new_reads_first(),
                    };
                    let op = cold.start(token, &file, offset, &mut out, Some(buf));
                    c.doing = Doing::Responding { out, op: Some(op) };
                    return;
                }
                let op = self.ring.read(token, file.file.as_fd(), buf, offset, max);
                c.doing = Doing::Responding { out, op: Some(op) };
            }
            (Next::Done, _) => {
                self.pipeline.complete(&out.resp, out.body_sent());
                if let Some(file) = out.sent_whole_file() {
                    self.pipeline.sent_file(file);
                }
                let close = out.closes_after();
                if let Some(buf) = out.into_buffer() {
                    self.recycle(buf);
                }
                if close { self.close(key) } else { self.advance(key) }
            }
        }
    }

    /// Submits a receive into the connection's input buffer (a TLS connection: into a
    /// ciphertext buffer).
    fn receive(&mut self, key: usize) {
        let token = self.conns.token(key);
        let c = &mut self.conns[key];
        let phase = if c.state.is_idle() { Phase::Idle } else { Phase::Head };
        if self.draining && phase == Phase::Idle {
            return self.close(key);
        }
        if c.phase != phase {
            c.phase = phase;
            c.deadline = phase.deadline(&self.pipeline, Instant::now());
        }
        let partial = c.state.has_partial_request();
        let cap = if c.state.inbuf.is_empty() { RECV_FIRST } else { RECV_MORE };
        let want = self.pipeline.read_hint(&c.state).min(cap);
        let (mut buf, want) = match c.tls {
            None => (std::mem::take(&mut c.state.inbuf), want),
            Some(_) => (Vec::new(), RECV_MORE), // a TLS record is up to 16 KiB and change
        };
        if buf.capacity() == 0
            && let Some(spare) = self.spare_recv.pop()
        {
            buf = spare;
        }
        let op = self.ring.recv(token, c.sock.as_fd(), buf, want);
        c.doing = Doing::Receiving { op, partial };
    }

    /// A blocking step: `openat`/`statx` on the ring when the translation is known to be a
    /// file; anything else (a full translation, a listing) on a helper.
    fn run_job(&mut self, key: usize, job: Job) {
        let token = self.conns.token(key);
        self.conns[key].phase = Phase::Parked;
        match job {
            Job::Resolve { url_path, known: Some(Translation::File(path, _)), .. } => {
                let step = Opening::start(url_path, path, &mut self.ring, token);
                self.on_open_step(key, step);
            }
            job => match self.helpers.submit(token, job) {
                Some(done) => {
                    let step = self.pipeline.resume(&mut self.conns[key].state, done);
                    self.on_step(key, step);
                }
                None => self.conns[key].doing = Doing::AtHelper,
            },
        }
    }

    fn on_open_step(&mut self, key: usize, step: OpenStep) {
        let c = &mut self.conns[key];
        match step {
            OpenStep::Submitted(opening, op) => c.doing = Doing::Opening { op, opening },
            OpenStep::Done(resolved) => {
                let step = self.pipeline.resume(&mut c.state, JobDone::Resolved(*resolved));
                self.on_step(key, step);
            }
        }
    }

    // ---- completions -------------------------------------------------------------------

    fn on_conn_event(&mut self, token: u64, event: Event) {
        let Some(key) = self.conns.live_key(token) else { return };
        match std::mem::take(&mut self.conns[key].doing) {
            Doing::Closing { out } => self.finalize(key, out),
            Doing::Receiving { .. } => self.on_received(key, event, false),
            Doing::TimingOut { .. } => self.on_received(key, event, true),
            Doing::Dozing { .. } => self.on_doze_event(key, token, event),
            Doing::SendingTls { .. } => match event {
                Event::Sent(r, g) => self.tls_sent(key, r, g, None),
                _ => self.close(key),
            },
            Doing::Opening { opening, .. } => {
                let step =
                    (*opening).completed(event, &mut self.ring, token, self.pipeline.open_rules());
                self.on_open_step(key, step);
            }
            Doing::Responding { out, .. } => self.on_response_event(key, out, event),
            // No operation of the connection's was in flight: fail safe.
            Doing::Deciding | Doing::AtHelper => self.close(key),
        }
    }

    /// The receive in flight completed (after the header timeout cancelled it, if
    /// `timed_out`: then the 408 goes out).
    fn on_received(&mut self, key: usize, event: Event, timed_out: bool) {
        let Event::Received(r, buf) = event else { return self.close(key) };
        let c = &mut self.conns[key];
        let ok = match c.tls.as_mut() {
            Some(tls) => tls.take_received(r, buf, &mut c.state, &mut self.spare_recv),
            None => {
                c.state.inbuf = buf;
                matches!(r, Ok(n) if n > 0)
            }
        };
        if timed_out {
            let resp = self.pipeline.timeout_response(c.state.peer, &c.state.inbuf);
            return self.pump(key, Box::new(Sending::new(resp)));
        }
        if !ok {
            return self.close(key);
        }
        match c.tls.as_mut() {
            Some(tls) if tls.wants_write() => {
                let cipher = tls.output(self.spare_recv.pop().unwrap_or_default());
                self.send_ciphertext(key, cipher, None);
            }
            _ => self.advance(key),
        }
    }

    /// A send or file read of the response `out` completed.
    fn on_response_event(&mut self, key: usize, mut out: Box<Sending>, event: Event) {
        match event {
            Event::Sent(r, g) if self.conns[key].tls.is_some() => {
                self.tls_sent(key, r, g, Some(out))
            }
            Event::Sent(Ok(n), g) if n > 0 => {
                out.sent(g, n);
                self.pump(key, out);
            }
            Event::Sent(_, g) => {
                out.restore(g);
                self.finalize(key, Some(out)); // the peer went away: log what was sent, close
            }
            Event::ReadPage(r, page) => {
                let Some(DirectRead { file, offset, len }) = out.direct_read.take() else {
                    return self.finalize(key, Some(out)); // (every page read is noted)
                };
                let Ok(n) = r else {
                    // A direct read failed: the same bytes through the page cache, in the
                    // same slot of the gate.
                    drop(page);
                    let buf = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK));
                    let token = self.conns.token(key);
                    let op = self.ring.read(token, file.file.as_fd(), buf, offset, len);
                    self.conns[key].doing = Doing::Responding { out, op: Some(op) };
                    return;
                };
                let cold_since = out.cold_read.take();
                out.page_read(page, n, offset, len);
                self.pump(key, out);
                if let Some(started) = cold_since {
                    self.gate.finished(started, n as u64);
                    self.start_waiting_reads();
                }
            }
            Event::Read(r, buf) => {
                let n = r.unwrap_or(0);
                let cold_since = out.cold_read.take();
                // A read error or a file that shrank under the response cuts it short: the
                // head still goes if it has not, then the connection closes.
                out.chunk_read(buf, n);
                self.pump(key, out);
                if let Some(started) = cold_since {
                    self.gate.finished(started, n as u64);
                    self.start_waiting_reads();
                }
            }
            _ => self.finalize(key, Some(out)),
        }
    }

    /// A completion for a dozing connection: the cancelled receive (then wait with a poll,
    /// keeping the buffer for another connection), or the poll (then receive again). A
    /// receive that won the race with its cancellation is handled as usual.
    fn on_doze_event(&mut self, key: usize, token: u64, event: Event) {
        match event {
            Event::Received(Err(e), mut buf) if Ring::was_cancelled(&e) && buf.is_empty() => {
                if self.spare_recv.len() < SPARE_RECV {
                    buf.clear();
                    self.spare_recv.push(buf);
                } else {
                    self.freed_recv += 1;
                }
                let c = &mut self.conns[key];
                c.doing = Doing::Dozing { op: self.ring.poll_once(token, c.sock.as_fd()) };
            }
            Event::Polled(Ok(())) => self.receive(key),
            Event::Polled(Err(_)) => self.close(key),
            event => self.on_received(key, event, false),
        }
    }

    /// Helper jobs finished: resume their connections.
    fn on_waker(&mut self, more: bool) {
        self.finish_jobs();
        if !more && let Some(w) = self.helpers.waker() {
            self.ring.poll_readable(WAKER, w); // the multishot poll ended: re-arm it
        }
    }

    // ---- closing, timeouts, shutdown -----------------------------------------------------

    /// Closes a connection: at once if nothing is in flight, else after cancelling it.
    fn close(&mut self, key: usize) {
        let c = &mut self.conns[key];
        if matches!(c.doing, Doing::Closing { .. }) {
            return;
        }
        let op = c.doing.op();
        let out = std::mem::take(&mut c.doing).into_response();
        match op {
            Some(op) => {
                self.ring.cancel(op);
                c.doing = Doing::Closing { out };
            }
            None => self.finalize(key, out),
        }
    }

    /// Ends a connection with nothing in flight; `out` is the response it abandons, if any.
    fn finalize(&mut self, key: usize, out: Option<Box<Sending>>) {
        self.conns.remove(key);
        if let Some(out) = out {
            // Abandoned mid-response: log what was sent.
            self.pipeline.complete(&out.resp, out.body_sent());
            if out.cold_read.is_some() {
                self.gate.released();
                self.start_waiting_reads();
            }
        }
        self.pipeline.closed();
        self.ended_since_idle = true;
    }

    /// Submits the oldest waiting cold reads while disk slots are free, skipping those whose
    /// connection has gone.
    fn start_waiting_reads(&mut self) {
        while let Some(r) = self.gate.next() {
            let Some(key) = self.conns.live_key(r.token) else {
                self.gate.released();
                continue;
            };
            match &mut self.conns[key].doing {
                Doing::Responding { out, op: op @ None } => {
                    let spare = &mut self.spare;
                    let cold = ColdStart {
                        ring: &mut self.ring,
                        pipeline: &self.pipeline,
                        spare,
                        new_reads_first: self.gate.new_reads_first(),
                    };
                    *op = Some(cold.start(r.token, &r.file, r.offset, out, None));
                }
                _ => self.gate.released(),
            }
        }
    }

    /// Keeps a chunk buffer for reuse.
    fn recycle(&mut self, buf: Vec<u8>) {
        keep_spare(&mut self.spare, buf);
    }

    fn sweep(&mut self, now: Instant) {
        self.doze_idle(now);
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.phase != Phase::Parked
                    && !matches!(c.doing, Doing::Closing { .. } | Doing::TimingOut { .. })
                    && c.deadline <= now
            })
            .map(|(k, _)| k)
            .collect();
        for key in expired {
            self.pipeline.timed_out();
            let c = &mut self.conns[key];
            match c.doing {
                Doing::Receiving { op, partial: true } if c.phase == Phase::Head => {
                    // Cancel the receive; its completion sends the 408 (then closes).
                    c.doing = Doing::TimingOut { op };
                    c.deadline = Phase::Send.deadline(&self.pipeline, now);
                    self.ring.cancel(op);
                }
                _ => self.close(key),
            }
        }
    }

    /// Cancels the receive of every keep-alive connection idle for [`DOZE_AFTER`]; its
    /// completion puts the connection to sleep (see `on_doze_event`).
    fn doze_idle(&mut self, now: Instant) {
        if self.conns.is_empty() && std::mem::take(&mut self.ended_since_idle) {
            // A burst is over: its buffers (receive, and 128 KiB chunks for file reads) go
            // back to the kernel, as mt's last connection thread does (RSS after 1 020
            // keep-alive connections stayed at 63-82 MB before).
            self.spare.clear();
            self.spare_recv.clear();
            self.freed_recv = 0;
            amped_sys::memory::trim_heap();
        }
        if std::mem::take(&mut self.freed_recv) >= SPARE_RECV {
            // Many buffers went back to the allocator since the last sweep: let the kernel
            // have their pages (they are scattered through the heap, so they would stay).
            amped_sys::memory::trim_heap();
        }
        let keepalive = self.pipeline.keepalive_timeout();
        for (_, c) in self.conns.iter_mut() {
            let idle_since = c.deadline.checked_sub(keepalive);
            if c.phase == Phase::Idle
                && idle_since.is_some_and(|t| now.saturating_duration_since(t) >= DOZE_AFTER)
                && let Doing::Receiving { op, .. } = c.doing
            {
                c.doing = Doing::Dozing { op };
                self.ring.cancel(op);
            }
        }
    }

    /// Graceful shutdown begins: stop accepting (the port closes once the accept is
    /// cancelled), close idle connections, let the others finish their responses.
    fn begin_drain(&mut self) {
        self.draining = true;
        match self.accept_op {
            Some(op) => self.ring.cancel(op),
            None => self.listener = None,
        }
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                matches!(c.doing, Doing::Receiving { partial: false, .. } | Doing::Dozing { .. })
            })
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            self.close(key);
        }
    }
}

impl ResumesJobs for UringLoop {
    type Runner = HelperPool;

    fn runner_and_results(&mut self) -> (&mut HelperPool, &mut Vec<(u64, JobDone)>) {
        (&mut self.helpers, &mut self.done)
    }

    fn live_key(&self, token: u64) -> Option<usize> {
        self.conns.live_key(token)
    }

    fn resume_parked(&mut self, key: usize, done: JobDone) {
        let c = &mut self.conns[key];
        if !matches!(c.doing, Doing::AtHelper) {
            return;
        }
        c.doing = Doing::Deciding;
        let step = self.pipeline.resume(&mut c.state, done);
        self.on_step(key, step);
    }
}

/// Keeps a chunk buffer for reuse, unless enough are kept or it grew past a chunk (a read from
/// the disk of up to 1 MiB: kept, every idle one would hold that much).
fn keep_spare(spare: &mut Vec<Vec<u8>>, buf: Vec<u8>) {
    if spare.len() < SPARE_BUFFERS && buf.capacity() <= CHUNK {
        spare.push(buf);
    }
}

/// What starting a cold read takes from the loop (its fields, borrowed apart from the
/// connection whose response the read is for).
struct ColdStart<'a> {
    ring: &'a mut Ring,
    pipeline: &'a Pipeline,
    spare: &'a mut Vec<Vec<u8>>,
    /// The disk gate sees the disk with time to spare and slow, so new requests' reads go
    /// before a transfer's ask-ahead: see [`ask_ahead::yields`].
    new_reads_first: bool,
}

impl ColdStart<'_> {
    /// Submits the cold read of `out` at `offset` of `file` for `token`, a disk slot taken.
    /// The page policy decides here, as the read goes to the disk, whether it goes around the
    /// page cache — a read that waited at the gate for seconds goes by what memory is like
    /// when it starts, not when it queued. Around the cache nothing is asked ahead (that would
    /// read into the page cache what is read again); through it, the disk is asked ahead
    /// first. `buf` is the response's chunk buffer where it has one at hand.
    fn start(
        self,
        token: u64,
        file: &Arc<crate::cache::FileEntry>,
        offset: u64,
        out: &mut Sending,
        buf: Option<Vec<u8>>,
    ) -> OpId {
        out.cold_read = Some(ColdStarted { at: Instant::now(), first: !out.asked_ahead() });
        let max = if self.pipeline.reads_around_cache(file) {
            let max = out.direct_read_len(offset);
            if let Some(op) = read_direct(self.ring, token, file, offset, max, out) {
                if let Some(buf) = buf {
                    keep_spare(self.spare, buf);
                }
                self.pipeline.count_direct_read();
                return op;
            }
            max // no huge page free: the same bytes through the page cache
        } else {
            let cfg = self.pipeline.config();
            let pieces = ask_ahead::depth(cfg, file.dev, out.since.elapsed(), self.new_reads_first);
            for (at, len) in ask_ahead::calls(out.ask_ahead(offset, pieces)) {
                self.ring.advise_will_need(file.file.as_fd(), at, len);
            }
            out.cold_read_len(offset, cfg.first_fill)
        };
        // A kept buffer may still hold the chunk it last carried: a ring read appends, so it
        // starts empty.
        let mut buf =
            buf.unwrap_or_else(|| self.spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK)));
        buf.clear();
        self.ring.read(token, file.file.as_fd(), buf, offset, max)
    }
}

/// Submits a direct read of `max` bytes of `file` at `offset` for `token` into a huge page from
/// the process's pool (`huge_pool.rs`), noting it in `out`; `None` where none is free or the
/// file cannot be opened for direct reads (the caller then reads through the page cache). The
/// second descriptor comes from /proc/self/fd on first use: no path walk on the disk.
fn read_direct(
    ring: &mut Ring,
    token: u64,
    file: &Arc<crate::cache::FileEntry>,
    offset: u64,
    max: usize,
    out: &mut Sending,
) -> Option<OpId> {
    let fd = file.direct_file()?;
    let page = crate::huge_pool::lend()?;
    let span = amped_sys::direct::Span::of(offset, max as u64);
    out.direct_read = Some(DirectRead { file: file.clone(), offset, len: max });
    Some(ring.read_page(token, fd.as_fd(), page, span.start, span.want))
}
