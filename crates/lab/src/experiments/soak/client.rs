//! A small HTTP/1.1 client for the soak: raw bytes out, a response head parsed with httparse,
//! bodies framed by Content-Length, chunked coding or the close, each byte handed to a
//! checker as it arrives. Every wait is bounded: reads wake every [`TICK`] to look at the
//! quit flag (Ctrl-C) and give up after `io_timeout` without a byte; a slow reader's pace is
//! part of the read loop.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a blocked read looks at the quit flag.
const TICK: Duration = Duration::from_millis(200);
/// Largest response head read.
const MAX_HEAD: usize = 64 << 10;

/// Why reading stopped before the answer was whole.
#[derive(Clone, Debug, PartialEq)]
pub enum Cut {
    /// The peer closed (EOF).
    Closed,
    /// Reset, or another socket error.
    Reset(String),
    /// No byte for the I/O timeout.
    Timeout,
    /// Ctrl-C: the run is being abandoned.
    Quit,
    /// Not HTTP (an unparsable or oversized head).
    Garbage,
}

/// A parsed response head.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Head {
    pub status: u16,
    pub content_length: Option<u64>,
    pub chunked: bool,
    /// `Content-Range: bytes first-last/total`.
    pub content_range: Option<(u64, u64, u64)>,
    /// `Connection: close`, or HTTP/1.0 without keep-alive.
    pub close: bool,
}

/// A slow reader's pace: at most `bytes_per_s` until `until` (or until `hurry` is set).
#[derive(Clone, Copy, Debug)]
pub struct Pace<'a> {
    pub bytes_per_s: f64,
    pub until: Instant,
    pub hurry: &'a AtomicBool,
}

/// One connection with its unread bytes.
pub struct Conn<'a> {
    stream: TcpStream,
    buf: Vec<u8>,
    quit: &'a AtomicBool,
    io_timeout: Duration,
    /// Answers read on it so far.
    pub answers: u32,
}

/// Connects to 127.0.0.1:`port`; with `rcvbuf`, the receive buffer is set that small before
/// connecting (so the window stays small and the server, not the kernel, holds the rest).
pub fn connect(port: u16, rcvbuf: Option<usize>) -> io::Result<TcpStream> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = match rcvbuf {
        None => TcpStream::connect_timeout(&addr, Duration::from_secs(10))?,
        Some(size) => {
            use rustix::net::{AddressFamily, SocketType, sockopt};
            let fd: OwnedFd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)?;
            sockopt::set_socket_recv_buffer_size(&fd, size)?;
            rustix::net::connect(&fd, &addr)?;
            TcpStream::from(fd)
        }
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

impl<'a> Conn<'a> {
    /// Wraps a connected stream.
    pub fn new(stream: TcpStream, quit: &'a AtomicBool, io_timeout: Duration) -> Conn<'a> {
        let _ = stream.set_read_timeout(Some(TICK));
        let _ = stream.set_write_timeout(Some(io_timeout));
        Conn { stream, buf: Vec::new(), quit, io_timeout, answers: 0 }
    }

    /// Sends bytes (a write error is a cut: reset or closed).
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Cut> {
        self.stream.write_all(bytes).map_err(|e| io_cut(&e))
    }

    /// Half-closes the sending side.
    pub fn finish_sending(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// Bytes already read past what was consumed.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Whether the server has closed or answered: a non-waiting look (for slowloris).
    pub fn peek_closed_or_answered(&mut self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        let _ = self.stream.set_nonblocking(true);
        let mut b = [0u8; 4096];
        let r = self.stream.read(&mut b);
        let _ = self.stream.set_nonblocking(false);
        match r {
            Ok(0) => true,
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(_) => true,
        }
    }

    /// Reads at least one more byte into the buffer (at most `max`).
    fn fill(&mut self, max: usize) -> Result<usize, Cut> {
        let mut chunk = [0u8; 64 << 10];
        let max = max.clamp(1, chunk.len());
        let started = Instant::now();
        loop {
            if self.quit.load(Ordering::Relaxed) {
                return Err(Cut::Quit);
            }
            match self.stream.read(&mut chunk[..max]) {
                Ok(0) => return Err(Cut::Closed),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if started.elapsed() >= self.io_timeout {
                        return Err(Cut::Timeout);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_cut(&e)),
            }
        }
    }

    /// Reads a response head. `Err(Closed)` with nothing read means the server closed first.
    pub fn read_head(&mut self) -> Result<Head, Cut> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let head = head_of(&resp);
                    self.buf.drain(..n);
                    if (100..200).contains(&head.status) {
                        continue; // 100 Continue and friends: the real answer follows
                    }
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if self.buf.len() < MAX_HEAD => {}
                _ => return Err(Cut::Garbage),
            }
            self.fill(usize::MAX)?;
        }
    }

    /// Reads a body framed as `head` says, handing each piece to `sink`; `head_request`: no
    /// body follows. Ok(()) when it arrived whole.
    pub fn read_body(
        &mut self,
        head: &Head,
        head_request: bool,
        pace: Option<Pace<'_>>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<(), Cut> {
        if head_request || head.status == 204 || head.status == 304 {
            return Ok(());
        }
        let mut reader = Paced { conn: self, pace, t0: Instant::now(), taken: 0 };
        if head.chunked {
            return reader.chunked(sink);
        }
        match head.content_length {
            Some(n) => reader.exactly(n, sink),
            None => loop {
                match reader.next(u64::MAX) {
                    Ok(piece) => sink(&piece),
                    Err(Cut::Closed) => return Ok(()),
                    Err(e) => return Err(e),
                }
            },
        }
    }
}

/// A body reader that keeps a slow reader's pace.
struct Paced<'c, 'a, 'p> {
    conn: &'c mut Conn<'a>,
    pace: Option<Pace<'p>>,
    t0: Instant,
    taken: u64,
}

impl Paced<'_, '_, '_> {
    /// The next bytes of the stream, at most `max`.
    fn next(&mut self, max: u64) -> Result<Vec<u8>, Cut> {
        let mut max = max;
        if let Some(p) = self.pace
            && Instant::now() < p.until
            && !p.hurry.load(Ordering::Relaxed)
        {
            // Wait until the budget allows a small read.
            let allowed = p.bytes_per_s * self.t0.elapsed().as_secs_f64() - self.taken as f64;
            if allowed < 512.0 {
                if self.conn.quit.load(Ordering::Relaxed) {
                    return Err(Cut::Quit);
                }
                std::thread::sleep(Duration::from_millis(50));
                return Ok(Vec::new());
            }
            max = max.min(allowed as u64).min(4096);
        }
        if self.conn.buf.is_empty() {
            self.conn.fill(usize::try_from(max).unwrap_or(usize::MAX))?;
        }
        let n = (self.conn.buf.len() as u64).min(max) as usize;
        self.taken += n as u64;
        Ok(self.conn.buf.drain(..n).collect())
    }

    fn exactly(&mut self, mut left: u64, sink: &mut dyn FnMut(&[u8])) -> Result<(), Cut> {
        while left > 0 {
            let piece = self.next(left)?;
            left -= piece.len() as u64;
            sink(&piece);
        }
        Ok(())
    }

    fn line(&mut self) -> Result<String, Cut> {
        let mut line = Vec::new();
        loop {
            if let Some(at) = self.conn.buf.iter().position(|&b| b == b'\n') {
                line.extend(self.conn.buf.drain(..=at));
                return Ok(String::from_utf8_lossy(&line).trim().to_string());
            }
            if self.conn.buf.len() > 4096 {
                return Err(Cut::Garbage);
            }
            self.conn.fill(usize::MAX)?;
        }
    }

    fn chunked(&mut self, sink: &mut dyn FnMut(&[u8])) -> Result<(), Cut> {
        loop {
            let size_line = self.line()?;
            let hex = size_line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(hex, 16).map_err(|_| Cut::Garbage)?;
            if size == 0 {
                // Trailers until the empty line.
                while !self.line()?.is_empty() {}
                return Ok(());
            }
            self.exactly(size, sink)?;
            self.line()?;
        }
    }
}

fn head_of(resp: &httparse::Response<'_, '_>) -> Head {
    let mut head = Head { status: resp.code.unwrap_or(0), ..Head::default() };
    let mut keep_alive = false;
    for h in resp.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        let value = value.trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            head.content_length = value.parse().ok();
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().ends_with("chunked");
        } else if h.name.eq_ignore_ascii_case("content-range") {
            head.content_range = parse_content_range(value);
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            head.close |= v.contains("close");
            keep_alive |= v.contains("keep-alive");
        }
    }
    if resp.version == Some(0) && !keep_alive {
        head.close = true;
    }
    head
}

/// `bytes first-last/total`.
pub fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    Some((first.trim().parse().ok()?, last.trim().parse().ok()?, total.trim().parse().ok()?))
}

fn io_cut(e: &io::Error) -> Cut {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Cut::Timeout,
        ErrorKind::UnexpectedEof => Cut::Closed,
        _ => Cut::Reset(e.kind().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn reads_framed_chunked_and_close_delimited_bodies() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 206 Partial Content\r\nContent-Range: bytes 2-4/10\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n2;x=1\r\nuv\r\n0\r\n\r\nHTTP/1.0 200 OK\r\n\r\nto the end").unwrap();
        });
        let quit = AtomicBool::new(false);
        let mut c = Conn::new(connect(port, Some(4096)).unwrap(), &quit, Duration::from_secs(5));
        let mut got = Vec::new();
        let h = c.read_head().unwrap();
        assert_eq!((h.status, h.content_range), (206, Some((2, 4, 10))));
        c.read_body(&h, false, None, &mut |b| got.extend_from_slice(b)).unwrap();
        let h = c.read_head().unwrap();
        assert!(h.chunked && !h.close);
        c.read_body(&h, false, None, &mut |b| got.extend_from_slice(b)).unwrap();
        let h = c.read_head().unwrap();
        assert!(h.close);
        server.join().unwrap();
        c.read_body(&h, false, None, &mut |b| got.extend_from_slice(b)).unwrap();
        assert_eq!(got, b"abcxyzuvto the end");
        assert_eq!(c.read_head(), Err(Cut::Closed));
    }

    #[test]
    fn a_paced_body_takes_its_time_and_a_silent_server_times_out() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n").unwrap();
            s.write_all(&[7u8; 3000]).unwrap();
            let (s2, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(900));
            drop((s, s2));
        });
        let quit = AtomicBool::new(false);
        let hurry = AtomicBool::new(false);
        let mut c = Conn::new(connect(port, None).unwrap(), &quit, Duration::from_secs(5));
        let h = c.read_head().unwrap();
        let t = Instant::now();
        let pace = Pace { bytes_per_s: 6000.0, until: t + Duration::from_secs(5), hurry: &hurry };
        let mut n = 0;
        c.read_body(&h, false, Some(pace), &mut |b| n += b.len()).unwrap();
        assert_eq!(n, 3000);
        assert!(t.elapsed() >= Duration::from_millis(350), "{:?}", t.elapsed());
        let mut c2 = Conn::new(connect(port, None).unwrap(), &quit, Duration::from_millis(400));
        assert_eq!(c2.read_head(), Err(Cut::Timeout));
        server.join().unwrap();
    }
}
