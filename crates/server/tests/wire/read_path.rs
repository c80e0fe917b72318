//! The read path of cold file data, for real: chunks found not resident go through a pipe
//! filled by a helper (`--read-path pipe`, the default), a read-ahead (`--read-path
//! read-ahead`) or a helper's read into a buffer (`--read-path copy`), and either way the body is exact — also when the file's pages are evicted
//! again and again while it is being sent (the race between the residency test and the send).
//! These tests name their architecture and do not go through `arch_tests!`.

use crate::amped_helpers::evict;
use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const STATS: &str = "/.amped/stats";
const LEN: usize = 6 << 20;

fn fill(root: &std::path::Path) {
    write(root, "big.bin", pseudo_random(LEN, 7));
    write(root, "small.txt", "hello\n");
}

/// GETs `path` reading slowly (64 KiB, then a pause) and returns the body.
fn slow_get(s: &Server, path: &str) -> Vec<u8> {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut all = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = c.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
        thread::sleep(Duration::from_micros(300));
    }
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    assert!(all.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&all[..split]));
    all.split_off(split)
}

/// Fetches the cold file with the given extra options, evicting its pages over and over while
/// it is sent, and returns the stats afterwards.
pub(crate) fn cold_fetch_under_eviction(arch: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--stats-path", STATS];
    args.extend_from_slice(extra);
    let s = Server::start(&["--arch", arch], &args, fill);
    let path = s.path("big.bin");
    evict(&path);
    let stop = AtomicBool::new(false);
    let body = thread::scope(|scope| {
        scope.spawn(|| {
            let file = std::fs::File::open(&path).unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                amped_sys::residency::evict(&file).unwrap();
                thread::sleep(Duration::from_millis(2));
            }
        });
        let body = slow_get(&s, "/big.bin");
        stop.store(true, Ordering::Relaxed);
        body
    });
    assert!(body == pseudo_random(LEN, 7), "body differs ({} bytes)", body.len());
    stats(s.addr, STATS)
}

/// amped's default: cold chunks go through pipes; the body is exact although its pages keep
/// being evicted while it is sent.
#[test]
fn amped_pipe_path_is_exact_under_eviction() {
    let st = cold_fetch_under_eviction("amped", &[]);
    assert!(counter(&st, "residency_misses") >= 1, "{st}");
    assert!(counter(&st, "pipe_fills") >= 1, "no pipe fill: {st}");
    assert_eq!(counter(&st, "pipe_fills"), counter(&st, "readahead_jobs"), "{st}");
}

/// Once a chunk of a body was cold, the rest of it goes through fills too (growing from
/// 128 KiB to 1 MiB), never through a `sendfile` of pages whose read may still be in flight:
/// a 6 MiB cold file takes at least six fills. The later chunks are still tested, for the page
/// policy's evidence only: each one found cold is a miss, never more misses than fills.
#[test]
fn a_body_that_met_the_disk_stays_on_fills() {
    let s = Server::start(&["--arch", "amped"], &["--stats-path", STATS], fill);
    evict(&s.path("big.bin"));
    let r = s.get("/big.bin");
    r.assert_status(200);
    assert!(r.body == pseudo_random(LEN, 7));
    let st = stats(s.addr, STATS);
    assert!(counter(&st, "pipe_fills") >= 6, "{st}");
    let misses = counter(&st, "residency_misses");
    assert!((1..=counter(&st, "pipe_fills")).contains(&misses), "{st}");
}

/// `--read-path read-ahead`: Flash's way, no pipes; still exact.
#[test]
fn amped_read_ahead_path_is_exact_under_eviction() {
    let st = cold_fetch_under_eviction("amped", &["--read-path", "read-ahead"]);
    assert!(counter(&st, "readahead_jobs") >= 1, "{st}");
    assert_eq!(counter(&st, "pipe_fills"), 0, "{st}");
}

/// `--read-path copy`: helpers read cold chunks into buffers; still exact, and no pipe.
#[test]
fn amped_copy_path_is_exact_under_eviction() {
    let st = cold_fetch_under_eviction("amped", &["--read-path", "copy"]);
    assert!(counter(&st, "copy_fills") >= 1, "{st}");
    assert_eq!(counter(&st, "pipe_fills"), 0, "{st}");
}

/// The options of the direct-read tests: files of 1 MB or more read around the page cache, and
/// no small bodies kept in memory, so that the small file is sent from the page cache, and
/// found cold again once evicted (a refault: the evidence of memory pressure).
const DIRECT_ARGS: [&str; 6] =
    ["--stats-path", STATS, "--direct-io-above", "1000000", "--small-file-bytes", "0"];

/// `--direct-io-above`: right after a small file served before was found cold again (memory
/// pressure), a large cold file's chunks are read around the page cache into buffers (or
/// through it, where the file system has no direct I/O) and the body is exact; with no such
/// miss, or where the files are not on a block device (overlayfs, tmpfs), pipes as usual.
#[test]
fn direct_reads_follow_a_small_miss_and_are_exact() {
    for small_miss in [true, false] {
        let s = Server::start(&["--arch", "amped"], &DIRECT_ARGS, fill);
        s.get("/small.txt").assert_status(200);
        if small_miss {
            evict(&s.path("small.txt"));
        }
        evict(&s.path("big.bin"));
        s.get("/small.txt").assert_status(200);
        let body = slow_get(&s, "/big.bin");
        assert!(body == pseudo_random(LEN, 7), "body differs ({} bytes)", body.len());
        let st = stats(s.addr, STATS);
        let block = {
            use std::os::unix::fs::MetadataExt;
            amped_sys::direct::on_block_device(std::fs::metadata(s.path("big.bin")).unwrap().dev())
        };
        if small_miss && block {
            assert!(counter(&st, "copy_fills") >= 1, "{st}");
        } else {
            assert_eq!(counter(&st, "copy_fills"), 0, "no pressure: {st}");
            assert!(counter(&st, "pipe_fills") >= 1, "{st}");
        }
    }
}

/// io_uring reads a large cold file around the page cache itself, on the ring into huge pages,
/// after a small file served before is found cold again: exact, also for a range from an unaligned offset; where the
/// files are not on a block device it reads through the page cache as before.
#[test]
fn uring_direct_reads_are_exact_from_any_offset() {
    let s = Server::start(&["--arch", "uring"], &DIRECT_ARGS, fill);
    s.get("/small.txt").assert_status(200);
    let block = {
        use std::os::unix::fs::MetadataExt;
        amped_sys::direct::on_block_device(std::fs::metadata(s.path("big.bin")).unwrap().dev())
    };
    for (from, to) in [(0, LEN - 1), (4097 * 3, LEN - 12_345)] {
        evict(&s.path("small.txt"));
        evict(&s.path("big.bin"));
        s.get("/small.txt").assert_status(200);
        let r = request_once(
            s.addr,
            req("GET", "/big.bin", &format!("Range: bytes={from}-{to}\r\n")).as_bytes(),
        );
        r.assert_status(206);
        assert!(r.body == pseudo_random(LEN, 7)[from..=to], "from {from}: {} bytes", r.body.len());
    }
    let st = stats(s.addr, STATS);
    if block {
        assert!(counter(&st, "direct_reads") >= 2, "{st}");
    } else {
        assert_eq!(counter(&st, "direct_reads"), 0, "not a block device: {st}");
    }
}

/// `--transfer-order oldest`, `--fill-ahead 3` and `--fill-blocks on` (the alternatives the
/// lab compares) change only the order, depth and size of the disk reads: the body is exact
/// under eviction either way.
#[test]
fn transfer_order_fill_ahead_and_fill_blocks_keep_the_body_exact() {
    let options = [["--transfer-order", "oldest"], ["--fill-ahead", "3"], ["--fill-blocks", "on"]];
    for extra in options {
        let st = cold_fetch_under_eviction("amped", &extra);
        assert!(counter(&st, "pipe_fills") >= 1, "{extra:?}: {st}");
    }
}

/// `--fill-blocks on` maps whole 2 MiB blocks, but a range that starts and ends inside blocks
/// gets exactly its bytes, cold, under every architecture that fills pipes.
#[test]
fn fill_blocks_serve_a_cold_range_exactly() {
    for arch in ["amped", "sped"] {
        let s = Server::start(&["--arch", arch], &["--fill-blocks", "on"], fill);
        evict(&s.path("big.bin"));
        let (from, to) = (2_100_001, 4_500_000);
        let r = request_once(
            s.addr,
            req("GET", "/big.bin", &format!("Range: bytes={from}-{to}\r\n")).as_bytes(),
        );
        r.assert_status(206);
        assert!(r.body == pseudo_random(LEN, 7)[from..=to], "{arch}: {} bytes", r.body.len());
    }
}

/// A small cold body (at most 256 KiB) goes in one fill, not two trips through the lane.
#[test]
fn a_small_cold_body_is_one_fill() {
    let s = Server::start(&["--arch", "amped"], &["--stats-path", STATS], |root| {
        write(root, "page.bin", pseudo_random(200 << 10, 3));
    });
    evict(&s.path("page.bin"));
    let r = s.get("/page.bin");
    r.assert_status(200);
    assert!(r.body == pseudo_random(200 << 10, 3));
    assert_eq!(counter(&stats(s.addr, STATS), "pipe_fills"), 1);
}

/// sped fills its pipes inline (the loop waits, as SPED does) and is exact too.
#[test]
fn sped_pipe_path_is_exact_under_eviction() {
    let st = cold_fetch_under_eviction("sped", &[]);
    assert!(counter(&st, "pipe_fills") >= 1, "{st}");
    assert_eq!(counter(&st, "jobs_helper"), 0, "{st}");
}

/// `--no-zero-copy` has no pipes (the body is copied anyway): a helper reads each cold chunk
/// into the response's buffer, and the loop writes it.
#[test]
fn no_zero_copy_copies_cold_chunks_instead_of_filling_pipes() {
    let st = cold_fetch_under_eviction("amped", &["--no-zero-copy"]);
    assert_eq!(counter(&st, "pipe_fills"), 0, "{st}");
    assert!(counter(&st, "copy_fills") >= 1, "{st}");
}

/// A bad `--read-path` is one line and exit status 2.
#[test]
fn unknown_read_path_is_refused() {
    let out =
        std::process::Command::new(binary()).args(["--read-path", "mmap", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--read-path 'mmap'") && err.lines().count() == 1, "{err}");
}

/// While one client receives a cold large file, cached small files are answered on other
/// connections and both are exact, whichever read path.
#[test]
fn cached_and_cold_requests_interleave() {
    for path in ["pipe", "read-ahead", "copy"] {
        let s = Server::start(&["--arch", "amped"], &["--read-path", path], fill);
        s.get("/small.txt").assert_status(200);
        evict(&s.path("big.bin"));
        thread::scope(|scope| {
            let big = scope.spawn(|| slow_get(&s, "/big.bin").len());
            for _ in 0..20 {
                s.get("/small.txt").assert_status(200);
            }
            assert_eq!(big.join().unwrap(), LEN);
        });
    }
}
