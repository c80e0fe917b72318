//! The `amped` binary: parse options, open the listener, serve until SIGTERM/SIGINT.

use amped::access_log::AccessLogger;
use amped::arch::{self, Server};
use amped::config::{Args, Config};
use amped::stats::Stats;
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => return fail(&first_line(&e.to_string())),
    };
    let cfg = match Config::load(args) {
        Ok(mut c) => {
            let fds = amped_sys::limits::raise_nofile_limit().unwrap_or(1024);
            c.fit_descriptors(fds);
            Arc::new(c)
        }
        Err(e) => return fail(&e.to_string()),
    };
    match run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string()),
    }
}

fn run(cfg: Arc<Config>) -> std::io::Result<()> {
    arch::preflight(&cfg)?;
    let listeners = arch::open_listeners(&cfg).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", cfg.listen))
    })?;
    let (log, log_thread) = AccessLogger::start(&cfg.access_log)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, shutdown.clone())?;
    }
    let addr = listeners[0].local_addr()?;
    if cfg.worker_fd.is_none() {
        // (An mp worker, re-executed by its parent, stays quiet: the parent has announced.)
        let mut out = std::io::stdout().lock();
        writeln!(out, "amped listening on http://{addr}/")?;
        writeln!(out, "amped: serving {} with arch {}", cfg.root.display(), cfg.arch.name())?;
        out.flush()?;
    }
    let server = Server { cfg, stats: Arc::new(Stats::default()), log, shutdown };
    let result = arch::serve(&server, listeners);
    drop(server); // the last log handle: the writer thread flushes and ends
    if let Some(t) = log_thread {
        let _ = t.join();
    }
    result
}

fn first_line(msg: &str) -> String {
    msg.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string()
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("amped: {msg}");
    ExitCode::from(2)
}
