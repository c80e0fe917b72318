//! `--stats-listen ADDR`: the server's counters on an address of their own (e.g. a loopback
//! or management address a monitoring system scrapes), apart from the served site.
//!
//! One thread, one connection at a time: a scrape is a single small request, so this needs
//! neither the pipeline nor an architecture. Any `GET`/`HEAD` gets the JSON document of
//! [`Stats::to_json`] (under `mp` the parent serves it, summed over every worker), anything
//! else `405`, a malformed request `400`; the connection then closes. A client gets
//! [`CLIENT_TIMEOUT`] to send its head, so a silent one cannot hold the thread for long. The
//! thread ends when shutdown begins.

use crate::stats::Stats;
use amped_http::{HeadWriter, Limits, Method, StatusCode};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a scraper may take to send its request head.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds `addr` (before the server announces itself, so a bad address fails start-up) and
/// returns the bound listener.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let opts =
        amped_sys::listen::ListenOptions { reuse_port: false, nonblocking: false, backlog: 64 };
    let l = amped_sys::listen::bind(addr, opts).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot listen on --stats-listen {addr}: {e}"))
    })?;
    crate::arch::blocking::set_accept_tick(&l)?;
    Ok(l)
}

/// Serves `stats` on `listener` until `shutdown` is set.
pub fn spawn(
    listener: TcpListener,
    stats: Arc<Stats>,
    shutdown: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("stats-listen".into()).spawn(move || {
        while !shutdown.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((sock, _)) => {
                    let _ = answer(sock, &stats);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    crate::errlog::warn!("--stats-listen: accept: {}", crate::errlog::reason(&e));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    })
}

fn answer(mut sock: TcpStream, stats: &Stats) -> io::Result<()> {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let limits = Limits::default();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head = loop {
        match amped_http::parse_request(&buf, &limits) {
            Ok(Some(head)) => break Ok(head),
            Err(e) => break Err(e.status()),
            Ok(None) => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        sock.set_read_timeout(Some(left))?;
        match sock.read(&mut chunk)? {
            0 => return Ok(()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let (status, body, head_only) = match head {
        Ok(h) if matches!(h.method, Method::Get | Method::Head) => {
            (StatusCode::OK, stats.to_json().into_bytes(), h.method == Method::Head)
        }
        Ok(_) => (
            StatusCode::METHOD_NOT_ALLOWED,
            amped_http::error_body(StatusCode::METHOD_NOT_ALLOWED),
            false,
        ),
        Err(status) => (status, amped_http::error_body(status), false),
    };
    let content_type: &[u8] =
        if status == StatusCode::OK { b"application/json" } else { b"text/html; charset=utf-8" };
    let mut out = Vec::with_capacity(256 + body.len());
    let mut w = HeadWriter::new(&mut out, status);
    w.date()
        .header("Content-Type", content_type)
        .header_u64("Content-Length", body.len() as u64)
        .header("Cache-Control", b"no-store")
        .header("Connection", b"close");
    if status == StatusCode::METHOD_NOT_ALLOWED {
        w.header("Allow", b"GET, HEAD");
    }
    w.finish();
    if !head_only {
        out.extend_from_slice(&body);
    }
    sock.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    sock.write_all(&out)
}
