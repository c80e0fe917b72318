//! The event loop shared by SPED and AMPED (Flash §3.3–3.4): one thread, non-blocking
//! sockets, level-triggered epoll. It accepts connections, reads request bytes, feeds them to
//! the [`Pipeline`], writes responses straight away and arms `EPOLLOUT` only while bytes
//! remain (Redis' habit: most responses leave without a second wake-up). What it does with a
//! [`Job`](crate::pipeline::Job) — a step that may block on the disk — is the one thing SPED,
//! AMPED and staged do differently, so that is delegated to a [`JobRunner`].
//!
//! Bytes cross the wire through each connection's [`Transport`]: plain TCP, or TLS when the
//! listener serves HTTPS (the loop only asks it to read, lends it to [`Outgoing`] to write,
//! and watches writability while it holds queued bytes). A TLS handshake is read like a
//! request head, under the header timeout.
//!
//! Timeouts: every connection carries one deadline, set on phase changes (header, idle,
//! send) and swept every 250 ms. Accepting pauses while the connection cap is reached or the
//! process is out of descriptors (re-armed after 100 ms), never spinning on a ready listener.

use super::conn_table::ConnTable;
use super::job_results::{JobRunner, ResumesJobs};
use super::lifecycle::{AcceptPause, Lifecycle, Phase, Stop, TICK};
use crate::pipeline::{ConnState, JobDone, Pipeline, Step};
use crate::tls::TlsContext;
use crate::transmit::{Outgoing, SendOptions, SendOutcome};
use crate::transport::Transport;
use amped_sys::epoll::{Interest, Poller, Ready};
use amped_sys::listen::accept_nonblocking;
use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

const LISTENER: u64 = u64::MAX;
const WAKER: u64 = u64::MAX - 1;
const ACCEPT_BATCH: usize = 64;

struct Conn {
    io: Transport,
    state: ConnState,
    out: Option<Outgoing>,
    phase: Phase,
    deadline: Instant,
    /// What epoll watches; `None` until first registered (a connection whose request is
    /// already there when it is accepted may be answered and closed without epoll at all).
    interest: Option<Interest>,
}

/// Serves `listener` (over TLS with `tls`) with one event loop whose jobs `runner` runs,
/// until shutdown: SPED (jobs inline), AMPED (helper lanes) and staged (job stages) are this
/// loop with their runner.
pub fn serve<R: JobRunner>(
    runner: R,
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    tls: Option<Arc<TlsContext>>,
    shutdown: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    EventLoop::new(pipeline, runner, listener)?.speaking(tls).run(shutdown)
}

/// One event loop serving one listener.
pub struct EventLoop<R: JobRunner> {
    pipeline: Arc<Pipeline>,
    runner: R,
    poller: Poller,
    listener: Option<TcpListener>,
    conns: ConnTable<Conn>,
    accept: AcceptPause,
    listening: bool,
    draining: bool,
    opts: SendOptions,
    /// The listener serves HTTPS with this context.
    tls: Option<Arc<TlsContext>>,
    scratch: Vec<u8>,
    done: Vec<(u64, JobDone)>,
}

impl<R: JobRunner> EventLoop<R> {
    /// Sets up the loop on a non-blocking `listener`.
    /// The calling thread becomes the loop (and is profiled as one).
    pub fn new(pipeline: Arc<Pipeline>, runner: R, listener: TcpListener) -> std::io::Result<Self> {
        crate::debox::set_role(crate::debox::Role::Loop);
        listener.set_nonblocking(true)?;
        let poller = Poller::new(1024)?;
        poller.add(&listener, LISTENER, Interest::Read)?;
        if let Some(w) = runner.waker() {
            poller.add(w, WAKER, Interest::Read)?;
        }
        let opt = pipeline.send_settings();
        let opts = SendOptions {
            zero_copy: opt.zero_copy,
            residency_test: opt.residency_test,
            read_path: opt.read_path,
            yield_each_step: false,
        };
        Ok(EventLoop {
            pipeline,
            runner,
            poller,
            listener: Some(listener),
            conns: ConnTable::with_capacity(1024),
            accept: AcceptPause::default(),
            listening: true,
            draining: false,
            opts,
            tls: None,
            scratch: vec![0u8; 16 << 10],
            done: Vec::new(),
        })
    }

    /// Serves HTTPS with `tls` (plain HTTP with `None`).
    pub fn speaking(mut self, tls: Option<Arc<TlsContext>>) -> Self {
        self.tls = tls;
        self
    }

    /// Runs until `shutdown` is set and the connections in flight have finished (or the
    /// shutdown deadline passed).
    pub fn run(mut self, shutdown: &Arc<AtomicBool>) -> std::io::Result<()> {
        let mut ready: Vec<Ready> = Vec::with_capacity(1024);
        let mut life = Lifecycle::new(Stop::new(shutdown.clone(), self.pipeline.config()));
        loop {
            if life.shutdown_begins() {
                self.begin_drain();
            }
            if life.should_stop(self.conns.is_empty()) {
                return Ok(());
            }
            ready.clear();
            ready.extend(self.poller.wait(Some(TICK))?);
            for ev in &ready {
                match ev.token {
                    LISTENER => self.accept_batch(),
                    WAKER => self.finish_jobs(),
                    token => self.on_ready(token, ev),
                }
            }
            let now = Instant::now();
            if life.sweep_due(now) {
                self.finish_jobs(); // (a missed wake-up costs a tick at most)
                self.sweep(now);
                self.pipeline.tick(now);
            }
            self.maybe_resume_accepting(now);
        }
    }

    fn accept_batch(&mut self) {
        let now = Instant::now();
        for _ in 0..ACCEPT_BATCH {
            if !self.accept.may_accept(self.conns.len(), now, &self.pipeline) {
                return self.stop_listening();
            }
            let Some(listener) = &self.listener else { return };
            match accept_nonblocking(listener) {
                Ok((sock, peer)) => self.register(sock, peer),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors: pause. ECONNABORTED and friends: the client gave up;
                    // keep going next time.
                    if self.accept.accept_failed(&e, &self.pipeline) {
                        self.stop_listening();
                    }
                    return;
                }
            }
        }
    }

    /// Takes a new connection and serves it at once: on loopback and busy links the request
    /// has usually arrived with the handshake, so it is read without waiting for epoll.
    fn register(&mut self, sock: TcpStream, peer: std::net::SocketAddr) {
        let Ok(io) = Transport::accept(sock, self.tls.as_deref()) else { return };
        let deadline = Phase::Head.deadline(&self.pipeline, Instant::now());
        let key = self.conns.insert(Conn {
            io,
            state: ConnState::new(peer),
            out: None,
            phase: Phase::Head,
            deadline,
            interest: None,
        });
        self.pipeline.accepted();
        self.drive(key, None);
    }

    /// Stops watching the listener while accepting is paused.
    fn stop_listening(&mut self) {
        if self.listening {
            if let Some(l) = &self.listener {
                let _ = self.poller.delete(l);
            }
            self.listening = false;
        }
    }

    fn maybe_resume_accepting(&mut self, now: Instant) {
        if self.listening || self.draining {
            return;
        }
        if !self.accept.may_accept(self.conns.len(), now, &self.pipeline) {
            return;
        }
        if let Some(l) = &self.listener
            && self.poller.add(l, LISTENER, Interest::Read).is_ok()
        {
            self.listening = true;
        }
    }

    fn on_ready(&mut self, token: u64, ev: &Ready) {
        let Some(key) = self.conns.live_key(token) else { return };
        if ev.hangup && !ev.readable && !ev.writable {
            self.close(key);
            return;
        }
        self.drive(key, None);
    }

    /// Advances one connection as far as it can go without blocking. `resumed` carries the
    /// result of the job the connection was parked on.
    fn drive(&mut self, key: usize, mut resumed: Option<JobDone>) {
        let pipeline = self.pipeline.clone();
        loop {
            let token = self.conns.token(key);
            // 1. A response in flight goes first.
            if self.conns[key].out.is_some() {
                if let Some(done) = resumed.take() {
                    // The cold chunk's job ran: send from its pipe, or the warmed pages.
                    self.conns[key].out.as_mut().unwrap().resume(done);
                }
                let conn = &mut self.conns[key];
                let out = conn.out.as_mut().unwrap();
                let opts = conn.io.send_options(self.opts);
                match out.send_on(conn.io.wire(), opts, &pipeline) {
                    SendOutcome::Done => {
                        let out = conn.out.take().unwrap();
                        pipeline.complete(&out.resp, out.body_sent());
                        if out.resp.close {
                            return self.close(key);
                        }
                        conn.phase = Phase::Served;
                        if conn.state.inbuf.is_empty() && !conn.io.holds_input() {
                            // The client is only now receiving this response, so its next
                            // request cannot be here yet: wait for epoll instead of a read that
                            // would fail (one syscall less per keep-alive request). (Unless
                            // TLS decrypted more than the last read took: no event would
                            // announce those bytes.)
                            let phase =
                                if conn.state.is_idle() { Phase::Idle } else { Phase::Head };
                            return self.wait_for(key, Interest::Read, phase);
                        }
                        continue;
                    }
                    SendOutcome::WouldBlock => {
                        return self.wait_for(key, Interest::Write, Phase::Send);
                    }
                    SendOutcome::Progress => continue, // not asked for here
                    SendOutcome::NotResident(job) => {
                        pipeline.count_cold_chunk();
                        match self.runner.submit(token, job) {
                            Some(done) => {
                                self.conns[key].out.as_mut().unwrap().resume(done);
                                continue;
                            }
                            None => return self.wait_for(key, Interest::None, Phase::Parked),
                        }
                    }
                    SendOutcome::Failed(_) => {
                        let out = self.conns[key].out.take().unwrap();
                        pipeline.complete(&out.resp, out.body_sent());
                        return self.close(key);
                    }
                }
            }
            // 2. Otherwise ask the pipeline what comes next.
            let conn = &mut self.conns[key];
            let mut step = match resumed.take() {
                Some(done) => pipeline.resume(&mut conn.state, done),
                None => pipeline.next(&mut conn.state, self.draining),
            };
            loop {
                match step {
                    Step::Respond(resp) => {
                        self.conns[key].out = Some(Outgoing::new(resp));
                        break;
                    }
                    Step::Block(job) => match self.runner.submit(token, job) {
                        Some(done) => step = pipeline.resume(&mut self.conns[key].state, done),
                        None => return self.wait_for(key, Interest::None, Phase::Parked),
                    },
                    Step::NeedMore => {
                        if !self.read_more(key) {
                            return;
                        }
                        break;
                    }
                    Step::Close => return self.close(key),
                }
            }
        }
    }

    /// Reads what the socket has. True if bytes arrived (drive on); false if the connection
    /// now waits for input or was closed.
    fn read_more(&mut self, key: usize) -> bool {
        let conn = &mut self.conns[key];
        let want = self.pipeline.read_hint(&conn.state).min(self.scratch.len());
        match conn.io.recv(&mut self.scratch[..want]) {
            Ok(0) => {
                self.close(key);
                false
            }
            Ok(n) => {
                conn.state.received(&self.scratch[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                let phase = if conn.state.is_idle() { Phase::Idle } else { Phase::Head };
                self.wait_for(key, Interest::Read, phase);
                false
            }
            Err(_) => {
                self.close(key);
                false
            }
        }
    }

    /// Parks the connection until `interest` fires, entering `phase` (and its deadline).
    fn wait_for(&mut self, key: usize, interest: Interest, phase: Phase) {
        let token = self.conns.token(key);
        let conn = &mut self.conns[key];
        if conn.phase != phase || phase == Phase::Send {
            conn.deadline = phase.deadline(&self.pipeline, Instant::now());
            conn.phase = phase;
        }
        let interest = conn.io.interest(interest);
        if conn.interest != Some(interest) {
            let res = match conn.interest {
                None => self.poller.add(&conn.io, token, interest),
                Some(_) => self.poller.modify(&conn.io, token, interest),
            };
            if res.is_err() {
                return self.close(key);
            }
            conn.interest = Some(interest);
        }
        if self.draining && phase == Phase::Idle {
            self.close(key);
        }
    }

    fn close(&mut self, key: usize) {
        // Closing the socket (its only descriptor) also removes it from epoll.
        if let Some(mut conn) = self.conns.try_remove(key) {
            conn.io.close();
            if let Some(out) = &conn.out {
                // Abandoned mid-response: log what was sent.
                self.pipeline.complete(&out.resp, out.body_sent());
            }
            self.pipeline.closed();
        }
    }

    fn sweep(&mut self, now: Instant) {
        let expired: Vec<usize> =
            self.conns.iter().filter(|(_, c)| c.deadline <= now).map(|(k, _)| k).collect();
        for key in expired {
            let conn = &mut self.conns[key];
            if conn.phase == Phase::Head && conn.state.has_partial_request() && conn.out.is_none() {
                let resp = self.pipeline.timeout_response(conn.state.peer, &conn.state.inbuf);
                let mut out = Outgoing::new(resp);
                let opts = conn.io.send_options(self.opts);
                let _ = out.send_on(conn.io.wire(), opts, &self.pipeline);
                self.pipeline.complete(&out.resp, out.body_sent());
                self.pipeline.timed_out();
            } else if conn.phase == Phase::Send {
                self.pipeline.send_timed_out(conn.state.peer);
            } else {
                self.pipeline.timed_out();
            }
            self.close(key);
        }
    }

    /// Graceful shutdown begins: stop accepting (the port is closed, new connections are
    /// refused), close idle connections, let the others finish their responses.
    fn begin_drain(&mut self) {
        self.draining = true;
        if let Some(l) = self.listener.take() {
            let _ = self.poller.delete(&l);
        }
        self.listening = false;
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.out.is_none() && c.phase != Phase::Parked && !c.state.has_partial_request()
            })
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            self.close(key);
        }
    }
}

impl<R: JobRunner> ResumesJobs for EventLoop<R> {
    type Runner = R;

    fn runner_and_results(&mut self) -> (&mut R, &mut Vec<(u64, JobDone)>) {
        (&mut self.runner, &mut self.done)
    }

    fn live_key(&self, token: u64) -> Option<usize> {
        self.conns.live_key(token)
    }

    fn resume_parked(&mut self, key: usize, done: JobDone) {
        self.drive(key, Some(done));
    }
}
