//! Test fixtures: small blocking HTTP servers on 127.0.0.1 with precise, countable behaviour,
//! and a runner for the real `ampload` binary that never lets a test hang.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server does with one request.
pub enum Reply {
    /// Send these bytes and keep the connection (unless the client asked to close).
    Send(Vec<u8>),
    /// Send these bytes, then close.
    SendAndClose(Vec<u8>),
    /// Close without answering.
    Close,
    /// Never answer (keep reading).
    Silence,
}

/// A server stall: for `length` at the start of every `period` since the server started, no
/// response is sent (every connection waits until the stall ends).
#[derive(Clone, Copy)]
pub struct Stall {
    pub period: Duration,
    pub length: Duration,
}

/// A running test server and what it saw.
pub struct TestServer {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
    pub paths: Arc<Mutex<HashMap<String, u64>>>,
}

impl TestServer {
    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn path_count(&self, path: &str) -> u64 {
        self.paths.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

/// A `200 OK` response with `body`.
pub fn ok(body: &str) -> Vec<u8> {
    response(200, "OK", body)
}

/// A response with a status and a `Content-Length` body.
pub fn response(status: u16, reason: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{body}", body.len())
        .into_bytes()
}

/// Starts a server answering every request through `handler(path)`.
pub fn serve(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> TestServer {
    serve_with(None, handler)
}

/// Starts a server that stalls as `stall` says.
pub fn serve_with(
    stall: Option<Stall>,
    handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> TestServer {
    let listener = listen_on_loopback();
    let server = TestServer {
        addr: listener.local_addr().unwrap(),
        connections: Arc::default(),
        requests: Arc::default(),
        paths: Arc::default(),
    };
    let (connections, requests, paths) =
        (Arc::clone(&server.connections), Arc::clone(&server.requests), Arc::clone(&server.paths));
    let handler = Arc::new(handler);
    let started = Instant::now();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            connections.fetch_add(1, Ordering::SeqCst);
            let (requests, paths, handler) =
                (Arc::clone(&requests), Arc::clone(&paths), Arc::clone(&handler));
            let _ = std::thread::Builder::new().stack_size(128 * 1024).spawn(move || {
                serve_connection(stream, started, stall, &requests, &paths, &*handler);
            });
        }
    });
    server
}

/// A loopback listener whose accept queue holds thousands of connections: std's holds 128,
/// and the tests that open 2 000 connections at once overflowed it on a busy machine (the
/// kernel then drops handshakes, and their requests waited for retransmits past the timeout).
fn listen_on_loopback() -> TcpListener {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    socket.listen(4096).unwrap();
    socket.into()
}

/// Reads requests (heads only: GETs have no body) and answers each.
fn serve_connection(
    mut stream: TcpStream,
    started: Instant,
    stall: Option<Stall>,
    requests: &AtomicU64,
    paths: &Mutex<HashMap<String, u64>>,
    handler: &(dyn Fn(&str) -> Reply + Send + Sync),
) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let close = head.to_ascii_lowercase().contains("\r\nconnection: close");
        requests.fetch_add(1, Ordering::SeqCst);
        *paths.lock().unwrap().entry(path.clone()).or_default() += 1;
        if let Some(stall) = stall {
            let phase = Duration::from_nanos(
                (started.elapsed().as_nanos() % stall.period.as_nanos()) as u64,
            );
            if phase < stall.length {
                std::thread::sleep(stall.length - phase);
            }
        }
        match handler(&path) {
            Reply::Send(bytes) => {
                if stream.write_all(&bytes).is_err() || close {
                    return;
                }
            }
            Reply::SendAndClose(bytes) => {
                let _ = stream.write_all(&bytes);
                return;
            }
            Reply::Close => return,
            Reply::Silence => {}
        }
    }
}

/// The result of one `ampload` run.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The JSON report (panics with the output if there is none).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("no JSON report ({e}); stdout {:?}, stderr {:?}", self.stdout, self.stderr)
        })
    }
}

/// Runs the real binary with `args`, killing it (and failing) after 30 s.
pub fn ampload(args: &[&str]) -> Run {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ampload"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("ampload {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Writes `text` to a temporary file.
pub fn temp_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

/// Reads a JSON number as u64.
pub fn n(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{value} is not a count"))
}

/// Reads a JSON number as f64.
pub fn f(value: &serde_json::Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("{value} is not a number"))
}
