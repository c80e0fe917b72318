//! The access log, in Combined Log Format, written by a thread of its own so that the event
//! loop never blocks on the log file. Lines are handed over through an unbounded channel
//! (nothing is dropped) and flushed whenever the channel runs dry, at most ~200 ms later.

use crate::config::AccessLog as Target;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// What one response contributes to the log.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Client address.
    pub peer: IpAddr,
    /// When the request arrived.
    pub time: SystemTime,
    /// `METHOD target VERSION`, as received.
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
#[derive(Clone)]
pub struct AccessLogger {
    tx: Option<Sender<String>>,
}

impl AccessLogger {
    /// A logger that writes nothing.
    pub fn off() -> Self {
        AccessLogger { tx: None }
    }

    /// Opens the target and starts the writer thread.
    pub fn start(target: &Target) -> io::Result<(Self, Option<JoinHandle<()>>)> {
        let out: Box<dyn Write + Send> = match target {
            Target::Off => return Ok((Self::off(), None)),
            Target::Stdout => Box::new(io::stdout()),
            Target::File(p) => {
                Box::new(OpenOptions::new().create(true).append(true).open(p).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot open access log {}: {e}", p.display()))
                })?)
            }
        };
        let (tx, rx) = unbounded();
        let handle = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_loop(rx, BufWriter::with_capacity(64 << 10, out)))?;
        Ok((AccessLogger { tx: Some(tx) }, Some(handle)))
    }

    /// Whether anything is logged (callers skip building records otherwise).
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues one line for a response that sent `bytes` body bytes.
    pub fn log(&self, rec: &LogRecord, bytes: u64) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(format_line(rec, bytes));
        }
    }
}

fn write_loop(rx: Receiver<String>, mut out: BufWriter<Box<dyn Write + Send>>) {
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let _ = out.write_all(line.as_bytes());
                if rx.is_empty() {
                    let _ = out.flush();
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = out.flush();
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = out.flush();
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
