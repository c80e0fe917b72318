//! A stalled disk must not stall cached requests: amped serves a tree through the FUSE slow
//! disk where every read that reaches the disk takes 400 ms. While one client waits for a cold
//! 512 KiB file (four such reads, at least 1.6 s), requests for a small file amped already has
//! in memory are answered — all of them before the cold file is complete — under `amped` (its
//! helpers wait for the disk) and `uring` (the kernel does). Under `sped` the loop itself waits
//! for the disk, so the same small requests wait for its reads: the paper's point.
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

/// Serves the slow tree with `arch`; of 10 small requests made one after another while `cold`
/// (a file no server has read yet) was being read from the disk, returns how many completed
/// before it, and the longest any of them took.
fn small_before_cold(arch: &str, mount: &Path, cold: &str) -> (usize, Duration) {
    let server = start(arch, mount);
    assert_eq!(get(server.1, "/small.txt").0, 6, "warm the small file");
    thread::scope(|scope| {
        let big = scope.spawn(|| get(server.1, cold));
        // Long enough for the cold request to reach the server on a loaded machine (at 150 ms
        // sped once answered a small request before its loop began to wait, and at 400 ms — the
        // end of the cold file's first read — once more), well inside the seconds the cold
        // file takes: the middle of its second read.
        thread::sleep(Duration::from_millis(600));
        let small: Vec<(Instant, Instant)> = (0..10)
            .map(|_| {
                let sent = Instant::now();
                (sent, get(server.1, "/small.txt").1)
            })
            .collect();
        let (len, big_done) = big.join().unwrap();
        assert_eq!(len, BIG);
        let before = small.iter().filter(|(_, done)| *done < big_done).count();
        let longest = small.iter().map(|(sent, done)| *done - *sent).max().unwrap();
        (before, longest)
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
        let (n, _) = small_before_cold(arch, &mount, &format!("/big-{arch}.bin"));
        assert_eq!(n, 10, "{arch}: {n} of 10 cached requests were answered before the cold one");
    }
    // Under sped a small request waits for a disk read on the loop. (Not "none before the cold
    // file": on a busy machine the cold file's socket can fill, and between its reads the loop
    // then answers a small request or two.)
    let (n, longest) = small_before_cold("sped", &mount, "/big-sped.bin");
    assert!(
        longest >= Duration::from_millis(150),
        "sped: the slowest cached request took {longest:?} ({n} before the cold one): its loop never waited for the disk"
    );
}
