//! What is specific to `--arch staged` (the whole suite runs against it in `arch_tests!`):
//! the thread-pool controller grows the resolve stage under load, never beyond
//! `--stage-threads-max`, and shrinks it back once idle; a full stage queue answers 503 with
//! `Retry-After` and counts it; graceful shutdown answers every request already read; cold
//! file chunks travel through the read stage and arrive exact under eviction.
//!
//! The slow job is a directory listing (`--listing`, never cached: each request is a resolve
//! job that reads and renders a 2000-entry directory), so the resolve queue grows under a
//! handful of clients without any timing trick.

use crate::common::*;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const STATS: &str = "/.amped/stats";
const ENTRIES: usize = 2000;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
    let dir = root.join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..ENTRIES {
        std::fs::write(dir.join(format!("entry-{i:05}.txt")), "x").unwrap();
    }
}

fn start(extra: &[&str]) -> Server {
    let mut args = vec!["--listing", "--stats-path", STATS];
    args.extend_from_slice(extra);
    Server::start(&["--arch", "staged"], &args, fill)
}

/// A gauge of the resolve stage.
fn resolve(s: &Server, gauge: &str) -> u64 {
    let st = stats(s.addr, STATS);
    st["stages"]["resolve"][gauge]
        .as_u64()
        .unwrap_or_else(|| panic!("stats lack stages.resolve.{gauge}: {st}"))
}

/// `clients` keep-alive clients asking for the listing back to back until `stop` is set.
fn listing_load(
    s: &Server,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<u64>> {
    (0..clients)
        .map(|_| {
            let (addr, stop) = (s.addr, stop.clone());
            thread::spawn(move || {
                let mut c = Conn::open(addr);
                let mut ok = 0;
                while !stop.load(Ordering::Relaxed) {
                    c.send(req("GET", "/many/", ""));
                    c.response().assert_status(200);
                    ok += 1;
                }
                ok
            })
        })
        .collect()
}

#[test]
fn staged_controller_grows_under_load_and_shrinks_when_idle() {
    let s = start(&["--stage-threads-max", "3"]);
    assert_eq!(resolve(&s, "threads"), 1, "a stage starts with one thread");
    let stop = Arc::new(AtomicBool::new(false));
    let load = listing_load(&s, 24, &stop);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut most = 1;
    while most < 2 && Instant::now() < deadline {
        most = most.max(resolve(&s, "threads"));
        thread::sleep(Duration::from_millis(50));
    }
    // Let the controller run a little longer under load: it must stop at the maximum.
    thread::sleep(Duration::from_millis(800));
    most = most.max(resolve(&s, "threads"));
    stop.store(true, Ordering::Relaxed);
    let served: u64 = load.into_iter().map(|h| h.join().expect("a client failed")).sum();
    assert!(
        most >= 2,
        "24 clients of a slow listing never grew the resolve stage ({served} served)"
    );
    assert!(most <= 3, "the resolve stage grew to {most} threads, beyond --stage-threads-max 3");
    assert!(resolve(&s, "peak_threads") <= 3);
    let idle_deadline = Instant::now() + Duration::from_secs(15);
    while resolve(&s, "threads") > 1 && Instant::now() < idle_deadline {
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(resolve(&s, "threads"), 1, "idle threads did not retire");
    assert_eq!(resolve(&s, "queue"), 0);
    assert!(resolve(&s, "jobs") >= served, "every listing is a resolve job");
}

/// One thread, a queue of one, batches of one: requests arriving together find the queue full.
#[test]
fn staged_full_queue_answers_503_and_counts_it() {
    let s = start(&["--stage-threads-max", "1", "--stage-queue", "1", "--stage-batch-max", "1"]);
    let mut refused = 0;
    for _round in 0..10 {
        let mut conns: Vec<Conn> = (0..12).map(|_| s.conn()).collect();
        for c in &mut conns {
            c.send(req("GET", "/many/", ""));
        }
        for c in &mut conns {
            let r = c.response();
            match r.status {
                200 => assert!(r.text().contains("entry-01999.txt")),
                503 => {
                    refused += 1;
                    assert_eq!(r.header("Retry-After"), Some("1"));
                    assert!(r.connection_has("close"));
                    c.assert_closed(Duration::from_secs(3));
                }
                other => panic!("unexpected status {other}"),
            }
        }
        if refused > 0 {
            break;
        }
    }
    assert!(refused > 0, "a queue of one never overflowed under 12 simultaneous listings");
    let st = stats(s.addr, STATS);
    assert_eq!(counter(&st, "queue_overflows"), refused);
    assert_eq!(st["stages"]["resolve"]["refused"].as_u64(), Some(refused));
    assert!(s.stderr().contains("resolve queue full"), "stderr: {}", s.stderr());
    s.get("/a.txt").assert_status(200);
}

/// SIGTERM while listings are queued or running: every request already sent is answered in
/// full, and the process exits 0 with its stage threads joined.
#[test]
fn staged_shutdown_answers_queued_requests() {
    let mut s = start(&["--stage-threads-max", "1", "--shutdown-timeout", "8"]);
    let mut conns: Vec<Conn> = (0..8).map(|_| s.conn()).collect();
    for c in &mut conns {
        c.send(req("GET", "/many/", ""));
    }
    thread::sleep(Duration::from_millis(200));
    s.signal("TERM");
    for c in &mut conns {
        let r = c.response();
        r.assert_status(200);
        assert!(r.text().contains("entry-01999.txt"), "listing cut short");
        let mut rest = c.pending().to_vec();
        let _ = c.stream.read_to_end(&mut rest);
        assert!(rest.is_empty(), "bytes after the response: {rest:?}");
    }
    let status = s.wait_exit(Duration::from_secs(10)).expect("no exit after SIGTERM");
    assert!(status.success(), "exit status {status}");
}

/// Cold chunks of a large file go through the read stage (pipe fills, the default read path),
/// and the body is exact although its pages keep being evicted while it is sent.
#[test]
fn staged_read_stage_carries_cold_chunks_exactly() {
    let st = crate::read_path::cold_fetch_under_eviction("staged", &[]);
    assert!(counter(&st, "pipe_fills") >= 1, "no pipe fill: {st}");
    let read_jobs = st["stages"]["read"]["jobs"].as_u64().unwrap_or(0);
    assert!(read_jobs >= 1, "the read stage ran no job: {st}");
    assert_eq!(read_jobs + counter(&st, "jobs_inline"), counter(&st, "pipe_fills"), "{st}");
}
