//! The error log: what the operator needs to know that is not a request (start-up summary,
//! reloads, permission and I/O errors with the path, timeouts, refused requests), one line per
//! event, written by a thread of its own so that no serving thread ever blocks on it.
//!
//! **The API** (for any module of the server):
//!
//! ```ignore
//! crate::errlog::error!("cannot open {}: {e}", path.display());   // something failed
//! crate::errlog::warn!("...");     // degraded service the operator should fix
//! crate::errlog::notice!("...");   // normal but significant: start-up, reload, re-open
//! crate::errlog::info!("...");     // per-request events: timeouts, refused requests
//! crate::errlog::debug!("...");
//! ```
//!
//! Each macro takes `format!` arguments and costs one atomic load when its level is filtered
//! out (`--log-level`, default `notice`). Lines look like
//! `2026-11-24T14:45:59Z warn: open /srv/www/a.html: permission denied`.
//!
//! **Never blocking, never filling the disk.** A line is formatted on the calling thread and
//! handed to the writer thread through a channel. At most [`LINES_PER_SECOND`] lines are
//! accepted per second (the rest are counted and reported as one line when the next second
//! begins), so a flood of bad requests cannot fill the disk or memory. Before [`start`] (and
//! after [`finish`]) lines go straight to stderr.
//!
//! [`reopen`] (SIGUSR1, SIGHUP) makes the writer re-open its file — or another destination —
//! so logrotate can rename the file away first.

use crate::config::ErrorLog as Target;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Most lines accepted per second; the rest are dropped and counted.
pub const LINES_PER_SECOND: u32 = 100;

/// How important a line is; a log keeps the lines at its level and above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed (a file cannot be opened for a reason other than its absence, a log
    /// cannot be written).
    Error = 0,
    /// Service is degraded and the operator should act (unreadable root, descriptors out).
    Warn = 1,
    /// Normal but significant: start-up summary, reload, logs re-opened, shutdown.
    Notice = 2,
    /// Per-request events: timeouts, refused (malformed, oversized) requests.
    Info = 3,
    /// Details for debugging.
    Debug = 4,
}

impl Level {
    /// Every level, most important first.
    pub const ALL: [Level; 5] =
        [Level::Error, Level::Warn, Level::Notice, Level::Info, Level::Debug];

    /// The `--log-level` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// Parses a `--log-level` value.
    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == s)
    }
}

enum Msg {
    Line(String),
    Reopen(Target),
}

/// Counts the lines of the current one-second window.
struct Limiter {
    window: Option<Instant>,
    sent: u32,
    dropped: u64,
}

impl Limiter {
    /// Whether a line at `t` may be written, and, when a new window begins after lines were
    /// dropped, how many were.
    fn admit(&mut self, t: Instant) -> (bool, Option<u64>) {
        let mut report = None;
        if self.window.is_none_or(|w| t.duration_since(w) >= Duration::from_secs(1)) {
            report = (self.dropped > 0).then_some(self.dropped);
            *self = Limiter { window: Some(t), sent: 0, dropped: 0 };
        }
        if self.sent >= LINES_PER_SECOND {
            self.dropped += 1;
            return (false, report);
        }
        self.sent += 1;
        (true, report)
    }
}

struct Writer {
    tx: Option<Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static WRITER: Mutex<Writer> = Mutex::new(Writer { tx: None, thread: None });
static LIMITER: Mutex<Limiter> = Mutex::new(Limiter { window: None, sent: 0, dropped: 0 });

/// Whether lines of `level` are kept (callers may skip expensive preparation otherwise).
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Changes the level (`--log-level`, and on reload).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Writes one line at `level` (use the macros). Never blocks on the log's destination.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let now = SystemTime::now();
    let mut lines = Vec::with_capacity(2);
    let (admit, dropped) = crate::cache::lock(&LIMITER).admit(Instant::now());
    if let Some(n) = dropped {
        lines.push(format_line(
            now,
            Level::Warn,
            format_args!("{n} error-log lines dropped by the rate limit ({LINES_PER_SECOND}/s)"),
        ));
    }
    if !admit {
        return;
    }
    lines.push(format_line(now, level, args));
    let writer = crate::cache::lock(&WRITER);
    for line in lines {
        match &writer.tx {
            Some(tx) => {
                let _ = tx.send(Msg::Line(line));
            }
            None => eprint!("{line}"),
        }
    }
}

/// Starts the writer thread on `target` at `level`. Fails (with the path) if the file cannot
/// be opened; the caller reports that and exits.
pub fn start(target: &Target, level: Level) -> io::Result<()> {
    set_level(level);
    let out = open(target)?;
    let (tx, rx) = unbounded();
    let thread =
        std::thread::Builder::new().name("error-log".into()).spawn(move || write_loop(rx, out))?;
    let mut w = crate::cache::lock(&WRITER);
    *w = Writer { tx: Some(tx), thread: Some(thread) };
    Ok(())
}

/// Makes the writer re-open `target` (the same path after logrotate renamed it, or a new
/// destination after a reload). If it cannot be opened, the old destination is kept and an
/// error line says why. Without a writer thread this does nothing.
pub fn reopen(target: &Target) {
    if let Some(tx) = &crate::cache::lock(&WRITER).tx {
        let _ = tx.send(Msg::Reopen(target.clone()));
    }
}

/// Flushes and stops the writer thread (at exit). Later lines go to stderr.
pub fn finish() {
    let thread = {
        let mut w = crate::cache::lock(&WRITER);
        w.tx = None;
        w.thread.take()
    };
    if let Some(t) = thread {
        let _ = t.join();
    }
}

/// Where lines go: nowhere, stderr or an append-mode file.
enum Out {
    Off,
    Stderr,
    File(BufWriter<File>),
}

impl Out {
    fn write(&mut self, line: &str) {
        let _ = match self {
            Out::Off => Ok(()),
            Out::Stderr => io::stderr().write_all(line.as_bytes()),
            Out::File(f) => f.write_all(line.as_bytes()),
        };
    }

    fn flush(&mut self) {
        if let Out::File(f) = self {
            let _ = f.flush();
        }
    }
}

fn open(target: &Target) -> io::Result<Out> {
    Ok(match target {
        Target::Off => Out::Off,
        Target::Stderr => Out::Stderr,
        Target::File(p) => Out::File(BufWriter::new(
            OpenOptions::new().create(true).append(true).open(p).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open error log {}: {e}", p.display()))
            })?,
        )),
    })
}

fn write_loop(rx: Receiver<Msg>, mut out: Out) {
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Msg::Line(line)) => {
                out.write(&line);
                if rx.is_empty() {
                    out.flush();
                }
            }
            Ok(Msg::Reopen(target)) => {
                out.flush();
                match open(&target) {
                    Ok(new) => out = new,
                    Err(e) => out.write(&format_line(
                        SystemTime::now(),
                        Level::Error,
                        format_args!("{e}; still writing to the previous error log"),
                    )),
                }
            }
            Err(RecvTimeoutError::Timeout) => out.flush(),
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    out.flush();
}

/// An I/O error as a short reason for a log line: `permission denied` rather than
/// `Permission denied (os error 13)`.
pub fn reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `2026-11-24T14:45:59Z level: message` plus a newline; control characters in the message
/// are escaped so a hostile request cannot forge lines.
pub fn format_line(t: SystemTime, level: Level, args: fmt::Arguments<'_>) -> String {
    let msg = args.to_string();
    let mut line = format!("{} {}: ", iso_time(t), level.name());
    for c in msg.chars() {
        if c.is_control() {
            line.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            line.push(c);
        }
    }
    line.push('\n');
    line
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC), rearranged from the HTTP date (`Tue, 10 Oct 2000 13:55:36
/// GMT`) as the access log rearranges it into its own format.
fn iso_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let http = amped_http::fmt_http_date(t);
    let p: Vec<&str> = http.split(' ').collect();
    match (p.len(), p.get(2).and_then(|m| MONTHS.iter().position(|x| x == m))) {
        (6, Some(m)) => format!("{}-{:02}-{}T{}Z", p[3], m + 1, p[1], p[4]),
        _ => http,
    }
}

/// Writes an error-log line at level `error` (takes `format!` arguments); see [`errlog`](crate::errlog).
#[macro_export]
macro_rules! errlog_error {
    ($($arg:tt)*) => { $crate::errlog::write($crate::errlog::Level::Error, format_args!($($arg)*)) };
}
/// Writes an error-log line at level `warn` (takes `format!` arguments); see [`errlog`](crate::errlog).
#[macro_export]
macro_rules! errlog_warn {
    ($($arg:tt)*) => { $crate::errlog::write($crate::errlog::Level::Warn, format_args!($($arg)*)) };
}
/// Writes an error-log line at level `notice` (takes `format!` arguments); see [`errlog`](crate::errlog).
#[macro_export]
macro_rules! errlog_notice {
    ($($arg:tt)*) => { $crate::errlog::write($crate::errlog::Level::Notice, format_args!($($arg)*)) };
}
/// Writes an error-log line at level `info` (takes `format!` arguments); see [`errlog`](crate::errlog).
#[macro_export]
macro_rules! errlog_info {
    ($($arg:tt)*) => { $crate::errlog::write($crate::errlog::Level::Info, format_args!($($arg)*)) };
}
/// Writes an error-log line at level `debug` (takes `format!` arguments); see [`errlog`](crate::errlog).
#[macro_export]
macro_rules! errlog_debug {
    ($($arg:tt)*) => { $crate::errlog::write($crate::errlog::Level::Debug, format_args!($($arg)*)) };
}
pub use crate::{
    errlog_debug as debug, errlog_error as error, errlog_info as info, errlog_notice as notice,
    errlog_warn as warn,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_time_level_and_escaped_message() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        assert_eq!(
            format_line(t, Level::Warn, format_args!("open {}: denied\r\nforged", "/a")),
            "2000-10-10T13:55:36Z warn: open /a: denied\\x0d\\x0aforged\n"
        );
        assert_eq!(iso_time(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso_time(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn levels_parse_and_order() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
        assert_eq!(Level::parse("verbose"), None);
        assert!(Level::Error < Level::Info);
    }

    #[test]
    fn the_rate_limit_keeps_a_window_and_reports_what_it_dropped() {
        let mut lim = Limiter { window: None, sent: 0, dropped: 0 };
        let t0 = Instant::now();
        for _ in 0..LINES_PER_SECOND {
            assert_eq!(lim.admit(t0), (true, None));
        }
        for _ in 0..5 {
            assert_eq!(lim.admit(t0 + Duration::from_millis(500)), (false, None));
        }
        assert_eq!(lim.admit(t0 + Duration::from_secs(1)), (true, Some(5)));
        assert_eq!(lim.admit(t0 + Duration::from_secs(3)), (true, None));
    }

    #[test]
    fn io_reasons_are_short() {
        let e = io::Error::from_raw_os_error(13);
        assert_eq!(reason(&e), "permission denied");
        assert_eq!(reason(&io::Error::other("Custom")), "custom");
    }
}
