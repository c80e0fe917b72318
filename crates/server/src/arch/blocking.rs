//! The blocking connection driver shared by the thread and process architectures (`mt`,
//! `pool`, `mp`): a thread (or process) serves one connection at a time, running every
//! [`Step`] of the pipeline itself — jobs inline (it may block on the disk: that is the model,
//! Flash-MT/Flash-MP, §3.1–3.2 of the paper), sends with the residency test off.
//!
//! **Timeouts and shutdown.** A blocking socket carries `SO_RCVTIMEO`/`SO_SNDTIMEO` of one
//! [`TICK`], so no socket call blocks longer than that (an `mp` socket does not block; its
//! waits in the room last a tick at most); the header, keep-alive and send deadlines are
//! kept here (as in the event loop) and checked before every read and after every tick. A
//! blocked `read` or `send` that returns `WouldBlock`/`TimedOut` means "a tick passed". The
//! tick is also how a thread notices a graceful shutdown ([`Stop`]): an idle connection is
//! closed, a response in flight finishes, a request arriving is answered with
//! `Connection: close`; once the shutdown deadline passes every connection is dropped.
//!
//! **Stepping aside** ([`Aside`]). `mt` never does. A `pool` worker steps aside from a
//! connection with nothing to read, or whose client takes no more of a response (its socket
//! buffer full), while other connections wait in its queue: the socket is then non-blocking,
//! so such a read or send returns at once and the connection is parked (with the rest of its
//! response) instead of holding the worker. An `mp` worker
//! serves its connections on non-blocking sockets and does its waiting — for the client's next
//! bytes or for room in a full socket buffer — in its own [`Room`]'s epoll set, together with
//! the listeners and the connections it has parked: when one of those is ready before the
//! connection being served, it parks that connection (with a response in flight, if any) and
//! serves the ready one. Either way a thread or process spends its time only on a connection
//! that has something to read or room to send.
//!
//! This module also holds what the acceptors of those architectures share: the [`Gate`] that
//! caps open connections at `--max-connections` (the acceptor waits for a free slot, leaving
//! the rest in the kernel's backlog) and [`next_connection`].

use super::lifecycle::{ACCEPT_BACKOFF, Phase, Stop, TICK, out_of_descriptors};
use super::waiting_room::{Room, Waited};
use crate::cache::lock;
use crate::pipeline::{ConnState, Pipeline, Step};
use crate::transmit::{Outgoing, SendOptions, SendOutcome};
use amped_sys::epoll::Interest;
use amped_sys::listen::prepare_stream;
use slab::Slab;
use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Read buffer of one connection.
const READ_BUF: usize = 16 << 10;

/// Keeps a server's (or process's) open connections: caps them at `--max-connections`, and at
/// the shutdown deadline shuts down the sockets of those still open, so that a thread blocked
/// sending to a slow client is released at once.
pub struct Gate {
    open: Mutex<Slab<Arc<TcpStream>>>,
    freed: Condvar,
    max: usize,
    /// Whose connections these are (their accepts, closes and pauses are counted there).
    pipeline: Arc<Pipeline>,
}

/// An accepted connection, kept by its [`Gate`] until dropped.
pub struct Connection {
    /// The socket (blocking).
    pub sock: Arc<TcpStream>,
    /// The client's address.
    pub peer: SocketAddr,
    key: usize,
    gate: Arc<Gate>,
}

impl Gate {
    /// A gate admitting at most `max` open connections of `pipeline`.
    pub fn new(max: usize, pipeline: Arc<Pipeline>) -> Arc<Gate> {
        Arc::new(Gate { open: Mutex::new(Slab::new()), freed: Condvar::new(), max, pipeline })
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// Whether `max` connections are open (a single-threaded acceptor stops accepting).
    pub fn is_full(&self) -> bool {
        lock(&self.open).len() >= self.max
    }

    /// Waits until a connection may be accepted; false if shutdown began meanwhile.
    pub fn wait_for_slot(&self, stop: &Stop) -> bool {
        let mut open = lock(&self.open);
        let mut paused = false;
        while open.len() >= self.max {
            if stop.draining() {
                return false;
            }
            if !paused {
                self.pipeline.accept_paused();
                paused = true;
            }
            open = self.freed.wait_timeout(open, TICK).unwrap_or_else(|p| p.into_inner()).0;
        }
        !stop.draining()
    }

    /// Keeps a freshly accepted socket as open.
    pub fn admit(self: &Arc<Self>, sock: TcpStream, peer: SocketAddr) -> Connection {
        let sock = Arc::new(sock);
        let key = lock(&self.open).insert(sock.clone());
        self.pipeline.accepted();
        Connection { sock, peer, key, gate: self.clone() }
    }

    /// Waits until every connection has closed or `until` passed; true if none is open.
    pub fn wait_all_closed(&self, until: Instant) -> bool {
        let mut open = lock(&self.open);
        while !open.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            open =
                self.freed.wait_timeout(open, left.min(TICK)).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }

    /// Shuts down every open socket: reads see EOF and sends fail, so the threads serving
    /// them close at once instead of finishing their responses.
    pub fn abort_all(&self) {
        for (_, sock) in lock(&self.open).iter() {
            let _ = sock.shutdown(Shutdown::Both);
        }
    }

    /// The shutdown deadline: waits for the open connections until `deadline`, aborts those
    /// left, and waits a little for their threads to let go. True if all closed in time.
    pub fn close_all_by(&self, deadline: Instant) -> bool {
        if self.wait_all_closed(deadline) {
            return true;
        }
        self.abort_all();
        self.wait_all_closed(Instant::now() + 2 * TICK);
        false
    }
}

impl Connection {
    /// A number no other open connection of its gate has (its token in a [`Room`]).
    pub fn id(&self) -> u64 {
        self.key as u64
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        lock(&self.gate.open).remove(self.key);
        self.gate.freed.notify_all();
        self.gate.pipeline.closed();
    }
}

/// The accepting side of a blocking architecture (mt, pool): the listener, accepting with a
/// tick so shutdown is seen; the gate that admits connections up to `--max-connections`; and
/// the graceful-shutdown clock the connections' threads share.
pub struct Acceptor {
    listener: TcpListener,
    /// The connections admitted and not yet closed.
    pub gate: Arc<Gate>,
    /// The graceful-shutdown clock.
    pub stop: Arc<Stop>,
}

impl Acceptor {
    /// Accepts on `listener` for `pipeline` until `shutdown` is raised.
    pub fn new(
        pipeline: &Arc<Pipeline>,
        listener: TcpListener,
        shutdown: &Arc<std::sync::atomic::AtomicBool>,
    ) -> io::Result<Acceptor> {
        set_accept_tick(&listener)?;
        let stop = Arc::new(Stop::new(shutdown.clone(), pipeline.config()));
        let gate = Gate::new(pipeline.max_connections(), pipeline.clone());
        Ok(Acceptor { listener, gate, stop })
    }

    /// The next connection admitted; `None` once shutdown has begun.
    pub fn next(&self) -> Option<Connection> {
        next_connection(&self.listener, &self.gate, &self.stop)
    }

    /// Stops listening, then closes the connections still open by the shutdown deadline.
    pub fn close(self) {
        drop(self.listener);
        self.gate.close_all_by(self.stop.deadline().unwrap_or_else(Instant::now));
    }
}

/// Makes `accept` on a blocking listener return `WouldBlock` after a [`TICK`] without a
/// connection (Linux honours `SO_RCVTIMEO` on listening sockets), so acceptors see shutdown.
pub fn set_accept_tick(listener: &TcpListener) -> io::Result<()> {
    socket2::SockRef::from(listener).set_read_timeout(Some(TICK))
}

/// The next connection for a thread or process architecture: waits for a slot under
/// `--max-connections`, accepts (backing off when descriptors run out), and returns `None`
/// once shutdown has begun — a connection accepted after that is closed unanswered.
pub fn next_connection(
    listener: &TcpListener,
    gate: &Arc<Gate>,
    stop: &Stop,
) -> Option<Connection> {
    loop {
        if !gate.wait_for_slot(stop) {
            return None;
        }
        match amped_sys::listen::accept_blocking(listener) {
            Ok((sock, peer)) => {
                if stop.draining() {
                    return None;
                }
                return Some(gate.admit(sock, peer));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) if out_of_descriptors(&e, &gate.pipeline) => std::thread::sleep(ACCEPT_BACKOFF),
            // EINVAL: the listener was shut down (mp's parent, at shutdown): nothing more comes.
            Err(e) if e.kind() == ErrorKind::InvalidInput => return None,
            Err(_) => {} // ECONNABORTED and friends: the client gave up
        }
    }
}

/// A connection with its protocol state and deadline, between two reads or in the middle of a
/// send: what a `pool` or `mp` worker hands to a waiting room ([`super::waiting_room`]) when
/// it steps aside, and takes back once the client has sent more or can take more.
pub struct Session {
    /// The connection.
    pub conn: Connection,
    state: ConnState,
    phase: Phase,
    deadline: Instant,
    prepared: bool,
    /// The socket is non-blocking (always under `mp`; under `pool` while others wait).
    nonblocking: bool,
    /// A response the client could not take more of when its worker stepped aside.
    sending: Option<Sending>,
    /// What a room's epoll set watches the socket for, if it is registered there.
    pub(super) watched: Option<Interest>,
}

/// A response in flight and its send deadline.
struct Sending {
    out: Outgoing,
    /// No body byte sent by then: the connection is closed.
    deadline: Instant,
    /// Body bytes sent when the deadline was last pushed back.
    sent: u64,
}

impl Sending {
    fn new(out: Outgoing, p: &Pipeline) -> Sending {
        let sent = out.body_sent();
        Sending { out, deadline: Phase::Send.deadline(p, Instant::now()), sent }
    }

    /// The send deadline passed: counted, logged, the response completed (access log).
    fn time_out(self, p: &Pipeline, peer: SocketAddr) {
        p.send_timed_out(peer);
        p.complete(&self.out.resp, self.out.body_sent());
    }
}

impl Session {
    /// A freshly accepted connection: the header timeout runs.
    pub fn new(conn: Connection, pipeline: &Pipeline) -> Session {
        let state = ConnState::new(conn.peer);
        let deadline = Phase::Head.deadline(pipeline, Instant::now());
        Session {
            conn,
            state,
            phase: Phase::Head,
            deadline,
            prepared: false,
            nonblocking: false,
            sending: None,
            watched: None,
        }
    }

    /// Its token in a room's epoll set.
    pub fn token(&self) -> u64 {
        self.conn.id()
    }

    /// What it waits for: room to send the rest of a response, or the client's next bytes.
    pub fn interest(&self) -> Interest {
        if self.sending.is_some() { Interest::Write } else { Interest::Read }
    }

    /// When the header, keep-alive or send timeout of this waiting connection runs out.
    pub fn deadline(&self) -> Instant {
        self.sending.as_ref().map_or(self.deadline, |s| s.deadline)
    }

    /// True when a request is under way — part of one has arrived, or its response is being
    /// sent — which a graceful shutdown lets finish.
    pub fn is_busy(&self) -> bool {
        self.sending.is_some() || self.state.has_partial_request()
    }

    /// Closes a waiting connection: one whose deadline passed gets what `timed_out` (or a
    /// send timeout) gives it; a response in flight is completed as sent so far.
    pub fn close(self, pipeline: &Pipeline, overdue: bool) {
        match self.sending {
            Some(s) if overdue => s.time_out(pipeline, self.state.peer),
            Some(s) => pipeline.complete(&s.out.resp, s.out.body_sent()),
            None if overdue => timed_out(pipeline, &self.conn.sock, self.phase, &self.state),
            None => {}
        }
    }
}

/// When a thread serving one connection steps aside from it for others.
pub enum Aside<'a> {
    /// Never (`mt`): it waits on its connection, with one [`TICK`] per socket call.
    Never,
    /// `pool`: from a connection with nothing to read or no room to send, while this says
    /// other connections wait for a thread.
    WhenOthersWait(&'a dyn Fn() -> bool),
    /// `mp`: the socket is non-blocking and every wait happens in this room, with the
    /// process's listeners and parked connections; when one of them is ready first.
    Room(&'a mut Room),
}

/// How a wait for the client's next bytes ended.
enum Wait {
    /// Bytes arrived.
    More,
    /// The connection must close (EOF, error, timeout, shutdown).
    Closed,
    /// Nothing has arrived and other connections wait for this thread: step aside.
    StepAside,
}

/// How sending a response ended.
enum Sent {
    /// All sent; the connection stays open for the next request.
    KeepOpen,
    /// The connection must close (done with `Connection: close`, failed, timed out).
    Closed,
    /// The client could not take more and other connections are waiting or ready: step aside
    /// with it.
    StepAside(Box<Sending>),
}

/// One connection being served on the calling thread.
struct Blocking<'a> {
    pipeline: &'a Pipeline,
    sock: &'a TcpStream,
    token: u64,
    watched: Option<Interest>,
    nonblocking: bool,
    state: ConnState,
    stop: &'a Stop,
    phase: Phase,
    deadline: Instant,
    sending: Option<Sending>,
    opts: SendOptions,
    buf: Vec<u8>,
    aside: Aside<'a>,
}

/// Serves `conn` on the calling thread until it closes, times out or shutdown ends it.
pub fn serve(pipeline: &Pipeline, conn: Connection, stop: &Stop) {
    let _ = serve_session(pipeline, Session::new(conn, pipeline), stop, Aside::Never);
}

/// Serves `session` on the calling thread until it closes — or, as `aside` says, returns it
/// while its client has sent nothing more to read (or takes nothing more of a response) and
/// other connections are waiting, so that a slow or idle client never holds a thread that
/// others are waiting for. The returned session waits elsewhere until its client is ready.
pub fn serve_session(
    pipeline: &Pipeline,
    mut session: Session,
    stop: &Stop,
    aside: Aside<'_>,
) -> Option<Session> {
    let sock: &TcpStream = &session.conn.sock;
    if !session.prepared {
        let ready = if matches!(aside, Aside::Room(_)) {
            prepare_stream(sock, true)
        } else {
            prepare_stream(sock, false)
                .and_then(|()| sock.set_read_timeout(Some(TICK)))
                .and_then(|()| sock.set_write_timeout(Some(TICK)))
        };
        if ready.is_err() {
            return None;
        }
        session.prepared = true;
        session.nonblocking = matches!(aside, Aside::Room(_));
    }
    let placeholder = ConnState::new(session.conn.peer);
    let mut c = Blocking {
        pipeline,
        sock,
        token: session.conn.id(),
        watched: session.watched,
        nonblocking: session.nonblocking,
        state: std::mem::replace(&mut session.state, placeholder),
        stop,
        phase: session.phase,
        deadline: session.deadline,
        sending: session.sending.take(),
        // This thread may block on the disk, so the residency test would only add a syscall.
        opts: SendOptions {
            zero_copy: pipeline.send_settings().zero_copy,
            residency_test: false,
            read_path: pipeline.send_settings().read_path,
            // pool: between two send calls, look for connections waiting for this thread.
            yield_each_step: matches!(aside, Aside::WhenOthersWait(_)),
        },
        buf: vec![0u8; READ_BUF],
        aside,
    };
    if !c.run() {
        return None;
    }
    let (state, phase, deadline, sending, watched, nonblocking) =
        (c.state, c.phase, c.deadline, c.sending, c.watched, c.nonblocking);
    Some(Session { state, phase, deadline, sending, watched, nonblocking, ..session })
}

impl Blocking<'_> {
    /// Serves until the connection closes (false) or steps aside (true).
    fn run(&mut self) -> bool {
        let p = self.pipeline;
        if let Some(sending) = self.sending.take()
            && !self.finish(sending)
        {
            return self.sending.is_some();
        }
        loop {
            let mut step = p.next(&mut self.state, self.stop.draining());
            loop {
                match step {
                    Step::Block(job) => step = p.resume(&mut self.state, p.run_job_inline(job)),
                    Step::Respond(resp) => {
                        if !self.finish(Sending::new(Outgoing::new(resp), p)) {
                            return self.sending.is_some();
                        }
                        break;
                    }
                    Step::NeedMore => {
                        match self.read_more() {
                            Wait::More => {}
                            Wait::Closed => return false,
                            Wait::StepAside => return true,
                        }
                        break;
                    }
                    Step::Close => return false,
                }
            }
        }
    }

    /// Sends a response: true if it went and the connection stays open; false if the
    /// connection closes, or steps aside with the rest of the response in `self.sending`.
    fn finish(&mut self, sending: Sending) -> bool {
        match self.send(sending) {
            Sent::KeepOpen => {
                self.phase = Phase::Served;
                true
            }
            Sent::Closed => false,
            Sent::StepAside(rest) => {
                self.sending = Some(*rest);
                false
            }
        }
    }

    /// Sends as much of a response as the client takes.
    fn send(&mut self, mut s: Sending) -> Sent {
        let p = self.pipeline;
        loop {
            // pool: others wait for a thread: send only what the socket takes now.
            let step_aside = self.others_wait();
            match s.out.send(self.sock, self.opts, p) {
                SendOutcome::Done => {
                    p.complete(&s.out.resp, s.out.body_sent());
                    return if s.out.resp.close { Sent::Closed } else { Sent::KeepOpen };
                }
                SendOutcome::WouldBlock => {
                    // A tick without progress, a full buffer (mp) or a signal: check the send
                    // and shutdown deadlines.
                    let now = Instant::now();
                    if s.out.body_sent() != s.sent {
                        s.sent = s.out.body_sent();
                        s.deadline = Phase::Send.deadline(p, now);
                    }
                    if now >= s.deadline {
                        s.time_out(p, self.state.peer);
                        return Sent::Closed;
                    }
                    if self.stop.expired() {
                        p.complete(&s.out.resp, s.out.body_sent());
                        return Sent::Closed;
                    }
                    if step_aside {
                        return Sent::StepAside(Box::new(s));
                    }
                    if let Aside::Room(room) = &mut self.aside {
                        let until = s.deadline;
                        match room.wait_current(
                            self.sock,
                            self.token,
                            &mut self.watched,
                            Interest::Write,
                            until,
                        ) {
                            Waited::Ready | Waited::Tick => {}
                            Waited::Others => return Sent::StepAside(Box::new(s)),
                            Waited::Failed => {
                                p.complete(&s.out.resp, s.out.body_sent());
                                return Sent::Closed;
                            }
                        }
                    }
                }
                SendOutcome::Progress => {} // pool: others are looked for before the next call
                SendOutcome::NotResident(job) => {
                    // Only with the residency test on (it is off here); the read-ahead runs inline.
                    p.count_cold_chunk();
                    s.out.resume(p.run_job_inline(job));
                }
                SendOutcome::Failed(_) => {
                    p.complete(&s.out.resp, s.out.body_sent());
                    return Sent::Closed;
                }
            }
        }
    }

    /// Reads what the client sends next.
    fn read_more(&mut self) -> Wait {
        let phase = if self.state.is_idle() { Phase::Idle } else { Phase::Head };
        if phase != self.phase {
            self.phase = phase;
            self.deadline = phase.deadline(self.pipeline, Instant::now());
        }
        loop {
            if Instant::now() >= self.deadline {
                timed_out(self.pipeline, self.sock, self.phase, &self.state);
                return Wait::Closed;
            }
            let want = self.pipeline.read_hint(&self.state).min(self.buf.len());
            // pool: others wait for a thread: take only what has arrived, never wait for more.
            let step_aside = self.others_wait();
            // Otherwise blocks for a tick at most (mp: the socket does not block).
            let got = amped_sys::transmit::recv(self.sock, &mut self.buf[..want]);
            match got {
                Ok(0) => return Wait::Closed,
                Ok(n) => {
                    self.state.received(&self.buf[..n]);
                    return Wait::More;
                }
                Err(e) if step_aside && e.kind() == ErrorKind::WouldBlock => {
                    return Wait::StepAside;
                }
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock
                        && matches!(self.aside, Aside::Room(_)) =>
                {
                    let Aside::Room(room) = &mut self.aside else { unreachable!() };
                    match room.wait_current(
                        self.sock,
                        self.token,
                        &mut self.watched,
                        Interest::Read,
                        self.deadline,
                    ) {
                        Waited::Ready => {}
                        Waited::Others => return Wait::StepAside,
                        Waited::Tick => {
                            if self.shutdown_ends_wait() {
                                return Wait::Closed;
                            }
                        }
                        Waited::Failed => return Wait::Closed,
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    if self.shutdown_ends_wait() {
                        return Wait::Closed;
                    }
                }
                Err(_) => return Wait::Closed,
            }
        }
    }

    /// `pool`: whether other connections wait for a thread — then the socket is made
    /// non-blocking, so the next read or send takes only what can be done now and this thread
    /// steps aside rather than wait; otherwise it blocks again (a tick at most per call). The
    /// mode changes only when it differs from the socket's (one `ioctl`), so a pool that stays
    /// idle or stays busy pays nothing per call for it. False under `mt` and `mp`.
    fn others_wait(&mut self) -> bool {
        let Aside::WhenOthersWait(waiting) = &self.aside else { return false };
        let wait = waiting();
        if wait != self.nonblocking && self.sock.set_nonblocking(wait).is_ok() {
            self.nonblocking = wait;
        }
        // What the socket does is what counts, should the change have failed.
        self.nonblocking
    }

    /// A tick passed while waiting to read. During shutdown only a request already arriving
    /// is finished.
    fn shutdown_ends_wait(&self) -> bool {
        self.stop.expired() || (self.stop.draining() && !self.state.has_partial_request())
    }
}

/// The header or keep-alive deadline passed: a client in the middle of a request head gets a
/// 408 (as from the event loop's sweep), then the connection closes.
fn timed_out(p: &Pipeline, sock: &TcpStream, phase: Phase, state: &ConnState) {
    p.timed_out();
    if phase == Phase::Head && state.has_partial_request() {
        let mut out = Outgoing::new(p.timeout_response(state.peer, &state.inbuf));
        let read_path = p.send_settings().read_path;
        let opts = SendOptions {
            zero_copy: false,
            residency_test: false,
            read_path,
            yield_each_step: false,
        };
        let _ = out.send(sock, opts, p);
        p.complete(&out.resp, out.body_sent());
    }
}
