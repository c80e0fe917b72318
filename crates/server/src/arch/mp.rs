//! MP, worker processes (Flash-MP, §3.1 of the paper; Apache's prefork): `--processes N`
//! workers share the listening socket and each serves one connection at a time, from accept
//! to close, on a blocking socket ([`super::blocking`]), running disk jobs inline.
//!
//! The parent binds the listeners, then starts each worker by re-executing its own binary with
//! the same arguments plus the hidden `--worker-fd FD[,FD…]`, the listeners' descriptors,
//! which the worker inherits (see `amped_sys::process`). Workers take `accept` in turn (the
//! kernel wakes one blocked acceptor per connection). With several `--listen` addresses every
//! worker serves all of them: it waits for the first listener with a connection waiting
//! (epoll, `EPOLLEXCLUSIVE`, so a connection wakes one waiting worker rather than all) and
//! accepts there without blocking; a worker that loses the race finds nothing and waits again. Each worker builds its **own** pipeline, so its own
//! caches — the replicated caches that cost Flash-MP its memory footprint. The counters,
//! though, are the server's: the parent creates them in shared memory and passes that to
//! every worker (`--stats-fd`, `--worker-index`), so the stats endpoint sums all workers
//! whichever one answers (see [`crate::stats`]).
//!
//! The parent only supervises: a worker that dies (crash, kill -9, a stray SIGTERM) is
//! replaced at most once a second per slot, with a line on stderr. SIGTERM/SIGINT to the
//! parent stops the shared listener (`shutdown(SHUT_RD)`: new connections are refused at once)
//! and forwards SIGTERM to every worker; each finishes the response in flight and exits; the parent waits for them until the shutdown deadline, kills what is left and exits
//! 0. Workers receive SIGTERM if the parent dies (`PR_SET_PDEATHSIG`). With `--pin`, worker i
//! is pinned to CPU i mod the number of CPUs. Only the parent prints the listening line.

use super::Server;
use super::blocking::{self, Gate, Stop};
use super::lifecycle::TICK;
use crate::config::Config;
use crate::operator::SignalCounts;
use crate::pipeline::Pipeline;
use crate::stats::Stats;
use amped_sys::process::{WorkerSignal, signal_worker, spawn_worker};
use std::ffi::OsString;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
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
        blocking::set_accept_tick(l)?; // the socket is shared: this sets it for every worker
        // Several listeners are polled, then accepted from without blocking (the descriptor's
        // mode is shared too, and every worker uses them the same way).
        l.set_nonblocking(listeners.len() > 1)?;
    }
    if pipeline.cfg.is_mp_worker() {
        serve_worker(&pipeline, &listeners, &server.shutdown)
    } else {
        let stats = Shared {
            fd: server.stats_fd.as_ref().map(|f| f.as_raw_fd()),
            cells: server.stats.shared_cells(),
        };
        Supervisor::start(&pipeline.cfg, listeners, stats)?.run(&server.shutdown, &server.signals)
    }
}

/// The shared counters the workers count in (see [`crate::stats`]).
struct Shared {
    /// The memory file, passed to each worker.
    fd: Option<RawFd>,
    /// The parent's view, to reset a dead worker's gauge.
    cells: Option<&'static [AtomicU64]>,
}

/// One worker: accept, serve that connection to its end, repeat until shutdown.
fn serve_worker(
    pipeline: &Pipeline,
    listeners: &[TcpListener],
    shutdown: &Arc<AtomicBool>,
) -> io::Result<()> {
    let stop = Stop::new(shutdown.clone(), &pipeline.cfg);
    let gate = Gate::new(1, pipeline.stats.clone());
    if let [listener] = listeners {
        while let Some(conn) = blocking::next_connection(listener, &gate, &stop) {
            blocking::serve(pipeline, conn, &stop);
        }
    } else {
        let mut any = blocking::AnyListener::new(listeners)?;
        while let Some(conn) = any.next_connection(&gate, &stop) {
            blocking::serve(pipeline, conn, &stop);
        }
    }
    Ok(())
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
        // workers blocked in `accept` see EINVAL and stop accepting.
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
