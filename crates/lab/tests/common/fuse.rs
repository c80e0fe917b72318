//! The FUSE slow disk for tests: whether it can be mounted here (root, /dev/fuse, the fuse
//! file system), and `amplab slowdisk` as a child that is stopped and unmounted on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Why the slow disk cannot be mounted here, if it cannot.
pub fn skip_reason() -> Option<String> {
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

pub fn mounted(path: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = path.to_str().unwrap();
    text.lines().any(|l| l.split(' ').nth(4) == Some(p))
}

/// The daemon; on drop: SIGTERM (SIGKILL after 5 s), wait, and `umount -l` the mount point.
pub struct Daemon {
    pub child: Child,
    pub mount: PathBuf,
}

impl Daemon {
    /// Sends SIGTERM and waits up to `within` for the exit status.
    pub fn stop(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
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

/// Mounts `src` at `mount` through `amplab slowdisk` with `args` (delay options) and waits
/// until it reports the mount.
pub fn mount(src: &Path, mount: &Path, args: &[&str]) -> Daemon {
    let child = Command::new(env!("CARGO_BIN_EXE_amplab"))
        .args(["slowdisk", "--source"])
        .arg(src)
        .arg("--mount")
        .arg(mount)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run amplab slowdisk");
    let mut daemon = Daemon { child, mount: mount.to_path_buf() };
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
    assert!(mounted(mount), "{} is not in the mount table", mount.display());
    daemon
}
