//! What an operator's signals do, under every architecture:
//!
//! | signal | effect |
//! |---|---|
//! | SIGTERM, SIGINT, SIGQUIT | graceful shutdown (stop accepting, finish responses in flight) |
//! | SIGHUP | re-read `--config` and the TLS certificate, apply what can change live, re-open both logs |
//! | SIGUSR1 | re-open the access and error logs (logrotate) |
//! | SIGUSR2, SIGPIPE, SIGALRM, real-time signals … | ignored (`amped_sys::signals`) |
//!
//! Shutdown only sets a flag the serving loops poll every tick. SIGHUP and SIGUSR1 are
//! handled by a thread of their own ([`OperatorSignals::spawn`]), so no serving thread ever
//! reads a file or waits for one: connections are not touched by a reload. What a reload
//! applies live is listed in [`Reloader::reload`]; every other option keeps its running
//! value and the error log says so, one line per option. The `mp` parent forwards both
//! signals to its workers (it watches [`SignalCounts`]), which reload themselves.

use crate::access_log::AccessLogger;
use crate::config::{AccessLog, Args, Config};
use crate::errlog::{self, Level};
use crate::sd_notify;
use crate::tls::TlsContext;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};
use signal_hook::iterator::{Handle, Signals};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

/// How many reloads and log re-opens have been done (the `mp` parent forwards each).
#[derive(Debug, Default)]
pub struct SignalCounts {
    /// SIGHUPs handled.
    pub reloads: AtomicU64,
    /// SIGUSR1s handled.
    pub reopens: AtomicU64,
}

/// The signal dispositions of a server, installed first thing in `main` so that no signal
/// can kill it during start-up.
pub struct OperatorSignals {
    /// Set by SIGTERM, SIGINT and SIGQUIT.
    pub shutdown: Arc<AtomicBool>,
    /// Counts of the signals handled so far.
    pub counts: Arc<SignalCounts>,
    pending: Signals,
}

/// The running signal thread; [`SignalThread::stop`] ends it.
pub struct SignalThread {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl OperatorSignals {
    /// Ignores the unused fatal signals and catches the others (they queue until
    /// [`OperatorSignals::spawn`]).
    pub fn install() -> io::Result<OperatorSignals> {
        amped_sys::signals::ignore(&amped_sys::signals::unused_fatal_signals())?;
        let shutdown = Arc::new(AtomicBool::new(false));
        for sig in [SIGTERM, SIGINT, SIGQUIT] {
            signal_hook::flag::register(sig, shutdown.clone())?;
        }
        let pending = Signals::new([SIGHUP, SIGUSR1, SIGTERM, SIGINT, SIGQUIT])?;
        Ok(OperatorSignals { shutdown, counts: Arc::default(), pending })
    }

    /// Starts the thread that handles SIGHUP and SIGUSR1 with `reloader`.
    pub fn spawn(mut self, mut reloader: Reloader) -> io::Result<SignalThread> {
        let handle = self.pending.handle();
        let counts = self.counts.clone();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for sig in self.pending.forever() {
                match sig {
                    SIGHUP => {
                        reloader.reload();
                        counts.reloads.fetch_add(1, Ordering::Relaxed);
                    }
                    SIGUSR1 => {
                        reloader.reopen_logs();
                        counts.reopens.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => announce_shutdown(reloader.notice_level(), &format!("signal {sig}")),
                }
            }
        })?;
        Ok(SignalThread { handle, thread })
    }
}

/// Says, once, that a graceful shutdown begins: in the error log and to systemd. The signal
/// thread calls it on SIGTERM/SIGINT/SIGQUIT; `main` calls it again when serving has ended,
/// in case the loops noticed the shutdown flag before the signal thread woke up.
pub fn announce_shutdown(level: Level, why: &str) {
    static ANNOUNCED: AtomicBool = AtomicBool::new(false);
    if !ANNOUNCED.swap(true, Ordering::Relaxed) {
        errlog::write(level, format_args!("graceful shutdown begins ({why})"));
        sd_notify::stopping();
    }
}

impl SignalThread {
    /// Ends the thread (and drops its log handles, so the log writers can finish).
    pub fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// Re-reads the configuration and re-opens logs for the signal thread.
pub struct Reloader {
    args: Args,
    current: Config,
    access_log: AccessLogger,
    fd_limit: u64,
    tls: Option<Arc<TlsContext>>,
}

impl Reloader {
    /// `level`, or `debug` in an `mp` worker: its parent, which re-reads the same file,
    /// already logs the event once for the whole server.
    fn level(&self, level: Level) -> Level {
        if self.current.is_mp_worker() { Level::Debug } else { level }
    }

    fn notice_level(&self) -> Level {
        self.level(Level::Notice)
    }
}

impl Reloader {
    /// `args` as the command line gave them (re-merged with the file on each reload),
    /// `current` the running configuration.
    pub fn new(args: Args, current: Config, access_log: AccessLogger, fd_limit: u64) -> Self {
        Reloader { args, current, access_log, fd_limit, tls: None }
    }

    /// The HTTPS context whose certificate a reload re-reads.
    pub fn with_tls(mut self, tls: Option<Arc<TlsContext>>) -> Self {
        self.tls = tls;
        self
    }

    /// SIGUSR1: both logs re-open their files (after logrotate renamed them).
    pub fn reopen_logs(&self) {
        self.access_log.reopen(&self.current.access_log);
        errlog::reopen(&self.current.error_log);
        errlog::write(self.notice_level(), format_args!("logs re-opened (SIGUSR1)"));
    }

    /// SIGHUP: re-reads the `--config` file (the command line still wins) and applies, while
    /// serving, the timeouts (`--header-timeout`, `--keepalive-timeout`, `--send-timeout`,
    /// `--shutdown-timeout`), `--max-discard-body`, the access log's path and format and the
    /// error log's destination and level; then re-opens both logs. Any other option that
    /// changed keeps its running value, with one error-log line each. An unreadable or
    /// invalid file changes nothing (one error line). The TLS certificate and key are re-read
    /// from their (possibly new) paths; if they cannot be loaded, the running certificate
    /// stays (one error line).
    pub fn reload(&mut self) {
        sd_notify::reloading();
        match Config::load(self.args.clone()) {
            Ok(mut new) => {
                new.fit_descriptors(self.fd_limit);
                for name in restart_only_changes(&self.current, &new) {
                    errlog::write(
                        self.level(Level::Warn),
                        format_args!(
                            "reload: {name} cannot change while serving; keeping the running value (restart amped to apply it)"
                        ),
                    );
                }
                self.apply(new);
                let level = self.notice_level();
                errlog::write(level, format_args!("reload: configuration re-read (SIGHUP)"));
            }
            Err(e) => errlog::write(
                self.level(Level::Error),
                format_args!("reload: {e}; keeping the running configuration"),
            ),
        }
        self.reload_certificate();
        self.access_log.reopen(&self.current.access_log);
        errlog::reopen(&self.current.error_log);
        sd_notify::ready();
    }

    /// Re-reads the TLS certificate and key, if HTTPS is on.
    fn reload_certificate(&mut self) {
        let (Some(tls), Some(files)) = (&self.tls, &self.current.tls) else { return };
        match tls.reload(files) {
            Ok(()) => errlog::write(
                self.notice_level(),
                format_args!("reload: TLS certificate re-read from {}", files.cert.display()),
            ),
            Err(e) => errlog::write(
                self.level(Level::Error),
                format_args!("reload: {e}; keeping the running TLS certificate"),
            ),
        }
    }

    /// Takes the live options of `new` into the running configuration.
    fn apply(&mut self, new: Config) {
        let cur = &mut self.current;
        cur.live.update_from(&new.live);
        // The access log's writer thread exists only if the log was on at start.
        if (cur.access_log == AccessLog::Off) == (new.access_log == AccessLog::Off) {
            cur.access_log = new.access_log;
        }
        cur.access_log_format = new.access_log_format;
        self.access_log.set_format(new.access_log_format);
        if cur.tls.is_some() && new.tls.is_some() {
            cur.tls = new.tls; // new paths are taken; turning TLS on or off needs a restart
        }
        cur.error_log = new.error_log;
        cur.log_level = new.log_level;
        errlog::set_level(new.log_level);
    }
}

/// The options (as `--name`) that differ between `old` and `new` and need a restart.
pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    macro_rules! fixed {
        ($($field:ident $(. $sub:ident)? => $name:literal),* $(,)?) => {
            $( if old.$field $(.$sub)? != new.$field $(.$sub)? { out.push($name); } )*
        };
    }
    fixed!(
        root => "ROOT",
        listen => "--listen",
        arch => "--arch",
        helpers => "--helpers",
        threads => "--threads",
        queue => "--queue",
        processes => "--processes",
        instances => "--instances",
        pin => "--pin",
        opt.path_cache => "--no-path-cache",
        opt.header_cache => "--no-header-cache",
        opt.file_cache => "--no-file-cache",
        opt.zero_copy => "--no-zero-copy",
        opt.residency_test => "--no-residency-test",
        opt.read_path => "--read-path",
        opt.direct_io_above => "--direct-io-above",
        path_cache_entries => "--path-cache-entries",
        file_cache_entries => "--file-cache-entries",
        file_cache_bytes => "--file-cache-bytes",
        small_file_bytes => "--small-file-bytes",
        page_yield_above => "--page-yield-above",
        transfer_order => "--transfer-order",
        transfers_at_once => "--transfers-at-once",
        kernel_read_ahead_below => "--kernel-read-ahead",
        disk_charge_test => "--disk-charge-test",
        refault_test => "--refault-test",
        keep_cached_large => "--keep-cached-large",
        share_large_reads => "--share-large-reads",
        fill_blocks => "--fill-blocks",
        fill_ahead => "--fill-ahead",
        fill_ahead_after => "--fill-ahead-after",
        fill_ahead_yields => "--fill-ahead-yields",
        first_fill => "--first-fill",
        disk_concurrency => "--disk-concurrency",
        metadata_helpers => "--metadata-helpers/--metadata-helpers-max",
        max_connections => "--max-connections",
        stages => "--stage-queue/--stage-threads-max/--stage-batch-max",
        limits => "--max-head-bytes/--max-uri-bytes",
        dotfiles => "--dotfiles",
        follow_outside_symlinks => "--follow-outside-symlinks",
        listing => "--listing",
        stats_path => "--stats-path",
        response.precompressed => "--precompressed",
        response.cache_control => "--cache-control",
        response.common_headers => "--add-header/--cors-origin/--security-headers",
        response.error_pages => "--error-page",
        response.spa_fallback => "--spa-fallback",
        stats_listen => "--stats-listen",
        server_header => "--server-header",
        debox => "--debox/--debox-stall-ms/--debox-out",
        metrics_path => "--metrics-path",
        slow_log => "--slow-log/--slow-request-ms/--slow-sample",
    );
    if (old.access_log == AccessLog::Off) != (new.access_log == AccessLog::Off) {
        out.push("--access-log (turning it on or off)");
    }
    if old.tls.is_some() != new.tls.is_some() {
        out.push("--tls-cert/--tls-key (turning TLS on or off)");
    }
    if old.redirect_http != new.redirect_http {
        out.push("--redirect-http");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_reload_applies_live_options_and_names_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("amped.toml");
        std::fs::write(&file, "header_timeout = 3.0\n").unwrap();
        let args = Args {
            root: Some(dir.path().to_path_buf()),
            config: Some(file.clone()),
            ..Default::default()
        };
        let cfg = Config::load(args.clone()).unwrap();
        let serving = cfg.clone();
        let mut r = Reloader::new(args, cfg, AccessLogger::off(), 1 << 20);
        std::fs::write(&file, "header_timeout = 1.0\narch = \"sped\"\nhelpers = 9\n").unwrap();
        r.reload();
        assert_eq!(serving.header_timeout(), Duration::from_secs(1), "applied live");
        assert_eq!(r.current.arch, serving.arch, "kept");
        let new = Config::load(r.args.clone()).unwrap();
        // The metadata lane's default maximum follows --helpers (4 ×), and who reads ahead
        // follows --arch (amped asks ahead itself), so those are named too: the running server
        // keeps them until a restart.
        let named = [
            "--arch",
            "--helpers",
            "--kernel-read-ahead",
            "--fill-ahead-after",
            "--metadata-helpers/--metadata-helpers-max",
        ];
        assert_eq!(restart_only_changes(&r.current, &new), named);
        std::fs::write(&file, "header_timeout = \"soon\"\n").unwrap();
        r.reload(); // invalid: nothing changes
        assert_eq!(serving.header_timeout(), Duration::from_secs(1));
    }
}
