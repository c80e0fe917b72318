//! The concurrency architectures. Each file drives the shared [`crate::pipeline::Pipeline`]
//! and nothing else: `sped`, `amped` and `staged` share [`event_loop`] and differ only in who
//! runs jobs.
//! This module opens the listening sockets and starts the chosen architecture (and its
//! instances).

pub mod amped;
pub mod blocking;
pub mod coalesce;
pub mod conn_table;
pub mod disk_charge;
pub mod disk_concurrency;
pub mod disk_pace;
pub mod event_loop;
pub mod job_results;
pub mod lifecycle;
pub mod metadata_lane;
pub mod mp;
pub mod mt;
pub mod pool;
pub mod privileges;
pub mod read_lane;
pub mod slow_gate;
pub mod sped;
pub mod staged;
pub mod transfer_leases;
pub mod turn_queues;
pub mod uring;
pub mod waiting_room;

use crate::access_log::AccessLogger;
use crate::client_limits::ClientLimits;
use crate::config::{Arch, Config, ListenAddr};
use crate::operator::SignalCounts;
use crate::pipeline::Pipeline;
use crate::stats::Stats;
use crate::tls::TlsContext;
use amped_sys::listen::{ListenOptions, bind};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Everything an architecture needs to serve.
pub struct Server {
    /// Resolved configuration.
    pub cfg: Arc<Config>,
    /// Shared counters.
    pub stats: Arc<Stats>,
    /// Under `mp`, in the parent: the shared counters' memory file, for the workers.
    pub stats_fd: Option<std::os::fd::OwnedFd>,
    /// Access log handle.
    pub log: AccessLogger,
    /// Set by SIGTERM/SIGINT/SIGQUIT.
    pub shutdown: Arc<AtomicBool>,
    /// Reloads and log re-opens done so far (the `mp` parent forwards them to its workers).
    pub signals: Arc<SignalCounts>,
    /// The HTTPS context of the `--listen` addresses (`--tls-cert`), if on.
    pub tls: Option<Arc<TlsContext>>,
}

impl Server {
    /// A fresh pipeline (own caches) over the shared counters, log and per-client limits.
    pub fn pipeline(&self, limits: &Option<Arc<ClientLimits>>) -> Arc<Pipeline> {
        let (cfg, stats, log) = (self.cfg.clone(), self.stats.clone(), self.log.clone());
        Arc::new(Pipeline::sharing(cfg, stats, log, limits.clone()))
    }

    /// The pipeline of a `--redirect-http` listener: every request is answered with a 301 to
    /// https on `https_port`.
    fn redirect_pipeline(
        &self,
        limits: &Option<Arc<ClientLimits>>,
        https_port: u16,
    ) -> Arc<Pipeline> {
        let (cfg, stats, log) = (self.cfg.clone(), self.stats.clone(), self.log.clone());
        let p = Pipeline::sharing(cfg, stats, log, limits.clone());
        Arc::new(p.redirecting_to_https(https_port))
    }
}

/// The listening sockets of a server and what to call them.
pub struct Listeners {
    /// One socket per serving loop: each address once per instance.
    pub sockets: Vec<TcpListener>,
    /// Each address once, as a user would write it (`http://127.0.0.1:8080/`,
    /// `unix:/run/amped.sock`), with the port the kernel chose for `:0`.
    pub names: Vec<String>,
    /// Unix socket files this server created (removed at exit).
    pub unix_paths: Vec<PathBuf>,
    /// The `--redirect-http` listener, if any (plain HTTP answered with redirects to https).
    pub redirect: Option<TcpListener>,
}

/// Opens the listeners: every `--listen` address (or the sockets systemd passed, when
/// socket-activated), each once per `--instances` (TCP: sharing the port through
/// SO_REUSEPORT; Unix and systemd sockets: the same socket shared). An `mp` worker
/// (`--worker-fd`) adopts the listeners its parent opened instead.
pub fn open_listeners(cfg: &Config) -> io::Result<Listeners> {
    if cfg.is_mp_worker() {
        let sockets = cfg
            .worker_fds
            .iter()
            .map(|&fd| amped_sys::process::inherited_listener(fd))
            .collect::<io::Result<Vec<_>>>()?;
        let names = sockets.iter().map(describe).collect();
        return Ok(Listeners { names, sockets, unix_paths: vec![], redirect: None });
    }
    let n = if cfg.arch.takes_instances() { cfg.instances } else { 1 };
    let nonblocking = cfg.arch.is_event_driven();
    let opts = ListenOptions { reuse_port: n > 1, nonblocking, backlog: 4096 };
    let mut out = Listeners { sockets: vec![], names: vec![], unix_paths: vec![], redirect: None };
    let activated = amped_sys::listen::systemd_listeners()?;
    if !activated.is_empty() {
        for l in activated {
            l.set_nonblocking(nonblocking)?;
            out.add_shared(l, n)?;
        }
        return Ok(out);
    }
    for addr in &cfg.listen {
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
        match addr {
            ListenAddr::Tcp(a) => {
                let first = bind(*a, opts).map_err(named)?;
                let bound: SocketAddr = first.local_addr()?;
                out.names.push(describe(&first));
                out.sockets.push(first);
                for _ in 1..n {
                    out.sockets.push(bind(bound, opts).map_err(named)?);
                }
            }
            ListenAddr::Unix(path) => {
                let l = amped_sys::listen::bind_unix(path, opts).map_err(named)?;
                out.unix_paths.push(path.clone());
                out.add_shared(l, n)?;
            }
        }
    }
    if cfg.tls.is_some() {
        for name in &mut out.names {
            *name = match name.strip_prefix("http://") {
                Some(rest) => format!("https://{rest}"),
                None => format!("{name} (TLS)"),
            };
        }
    }
    if let Some(addr) = cfg.redirect_http {
        let named = |e: io::Error| {
            io::Error::new(e.kind(), format!("cannot listen on {addr} (--redirect-http): {e}"))
        };
        let l = bind(addr, ListenOptions { reuse_port: false, ..opts }).map_err(named)?;
        out.names.push(format!("{} (redirect to https)", describe(&l)));
        out.redirect = Some(l);
    }
    Ok(out)
}

impl Listeners {
    /// Adds `l`, shared by `n` loops.
    fn add_shared(&mut self, l: TcpListener, n: usize) -> io::Result<()> {
        self.names.push(describe(&l));
        for _ in 1..n {
            self.sockets.push(l.try_clone()?);
        }
        self.sockets.push(l);
        Ok(())
    }
}

/// A listener's address as a user would write it.
fn describe(l: &TcpListener) -> String {
    match socket2::SockRef::from(l).local_addr() {
        Ok(a) => match (a.as_socket(), a.as_pathname()) {
            (Some(ip), _) => ListenAddr::Tcp(ip).to_string(),
            (None, Some(path)) => ListenAddr::Unix(path.to_path_buf()).to_string(),
            (None, None) => "unix:(unnamed)".into(),
        },
        Err(e) => format!("(unknown address: {e})"),
    }
}

/// Checks, before the server announces itself, that the architecture can run here.
pub fn preflight(cfg: &Config) -> io::Result<()> {
    match cfg.arch {
        Arch::Uring => uring::check_available(),
        _ => Ok(()),
    }
}

/// Serves `listeners` with the configured architecture until shutdown completes: the
/// `--listen` sockets (over TLS when it is on), then the `--redirect-http` one.
pub fn serve(server: &Server, listeners: Listeners) -> io::Result<()> {
    let arch = server.cfg.arch;
    let limits = ClientLimits::from_config(&server.cfg, &server.stats);
    let https_port = listeners.sockets.iter().find_map(|l| l.local_addr().ok()).map(|a| a.port());
    let run_one = |listener: TcpListener, redirect: bool| -> io::Result<()> {
        let (pipeline, tls) = if redirect {
            // (HTTPS on Unix sockets only: redirect to the default port.)
            (server.redirect_pipeline(&limits, https_port.unwrap_or(443)), None)
        } else {
            (server.pipeline(&limits), server.tls.clone())
        };
        match arch {
            Arch::Sped => {
                let runner = sped::InlineRunner::new(pipeline.clone());
                event_loop::serve(runner, pipeline, listener, tls, &server.shutdown)
            }
            Arch::Amped => {
                let runner = amped::HelperPool::start(pipeline.clone())?;
                event_loop::serve(runner, pipeline, listener, tls, &server.shutdown)
            }
            Arch::Mt => mt::run(pipeline, listener, &server.shutdown),
            Arch::Pool => pool::run(pipeline, listener, &server.shutdown),
            Arch::Mp => mp::run(pipeline, vec![listener], server),
            Arch::Uring => uring::run(pipeline, listener, tls, &server.shutdown),
            Arch::Staged => {
                let runner = staged::Stages::start(pipeline.clone())?;
                event_loop::serve(runner, pipeline, listener, tls, &server.shutdown)
            }
        }
    };
    if arch == Arch::Mp {
        // One set of worker processes, each serving every listener (no TLS: no redirect).
        return mp::run(server.pipeline(&limits), listeners.sockets, server);
    }
    let sockets = listeners.sockets.into_iter().map(|l| (l, false));
    std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .chain(listeners.redirect.map(|l| (l, true)))
            .enumerate()
            .map(|(i, (l, redirect))| {
                // Event loops are pinned here; pool and mp pin their own workers.
                let pin = server.cfg.pin && arch.is_event_driven();
                s.spawn(move || {
                    if pin {
                        let _ = amped_sys::limits::pin_current_thread(
                            amped_sys::limits::nth_allowed_cpu(i),
                        );
                    }
                    run_one(l, redirect)
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
