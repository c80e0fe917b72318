//! The access log, in Combined Log Format, written by a thread of its own so that the event
//! loop never blocks on the log file. Lines are handed over through an unbounded channel
//! (nothing is dropped) and flushed whenever the channel runs dry, at most ~200 ms later.
//!
//! `--access-log-format combined+time` appends the request time in seconds (from the request
//! head's arrival to the response's last byte handed to the kernel, microsecond resolution).
//! [`AccessLogger::reopen`] (SIGUSR1, SIGHUP) makes the writer re-open its file, so logrotate
//! can rename it away first; requests are never lost meanwhile (the channel holds them).

use crate::config::{AccessLog as Target, AccessLogFormat};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// What one response contributes to the log.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Client address.
    pub peer: IpAddr,
    /// When the request arrived.
    pub time: SystemTime,
    /// The same moment on the monotonic clock, for the request time.
    pub started: Instant,
    /// `METHOD target VERSION`, as received (for a request refused before it could be
    /// parsed, the raw first line, as much of it as arrived).
    pub request_line: String,
    /// Response status.
    pub status: u16,
    /// Referer header.
    pub referer: Option<String>,
    /// User-Agent header.
    pub user_agent: Option<String>,
}

/// Handle to the writer thread; cheap to clone. Dropping every handle ends the thread after
/// it has written everything.
///
/// Turning the log on or off needs a restart; its path and format change on reload.
#[derive(Clone)]
pub struct AccessLogger {
    tx: Option<Sender<Msg>>,
    with_time: Arc<AtomicBool>,
}

enum Msg {
    Line(String),
    Reopen(Target),
}

type Out = BufWriter<Box<dyn Write + Send>>;

fn open(target: &Target) -> io::Result<Option<Out>> {
    let out: Box<dyn Write + Send> = match target {
        Target::Off => return Ok(None),
        Target::Stdout => Box::new(io::stdout()),
        Target::File(p) => {
            Box::new(OpenOptions::new().create(true).append(true).open(p).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open access log {}: {e}", p.display()))
            })?)
        }
    };
    Ok(Some(BufWriter::with_capacity(64 << 10, out)))
}

impl AccessLogger {
    /// A logger that writes nothing.
    pub fn off() -> Self {
        AccessLogger { tx: None, with_time: Arc::default() }
    }

    /// Opens the target and starts the writer thread.
    pub fn start(
        target: &Target,
        format: AccessLogFormat,
    ) -> io::Result<(Self, Option<JoinHandle<()>>)> {
        let Some(out) = open(target)? else { return Ok((Self::off(), None)) };
        let (tx, rx) = unbounded();
        let target = target.clone();
        let handle = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_loop(rx, out, target))?;
        let logger = AccessLogger { tx: Some(tx), with_time: Arc::default() };
        logger.set_format(format);
        Ok((logger, Some(handle)))
    }

    /// Changes the line format (on reload).
    pub fn set_format(&self, format: AccessLogFormat) {
        self.with_time.store(format == AccessLogFormat::CombinedTime, Ordering::Relaxed);
    }

    /// Makes the writer re-open `target` (the same path after logrotate renamed the file, or a
    /// new path after a reload); if that fails it keeps writing where it did and says so in
    /// the error log. Does nothing when the log is off.
    pub fn reopen(&self, target: &Target) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Reopen(target.clone()));
        }
    }

    /// Whether anything is logged (callers skip building records otherwise).
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues one line for a response that sent `bytes` body bytes.
    pub fn log(&self, rec: &LogRecord, bytes: u64) {
        if let Some(tx) = &self.tx {
            let mut line = format_line(rec, bytes);
            if self.with_time.load(Ordering::Relaxed) {
                line.pop();
                line.push_str(&format!(" {:.6}\n", rec.started.elapsed().as_secs_f64()));
            }
            let _ = tx.send(Msg::Line(line));
        }
    }
}

fn write_loop(rx: Receiver<Msg>, out: Out, target: Target) {
    let mut w = Writer { out, target, failing: false };
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Msg::Line(line)) => {
                if let Err(e) = w.out.write_all(line.as_bytes()) {
                    w.check(Err(e)); // (a buffered write succeeding says nothing of the disk)
                }
                if rx.is_empty() {
                    w.flush();
                }
            }
            Ok(Msg::Reopen(target)) => {
                w.flush();
                match open(&target) {
                    Ok(Some(new)) => w = Writer { out: new, target, failing: false },
                    Ok(None) => {} // turning the log off needs a restart
                    Err(e) => {
                        crate::errlog::error!("{e}; still writing to the previous access log")
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => w.flush(),
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    w.flush();
}

/// The open log and whether writing to it fails (reported once per failure spell, not once
/// per line: a full disk must not flood the error log).
struct Writer {
    out: Out,
    target: Target,
    failing: bool,
}

impl Writer {
    fn flush(&mut self) {
        let r = self.out.flush();
        self.check(r);
    }

    /// Reports the first failure of a spell; a successful flush ends the spell.
    fn check(&mut self, r: io::Result<()>) {
        match r {
            Err(e) if !self.failing => {
                self.failing = true;
                let reason = crate::errlog::reason(&e);
                match &self.target {
                    Target::File(p) => crate::errlog::error!(
                        "access log {}: {reason}; lines are being lost",
                        p.display()
                    ),
                    _ => crate::errlog::error!("access log: {reason}; lines are being lost"),
                }
            }
            Err(_) => {}
            Ok(()) => {
                if self.failing {
                    crate::errlog::notice!("access log: writing again");
                }
                self.failing = false;
            }
        }
    }
}

/// One Combined Log Format line, newline-terminated.
pub fn format_line(rec: &LogRecord, bytes: u64) -> String {
    let quoted = |v: &Option<String>| match v {
        Some(s) => escape(s),
        None => "-".to_string(),
    };
    let size = if bytes == 0 { "-".to_string() } else { bytes.to_string() };
    format!(
        "{} - - [{}] \"{}\" {} {} \"{}\" \"{}\"\n",
        rec.peer,
        clf_time(rec.time),
        escape(&rec.request_line),
        rec.status,
        size,
        quoted(&rec.referer),
        quoted(&rec.user_agent)
    )
}

/// Quotes and control characters escaped so a hostile request cannot forge log lines.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `10/Oct/2000:13:55:36 +0000` (always UTC).
fn clf_time(t: SystemTime) -> String {
    // httpdate gives "Tue, 10 Oct 2000 13:55:36 GMT"; rearrange it.
    let s = httpdate_fmt(t);
    let p: Vec<&str> = s.split(' ').collect();
    if p.len() != 6 {
        return s;
    }
    format!("{}/{}/{}:{} +0000", p[1], p[2], p[3], p[4])
}

fn httpdate_fmt(t: SystemTime) -> String {
    amped_http::fmt_http_date(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_log_format_line() {
        let rec = LogRecord {
            peer: "127.0.0.1".parse().unwrap(),
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136),
            started: Instant::now(),
            request_line: "GET /a \"b\" HTTP/1.1".into(),
            status: 200,
            referer: None,
            user_agent: Some("curl/8\n".into()),
        };
        assert_eq!(
            format_line(&rec, 5),
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a \\\"b\\\" HTTP/1.1\" 200 5 \"-\" \"curl/8\\x0a\"\n"
        );
        assert!(format_line(&rec, 0).contains(" 200 - "));
    }
}
