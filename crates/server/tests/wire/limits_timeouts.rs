//! Timeouts (header, keep-alive, send), --max-connections and graceful shutdown. All timeouts
//! are set to about one second so each test takes a few seconds.

use crate::common::*;
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

const BIG_LEN: usize = 20 << 20;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
    write(root, "big.bin", pseudo_random(BIG_LEN, 9));
}

/// Assert `c` is closed by the server between `min` and `max` after `since`.
fn assert_closed_between(c: &mut Conn, since: Instant, min: Duration, max: Duration) {
    let ended = c.wait_closed(max.saturating_sub(since.elapsed()));
    let Ended::Closed(_) = ended else {
        panic!("connection still open {max:?} after the start");
    };
    let at = since.elapsed();
    assert!(at >= min, "closed too early, after {at:?} (< {min:?})");
    // A 408 before closing is fine; anything else is not.
    if !c.pending().is_empty() {
        let rs = split_responses(c.pending());
        assert!(rs.len() == 1 && rs[0].status == 408, "unexpected bytes before close: {rs:?}");
    }
}

/// Read the rest of a `len`-byte body from `c` (after its head), returning how many body bytes
/// arrived before EOF, reset or `limit`, and whether they equal `expect`'s prefix.
fn read_body(
    stream: &mut TcpStream,
    already: &[u8],
    expect: &[u8],
    pace: Option<Duration>,
) -> (usize, bool, bool) {
    let mut got = already.to_vec();
    let mut chunk = vec![0u8; 256 * 1024];
    let mut closed = false;
    while got.len() < expect.len() {
        match stream.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => {
                closed = true;
                break;
            }
        }
        if let Some(p) = pace {
            thread::sleep(p);
        }
    }
    let n = got.len().min(expect.len());
    (got.len(), got[..n] == expect[..n], closed)
}

/// Send a GET for /big.bin and read its head (plus whatever body bytes came along).
fn start_big_download(s: &Server) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    std::io::Write::write_all(&mut stream, req("GET", "/big.bin", "").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = stream.read(&mut chunk).expect("read head");
        assert!(n > 0, "closed before the head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains(&format!("content-length: {BIG_LEN}\r\n")),
        "{head}"
    );
    (stream, buf[end..].to_vec())
}

arch_tests! {
    /// A connection that sends nothing is closed after --header-timeout.
    fn header_timeout_idle(arch) {
        let s = Server::start(arch, &["--header-timeout", "1"], fill);
        let start = Instant::now();
        let mut c = s.conn();
        assert_closed_between(&mut c, start, Duration::from_millis(800), Duration::from_secs(4));
    }

    /// Half a head, then silence: closed after --header-timeout.
    fn header_timeout_partial_head(arch) {
        let s = Server::start(arch, &["--header-timeout", "1"], fill);
        let start = Instant::now();
        let mut c = s.conn();
        c.send("GET /a.txt HTTP/1.1\r\nHo");
        assert_closed_between(&mut c, start, Duration::from_millis(800), Duration::from_secs(4));
    }

    /// A slowloris client trickling a byte every 200 ms does not extend the header timeout.
    fn header_timeout_slowloris(arch) {
        let s = Server::start(arch, &["--header-timeout", "1"], fill);
        let start = Instant::now();
        let mut c = s.conn();
        let head = req("GET", "/a.txt", &"X-Slow: zzzzzzzzzzzzzzzzzzzz\r\n".repeat(4));
        for byte in head.as_bytes() {
            if std::io::Write::write_all(&mut c.stream, &[*byte]).is_err() {
                break; // closed by the server
            }
            if start.elapsed() > Duration::from_secs(5) {
                break;
            }
            thread::sleep(Duration::from_millis(200));
        }
        assert_closed_between(&mut c, start, Duration::from_millis(800), Duration::from_secs(5));
        assert!(!contains(c.pending(), b"AAAA"), "slowloris got served");
    }

    /// On a keep-alive connection, a second head that stops half-way is cut off by the header
    /// timeout, not left to the (longer) keep-alive timeout.
    fn header_timeout_on_second_request(arch) {
        let s = Server::start(arch, &["--header-timeout", "1", "--keepalive-timeout", "30"], fill);
        let mut c = s.conn();
        c.send(req("GET", "/a.txt", ""));
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        let start = Instant::now();
        c.send("GET /a.txt HTTP/1.1\r\nHo");
        assert_closed_between(&mut c, start, Duration::from_millis(800), Duration::from_secs(4));
    }

    /// The header timeout does not cut off a client that sends its head promptly.
    fn header_timeout_not_premature(arch) {
        let s = Server::start(arch, &["--header-timeout", "1"], fill);
        let mut c = s.conn();
        thread::sleep(Duration::from_millis(500));
        c.send(req("GET", "/a.txt", ""));
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
    }

    /// An idle keep-alive connection is closed after --keepalive-timeout.
    fn keepalive_timeout(arch) {
        let s = Server::start(arch, &["--keepalive-timeout", "1", "--header-timeout", "10"], fill);
        let mut c = s.conn();
        c.send(req("GET", "/a.txt", ""));
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
        let start = Instant::now();
        assert_closed_between(&mut c, start, Duration::from_millis(800), Duration::from_secs(4));
    }

    /// A keep-alive connection used within the timeout stays usable.
    fn keepalive_reused_within_timeout(arch) {
        let s = Server::start(arch, &["--keepalive-timeout", "2"], fill);
        let mut c = s.conn();
        for _ in 0..3 {
            c.send(req("GET", "/a.txt", ""));
            assert_eq!(c.response().assert_status(200).body, b"AAAA");
            thread::sleep(Duration::from_millis(700));
        }
    }

    /// A client that stops reading a large response is cut off after --send-timeout.
    fn send_timeout(arch) {
        let mut s = Server::start(arch, &["--send-timeout", "1"], fill);
        let (mut stream, already) = start_big_download(&s);
        thread::sleep(Duration::from_millis(3500)); // stall: socket buffers fill up
        stream.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let expect = pseudo_random(BIG_LEN, 9);
        let (got, same, closed) = read_body(&mut stream, &already, &expect, None);
        assert!(same, "body bytes differ from the file");
        assert!(got < BIG_LEN, "stalled client received the whole body: no send timeout");
        assert!(closed, "server neither finished nor closed the stalled connection");
        s.assert_alive();
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
    }

    /// --max-connections 2: a third connection waits until one closes, then is served.
    fn max_connections_waits(arch) {
        // With --instances N the cap applies to each event loop (SO_REUSEPORT spreads
        // connections over the loops), so a third connection may rightly be served by another.
        if arch.contains(&"--instances") {
            return;
        }
        let mut s = Server::start(arch, &["--max-connections", "2"], fill);
        let mut c1 = s.conn();
        let mut c2 = s.conn();
        for c in [&mut c1, &mut c2] {
            c.send(req("GET", "/a.txt", ""));
            assert_eq!(c.response().assert_status(200).body, b"AAAA");
        }
        // The third connection may complete in the kernel's backlog but must not be served.
        let mut c3 = match TcpStream::connect_timeout(&s.addr, Duration::from_secs(2)) {
            Ok(stream) => {
                stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                stream
            }
            Err(e) => panic!("third connect failed outright: {e}"),
        };
        std::io::Write::write_all(&mut c3, req("GET", "/a.txt", "Connection: close\r\n").as_bytes()).unwrap();
        let mut buf = [0u8; 1024];
        match read_within(&mut c3, &mut buf, Duration::from_millis(800)) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("third connection answered while two are open: {other:?}"),
        }
        s.assert_alive();
        drop(c1);
        c3.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
        let mut got = Vec::new();
        let _ = c3.read_to_end(&mut got);
        let rs = split_responses(&got);
        assert_eq!(rs.len(), 1, "{:?}", String::from_utf8_lossy(&got));
        assert_eq!(rs[0].assert_status(200).body, b"AAAA");
        // c2 is still served
        c2.send(req("GET", "/a.txt", ""));
        assert_eq!(c2.response().assert_status(200).body, b"AAAA");
    }

    /// --max-connections 2 with 12 clients at once: all are served in turn, no crash.
    fn max_connections_many_clients(arch) {
        let mut s = Server::start(arch, &["--max-connections", "2"], fill);
        let addr = s.addr;
        let handles: Vec<_> = (0..12)
            .map(|_| thread::spawn(move || get(addr, "/a.txt")))
            .collect();
        for h in handles {
            let r = h.join().expect("client thread");
            assert_eq!(r.assert_status(200).body, b"AAAA");
        }
        s.assert_alive();
    }

    /// Out of descriptors (the server's RLIMIT_NOFILE lowered under it with prlimit): held
    /// connections pile up in the backlog, the server neither crashes nor spins on the ready
    /// listener, and once the clients let go it serves again.
    fn out_of_descriptors_backs_off(arch) {
        let mut s = Server::start(arch, &[], fill);
        let pid = s.pid();
        let st = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), "--nofile=40:40"])
            .status()
            .expect("run prlimit");
        assert!(st.success(), "prlimit failed");
        let held: Vec<TcpStream> =
            (0..80).filter_map(|_| TcpStream::connect_timeout(&s.addr, Duration::from_secs(1)).ok()).collect();
        assert!(held.len() >= 40, "only {} connects succeeded", held.len());
        thread::sleep(Duration::from_millis(300));
        let cpu_before = cpu_seconds(pid);
        thread::sleep(Duration::from_secs(1));
        let spent = cpu_seconds(pid) - cpu_before;
        assert!(spent < 0.5, "server burned {spent:.2} s of CPU in 1 s while out of descriptors");
        s.assert_alive();
        drop(held);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let ok = TcpStream::connect_timeout(&s.addr, Duration::from_secs(1)).ok().and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
                std::io::Write::write_all(&mut c, req("GET", "/a.txt", "Connection: close\r\n").as_bytes()).ok()?;
                let mut got = Vec::new();
                let _ = c.read_to_end(&mut got);
                Some(got)
            });
            if let Some(got) = ok {
                let rs = split_responses(&got);
                if rs.len() == 1 && rs[0].status == 200 {
                    assert_eq!(rs[0].body, b"AAAA");
                    break;
                }
            }
            assert!(Instant::now() < deadline, "not serving again 5 s after the clients let go");
            thread::sleep(Duration::from_millis(100));
        }
        s.assert_alive();
    }

    /// SIGTERM during a slowly read 20 MiB response: the body completes, new connections are
    /// refused, and the process exits 0 within the shutdown timeout.
    fn graceful_shutdown(arch) {
        let mut s = Server::start(arch, &["--shutdown-timeout", "8"], fill);
        let (mut stream, already) = start_big_download(&s);
        let expect = pseudo_random(BIG_LEN, 9);
        s.signal("TERM");
        let term_at = Instant::now();
        thread::sleep(Duration::from_millis(300));
        // New connections: refused (or closed at once), never left hanging unanswered.
        if let Ok(mut late) = TcpStream::connect_timeout(&s.addr, Duration::from_secs(1)) {
            late.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
            let _ = std::io::Write::write_all(&mut late, get_req("/a.txt").as_bytes());
            let mut buf = [0u8; 64];
            match late.read(&mut buf) {
                Ok(n) => assert_eq!(n, 0, "a connection made after SIGTERM was answered: {:?}", String::from_utf8_lossy(&buf[..n])),
                Err(e) => assert!(
                    !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                    "a connection made after SIGTERM was accepted and left hanging"
                ),
            }
        }
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let (got, same, _) = read_body(&mut stream, &already, &expect, Some(Duration::from_millis(5)));
        assert_eq!(got, BIG_LEN, "in-flight body cut short by shutdown");
        assert!(same, "in-flight body corrupted");
        let status = s.wait_exit(Duration::from_secs(8).saturating_sub(term_at.elapsed()) + Duration::from_secs(2))
            .expect("server did not exit after SIGTERM");
        assert!(status.success(), "exit status {status}");
    }

    /// A client that never reads cannot hold shutdown beyond --shutdown-timeout.
    fn shutdown_deadline(arch) {
        let mut s = Server::start(arch, &["--shutdown-timeout", "1"], fill);
        let (_stalled, _) = start_big_download(&s);
        let start = Instant::now();
        s.signal("TERM");
        let status = s.wait_exit(Duration::from_secs(4));
        assert!(status.is_some(), "server still running 4 s after SIGTERM with --shutdown-timeout 1");
        assert!(start.elapsed() >= Duration::from_millis(500), "exited before trying to finish the response");
    }

    /// SIGINT on an idle server: exit 0 promptly.
    fn sigint_exits_cleanly(arch) {
        let mut s = Server::start(arch, &[], fill);
        let mut idle = s.conn(); // an idle keep-alive connection must not delay exit much
        idle.send(req("GET", "/a.txt", ""));
        idle.response().assert_status(200);
        s.signal("INT");
        let status = s.wait_exit(Duration::from_secs(4)).expect("no exit after SIGINT");
        assert!(status.success(), "exit status {status}");
    }

    /// 300 idle connections do not stop the server from serving a new one, and each of them is
    /// then served too.
    fn many_idle_connections(arch) {
        // mp serves one connection per worker process (prefork): 300 idle connections occupy
        // every worker until they time out, by design. archs_specific tests what it does instead.
        if arch.contains(&"mp") {
            return;
        }
        let s = Server::start(arch, &[], fill);
        let mut idle: Vec<Conn> = (0..300).map(|_| s.conn()).collect();
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        for c in &mut idle {
            c.send(req("GET", "/a.txt", ""));
        }
        for c in &mut idle {
            assert_eq!(c.response().assert_status(200).body, b"AAAA");
        }
    }
}

/// User + system CPU seconds the process (all its threads) has used, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    let after_comm = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_comm.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5); after the comm they are 11 and 12 (0-based).
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}
