//! `amplab slowdisk` for real: mounts a tiny tree through the FUSE slow disk, reads a file
//! through it (content equal to the source; the first read pays the configured delay, the
//! second comes from the page cache), checks that it is read-only, and that SIGTERM unmounts.
//! Runs only as root with /dev/fuse (skipped with a printed reason otherwise); bounded in time;
//! the mount is always removed (`umount -l`), whatever happens.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const SEEK_MS: u64 = 150;

fn skip_reason() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root (mounting FUSE needs root)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !fs.lines().any(|l| l.split_whitespace().last() == Some("fuse")) {
        return Some("the kernel has no fuse file system".into());
    }
    None
}

fn mounted(path: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = path.to_str().unwrap();
    text.lines().any(|l| l.split(' ').nth(4) == Some(p))
}

/// The daemon; on drop: SIGTERM (SIGKILL after 5 s), wait, and `umount -l` the mount point.
struct Daemon {
    child: Child,
    mount: PathBuf,
}

impl Daemon {
    /// Sends SIGTERM and waits up to `within` for the exit status.
    fn stop(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none()
            && self.stop(Duration::from_secs(5)).is_none()
        {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = rustix::mount::unmount(&self.mount, rustix::mount::UnmountFlags::DETACH);
    }
}

#[test]
fn reads_through_the_slow_disk_then_from_the_page_cache() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    let data: Vec<u8> =
        (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(src.join("d/file.bin"), &data).unwrap();
    std::fs::write(src.join("small.txt"), b"hello\n").unwrap();
    let mount = tmp.path().canonicalize().unwrap().join("mnt");

    let child = Command::new(env!("CARGO_BIN_EXE_amplab"))
        .args(["slowdisk", "--source"])
        .arg(&src)
        .arg("--mount")
        .arg(&mount)
        .args(["--seek-ms", &SEEK_MS.to_string(), "--meta-ms", "0", "--mbps", "1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run amplab slowdisk");
    let mut daemon = Daemon { child, mount: mount.clone() };

    // Its first stdout line says it is mounted.
    let stdout = daemon.child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line =
        rx.recv_timeout(Duration::from_secs(20)).expect("amplab slowdisk did not report a mount");
    assert!(line.contains("mounted at"), "{line:?}");
    assert!(mounted(&mount), "{} is not in the mount table", mount.display());

    let path = mount.join("d/file.bin");
    let t0 = Instant::now();
    let first = std::fs::read(&path).unwrap();
    let cold = t0.elapsed();
    assert!(first == data, "content differs through the mount");
    assert!(cold >= Duration::from_millis(SEEK_MS), "the first read took only {cold:?}");

    let t1 = Instant::now();
    let second = std::fs::read(&path).unwrap();
    let warm = t1.elapsed();
    assert!(second == data);
    assert!(
        warm < Duration::from_millis(SEEK_MS / 3) && warm * 5 < cold,
        "the repeated read took {warm:?} (cold {cold:?}): not served from the page cache"
    );
    eprintln!("cold read {cold:?}, repeated read {warm:?}");

    assert_eq!(std::fs::read(mount.join("small.txt")).unwrap(), b"hello\n");
    let e = std::fs::write(mount.join("new.txt"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(30), "writes must fail with EROFS: {e}"); // EROFS

    let status =
        daemon.stop(Duration::from_secs(10)).expect("amplab slowdisk did not exit on SIGTERM");
    assert!(status.success(), "{status}");
    assert!(!mounted(&mount), "still mounted after SIGTERM");
}
