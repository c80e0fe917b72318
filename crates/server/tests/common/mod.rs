//! Shared machinery of the wire tests: a [`Server`] guard that runs the real `amped` binary
//! against a temporary document root, a raw-TCP [`Conn`] and a tiny HTTP/1.1 response parser.
//!
//! Everything is bounded: sockets carry read/write timeouts of a few seconds and the server's
//! first stdout line is awaited for at most [`START_TIMEOUT`], so a broken server makes a test
//! fail, never hang.

#![allow(dead_code)] // each topic module uses a different subset of the helpers

use std::ffi::OsString;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long the server may take to print its `listening` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Default socket read/write timeout of test connections.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// A marker written to files OUTSIDE the document root; no response may ever contain it.
pub const SECRET_MARKER: &str = "TOP-SECRET-MARKER-7f3a9c21";
/// What a server prints first on stdout, before the port.
pub const LISTEN_PREFIX: &str = "amped listening on http://127.0.0.1:";

/// A running `amped` child serving a temporary document root. Killed and reaped on drop.
///
/// Layout of the temporary directory:
/// ```text
/// tmp/secret.txt          SECRET_MARKER (outside the root)
/// tmp/rootx/secret.txt    SECRET_MARKER (a sibling whose name extends the root's name)
/// tmp/outside/inner.txt   SECRET_MARKER (a directory outside the root)
/// tmp/root/               the document root, filled by the test
/// ```
pub struct Server {
    child: Child,
    /// Where the server listens (parsed from its first stdout line).
    pub addr: SocketAddr,
    /// The document root.
    pub root: PathBuf,
    /// The temporary directory holding the root and the secrets.
    pub tmp: tempfile::TempDir,
    stdout_lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    exited: Option<ExitStatus>,
}

/// The server binary: `$AMPED_BIN` if set (e.g. a release build), else the one cargo built.
pub fn binary() -> OsString {
    std::env::var_os("AMPED_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_amped").into())
}

/// A fresh temporary directory on the real disk (not tmpfs), so that page-cache eviction
/// behaves as on a real server: under `/var/tmp` where it exists, else the target directory.
/// It is made world-traversable (0755), as `/var/tmp` is, so that a server that has dropped
/// privileges (`--user nobody`) can reach its root wherever the checkout lives.
pub fn temp_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let var_tmp = Path::new("/var/tmp");
    let parent = if var_tmp.is_dir() { var_tmp } else { Path::new(env!("CARGO_TARGET_TMPDIR")) };
    let dir =
        tempfile::Builder::new().prefix("amped-wire-").tempdir_in(parent).expect("create temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Whether a process of another user (no group in common) can execute `path`: every
/// directory above it searchable and the file executable by others.
pub fn others_can_execute(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    mode(path) & 0o001 != 0 && path.ancestors().skip(1).all(|d| mode(d) & 0o001 != 0)
}

impl Server {
    /// Start `amped --listen 127.0.0.1:0 ARCH_ARGS EXTRA_ARGS ROOT` after `fill(root)`.
    pub fn start(arch: &[&str], extra: &[&str], fill: impl FnOnce(&Path)) -> Server {
        let mut args: Vec<OsString> = vec!["--listen".into(), "127.0.0.1:0".into()];
        args.extend(arch.iter().map(OsString::from));
        args.extend(extra.iter().map(OsString::from));
        Server::start_with(fill, |root| {
            args.push(root.into());
            args
        })
    }

    /// Start `amped` with exactly the arguments `args(root)` returns, after `fill(root)`.
    pub fn start_with(
        fill: impl FnOnce(&Path),
        args: impl FnOnce(&Path) -> Vec<OsString>,
    ) -> Server {
        Server::start_prepared(fill, args, |_, _| {})
    }

    /// As [`Server::start_with`], letting `prepare` adjust the command (user, environment)
    /// once the temporary directory exists (`prepare` gets the command and that directory).
    pub fn start_prepared(
        fill: impl FnOnce(&Path),
        args: impl FnOnce(&Path) -> Vec<OsString>,
        prepare: impl FnOnce(&mut Command, &Path),
    ) -> Server {
        let tmp = temp_dir();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        for dir in ["rootx", "outside"] {
            std::fs::create_dir(tmp.path().join(dir)).unwrap();
        }
        for file in ["secret.txt", "rootx/secret.txt", "outside/inner.txt"] {
            std::fs::write(tmp.path().join(file), SECRET_MARKER).unwrap();
        }
        fill(&root);
        let args = args(&root);
        let mut cmd = Command::new(binary());
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        prepare(&mut cmd, tmp.path());
        let mut child = cmd.spawn().expect("spawn amped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        drain_into(child.stderr.take().unwrap(), Arc::clone(&stderr));
        let stdout_lines = Arc::new(Mutex::new(Vec::new()));
        let (first_tx, first_rx) = mpsc::channel();
        let lines = Arc::clone(&stdout_lines);
        let stdout = child.stdout.take().unwrap();
        thread::spawn(move || {
            let mut first = Some(first_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Kept before the first line is announced, so stdout_lines() has it as soon
                // as start() returns.
                lines.lock().unwrap().push(line.clone());
                if let Some(tx) = first.take() {
                    let _ = tx.send(line);
                }
            }
        });
        let mut server = Server {
            child,
            addr: "127.0.0.1:1".parse().unwrap(),
            root,
            tmp,
            stdout_lines,
            stderr,
            exited: None,
        };
        let first = match first_rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("amped {args:?} printed no first line within {START_TIMEOUT:?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.wait_exit(Duration::from_secs(2));
                panic!("amped {args:?} closed stdout without a first line (exit: {status:?})")
            }
        };
        server.addr = parse_listen_line(&first);
        server
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send a signal (`TERM`, `INT`, ...) with the `kill` command.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Wait up to `limit` for the child to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                self.exited = Some(status);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Panic if the server process has exited (crashed).
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            self.exited = Some(status);
            panic!("amped exited unexpectedly: {status}");
        }
    }

    /// The lines the server printed on stdout so far (the listening line first).
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_lines.lock().unwrap().clone()
    }

    /// What the server printed on stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Stderr once it contains `needle`, or as it is after 5 s (stderr is read by a thread,
    /// so a line the server wrote may not have arrived yet).
    pub fn stderr_with(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let err = self.stderr();
            if err.contains(needle) || std::time::Instant::now() > deadline {
                return err;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A new connection to the server.
    pub fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// `GET path` with `Connection: close` on a fresh connection.
    pub fn get(&self, path: &str) -> Response {
        get(self.addr, path)
    }

    /// A file under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if thread::panicking() {
            eprintln!("---- amped stderr ----\n{}", self.stderr());
        }
    }
}

/// Parse `amped listening on http://127.0.0.1:PORT/` (or `https://`) into an address (with
/// several listeners the line names each, the first one first; an address of every interface,
/// `0.0.0.0`, is reached through 127.0.0.1).
pub fn parse_listen_line(line: &str) -> SocketAddr {
    let addr = line
        .strip_prefix("amped listening on http://")
        .or_else(|| line.strip_prefix("amped listening on https://"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .unwrap_or_else(|| panic!("unexpected first stdout line: {line:?}"));
    assert_ne!(addr.port(), 0, "server reports port 0");
    if addr.ip().is_unspecified() {
        return SocketAddr::from(([127, 0, 0, 1], addr.port()));
    }
    addr
}

fn drain_into(
    mut from: impl Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

/// Run `amped ARGS` that is expected to fail at start-up; returns (status, stdout, stderr).
pub fn run_expecting_exit(args: &[OsString]) -> (ExitStatus, String, String) {
    let mut child = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn amped");
    let out = Arc::new(Mutex::new(Vec::new()));
    let err = Arc::new(Mutex::new(Vec::new()));
    let drains = [
        drain_into(child.stdout.take().unwrap(), Arc::clone(&out)),
        drain_into(child.stderr.take().unwrap(), Arc::clone(&err)),
    ];
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("amped {args:?} did not exit within 5 s");
        }
        thread::sleep(Duration::from_millis(20));
    };
    // Let the drain threads reach EOF (bounded: a stray grandchild could hold the pipes).
    let deadline = Instant::now() + Duration::from_secs(3);
    while !drains.iter().all(thread::JoinHandle::is_finished) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
    (status, text(&out), text(&err))
}

/// Poll `cond` every 50 ms for up to `limit`.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Deterministic pseudo-random bytes (xorshift), for binary files.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Write `contents` to `root/rel`, creating parent directories.
pub fn write(root: &Path, rel: &str, contents: impl AsRef<[u8]>) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, contents).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Raw TCP

/// One raw client connection with a receive buffer, so pipelined responses can be split.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

/// How a wait for the peer to close ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// EOF or reset, after this long.
    Closed(Duration),
    /// Still open when the limit passed.
    StillOpen,
}

impl Conn {
    /// Connect with [`IO_TIMEOUT`] on reads and writes.
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Conn { stream, buf: Vec::new() }
    }

    /// Write all of `data`.
    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).expect("send request");
    }

    /// Read one response to a request whose response has a body (GET).
    pub fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Read one response to a HEAD request (no body whatever Content-Length says).
    pub fn head_response(&mut self) -> Response {
        self.read_response(true)
    }

    fn read_response(&mut self, head: bool) -> Response {
        loop {
            match parse_response(&self.buf, head) {
                Ok(Some((resp, used))) => {
                    self.buf.drain(..used);
                    return resp;
                }
                Ok(None) => {}
                Err(e) => panic!("bad response ({e}): {:?}", String::from_utf8_lossy(&self.buf)),
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "connection closed before a complete response; got {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                // A read with a timeout is not restarted after a signal handler ran (EINTR, seen
                // once under pool in a full run): read again, as `closed_within` does.
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!(
                    "reading response: {e}; got so far {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }

    /// Bytes received but not yet consumed by a parsed response.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Wait up to `limit` for the server to close (EOF or reset); data that arrives meanwhile
    /// is kept in the buffer.
    pub fn wait_closed(&mut self, limit: Duration) -> Ended {
        let start = Instant::now();
        let deadline = start + limit;
        let mut chunk = [0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ended::StillOpen;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ended::Closed(start.elapsed()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ended::StillOpen;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Ended::Closed(start.elapsed()), // reset counts as closed
            }
        }
    }

    /// Assert the server closes this connection within `limit`.
    pub fn assert_closed(&mut self, limit: Duration) {
        let ended = self.wait_closed(limit);
        assert!(
            matches!(ended, Ended::Closed(_)),
            "server kept the connection open for {limit:?}; extra bytes: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    /// Assert nothing arrives and the connection stays open for `d`.
    pub fn assert_silent_for(&mut self, d: Duration) {
        let ended = self.wait_closed(d);
        assert_eq!(ended, Ended::StillOpen, "connection closed early");
        assert!(self.buf.is_empty(), "unexpected bytes: {:?}", String::from_utf8_lossy(&self.buf));
    }
}

/// Send `bytes` on a new connection and read until the server closes or [`IO_TIMEOUT`] passes.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut conn = Conn::open(addr);
    conn.send(bytes);
    conn.wait_closed(IO_TIMEOUT);
    conn.buf
}

/// Send `bytes` on a new connection and read exactly one (GET-style) response.
pub fn request_once(addr: SocketAddr, bytes: &[u8]) -> Response {
    let mut conn = Conn::open(addr);
    conn.send(bytes);
    conn.response()
}

/// `GET path HTTP/1.1` with `Connection: close` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    request_once(addr, get_req(path).as_bytes())
}

/// The text of a `GET path HTTP/1.1` request with `Host` and `Connection: close`.
pub fn get_req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
}

/// The text of a keep-alive `GET path HTTP/1.1` with extra header lines (each ending `\r\n`).
pub fn req(method: &str, path: &str, extra_headers: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: test\r\n{extra_headers}\r\n")
}

/// One `read` on `stream` that waits at most `limit` in all: an interrupted wait (EINTR,
/// e.g. when the test process is stopped and continued) is resumed for the time left, so it
/// is never mistaken for an answer or a close; the timeout comes back as `WouldBlock` or
/// `TimedOut`.
pub fn read_within(
    stream: &mut TcpStream,
    buf: &mut [u8],
    limit: Duration,
) -> std::io::Result<usize> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted && Instant::now() < deadline => continue,
            other => return other,
        }
    }
}

/// A new connection's `GET path` is refused by the per-client connection limit: 429 with
/// `Retry-After: 1`, then the server closes it.
pub fn assert_refused_over_connection_limit(s: &Server, path: &str) {
    let mut over = s.conn();
    over.send(req("GET", path, ""));
    let r = over.response();
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("1"));
    over.assert_closed(Duration::from_secs(3));
}

// ---------------------------------------------------------------------------------------------
// Response parsing

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// `HTTP/1.1`
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// How many times the header `name` occurs.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).count()
    }

    /// The header that must be there.
    pub fn must(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("response lacks {name}: {self:?}"))
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Assert the status, printing the response when it differs.
    pub fn assert_status(&self, status: u16) -> &Self {
        assert_eq!(
            self.status,
            status,
            "unexpected status; headers {:?}, body {:?}",
            self.headers,
            self.text()
        );
        self
    }

    /// Whether `Connection` lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// Content-Length as a number.
    pub fn content_length(&self) -> u64 {
        self.must("content-length")
            .parse()
            .unwrap_or_else(|_| panic!("bad Content-Length in {self:?}"))
    }
}

/// Parse one response from the front of `buf`. `Ok(None)`: incomplete. `head`: the response
/// answers a HEAD request, so it has no body.
pub fn parse_response(buf: &[u8], head: bool) -> Result<Option<(Response, usize)>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head_text = std::str::from_utf8(&buf[..end]).map_err(|e| e.to_string())?;
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_string();
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let reason = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) =
            line.split_once(':').ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let mut resp = Response { version, status, reason, headers, body: Vec::new() };
    let bodyless = head || status == 304 || status == 204 || (100..200).contains(&status);
    let len = if bodyless {
        0
    } else {
        let cl = resp
            .header("content-length")
            .ok_or_else(|| format!("no Content-Length in {:?}", resp.headers))?;
        cl.parse::<usize>().map_err(|e| format!("Content-Length {cl:?}: {e}"))?
    };
    let start = end + 4;
    if buf.len() < start + len {
        return Ok(None);
    }
    resp.body = buf[start..start + len].to_vec();
    Ok(Some((resp, start + len)))
}

/// Split a byte stream holding complete GET responses.
pub fn split_responses(mut buf: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        match parse_response(buf, false) {
            Ok(Some((resp, used))) => {
                out.push(resp);
                buf = &buf[used..];
            }
            other => panic!(
                "trailing bytes are not a complete response ({other:?}): {:?}",
                String::from_utf8_lossy(buf)
            ),
        }
    }
    out
}

/// Does `haystack` contain `needle`?
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `GET` the stats endpoint at `path` and parse its JSON body.
pub fn stats(addr: SocketAddr, path: &str) -> serde_json::Value {
    let resp = get(addr, path);
    resp.assert_status(200);
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("stats body is not JSON ({e}): {:?}", resp.text()))
}

/// A counter from a stats document.
pub fn counter(stats: &serde_json::Value, name: &str) -> u64 {
    stats
        .get(name)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("stats lack numeric {name:?}: {stats}"))
}

/// Format `t` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), truncating to the second.
pub fn http_date(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs();
    let (days, rem) = (secs / 86400, secs % 86400);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // civil-from-days (H. Hinnant), for days since 1970-01-01
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        [(month - 1) as usize];
    format!(
        "{weekday}, {day:02} {mon} {year} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// ---------------------------------------------------------------------------------------------
// Descriptor exhaustion

/// Lowers RLIMIT_NOFILE of the server (and of its worker processes, for `mp`) to the lowest
/// descriptor number each has free, so that its next `open`, `accept` or `socket` fails with
/// `EMFILE` while everything already open keeps working; the soft limits are put back on drop.
/// Uses the `prlimit` command (util-linux); lowering one's own soft limit needs no privilege.
pub struct DescriptorSqueeze {
    restore: Vec<(u32, String)>,
}

impl DescriptorSqueeze {
    /// Squeezes `server`'s processes.
    pub fn apply(server: &Server) -> DescriptorSqueeze {
        let mut pids = vec![server.pid()];
        pids.extend(child_pids(server.pid()));
        let mut restore = Vec::new();
        for pid in pids {
            let soft = soft_nofile(pid);
            prlimit(pid, &format!("{}:", lowest_free_fd(pid)));
            restore.push((pid, soft));
        }
        DescriptorSqueeze { restore }
    }
}

/// Sets the soft RLIMIT_NOFILE of `server`'s processes (its mp workers too) to `n`, as if it
/// had been started under `ulimit -n n` (it raises its limit only at start-up).
pub fn limit_descriptors(server: &Server, n: u32) {
    prlimit(server.pid(), &format!("{n}:"));
    for pid in child_pids(server.pid()) {
        prlimit(pid, &format!("{n}:"));
    }
}

impl Drop for DescriptorSqueeze {
    fn drop(&mut self) {
        for (pid, soft) in &self.restore {
            prlimit(*pid, &format!("{soft}:"));
        }
    }
}

/// The processes whose parent is `pid`.
pub fn child_pids(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(text.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out
}

fn lowest_free_fd(pid: u32) -> u32 {
    let open: std::collections::HashSet<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read /proc/PID/fd")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    (0..).find(|n| !open.contains(n)).unwrap()
}

fn soft_nofile(pid: u32) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("read limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("nofile line");
    line.split_whitespace().nth(3).expect("soft limit").to_string()
}

fn prlimit(pid: u32, nofile: &str) {
    let out = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={nofile}"))
        .output()
        .expect("run prlimit (util-linux)");
    assert!(out.status.success(), "prlimit: {}", String::from_utf8_lossy(&out.stderr));
}
