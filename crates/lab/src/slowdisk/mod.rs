//! The slow disk: a read-only FUSE passthrough of a source directory that makes every request
//! reaching it cost what a 2004 disk access cost (`amplab slowdisk`, and `--disk-emulation
//! fuse` of the disk-bound experiments).
//!
//! The kernel keeps caching as usual (page cache for data, entry and attribute caches), so only
//! misses reach the daemon, as only page-cache misses reach a disk; each miss then waits in a
//! FIFO queue for one of `arms` emulated disk arms and costs `seek_ms + bytes / mbps` (a read)
//! or `meta_ms` (a lookup or getattr). See [`model`] for the delay model, [`fs`] for the file
//! system and [`mounts`] for mount-table housekeeping (stale mounts, lazy unmounts).
//!
//! Mounting uses fuser's pure-Rust path (the mount(2) system call), which needs root; no
//! fusermount helper is involved. Mount options: `ro`, `allow_other` (servers' workers run as
//! nobody), `default_permissions`, `fsname=amplab-slowdisk`, `max_read=131072`.

mod fs;
pub mod model;
pub mod mounts;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use fuser::{BackgroundSession, Config, INodeNo, MountOption, Notifier, SessionACL};
use serde::{Deserialize, Serialize};

pub use model::{Model, Snapshot};

use fs::{Nodes, SlowFs};
use model::{Disk, Stats};

/// Everything a mount needs besides its paths.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    pub model: Model,
    /// How long the kernel may cache entries and attributes, s. Long by default: the data set
    /// does not change while mounted, and a real kernel does not re-read a cached inode from
    /// disk every second (with a 1 s TTL every hot file would cost a metadata "disk" access
    /// each second). Dropping the caches (or [`Mounted::invalidate`]) forgets them.
    pub ttl_s: f64,
    /// Largest READ request, bytes (also the readahead window).
    pub max_read: u32,
}

impl Options {
    /// The defaults for `model`: one hour of entry/attribute caching, 128 KiB reads.
    pub fn new(model: Model) -> Options {
        Options { model, ttl_s: 3600.0, max_read: 128 << 10 }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        self.model.validate()?;
        if !(self.ttl_s.is_finite() && self.ttl_s >= 0.0 && self.ttl_s <= 1e7) {
            return Err(format!("--ttl-s {} is not a number of seconds", self.ttl_s));
        }
        if !(4096..=(1 << 20)).contains(&self.max_read) || !self.max_read.is_multiple_of(4096) {
            return Err(format!(
                "--max-read {} is not a multiple of 4 KiB between 4 KiB and 1 MiB",
                self.max_read
            ));
        }
        Ok(())
    }
}

/// What setup.json records about a mount.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Info {
    pub source: PathBuf,
    pub mount_point: PathBuf,
    #[serde(flatten)]
    pub options: Options,
    pub mount_options: String,
}

/// Why FUSE cannot be used here, if it cannot.
pub fn unavailable() -> Option<String> {
    if !crate::machine::is_root() {
        return Some("amplab was not run as root (mounting needs root)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    let listed = std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|t| t.lines().any(|l| l.split_whitespace().last() == Some("fuse")));
    if !listed {
        return Some("the kernel has no fuse file system (/proc/filesystems)".into());
    }
    None
}

/// A mounted slow disk. Dropping it unmounts (lazily) and removes the mount point if it
/// created it.
pub struct Mounted {
    session: Option<BackgroundSession>,
    notifier: Notifier,
    info: Info,
    stats: Arc<Stats>,
    nodes: Arc<Nodes>,
    stop: Arc<AtomicBool>,
    created_dir: bool,
}

/// The source, canonical and a directory, and the mount point, absolute and not inside it.
fn checked_paths(source: &Path, mount_point: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let source = source.canonicalize()?;
    if !source.is_dir() {
        return Err(io::Error::other(format!("{} is not a directory", source.display())));
    }
    let mount_point = absolute_mount_point(mount_point)?;
    if mount_point.starts_with(&source) {
        return Err(io::Error::other(format!(
            "the mount point {} is inside the source {}",
            mount_point.display(),
            source.display()
        )));
    }
    Ok((source, mount_point))
}

/// The FUSE session's options: read-only, no atime, devices or setuid, permissions checked by
/// the kernel, open to every user, reads of at most `max_read` bytes.
fn fuse_config(options: &Options) -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(mounts::FSNAME.into()),
        MountOption::RO,
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::DefaultPermissions,
        MountOption::CUSTOM(format!("max_read={}", options.max_read)),
    ];
    config.acl = SessionACL::All;
    config
}

impl Mounted {
    /// Mounts `source` at `mount_point` (created if missing). A stale slow-disk mount found
    /// there is lazily unmounted first.
    pub fn mount(source: &Path, mount_point: &Path, options: &Options) -> io::Result<Mounted> {
        options.validate().map_err(io::Error::other)?;
        let (source, mount_point) = checked_paths(source, mount_point)?;
        mounts::clear_stale(&mount_point)?;
        let created_dir = !mount_point.exists();
        if created_dir {
            crate::datasets::make_dir(&mount_point)?;
        }
        let stats = Arc::new(Stats::default());
        let disk = Disk::start(options.model, stats.clone())?;
        let stop = disk.stop_flag();
        let nodes = Arc::new(Nodes::new(source.clone()));
        let ttl = Duration::from_secs_f64(options.ttl_s);
        let fs = SlowFs::new(disk, nodes.clone(), ttl, options.max_read);
        let session = match fuser::spawn_mount(fs, &mount_point, &fuse_config(options)) {
            Ok(s) => s,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                let _ = mounts::lazy_unmount(&mount_point);
                if created_dir {
                    let _ = std::fs::remove_dir(&mount_point);
                }
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot mount a FUSE file system at {}: {e}", mount_point.display()),
                ));
            }
        };
        let notifier = session.notifier();
        let info = Info {
            source,
            mount_point,
            options: *options,
            mount_options: format!(
                "ro,noatime,nodev,nosuid,allow_other,default_permissions,fsname={},max_read={}",
                mounts::FSNAME,
                options.max_read
            ),
        };
        Ok(Mounted { session: Some(session), notifier, info, stats, nodes, stop, created_dir })
    }

    /// Where it is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.info.mount_point
    }

    /// The mount as setup.json records it.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The disk's counters so far.
    pub fn stats(&self) -> Snapshot {
        self.stats.snapshot()
    }

    /// Whether the session has ended (unmounted from outside).
    pub fn finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Makes the kernel forget what it cached of this mount (pages, attributes, entries), as
    /// a cold start of the emulated disk, without touching the rest of the page cache.
    /// Returns how many inodes were invalidated.
    pub fn invalidate(&self) -> usize {
        let entries = self.nodes.entries();
        for (_, parent, name) in &entries {
            // ENOENT means "not cached": nothing to do.
            let _ = self.notifier.inval_entry(INodeNo(*parent), name);
        }
        let _ = self.notifier.inval_inode(INodeNo::ROOT, 0, 0);
        for (ino, _, _) in &entries {
            let _ = self.notifier.inval_inode(INodeNo(*ino), 0, 0);
        }
        entries.len() + 1
    }

    /// Unmounts (lazily: `umount -l`), waits up to 5 s for the session to end, and removes
    /// the mount point if it was created by [`Mounted::mount`].
    pub fn unmount(mut self) -> io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        self.stop.store(true, Ordering::Relaxed);
        let result = mounts::lazy_unmount(&self.info.mount_point);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !session.guard.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        if session.guard.is_finished() {
            let _ = session.join();
        } else {
            eprintln!(
                "[amplab slowdisk] {} is detached but still in use; its session ends with its last user",
                self.info.mount_point.display()
            );
        }
        if self.created_dir {
            let _ = std::fs::remove_dir(&self.info.mount_point);
        }
        result
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            eprintln!("[amplab slowdisk] umount -l {}: {e}", self.info.mount_point.display());
        }
    }
}

/// `path` made absolute without resolving its last component (which may be a stale mount).
fn absolute_mount_point(path: &Path) -> io::Result<PathBuf> {
    let abs =
        if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    let name = abs
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} cannot be a mount point", path.display())))?;
    let parent = abs.parent().unwrap_or(Path::new("/")).canonicalize()?;
    Ok(parent.join(name))
}

/// `amplab slowdisk`: mounts `source` at `mount` and serves in the foreground until SIGTERM,
/// SIGINT or SIGHUP, or until unmounted from outside; then unmounts and prints the counters.
pub fn serve(source: &Path, mount: &Path, options: &Options) -> Result<(), String> {
    if let Some(why) = unavailable() {
        return Err(format!("cannot mount a FUSE file system: {why}"));
    }
    let quit = Arc::new(AtomicBool::new(false));
    for sig in
        [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(sig, quit.clone())
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    let m = Mounted::mount(source, mount, options).map_err(|e| e.to_string())?;
    println!(
        "amplab slowdisk: {} mounted at {} ({}; entry/attribute cache {} s; reads of at most {} KiB)",
        m.info.source.display(),
        m.mount_point().display(),
        options.model.describe(),
        options.ttl_s,
        options.max_read >> 10
    );
    let _ = io::stdout().flush();
    while !quit.load(Ordering::Relaxed) && !m.finished() {
        thread::sleep(Duration::from_millis(50));
    }
    let s = m.stats();
    let mount_point = m.mount_point().to_path_buf();
    let result = m.unmount();
    eprintln!(
        "[amplab slowdisk] unmounted {}: {} reads ({:.1} MiB), {} lookups/getattrs, disk busy {:.1} s, queued {:.1} s in all, at most {} waiting",
        mount_point.display(),
        s.reads,
        s.read_bytes as f64 / 1048576.0,
        s.meta,
        s.busy_ns as f64 / 1e9,
        s.wait_ns as f64 / 1e9,
        s.max_queued
    );
    result.map_err(|e| format!("umount -l {}: {e}", mount_point.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        Model { seek_ms: 5.0, mbps: 40.0, meta_ms: 5.0, arms: 1 }
    }

    #[test]
    fn validates_options() {
        assert!(Options::new(model()).validate().is_ok());
        assert!(Options { ttl_s: -1.0, ..Options::new(model()) }.validate().is_err());
        assert!(Options { max_read: 1000, ..Options::new(model()) }.validate().is_err());
        assert!(Options { max_read: 2 << 20, ..Options::new(model()) }.validate().is_err());
        assert!(Options::new(Model { arms: 0, ..model() }).validate().is_err());
    }

    #[test]
    fn mount_points_are_made_absolute_without_resolving_the_last_component() {
        let dir = tempfile::tempdir().unwrap();
        let p = absolute_mount_point(&dir.path().join("mnt")).unwrap();
        assert_eq!(p, dir.path().canonicalize().unwrap().join("mnt"));
        assert!(absolute_mount_point(Path::new("/")).is_err());
    }
}
