//! MP, worker processes (Flash-MP, §3.1 of the paper; Apache's prefork): `--processes N`
//! workers share the listening socket; each serves one connection at a time with the blocking
//! driver ([`super::blocking`]), running disk jobs inline, and keeps its own caches.
//!
//! **Slow clients do not hold a worker.** A worker waits — for a client's next bytes or for
//! room in a full socket buffer — in its own [`Room`] (an epoll set holding its listeners,
//! the connections it has parked and the one it serves; sockets non-blocking). While the
//! connection it serves is ready it stays with it; when something else is ready first it
//! parks that connection (state, deadline, any response in flight) and serves the ready one.
//! So slowloris heads, idle keep-alive clients and slow readers cost a parked socket each.
//! A worker holds at most [`MAX_CONNECTIONS_PER_WORKER`] connections (or its share of
//! `--max-connections`); past that it stops watching the listeners. No event loop is shared
//! between processes: a parked connection is served by the worker that accepted it.
//!
//! The parent binds the listeners, then starts each worker by re-executing its own binary with
//! the same arguments plus the hidden `--worker-fd FD[,FD…]`, the listeners' descriptors,
//! which the worker inherits (see `amped_sys::process`). Every worker watches every listener
//! (`EPOLLEXCLUSIVE`, so a connection wakes one waiting worker rather than all) and accepts
//! without blocking; a worker that loses the race finds nothing and waits again. Each worker
//! builds its **own** pipeline, so its own
//! caches — the replicated caches that cost Flash-MP its memory footprint. The counters,
//! though, are the server's: the parent creates them in shared memory and passes that to
//! every worker (`--stats-fd`, `--worker-index`), so the stats endpoint sums all workers
//! whichever one answers (see [`crate::stats`]). The per-client limits live in the same
//! memory, after the counters, so `--max-connections-per-ip` and `--rate-limit-per-ip` hold
//! for the server, not per worker (see [`crate::client_limits`]).
//!
//! The parent only supervises: a worker that dies (crash, kill -9, a stray SIGTERM) is
//! replaced at most once a second per slot, with a line on stderr. SIGTERM/SIGINT to the
//! parent stops the shared listener (`shutdown(SHUT_RD)`: new connections are refused at once)
//! and forwards SIGTERM to every worker; each stops watching the listeners, closes its idle
//! connections, finishes the requests under way (parked ones included) and exits; the parent
//! waits for them until the shutdown deadline, kills what is left and exits 0. Workers
//! receive SIGTERM if the parent dies (`PR_SET_PDEATHSIG`). With `--pin`, worker i is pinned
//! to CPU i mod the number of CPUs. Only the parent prints the listening line.

use super::Server;
use super::blocking::{self, Aside, Gate, Session};
use super::lifecycle::{ACCEPT_BACKOFF, Stop, TICK, out_of_descriptors};
use super::waiting_room::{FOREIGN, Room};
use crate::client_limits::Shared as ClientShared;
use crate::config::Config;
use crate::operator::SignalCounts;
use crate::pipeline::Pipeline;
use crate::stats::Stats;
use amped_sys::listen::accept_nonblocking;
use amped_sys::process::{WorkerSignal, signal_worker, spawn_worker};
use std::ffi::OsString;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the parent looks for dead workers and for the shutdown signal.
const SUPERVISE_TICK: Duration = Duration::from_millis(100);
/// Shortest time between two starts of the same worker slot (no fork storm if workers crash
/// at start-up).
const RESPAWN_INTERVAL: Duration = Duration::from_secs(1);

/// Runs the `mp` architecture on `listeners`: the supervising parent, or (with
/// `--worker-fd`) one worker.
pub fn run(
    pipeline: Arc<Pipeline>,
    listeners: Vec<TcpListener>,
    server: &Server,
) -> io::Result<()> {
    for l in &listeners {
        // Workers wait for the listeners in epoll, then accept without blocking (the mode is
        // the shared socket's: every worker uses it the same way).
        l.set_nonblocking(true)?;
    }
    if pipeline.config().is_mp_worker() {
        serve_worker(&pipeline, &listeners, &server.shutdown)
    } else {
        let stats = Shared {
            fd: server.stats_fd.as_ref().map(|f| f.as_raw_fd()),
            cells: server.stats.shared_cells(),
            limits: server.stats.limit_words(),
        };
        Supervisor::start(pipeline.config(), listeners, stats)?
            .run(&server.shutdown, &server.signals)
    }
}

/// The shared counters the workers count in (see [`crate::stats`]).
struct Shared {
    /// The memory file, passed to each worker.
    fd: Option<RawFd>,
    /// The parent's view, to reset a dead worker's gauge.
    cells: Option<&'static [AtomicU64]>,
    /// The per-client limits' words, to free a dead worker's connection cells.
    limits: Option<&'static [AtomicU64]>,
}

/// The most connections one worker holds at once (its share of `--max-connections` if less);
/// past it the worker stops accepting and newcomers wait in the kernel's backlog.
pub const MAX_CONNECTIONS_PER_WORKER: usize = 256;

/// One worker: serve the connection that is ready — a parked one whose client sent more or
/// can take more, or a new one from a listener — until it would wait while another is ready;
/// repeat until shutdown.
fn serve_worker(
    pipeline: &Arc<Pipeline>,
    listeners: &[TcpListener],
    shutdown: &Arc<AtomicBool>,
) -> io::Result<()> {
    let cfg = pipeline.config();
    let stop = Stop::new(shutdown.clone(), cfg);
    let share = cfg.max_connections.div_ceil(cfg.processes);
    let gate = Gate::new(share.clamp(1, MAX_CONNECTIONS_PER_WORKER), pipeline.clone());
    let mut room = Room::new(true)?;
    let mut doors = Doors { listeners, watched: false, shut: vec![false; listeners.len()] };
    loop {
        let open = !stop.draining() && !gate.is_full();
        if doors.set_watched(&room, open)? && !open && !stop.draining() {
            pipeline.accept_paused(); // at the connection cap
        }
        if stop.draining() && room.is_empty() {
            return Ok(());
        }
        for token in room.wait() {
            let session = match doors.index(token) {
                Some(i) if open && !gate.is_full() => match doors.accept(i, &room, &stop, pipeline)
                {
                    Some((sock, peer)) => Session::new(gate.admit(sock, peer), pipeline),
                    None => continue,
                },
                Some(_) => continue,
                None => match room.take(token) {
                    Some(session) => session,
                    None => continue,
                },
            };
            // A bug hit by one connection must not take the worker's other connections with
            // it; the panic is reported on stderr by the default hook and the connection closed.
            let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
                blocking::serve_session(pipeline, session, &stop, Aside::Room(&mut room))
            }));
            if let Ok(Some(waiting)) = served {
                room.park(waiting, pipeline);
            }
        }
        room.sweep(pipeline, &stop);
    }
}

/// A worker's listeners, watched in its room while it accepts.
struct Doors<'a> {
    listeners: &'a [TcpListener],
    watched: bool,
    /// Listeners shut down by the parent (shutdown): never watched again.
    shut: Vec<bool>,
}

impl Doors<'_> {
    /// Watches the listeners while the worker accepts (`open`), not otherwise: a listener with
    /// connections waiting stays readable, which would wake the worker for nothing. True if
    /// that changed.
    fn set_watched(&mut self, room: &Room, open: bool) -> io::Result<bool> {
        if open == self.watched {
            return Ok(false);
        }
        for (i, l) in self.listeners.iter().enumerate() {
            if self.shut[i] {
                continue;
            }
            if open {
                room.watch_exclusive(l, FOREIGN + 1 + i as u64)?;
            } else {
                room.unwatch(l);
            }
        }
        self.watched = open;
        Ok(true)
    }

    /// The listener a room token names.
    fn index(&self, token: u64) -> Option<usize> {
        let i = token.checked_sub(FOREIGN + 1)? as usize;
        (i < self.listeners.len()).then_some(i)
    }

    /// Accepts a connection from listener `i` without blocking, if one is waiting (another
    /// worker may have taken it) and shutdown has not begun.
    fn accept(
        &mut self,
        i: usize,
        room: &Room,
        stop: &Stop,
        p: &Pipeline,
    ) -> Option<(TcpStream, SocketAddr)> {
        match accept_nonblocking(&self.listeners[i]) {
            Ok(conn) if !stop.draining() => Some(conn),
            Ok(_) => None, // closed unanswered: shutdown began
            Err(e) if out_of_descriptors(&e, p) => {
                std::thread::sleep(ACCEPT_BACKOFF);
                None
            }
            // EINVAL: shut down by the parent at shutdown: nothing more comes.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                self.shut[i] = true;
                room.unwatch(&self.listeners[i]); // it stays readable
                None
            }
            Err(_) => None, // WouldBlock (another worker took it), ECONNABORTED …
        }
    }
}

/// Sends `sig` to every worker if `count` moved past `seen` (the parent handled a signal).
fn forward(count: &AtomicU64, seen: &mut u64, slots: &[Slot], sig: WorkerSignal) {
    let now = count.load(Ordering::Relaxed);
    if now != *seen {
        *seen = now;
        for child in slots.iter().filter_map(|s| s.child.as_ref()) {
            let _ = signal_worker(child.id(), sig);
        }
    }
}

/// A worker slot: its process (if running) and when it was last started.
struct Slot {
    child: Option<Child>,
    started: Instant,
}

/// The parent of the workers.
struct Supervisor<'a> {
    cfg: &'a Config,
    /// Our copies of the listeners, for new workers; closed when shutdown begins.
    listeners: Vec<TcpListener>,
    exe: PathBuf,
    args: Vec<OsString>,
    slots: Vec<Slot>,
    stats: Shared,
}

impl<'a> Supervisor<'a> {
    /// Starts `cfg.processes` workers on `listeners`.
    fn start(cfg: &'a Config, listeners: Vec<TcpListener>, stats: Shared) -> io::Result<Self> {
        let exe = std::env::current_exe()?;
        let args = std::env::args_os().skip(1).collect();
        let mut sup = Supervisor {
            cfg,
            listeners,
            exe,
            args,
            slots: Vec::with_capacity(cfg.processes),
            stats,
        };
        for i in 0..cfg.processes {
            match sup.spawn(i) {
                Ok(child) => sup.slots.push(Slot { child: Some(child), started: Instant::now() }),
                Err(e) => {
                    sup.stop_workers(Instant::now());
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot start mp worker {i}: {e}"),
                    ));
                }
            }
        }
        Ok(sup)
    }

    fn spawn(&self, i: usize) -> io::Result<Child> {
        if self.listeners.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "the listeners are closed"));
        }
        let fds: Vec<String> = self.listeners.iter().map(|l| l.as_raw_fd().to_string()).collect();
        let mut cmd = Command::new(&self.exe);
        // The option goes first: ROOT may follow a `--` in the original arguments.
        cmd.arg("--worker-fd").arg(fds.join(","));
        if let Some(fd) = self.stats.fd {
            cmd.arg("--stats-fd").arg(fd.to_string()).arg("--worker-index").arg(i.to_string());
        }
        cmd.args(&self.args).stdin(Stdio::null());
        let cpu = self.cfg.pin.then(|| amped_sys::limits::nth_allowed_cpu(i));
        spawn_worker(cmd, &self.listeners, self.stats.fd, cpu)
    }

    /// Replaces dead workers and forwards reloads and log re-opens to them until `shutdown`
    /// is set, then stops them all.
    fn run(mut self, shutdown: &AtomicBool, signals: &SignalCounts) -> io::Result<()> {
        let mut reloads = signals.reloads.load(Ordering::Relaxed);
        let mut reopens = signals.reopens.load(Ordering::Relaxed);
        while !shutdown.load(Ordering::Relaxed) {
            for i in 0..self.slots.len() {
                self.check(i, shutdown);
            }
            forward(&signals.reloads, &mut reloads, &self.slots, WorkerSignal::Reload);
            forward(&signals.reopens, &mut reopens, &self.slots, WorkerSignal::ReopenLogs);
            std::thread::sleep(SUPERVISE_TICK);
        }
        let deadline = Instant::now() + self.cfg.shutdown_timeout() + 2 * TICK;
        self.stop_workers(deadline);
        Ok(())
    }

    /// Reaps worker `i` if it died and starts a new one (rate-limited).
    fn check(&mut self, i: usize, shutdown: &AtomicBool) {
        let slot = &mut self.slots[i];
        if let Some(child) = &mut slot.child
            && let Ok(Some(status)) = child.try_wait()
        {
            crate::errlog::error!(
                "mp worker {i} (pid {}) exited unexpectedly ({status}); starting a new one",
                child.id()
            );
            slot.child = None;
            if let Some(cells) = self.stats.cells {
                Stats::reset_open_gauge(cells, i);
            }
            if let Some(words) = self.stats.limits {
                ClientShared::clear_worker(words, self.cfg.max_connections_per_ip, i);
            }
        }
        if slot.child.is_some()
            || slot.started.elapsed() < RESPAWN_INTERVAL
            || shutdown.load(Ordering::Relaxed)
        {
            return;
        }
        let spawned = self.spawn(i);
        let slot = &mut self.slots[i];
        slot.started = Instant::now();
        match spawned {
            Ok(child) => slot.child = Some(child),
            Err(e) => crate::errlog::error!(
                "cannot start mp worker {i}: {e}; retrying in {RESPAWN_INTERVAL:?}"
            ),
        }
    }

    /// Graceful stop: close our copy of the listener, SIGTERM every worker, wait for them
    /// until `deadline`, then SIGKILL the rest.
    fn stop_workers(&mut self, deadline: Instant) {
        // The workers share the listening socket, and one busy with a response keeps its copy
        // open until it exits: closing ours alone would leave the kernel accepting connections
        // nobody will answer. `shutdown(SHUT_RD)` stops the shared socket listening for every
        // process at once (new connections are refused, as under the other architectures);
        // a worker watching it finds it readable, gets EINVAL from `accept` and stops
        // watching it.
        for listener in self.listeners.drain(..) {
            let _ = socket2::SockRef::from(&listener).shutdown(std::net::Shutdown::Read);
        }
        for child in self.slots.iter().filter_map(|s| s.child.as_ref()) {
            let _ = signal_worker(child.id(), WorkerSignal::Terminate);
        }
        for slot in &mut self.slots {
            let Some(child) = &mut slot.child else { continue };
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                crate::errlog::error!(
                    "mp worker (pid {}) still busy at the shutdown deadline; killing it",
                    child.id()
                );
                let _ = child.kill();
                let _ = child.wait();
            }
            slot.child = None;
        }
    }
}
