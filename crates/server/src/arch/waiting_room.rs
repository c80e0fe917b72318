//! The waiting room of the blocking architectures: connections whose client has sent nothing
//! to read (or takes no more of a response) while other connections are waiting. A worker
//! parks such a connection here ([`Room::park`]) with its protocol state, deadline and any
//! response in flight, and takes the next one instead of blocking on a slow or idle client;
//! the room watches the parked sockets with epoll and hands a connection back when its client
//! has sent more (or can take more).
//!
//! So a slowloris (clients trickling a head byte by byte), a slow reader of a large file or a
//! crowd of idle keep-alive clients costs a parked socket each, not a worker: a worker is
//! taken only while a request can actually be read or answered.
//!
//! One room, two drivers:
//! - `pool` ([`WaitingRoom`]): one thread per server watches the room and puts connections
//!   whose client sent more or can take more back in the workers' queue. A worker parks a
//!   connection only while others wait in that queue; without them it keeps its connection as
//!   before, so the cached path pays a couple of atomic loads per read or send.
//! - `mp` (`super::mp`): each worker process owns a room and waits in it itself, for its
//!   listeners, its parked connections and the connection it is serving at once
//!   ([`Room::wait_current`]); a connection stays registered while its worker serves it, so
//!   stepping aside and back costs no system call beyond the wait.
//!
//! Deadlines still hold while parked: [`Room::sweep`] answers a head that is overdue with 408
//! (as the event loops do), closes idle connections past their keep-alive time and sends past
//! their send timeout, once per housekeeping tick (the event loops' [`Housekeeping`]). At
//! graceful shutdown it sweeps on every turn: it closes idle parked connections at once and
//! lets those with a request under way finish, until the shutdown deadline.

use super::blocking::Session;
use super::lifecycle::{Housekeeping, Stop, TICK};
use crate::pipeline::Pipeline;
use amped_sys::epoll::{Interest, Poller, Waker};
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Tokens at or above this are the driver's own descriptors (a waker, listeners); below it,
/// connections ([`Session::token`]).
pub const FOREIGN: u64 = 1 << 63;

/// Parked connections, watched with epoll.
pub struct Room {
    poller: Poller,
    parked: HashMap<u64, Session>,
    /// `mp`: a connection taken out stays registered (its worker waits for it here too).
    keep_watching: bool,
    /// When [`Room::sweep`] next looks at the deadlines.
    housekeeping: Housekeeping,
}

/// How [`Room::wait_current`] ended.
pub enum Waited {
    /// The connection being served is ready.
    Ready,
    /// Something else is ready first (a parked connection, a listener): step aside.
    Others,
    /// Nothing within a tick (or before the deadline).
    Tick,
    /// The connection could not be watched: close it.
    Failed,
}

impl Room {
    /// An empty room; `keep_watching` when its driver also waits here for the connection it
    /// serves (`mp`).
    pub fn new(keep_watching: bool) -> io::Result<Room> {
        Ok(Room {
            poller: Poller::new(256)?,
            parked: HashMap::new(),
            keep_watching,
            housekeeping: Housekeeping::after(Instant::now()),
        })
    }

    /// Watches one of the driver's own descriptors under `token` (at least [`FOREIGN`]).
    pub fn watch(&self, fd: impl AsFd, token: u64) -> io::Result<()> {
        debug_assert!(token >= FOREIGN);
        self.poller.add(fd, token, Interest::Read)
    }

    /// Watches a listening socket shared with other processes (`EPOLLEXCLUSIVE`: an incoming
    /// connection wakes one waiting process, not all).
    pub fn watch_exclusive(&self, fd: impl AsFd, token: u64) -> io::Result<()> {
        debug_assert!(token >= FOREIGN);
        self.poller.add_exclusive(fd, token)
    }

    /// Stops watching one of the driver's own descriptors.
    pub fn unwatch(&self, fd: impl AsFd) {
        let _ = self.poller.delete(fd);
    }

    /// True when no connection is parked.
    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// Parks `session` until its client sends more or can take more (closed if it cannot be
    /// watched).
    pub fn park(&mut self, mut session: Session, pipeline: &Pipeline) {
        let (token, want) = (session.token(), session.interest());
        let sock: &TcpStream = &session.conn.sock;
        let watching = match session.watched {
            Some(now) if now == want => Ok(()),
            Some(_) => self.poller.modify(sock, token, want),
            None => self.poller.add(sock, token, want),
        };
        if watching.is_err() {
            session.close(pipeline, false);
            return;
        }
        session.watched = Some(want);
        self.parked.insert(token, session);
    }

    /// Waits up to a tick for readiness; the ready tokens (parked connections to [`take`],
    /// the driver's own descriptors).
    ///
    /// [`take`]: Room::take
    pub fn wait(&mut self) -> Vec<u64> {
        match self.poller.wait(Some(TICK)) {
            Ok(events) => events.map(|e| e.token).collect(),
            Err(_) => {
                std::thread::sleep(TICK);
                Vec::new()
            }
        }
    }

    /// Takes the parked connection `token` out of the room (to be served).
    pub fn take(&mut self, token: u64) -> Option<Session> {
        let mut session = self.parked.remove(&token)?;
        if !self.keep_watching {
            let _ = self.poller.delete(&*session.conn.sock);
            session.watched = None;
        }
        Some(session)
    }

    /// `mp`: waits, until `deadline` and for a tick at most, for the connection being served
    /// (`sock`, `token`) to be ready as `want` says, or for anything else in the room.
    pub fn wait_current(
        &mut self,
        sock: &TcpStream,
        token: u64,
        watched: &mut Option<Interest>,
        want: Interest,
        deadline: Instant,
    ) -> Waited {
        if *watched != Some(want) {
            let watching = match watched {
                Some(_) => self.poller.modify(sock, token, want),
                None => self.poller.add(sock, token, want),
            };
            if watching.is_err() {
                return Waited::Failed;
            }
            *watched = Some(want);
        }
        let timeout = deadline.saturating_duration_since(Instant::now()).min(TICK);
        let (mut current, mut others) = (false, false);
        match self.poller.wait(Some(timeout)) {
            Ok(events) => {
                for e in events {
                    if e.token == token {
                        current = true;
                    } else {
                        others = true;
                    }
                }
            }
            Err(_) => std::thread::sleep(timeout),
        }
        match (current, others) {
            (true, _) => Waited::Ready,
            (false, true) => Waited::Others,
            (false, false) => Waited::Tick,
        }
    }

    /// Closes overdue connections (when housekeeping is due, and on every call while shutting
    /// down); at shutdown closes the idle ones, and all of them at its deadline.
    pub fn sweep(&mut self, pipeline: &Pipeline, stop: &Stop) {
        self.sweep_at(Instant::now(), pipeline, stop);
    }

    /// [`Room::sweep`] at `now`.
    fn sweep_at(&mut self, now: Instant, pipeline: &Pipeline, stop: &Stop) {
        let draining = stop.draining();
        let tick_due = self.housekeeping.due(now);
        if tick_due {
            // The page policy's timed yields ride on the same tick (the event loops' do too).
            pipeline.tick(now);
        }
        if !tick_due && !draining {
            return;
        }
        let expired = stop.expired();
        let due: Vec<u64> = self
            .parked
            .iter()
            .filter(|(_, s)| expired || s.deadline() <= now || (draining && !s.is_busy()))
            .map(|(&token, _)| token)
            .collect();
        for token in due {
            if let Some(session) = self.take(token) {
                let overdue = session.deadline() <= now;
                session.close(pipeline, overdue);
            }
        }
    }
}

/// The token of the pool room's waker.
const WAKE: u64 = FOREIGN;

/// `pool`'s driver: where workers park connections, watched by one thread.
pub struct WaitingRoom {
    arrivals: Sender<Session>,
    waker: Arc<Waker>,
}

impl WaitingRoom {
    /// Starts the room's thread; connections whose client sent more (or can take more)
    /// go to `ready`.
    pub fn start(
        pipeline: Arc<Pipeline>,
        stop: Arc<Stop>,
        ready: Sender<Session>,
    ) -> io::Result<(WaitingRoom, JoinHandle<()>)> {
        let (arrivals, incoming) = unbounded();
        let waker = Arc::new(Waker::new()?);
        let thread_waker = waker.clone();
        // The epoll set is made on the room's thread (its event buffer stays there); whether
        // that worked comes back before the pool starts serving.
        let (started_tx, started) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("pool-waiting".into()).spawn(move || {
            let made = Room::new(false).and_then(|room| {
                room.watch(thread_waker.as_fd(), WAKE)?;
                Ok(room)
            });
            let room = match made {
                Ok(room) => {
                    let _ = started_tx.send(Ok(()));
                    room
                }
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            Watch { room, incoming, ready, waker: thread_waker }.run(&pipeline, &stop);
        })?;
        started.recv().map_err(|_| io::Error::other("the pool's waiting room did not start"))??;
        Ok((WaitingRoom { arrivals, waker }, thread))
    }

    /// Parks `session` until its client sends more or can take more (closed if the room has
    /// shut down).
    pub fn park(&self, session: Session) {
        if self.arrivals.send(session).is_ok() {
            self.waker.wake();
        }
    }
}

/// The pool room's thread state.
struct Watch {
    room: Room,
    incoming: Receiver<Session>,
    ready: Sender<Session>,
    waker: Arc<Waker>,
}

impl Watch {
    fn run(&mut self, pipeline: &Pipeline, stop: &Stop) {
        loop {
            for token in self.room.wait() {
                if token == WAKE {
                    self.waker.drain();
                } else if let Some(session) = self.room.take(token) {
                    // Readable, writable, closed or failed: a worker finds out which.
                    let _ = self.ready.send(session);
                }
            }
            while let Ok(session) = self.incoming.try_recv() {
                self.room.park(session, pipeline);
            }
            self.room.sweep(pipeline, stop);
            if stop.draining() && self.room.is_empty() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::blocking::Gate;
    use crate::config::{Args, Config};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// A server whose header timeout is 10 ms, its counters, and a fresh connection to it.
    struct Bench {
        _dir: tempfile::TempDir,
        cfg: Arc<Config>,
        stats: Arc<crate::stats::Stats>,
        pipeline: Arc<Pipeline>,
        gate: Arc<Gate>,
        listener: TcpListener,
        clients: Vec<TcpStream>,
    }

    impl Bench {
        fn new() -> Bench {
            let dir = tempfile::tempdir().unwrap();
            let args = Args {
                root: Some(dir.path().into()),
                header_timeout: Some(0.01),
                ..Args::default()
            };
            let cfg = Arc::new(Config::resolve(args).unwrap());
            let stats = Arc::new(crate::stats::Stats::default());
            let log = crate::access_log::AccessLogger::off();
            let pipeline = Arc::new(Pipeline::new(cfg.clone(), stats.clone(), log));
            let gate = Gate::new(8, pipeline.clone());
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            Bench { _dir: dir, cfg, stats, pipeline, gate, listener, clients: Vec::new() }
        }

        /// A connection that has sent nothing yet (its header timeout runs).
        fn session(&mut self) -> Session {
            self.clients.push(TcpStream::connect(self.listener.local_addr().unwrap()).unwrap());
            let (sock, peer) = self.listener.accept().unwrap();
            Session::new(self.gate.admit(sock, peer), &self.pipeline)
        }

        fn timeouts(&self) -> u64 {
            self.stats.total_named("timeouts")
        }
    }

    #[test]
    fn overdue_connections_are_swept_on_the_housekeeping_tick_and_idle_ones_at_shutdown() {
        let mut b = Bench::new();
        let flag = Arc::new(AtomicBool::new(false));
        let stop = Stop::new(flag.clone(), &b.cfg);
        let mut room = Room::new(false).unwrap();
        let late = b.session();
        let t = Instant::now(); // past its deadline 10 ms from now
        room.housekeeping = Housekeeping::after(t);
        room.park(late, &b.pipeline);
        room.sweep_at(t + TICK / 2, &b.pipeline, &stop);
        assert!(!room.is_empty(), "overdue, but housekeeping is not due yet");
        assert_eq!(b.timeouts(), 0);
        room.sweep_at(t + TICK, &b.pipeline, &stop);
        assert!(room.is_empty(), "swept on the tick");
        assert_eq!(b.timeouts(), 1, "closed as timed out");
        // Shutdown: an idle connection goes on the next turn, tick or not.
        let idle = b.session();
        room.park(idle, &b.pipeline);
        room.sweep_at(t + TICK + Duration::from_millis(1), &b.pipeline, &stop);
        assert!(!room.is_empty(), "no tick, no shutdown: stays");
        flag.store(true, Ordering::Relaxed);
        room.sweep_at(t + TICK + Duration::from_millis(2), &b.pipeline, &stop);
        assert!(room.is_empty(), "closed at shutdown before the next tick");
    }
}
