//! The `amped` binary: parse options, open the listener, serve until SIGTERM/SIGINT/SIGQUIT
//! (SIGHUP reloads, SIGUSR1 re-opens the logs: see `amped::operator`).

use amped::access_log::AccessLogger;
use amped::arch::{self, Server};
use amped::config::{Args, Config};
use amped::errlog;
use amped::operator::{self, OperatorSignals, Reloader};
use amped::sd_notify;
use amped::stats::Stats;
use amped::stats_listener;
use amped::tls::TlsContext;
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    // First of all: from here on no signal can kill the server while it starts.
    let signals = match OperatorSignals::install() {
        Ok(s) => s,
        Err(e) => return fail(&format!("cannot install signal handlers: {e}")),
    };
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => return fail(&first_line(&e.to_string())),
    };
    let fd_limit = amped_sys::limits::raise_nofile_limit().unwrap_or(1024);
    // Big generated pages (listings) go back to the kernel when freed (crates/sys/src/memory.rs).
    amped_sys::memory::map_large_blocks(1 << 20);
    let cfg = match Config::load(args.clone()) {
        Ok(mut c) => {
            c.fit_descriptors(fd_limit);
            c
        }
        Err(e) => return fail(&e.to_string()),
    };
    if let Err(e) = errlog::start(&cfg.error_log, cfg.log_level) {
        return fail(&e.to_string());
    }
    let result = run(args, cfg, signals, fd_limit);
    errlog::finish();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn run(args: Args, cfg: Config, signals: OperatorSignals, fd_limit: u64) -> std::io::Result<()> {
    arch::preflight(&cfg)?;
    let tls = match &cfg.tls {
        Some(files) => Some(Arc::new(TlsContext::load(files).map_err(std::io::Error::other)?)),
        None => None,
    };
    let listeners = arch::open_listeners(&cfg)?;
    let (stats, stats_fd) = Stats::for_server(&cfg)?;
    let stats_listener = match cfg.stats_listen {
        Some(addr) if !cfg.is_mp_worker() => Some(stats_listener::bind(addr)?),
        _ => None,
    };
    let (log, log_thread) = AccessLogger::start(&cfg.access_log, cfg.access_log_format)?;
    if let Some(d) = &cfg.debox {
        amped::debox::start(d.stall);
    }
    if cfg.metrics_path.is_some() {
        amped::metrics::start();
    }
    let _slow_log_thread = match &cfg.slow_log {
        Some(s) => {
            let (log, thread) = amped::timeline::slowlog::SlowLog::open(&s.path)?;
            amped::timeline::start(s.threshold, s.sample, log);
            Some(thread)
        }
        None => None,
    };
    // Bound and logs opened: now stop being root (nothing after this needs it).
    arch::privileges::give_up(&cfg)?;
    let worker = cfg.is_mp_worker();
    let names = listeners.names.join(" ");
    if !worker {
        // (An mp worker, re-executed by its parent, stays quiet: the parent has announced.)
        let mut out = std::io::stdout().lock();
        writeln!(out, "amped listening on {names}")?;
        writeln!(out, "amped: serving {} with arch {}", cfg.root.display(), cfg.arch.name())?;
        if let Some(l) = &stats_listener {
            writeln!(out, "amped: stats on http://{}/", l.local_addr()?)?;
        }
        out.flush()?;
        announce(&cfg, &names);
    }
    let debox_out = cfg.debox.as_ref().and_then(|d| d.out.clone());
    let unix_paths = listeners.unix_paths.clone();
    let shutdown = signals.shutdown.clone();
    let counts = signals.counts.clone();
    let reloader = Reloader::new(args, cfg.clone(), log.clone(), fd_limit).with_tls(tls.clone());
    let signal_thread = signals.spawn(reloader)?;
    let server = Server {
        cfg: Arc::new(cfg),
        stats: Arc::new(stats),
        stats_fd,
        log,
        shutdown,
        signals: counts,
        tls,
    };
    let stats_thread = match stats_listener {
        Some(l) => Some(stats_listener::spawn(l, server.stats.clone(), server.shutdown.clone())?),
        None => None,
    };
    if !worker {
        sd_notify::ready();
    }
    let result = arch::serve(&server, listeners);
    let level = if worker { errlog::Level::Debug } else { errlog::Level::Notice };
    operator::announce_shutdown(level, "serving ended");
    if let Some(t) = stats_thread {
        server.shutdown.store(true, std::sync::atomic::Ordering::Relaxed); // (if serve failed)
        let _ = t.join();
    }
    signal_thread.stop();
    for path in unix_paths {
        let _ = std::fs::remove_file(path);
    }
    let debox_written = match debox_out {
        Some(path) => amped::debox::report::write_at_exit(&path, worker),
        None => Ok(()),
    };
    drop(server); // the last log handle: the writer thread flushes and ends
    if let Some(t) = log_thread {
        let _ = t.join();
    }
    if !worker {
        errlog::notice!("stopped");
    }
    result.and(debox_written)
}

/// The start-up summary in the error log, and a warning if the root cannot be read.
fn announce(cfg: &Config, urls: &str) {
    errlog::notice!(
        "amped {} (pid {}) serving {} on {urls} with arch {}; access log {:?}, error log level {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        cfg.root.display(),
        cfg.arch.name(),
        cfg.access_log,
        cfg.log_level.name()
    );
    if let Err(e) = std::fs::read_dir(&cfg.root) {
        errlog::warn!(
            "root {} is not readable by uid {}: {}; requests will be answered 403 or 404",
            cfg.root.display(),
            amped_sys::process::current_uid(),
            errlog::reason(&e)
        );
    }
}

fn first_line(msg: &str) -> String {
    msg.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string()
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("amped: {msg}");
    ExitCode::from(2)
}
