//! What is specific to the thread and process architectures and to `--instances`: pool and
//! mp workers not held by slow clients (idle, slowloris, slow readers), a pool's overflow
//! answered 503 and counted, graceful shutdown and send timeouts of parked connections, mp
//! workers replaced after a crash, stopped with the parent (gracefully or not) and pinned
//! with `--pin`, and N event loops on one port. These tests name their architecture and do
//! not go through `arch_tests!` (the whole suite runs against each architecture there).

use crate::common::*;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

const STATS: &str = "/.amped/stats";
const BIG_LEN: usize = 16 << 20;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
    write(root, "big.bin", pseudo_random(BIG_LEN, 5));
}

/// A keep-alive connection that has had one request answered.
fn held_connection(s: &Server) -> Conn {
    let mut c = s.conn();
    c.send(req("GET", "/a.txt", ""));
    assert_eq!(c.response().assert_status(200).body, b"AAAA");
    c
}

/// A connection that asked for the 16 MiB file and reads none of it: its worker has sent what
/// the socket buffers take and can send no more.
fn unread_download(s: &Server) -> Conn {
    let mut c = s.conn();
    c.send(req("GET", "/big.bin", ""));
    let mut first = [0u8; 1];
    let n = c.stream.peek(&mut first).expect("the download starts");
    assert_eq!(n, 1);
    c
}

/// `n` connections that send half a request head, then nothing.
fn half_heads(s: &Server, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|i| {
            let mut c = s.conn();
            c.send(format!("GET /a.txt?{i} HTTP/1.1\r\nHost: t\r\n"));
            c
        })
        .collect()
}

/// Finishes the heads of all but the last of `heads` (each then answered 200); the last,
/// never finished, gets its 408 at the header timeout.
fn finish_half_heads(mut heads: Vec<Conn>) {
    let mut last = heads.pop().unwrap();
    for c in &mut heads {
        c.send("Connection: close\r\n\r\n");
    }
    // What is checked here is that each is answered, and rightly; promptness is
    // `normal_requests_are_answered_promptly`'s. On a machine loaded by the whole suite an
    // answer once came later than the usual 5 s read limit (mp, session 19; the cause was not
    // found), so these reads may wait 10 s.
    for c in &mut heads {
        c.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(c.response().assert_status(200).body, b"AAAA");
    }
    // The 408 comes at the header timeout (4 s) after the server first read that head; that
    // too once came later than 5 s under the whole suite.
    last.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(last.response().assert_status(408).status, 408, "the one that never finished");
}

/// 20 normal requests, one after the other on new connections: each answered 200 within 2 s,
/// all within 3 s (while slow clients hold connections open).
fn normal_requests_are_answered_promptly(s: &Server) {
    let start = Instant::now();
    for i in 0..20 {
        let asked = Instant::now();
        let r = get(s.addr, "/a.txt");
        assert_eq!(r.status, 200, "normal request {i} among slow clients: {r:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "request {i} waited {:?}",
            asked.elapsed()
        );
    }
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "slow clients held the workers: {:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// pool

/// `--threads 1 --queue 1` under a burst: 8 clients each open 40 connections as fast as they
/// can, each with a request sent at once. Slow clients no longer hold a worker (they are
/// parked), so only a burst fills the queue: the acceptor outruns the one worker and
/// answers the connections the queue has no room for with a 503 (`Retry-After`,
/// `Connection: close`). Every connection gets a complete answer, 200 or that 503; the 503s
/// are counted in `queue_overflows` and reported on stderr. A burst the worker keeps up with
/// (no 503) is tried again, five bursts at most.
#[test]
fn pool_overflow_is_refused_with_503() {
    let s = Server::start(
        &["--arch", "pool", "--threads", "1", "--queue", "1"],
        &["--stats-path", STATS],
        fill,
    );
    let mut refused = 0;
    for _ in 0..5 {
        let addr = s.addr;
        let clients: Vec<_> = (0..8)
            .map(|_| {
                thread::spawn(move || {
                    let mut conns: Vec<Conn> = (0..40).map(|_| Conn::open(addr)).collect();
                    for c in &mut conns {
                        c.send(get_req("/a.txt"));
                    }
                    conns.iter_mut().map(|c| c.response()).collect::<Vec<_>>()
                })
            })
            .collect();
        for r in clients.into_iter().flat_map(|t| t.join().unwrap()) {
            if r.status == 503 {
                assert!(r.connection_has("close"), "{r:?}");
                assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
                refused += 1;
            } else {
                assert_eq!(r.assert_status(200).body, b"AAAA");
            }
        }
        if refused > 0 {
            break;
        }
    }
    assert!(refused > 0, "five bursts of 320 connections never filled a queue of 1");
    assert!(
        eventually(Duration::from_secs(2), || s.stderr().contains("refused")),
        "no overflow line on stderr: {}",
        s.stderr()
    );
    let st = stats(s.addr, STATS);
    assert_eq!(counter(&st, "queue_overflows"), refused, "{st}");
}

/// `--threads 1`: a client queued behind an idle keep-alive connection is served at once
/// (the worker parks the idle connection instead of waiting on it), and the idle connection
/// is served again when it sends its next request.
#[test]
fn pool_idle_keepalive_connections_do_not_block_the_queue() {
    let s =
        Server::start(&["--arch", "pool", "--threads", "1"], &["--keepalive-timeout", "30"], fill);
    let mut idle = held_connection(&s);
    let start = Instant::now();
    let mut waiting = s.conn();
    waiting.send(req("GET", "/a.txt", ""));
    assert_eq!(waiting.response().assert_status(200).body, b"AAAA");
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(2), "served only after {waited:?}");
    for _ in 0..2 {
        idle.send(req("GET", "/a.txt", ""));
        assert_eq!(idle.response().assert_status(200).body, b"AAAA");
        waiting.send(req("GET", "/a.txt", ""));
        assert_eq!(waiting.response().assert_status(200).body, b"AAAA");
    }
}

/// Slowloris against `--threads 8`: 40 connections that send half a request head and then
/// nothing do not hold the workers — 20 normal requests meanwhile are each answered 200 well
/// within the header timeout, the slow clients are served when they finally finish their
/// heads, and one that never does gets its 408 at the header timeout.
#[test]
fn pool_slowloris_costs_normal_clients_nothing() {
    let s = Server::start(
        &["--arch", "pool", "--threads", "8", "--queue", "64"],
        &["--header-timeout", "4"],
        fill,
    );
    let slow = half_heads(&s, 40);
    normal_requests_are_answered_promptly(&s);
    finish_half_heads(slow);
}

/// Slow readers against `--threads 2`, more of them than workers: 3 connections that ask for
/// the 16 MiB file and read none of it and 2 that read it 64 KiB every 5 ms. A send that would
/// block steps aside while others wait, so none of them holds a worker: 20 normal requests
/// meanwhile are each answered 200 within 2 s. Then every download arrives whole, byte for
/// byte, once its client reads.
#[test]
fn pool_slow_readers_cost_normal_clients_nothing() {
    let s =
        Server::start(&["--arch", "pool", "--threads", "2"], &["--keepalive-timeout", "30"], fill);
    let mut unread: Vec<Conn> = (0..3).map(|_| unread_download(&s)).collect();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let (mut stream, head_len) = start_download(&s);
            thread::spawn(move || read_all_slowly(&mut stream, 64 << 10).split_off(head_len))
        })
        .collect();
    normal_requests_are_answered_promptly(&s);
    let big = pseudo_random(BIG_LEN, 5);
    for c in &mut unread {
        let r = c.response();
        assert_eq!(r.assert_status(200).body.len(), BIG_LEN);
        assert!(r.body == big, "a download parked mid-send came back altered");
    }
    for t in slow {
        let body = t.join().unwrap();
        assert_eq!(body.len(), BIG_LEN, "a slowly read download cut short");
        assert!(body == big, "a slowly read download came back altered");
    }
}

/// SIGTERM to `--threads 1` with its work parked: a download its client does not read yet
/// (parked mid-send while the worker served the others), a connection with half a request
/// head and an idle keep-alive one. The idle one is closed at once; the half head, finished
/// after the signal, is answered with `Connection: close`; the download completes once read;
/// and the server exits 0.
#[test]
fn pool_graceful_shutdown_finishes_parked_work() {
    let mut s = Server::start(
        &["--arch", "pool", "--threads", "1"],
        &["--shutdown-timeout", "8", "--keepalive-timeout", "30"],
        fill,
    );
    let (mut download, head_len) = start_download(&s);
    let mut half = half_heads(&s, 1).pop().unwrap();
    // Answered by the only worker, so the two before it were accepted and stepped aside from.
    let mut idle = held_connection(&s);
    s.signal("TERM");
    idle.assert_closed(Duration::from_secs(2));
    half.send("\r\n");
    let r = half.response();
    assert_eq!(r.assert_status(200).body, b"AAAA");
    assert!(r.connection_has("close"), "{r:?}");
    assert_eq!(read_to_end_slowly(&mut download), head_len + BIG_LEN, "download cut short");
    let status = s.wait_exit(Duration::from_secs(8)).expect("no exit after SIGTERM");
    assert!(status.success(), "exit status {status}");
}

/// GET /big.bin with `Connection: close`; returns the stream and the length of the head.
fn start_download(s: &Server) -> (TcpStream, usize) {
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(get_req("/big.bin").as_bytes()).unwrap();
    let mut buf = [0u8; 4096];
    let n = stream.peek(&mut buf).unwrap();
    let head =
        buf[..n].windows(4).position(|w| w == b"\r\n\r\n").expect("head in the first segment") + 4;
    assert!(buf.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&buf[..n]));
    (stream, head)
}

/// Reads until EOF, pausing between reads (a slow client); returns the byte count.
fn read_to_end_slowly(stream: &mut TcpStream) -> usize {
    let mut total = 0;
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("download failed after {total} bytes: {e}"),
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reads until EOF, at most `chunk` bytes every 5 ms (a slow client); returns what came.
fn read_all_slowly(stream: &mut TcpStream, chunk: usize) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("download failed after {} bytes: {e}", all.len()),
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// mt and pool: a client that keeps reading, but too slowly to finish before the shutdown
/// deadline, is cut off at the deadline and the server exits (with the access log on, whose
/// writer outlives every connection thread). Under `pool --threads 1` the download is parked
/// mid-send when the signal comes (its worker served another client meanwhile).
#[test]
fn blocking_archs_cut_slow_readers_at_the_shutdown_deadline() {
    for arch in [&["--arch", "mt"][..], &["--arch", "pool", "--threads", "1"]] {
        let name = arch[1];
        let logdir = temp_dir();
        let log = logdir.path().join("access.log");
        let mut s = Server::start(
            arch,
            &["--shutdown-timeout", "1", "--access-log", log.to_str().unwrap()],
            fill,
        );
        let (mut download, _) = start_download(&s);
        assert_eq!(get(s.addr, "/a.txt").assert_status(200).body, b"AAAA");
        s.signal("TERM");
        let term = Instant::now();
        let mut chunk = [0u8; 16 << 10];
        let mut total = 0;
        while s.wait_exit(Duration::from_millis(100)).is_none()
            && term.elapsed() < Duration::from_secs(6)
        {
            match download.read(&mut chunk) {
                Ok(n) => total += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => {}
            }
        }
        let status = s
            .wait_exit(Duration::ZERO)
            .unwrap_or_else(|| panic!("{name}: still running 6 s after SIGTERM"));
        assert!(status.success(), "{name}: exit status {status}");
        assert!(total < BIG_LEN, "{name}: the slow client got everything ({total} bytes)");
        assert!(term.elapsed() < Duration::from_secs(4), "{name}: exit took {:?}", term.elapsed());
    }
}

// ---------------------------------------------------------------------------------------------
// mp

/// The live children of process `parent` (from /proc/*/stat; zombies excluded).
fn children(parent: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse::<u32>().ok()));
        if ppid == Some(parent) && state != Some("Z") {
            out.insert(pid);
        }
    }
    out
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

/// The worker pids of an mp server, once all `n` are up.
fn workers(s: &Server, n: usize) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    let up = eventually(Duration::from_secs(5), || {
        found = children(s.pid());
        found.len() == n
    });
    assert!(up, "expected {n} workers, found {found:?}");
    found
}

/// kill -9 of a worker: the parent starts a new one (and says so) and the server keeps serving.
#[test]
fn mp_worker_crash_is_replaced() {
    let mut s = Server::start(&["--arch", "mp", "--processes", "2"], &[], fill);
    let before = workers(&s, 2);
    let victim = *before.iter().next().unwrap();
    let status =
        std::process::Command::new("kill").args(["-KILL", &victim.to_string()]).status().unwrap();
    assert!(status.success());
    let mut now = BTreeSet::new();
    let replaced = eventually(Duration::from_secs(5), || {
        now = children(s.pid());
        now.len() == 2 && !now.contains(&victim)
    });
    assert!(replaced, "worker {victim} not replaced: workers now {now:?}");
    assert!(s.stderr().contains("exited unexpectedly"), "no line on stderr: {}", s.stderr());
    for _ in 0..6 {
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
    }
    s.assert_alive();
}

/// The per-client limits hold for the server, not per worker: `--processes 4
/// --max-connections-per-ip 2` lets two connections in (each held by a worker) and answers a
/// third 429 although two workers are free; a connection that closes frees its place; a
/// worker killed while it holds one gives it back. `--rate-limit-per-ip 1/m --rate-limit-burst
/// 3` over new connections (spread over the workers) serves three requests, then 429.
#[test]
fn mp_client_limits_hold_for_the_whole_server() {
    let args = ["--max-connections-per-ip", "2", "--stats-path", STATS];
    let s = Server::start(&["--arch", "mp", "--processes", "4"], &args, fill);
    let mut open = vec![held_connection(&s), held_connection(&s)];
    assert_refused_over_connection_limit(&s, "/a.txt");
    drop(open.pop());
    thread::sleep(Duration::from_millis(300)); // its worker notices the close
    open.push(held_connection(&s));
    let mut over = s.conn();
    over.send(req("GET", "/a.txt", ""));
    assert_eq!(over.response().status, 429);
    // A worker killed while it holds a connection: the parent frees its place. The other
    // connection stays open, so a new one is served only if the dead worker's place is free.
    let victim = busiest_worker(&workers(&s, 4)).expect("a worker with a client connection");
    let status = std::process::Command::new("kill").args(["-KILL", &victim.to_string()]).status();
    assert!(status.unwrap().success());
    let back = eventually(Duration::from_secs(5), || s.get("/a.txt").status == 200);
    assert!(back, "the dead worker's place was not given back");
    assert!(counter(&stats(s.addr, STATS), "client_limit_refusals") >= 2);
    drop(open);

    let args = ["--rate-limit-per-ip", "1/m", "--rate-limit-burst", "3"];
    let s = Server::start(&["--arch", "mp", "--processes", "4"], &args, fill);
    for _ in 0..3 {
        s.get("/a.txt").assert_status(200);
    }
    let r = s.get("/a.txt");
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("60"));
}

/// Slow clients against `--processes 2`, more of them than workers: 8 connections that send
/// half a request head and then nothing, 2 that trickle a head a byte every 20 ms, and 4 that
/// ask for a 16 MiB file and read none of it. None of them holds a worker: 20 normal requests
/// meanwhile are each answered 200 within 2 s. Then the slow clients are served in full: the
/// half heads when they finish (one that never does gets its 408 at the header timeout), the
/// trickled heads, and the downloads byte for byte once their clients read.
#[test]
fn mp_slow_clients_cost_normal_clients_nothing() {
    let s = Server::start(
        &["--arch", "mp", "--processes", "2"],
        &["--header-timeout", "4", "--keepalive-timeout", "30"],
        fill,
    );
    let heads = half_heads(&s, 8);
    let mut downloads: Vec<Conn> = (0..4).map(|_| unread_download(&s)).collect();
    let tricklers: Vec<_> = (0..2)
        .map(|_| {
            let mut c = s.conn();
            thread::spawn(move || {
                for b in b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".iter() {
                    c.send([*b]);
                    thread::sleep(Duration::from_millis(20));
                }
                c.response()
            })
        })
        .collect();
    normal_requests_are_answered_promptly(&s);
    for t in tricklers {
        assert_eq!(t.join().unwrap().assert_status(200).body, b"AAAA");
    }
    finish_half_heads(heads);
    let big = pseudo_random(BIG_LEN, 5);
    for c in &mut downloads {
        let r = c.response();
        assert_eq!(r.assert_status(200).body.len(), BIG_LEN);
        assert!(r.body == big, "a download parked mid-send came back altered");
    }
}

/// `mp --processes 1` and `pool --threads 1` with `--send-timeout 1`: a download whose
/// client stops reading is parked while the only worker serves another client, and is still
/// cut off at the send timeout: the waiting room keeps its deadline.
#[test]
fn parked_download_keeps_its_send_timeout() {
    for arch in [["--arch", "mp", "--processes", "1"], ["--arch", "pool", "--threads", "1"]] {
        let args = ["--send-timeout", "1", "--stats-path", STATS];
        let s = Server::start(&arch, &args, fill);
        let mut download = unread_download(&s);
        let timeouts = counter(&stats(s.addr, STATS), "timeouts");
        thread::sleep(Duration::from_secs(3)); // parked, and no byte taken for longer than 1 s
        let ended = download.wait_closed(Duration::from_secs(5));
        assert!(
            matches!(ended, Ended::Closed(_)),
            "{arch:?}: the stalled download was never cut off"
        );
        assert!(
            download.pending().len() < BIG_LEN,
            "{arch:?}: the stalled client got the whole body"
        );
        assert!(
            counter(&stats(s.addr, STATS), "timeouts") > timeouts,
            "{arch:?}: no timeout counted"
        );
    }
}

/// The worker (among `pids`) with more sockets open than the others: one holding a client
/// connection besides the listener they all share.
fn busiest_worker(pids: &BTreeSet<u32>) -> Option<u32> {
    let sockets = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
    };
    let counts: Vec<(usize, u32)> = pids.iter().map(|&p| (sockets(p), p)).collect();
    let least = counts.iter().map(|c| c.0).min()?;
    counts.into_iter().filter(|c| c.0 > least).max().map(|c| c.1)
}

/// SIGTERM to the parent reaches every worker: a download in flight completes, every worker
/// exits, and the parent exits 0.
#[test]
fn mp_shutdown_stops_every_worker() {
    let mut s =
        Server::start(&["--arch", "mp", "--processes", "3"], &["--shutdown-timeout", "8"], fill);
    let pids = workers(&s, 3);
    let (mut download, head_len) = start_download(&s);
    s.signal("TERM");
    assert_eq!(read_to_end_slowly(&mut download), head_len + BIG_LEN, "download cut short");
    let status = s.wait_exit(Duration::from_secs(8)).expect("no exit after SIGTERM");
    assert!(status.success(), "exit status {status}");
    let lingering: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(lingering.is_empty(), "workers still running after the parent exited: {lingering:?}");
}

/// A parent killed outright (no chance to forward anything) takes its workers with it
/// (`PR_SET_PDEATHSIG`).
#[test]
fn mp_workers_exit_when_the_parent_dies() {
    let mut s = Server::start(&["--arch", "mp", "--processes", "2"], &[], fill);
    let pids = workers(&s, 2);
    s.signal("KILL");
    s.wait_exit(Duration::from_secs(3)).expect("parent survived SIGKILL");
    let gone = eventually(Duration::from_secs(3), || pids.iter().all(|&p| !alive(p)));
    assert!(gone, "orphaned workers still running: {pids:?}");
}

/// The CPUs the process or thread at `/proc/.../status` may run on, as listed there.
fn cpus_allowed(status_path: &str) -> Option<String> {
    let status = std::fs::read_to_string(status_path).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

/// How many CPUs the test may use, if they are numbered 0..n (else pinning is not checked).
fn contiguous_cpus() -> Option<usize> {
    let n = thread::available_parallelism().ok()?.get();
    let all = if n == 1 { "0".to_string() } else { format!("0-{}", n - 1) };
    (cpus_allowed("/proc/self/status")? == all).then_some(n)
}

/// `--pin` with mp: worker i runs on CPU i mod the number of CPUs.
#[test]
fn mp_pin_places_workers_on_cpus() {
    let Some(ncpus) = contiguous_cpus() else { return };
    let s = Server::start(&["--arch", "mp", "--processes", "2", "--pin"], &[], fill);
    let pids = workers(&s, 2);
    let want: BTreeSet<String> = (0..2).map(|i| (i % ncpus).to_string()).collect();
    // A worker just forked runs on its parent's CPUs until its pre-exec hook has pinned it.
    let mut got = BTreeSet::new();
    let pinned = eventually(Duration::from_secs(3), || {
        got = pids
            .iter()
            .map(|p| cpus_allowed(&format!("/proc/{p}/status")).expect("worker status"))
            .collect();
        got == want
    });
    assert!(pinned, "workers on CPUs {got:?}, expected {want:?}");
    assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
}

// ---------------------------------------------------------------------------------------------
// --instances

/// Listening sockets on `port` (IPv4), from /proc/net/tcp.
fn listening_sockets(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&local) && f[3] == "0A"
        })
        .count()
}

/// `--instances 2 --pin`: two listening sockets share the port (SO_REUSEPORT), the event
/// loops run pinned to CPUs 0 and 1, and many clients at once are all served.
#[test]
fn instances_share_the_port_and_pin() {
    let s = Server::start(&["--arch", "amped", "--instances", "2", "--pin"], &[], fill);
    assert_eq!(listening_sockets(s.addr.port()), 2, "expected two SO_REUSEPORT listeners");
    let addr = s.addr;
    let clients: Vec<_> = (0..16).map(|_| thread::spawn(move || get(addr, "/a.txt"))).collect();
    for c in clients {
        assert_eq!(c.join().unwrap().assert_status(200).body, b"AAAA");
    }
    let Some(ncpus) = contiguous_cpus() else { return };
    let pinned: BTreeSet<String> = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
        .unwrap()
        .flatten()
        .filter_map(|t| cpus_allowed(&t.path().join("status").to_string_lossy()))
        .filter(|c| !c.contains([',', '-']))
        .collect();
    let want: BTreeSet<String> = (0..2).map(|i| (i % ncpus).to_string()).collect();
    assert_eq!(pinned, want, "CPUs of the pinned threads");
}
