//! The concurrency architectures. Each file drives the shared [`crate::pipeline::Pipeline`]
//! and nothing else: `sped`, `amped` and `staged` share [`event_loop`] and differ only in who
//! runs jobs.
//! This module opens the listening sockets and starts the chosen architecture (and its
//! instances).

pub mod amped;
pub mod blocking;
pub mod event_loop;
pub mod lifecycle;
pub mod mp;
pub mod mt;
pub mod pool;
pub mod read_lane;
pub mod sped;
pub mod staged;
pub mod uring;

use crate::access_log::AccessLogger;
use crate::config::{Arch, Config};
use crate::operator::SignalCounts;
use crate::pipeline::Pipeline;
use crate::stats::Stats;
use amped_sys::listen::{ListenOptions, bind};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Everything an architecture needs to serve.
pub struct Server {
    /// Resolved configuration.
    pub cfg: Arc<Config>,
    /// Shared counters.
    pub stats: Arc<Stats>,
    /// Access log handle.
    pub log: AccessLogger,
    /// Set by SIGTERM/SIGINT/SIGQUIT.
    pub shutdown: Arc<AtomicBool>,
    /// Reloads and log re-opens done so far (the `mp` parent forwards them to its workers).
    pub signals: Arc<SignalCounts>,
}

impl Server {
    /// A fresh pipeline (own caches) over the shared counters and log.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        Arc::new(Pipeline::new(self.cfg.clone(), self.stats.clone(), self.log.clone()))
    }
}

/// Opens the listener(s): one, or `instances` sharing the port through SO_REUSEPORT.
/// An `mp` worker (`--worker-fd`) adopts the listener its parent opened instead.
pub fn open_listeners(cfg: &Config) -> io::Result<Vec<TcpListener>> {
    if let Some(fd) = cfg.worker_fd {
        return Ok(vec![amped_sys::process::inherited_listener(fd)?]);
    }
    let n = if cfg.arch.takes_instances() { cfg.instances } else { 1 };
    let opts =
        ListenOptions { reuse_port: n > 1, nonblocking: cfg.arch.is_event_driven(), backlog: 4096 };
    let first = bind(cfg.listen, opts)?;
    let addr: SocketAddr = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..n {
        all.push(bind(addr, opts)?);
    }
    Ok(all)
}

/// Checks, before the server announces itself, that the architecture can run here.
pub fn preflight(cfg: &Config) -> io::Result<()> {
    match cfg.arch {
        Arch::Uring => uring::check_available(),
        _ => Ok(()),
    }
}

/// Serves on `listeners` with the configured architecture until shutdown completes.
pub fn serve(server: &Server, listeners: Vec<TcpListener>) -> io::Result<()> {
    let arch = server.cfg.arch;
    let run_one = |listener: TcpListener| -> io::Result<()> {
        let pipeline = server.pipeline();
        match arch {
            Arch::Sped => sped::run(pipeline, listener, &server.shutdown),
            Arch::Amped => amped::run(pipeline, listener, &server.shutdown),
            Arch::Mt => mt::run(pipeline, listener, &server.shutdown),
            Arch::Pool => pool::run(pipeline, listener, &server.shutdown),
            Arch::Mp => mp::run(pipeline, listener, &server.shutdown, &server.signals),
            Arch::Uring => uring::run(pipeline, listener, &server.shutdown),
            Arch::Staged => staged::run(pipeline, listener, &server.shutdown),
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                // Event loops are pinned here; pool and mp pin their own workers.
                let pin = server.cfg.pin && arch.is_event_driven();
                s.spawn(move || {
                    if pin {
                        let _ = amped_sys::limits::pin_current_thread(
                            amped_sys::limits::nth_allowed_cpu(i),
                        );
                    }
                    run_one(l)
                })
            })
            .collect();
        let mut result = Ok(());
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("an event loop panicked")),
            }
        }
        result
    })
}
