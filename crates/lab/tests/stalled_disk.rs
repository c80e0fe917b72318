//! A stalled disk must not stall cached requests: amped serves a tree through the FUSE slow
//! disk where every read that reaches the disk takes 400 ms. While one client waits for a cold
//! 512 KiB file (four such reads, at least 1.6 s), requests for a small file amped already has
//! in memory are answered — all of them before the cold file is complete — under `amped` (its
//! helpers wait for the disk) and `uring` (the kernel does). Under `sped` the loop itself waits
//! for the disk, so the same small requests wait behind the cold file: the paper's point.
//! Runs only as root with /dev/fuse (skipped with a printed reason otherwise); bounded in time.

mod common;
#[path = "common/fuse.rs"]
mod fuse;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIG: usize = 512 << 10;

/// amped on `root` with `arch`; killed on drop.
struct Amped(Child, SocketAddr);

impl Drop for Amped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(arch: &str, root: &Path) -> Amped {
    let mut child = Command::new(&common::binaries().0)
        .args(["--listen", "127.0.0.1:0", "--arch", arch])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start amped");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // Keep reading what it prints, so that it never writes into a closed pipe.
    thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line.trim().rsplit("http://").next().unwrap().trim_end_matches('/');
    let addr: SocketAddr = addr.parse().unwrap_or_else(|_| panic!("listening line {line:?}"));
    Amped(child, addr)
}

/// GET `path` on a new connection; returns the body length and when it was complete.
fn get(addr: SocketAddr, path: &str) -> (usize, Instant) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    assert!(all.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&all[..40]));
    let head = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (all.len() - head, Instant::now())
}

/// Serves the slow tree with `arch`; returns how many of 10 small requests, started while
/// `cold` (a file no server has read yet) was being read from the disk, completed before it.
fn small_before_cold(arch: &str, mount: &Path, cold: &str) -> usize {
    let server = start(arch, mount);
    assert_eq!(get(server.1, "/small.txt").0, 6, "warm the small file");
    thread::scope(|scope| {
        let big = scope.spawn(|| get(server.1, cold));
        // Long enough for the cold request to reach the server on a loaded machine (at 150 ms
        // sped once answered a small request before its loop began to wait), well inside the
        // seconds the cold file takes.
        thread::sleep(Duration::from_millis(400));
        let small: Vec<Instant> = (0..10).map(|_| get(server.1, "/small.txt").1).collect();
        let (len, big_done) = big.join().unwrap();
        assert_eq!(len, BIG);
        small.iter().filter(|t| **t < big_done).count()
    })
}

#[test]
fn cached_requests_do_not_wait_for_a_stalled_disk() {
    if let Some(why) = fuse::skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("small.txt"), b"hello\n").unwrap();
    // One cold file per architecture: nothing has read it through the mount before.
    for arch in ["amped", "uring", "sped"] {
        std::fs::write(src.join(format!("big-{arch}.bin")), vec![7u8; BIG]).unwrap();
    }
    let mount = tmp.path().canonicalize().unwrap().join("mnt");
    let _disk =
        fuse::mount(&src, &mount, &["--seek-ms", "400", "--meta-ms", "0", "--mbps", "1000"]);
    for arch in ["amped", "uring"] {
        let n = small_before_cold(arch, &mount, &format!("/big-{arch}.bin"));
        assert_eq!(n, 10, "{arch}: {n} of 10 cached requests were answered before the cold one");
    }
    let n = small_before_cold("sped", &mount, "/big-sped.bin");
    assert_eq!(n, 0, "sped: {n} cached requests were answered while its loop waited for the disk");
}
