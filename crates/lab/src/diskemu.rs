//! The emulated 2004 disk for disk-bound runs, in one of three ways (`--disk-emulation`):
//!
//! - `fuse` (default as root with /dev/fuse): the data set is mounted once per experiment
//!   through the slow disk ([`crate::slowdisk`]), a read-only FUSE passthrough that adds a
//!   disk-like *latency* to every page-cache miss (seek + transfer, FIFO behind one arm), and
//!   every server serves from the mount point inside a memory cgroup (`memory.limit_in_bytes`:
//!   its page cache cannot hold a larger data set).
//! - `blkio`: the memory cgroup plus a blkio cgroup (`blkio.throttle.read_iops_device` on the
//!   disk holding the data), which caps the *rate* of reads but adds no latency below it.
//! - `none`: neither; only the eviction happens.
//!
//! Before each server the data set leaves the page cache (global drop_caches; or posix_fadvise
//! DONTNEED on its files, or with the FUSE disk invalidations of its cache). Not root, or
//! without cgroup v1: no limit; every report says so.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::datasets::files_under;
use crate::proc::CgroupProcs;
use crate::slowdisk::{self, Mounted, Snapshot};

const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";

/// How the slow disk is emulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The FUSE slow disk (latency per miss) and the memory cgroup.
    Fuse,
    /// The blkio read-rate throttle and the memory cgroup.
    Blkio,
    /// No emulation.
    None,
}

/// How the data set leaves the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evict {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` (root; page cache, dentries and inodes).
    DropCaches,
    /// posix_fadvise(DONTNEED) on each file of the data set (no root needed; file pages only);
    /// with the FUSE disk, FUSE invalidations of its pages, attributes and entries instead.
    Fadvise,
}

/// Whether the cgroups are in force, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum CgroupState {
    Applied,
    NotRoot,
    DisabledByOption,
    Unavailable(String),
}

/// What a run asks for.
#[derive(Clone, Copy, Debug)]
pub struct Wanted {
    /// The disk model's name in reports (`hdd`, `ssd`, `iops`, `fuse`, `blkio`, `none`, or
    /// `default`).
    pub name: &'static str,
    pub memory_limit_bytes: u64,
    pub read_iops: u32,
    /// The blkio byte cap, bytes/s (`--read-mbps`), if any.
    pub read_bps: Option<u64>,
    /// `--no-cgroups` not given.
    pub cgroups: bool,
    pub evict: Option<Evict>,
    /// `--disk-emulation`, if given.
    pub method: Option<Method>,
    /// The FUSE disk's options.
    pub slowdisk: slowdisk::Options,
    pub quick: bool,
}

/// The disk-emulation settings of a run, as recorded in setup.json. With the FUSE disk it
/// holds the mount; the last clone dropped unmounts it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskEmulation {
    /// The disk model's name (`--disk-emulation`), as reports and results.csv show it.
    pub name: String,
    /// The emulation in force.
    pub method: Method,
    /// `--disk-emulation` as given (null: the default was taken).
    pub requested: Option<Method>,
    /// Why this method: the default's reasoning, or a fallback.
    pub method_reason: String,
    pub memory_limit_bytes: u64,
    /// The blkio throttle, reads/s (method blkio only).
    pub read_iops: Option<u32>,
    /// The blkio throttle's byte cap, bytes/s (method blkio with `--read-mbps` only).
    #[serde(default)]
    pub read_bps: Option<u64>,
    /// `major:minor` of the whole disk holding the data.
    pub device: String,
    /// The memory cgroup (and with blkio the blkio cgroup).
    pub cgroups: CgroupState,
    pub evict: Evict,
    /// The FUSE slow disk (method fuse).
    pub slowdisk: Option<slowdisk::Info>,
    #[serde(skip)]
    mount: Option<Arc<MountGuard>>,
    #[serde(skip)]
    data_dir: PathBuf,
}

/// The mount, shared by clones of the plan.
struct MountGuard(Mounted);

impl std::fmt::Debug for MountGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mounted({})", self.0.mount_point().display())
    }
}

/// One server's cgroups; removed when dropped (after the server has exited).
#[derive(Debug)]
pub struct Cgroup {
    memory: PathBuf,
    blkio: Option<PathBuf>,
    device: String,
}

/// What a cgroup saw while a server ran in it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CgroupStats {
    pub memory_max_usage_bytes: u64,
    pub memory_failcnt: u64,
    pub oom_kills: u64,
    /// Whether a blkio cgroup counted the disk reads below.
    pub blkio: bool,
    /// Reads dispatched to the throttled device (blkio only; 0 otherwise).
    pub disk_reads: u64,
    /// Bytes those reads read (`blkio.throttle.io_service_bytes`).
    pub disk_read_bytes: u64,
}

fn memory_cgroup_missing() -> bool {
    !Path::new(MEMORY_ROOT).join("cgroup.procs").exists()
}

fn blkio_cgroup_missing() -> bool {
    !Path::new(BLKIO_ROOT).join("blkio.throttle.read_iops_device").exists()
}

/// The method asked for, or the default here, and why (`fuse_missing`: why the FUSE disk
/// cannot be had, if it cannot).
fn wanted_method(w: &Wanted, root: bool, fuse_missing: Option<&str>) -> (Method, String) {
    match w.method {
        Some(m) => (m, format!("--disk-emulation {} was given", w.name)),
        None if !w.cgroups => (Method::None, "--no-cgroups was given".to_string()),
        None => match fuse_missing {
            None => (
                Method::Fuse,
                "the default as root with /dev/fuse and the kernel's fuse file system".into(),
            ),
            Some(why) if root => {
                (Method::Blkio, format!("the default here: no FUSE disk because {why}"))
            }
            Some(_) => (Method::None, "the default when not root".into()),
        },
    }
}

impl DiskEmulation {
    /// Settles the plan for data under `data_dir` and, for the FUSE disk, mounts `data_dir`
    /// at `/var/tmp/amplab-slowdisk-<pid>` (after clearing stale mounts of dead amplab runs).
    /// An explicit `--disk-emulation fuse` that cannot be had is an error; the default falls
    /// back to blkio (and says why).
    pub fn plan(w: &Wanted, data_dir: &Path) -> Result<DiskEmulation, String> {
        let root = crate::machine::is_root();
        let device = disk_of(data_dir).unwrap_or_else(|e| format!("unknown ({e})"));
        let fuse_missing = slowdisk::unavailable();
        let (mut method, mut method_reason) = wanted_method(w, root, fuse_missing.as_deref());
        if method == Method::Fuse
            && let Some(why) = &fuse_missing
        {
            return Err(format!("--disk-emulation {}: {why}", w.name));
        }
        let mut emu = DiskEmulation {
            name: w.name.to_string(),
            method,
            requested: w.method,
            method_reason: String::new(),
            memory_limit_bytes: w.memory_limit_bytes,
            read_iops: None,
            read_bps: None,
            device,
            cgroups: CgroupState::DisabledByOption,
            evict: Evict::Fadvise,
            slowdisk: None,
            mount: None,
            data_dir: data_dir.to_path_buf(),
        };
        if method == Method::Fuse
            && let Err(e) = emu.mount_fuse(w)
        {
            if w.method.is_some() {
                return Err(format!("--disk-emulation {}: {e}", w.name));
            }
            method = if root { Method::Blkio } else { Method::None };
            method_reason = format!("the default fell back: the FUSE disk failed ({e})");
        }
        emu.method = method;
        emu.method_reason = method_reason;
        emu.read_iops = (method == Method::Blkio).then_some(w.read_iops);
        emu.read_bps = w.read_bps.filter(|_| method == Method::Blkio);
        emu.cgroups = emu.cgroup_state(w.cgroups, root);
        emu.evict = match w.evict {
            Some(Evict::DropCaches) if !root => Evict::Fadvise,
            Some(e) => e,
            None if root && !w.quick => Evict::DropCaches,
            None => Evict::Fadvise,
        };
        Ok(emu)
    }

    /// Mounts the FUSE disk over the data (after clearing stale mounts of dead amplab runs).
    fn mount_fuse(&mut self, w: &Wanted) -> Result<(), String> {
        for stale in slowdisk::mounts::clear_dead_runs() {
            eprintln!(
                "[amplab] unmounted the stale slow disk {} of a dead amplab run",
                stale.display()
            );
        }
        let at = slowdisk::mounts::run_mount_point(std::process::id());
        let m = Mounted::mount(&self.data_dir, &at, &w.slowdisk).map_err(|e| e.to_string())?;
        self.slowdisk = Some(m.info().clone());
        self.mount = Some(Arc::new(MountGuard(m)));
        Ok(())
    }

    /// Whether the memory (and blkio) cgroups can be applied for this plan's method, and if
    /// not why (`wanted`: cgroups were not turned off by `--no-cgroups`).
    fn cgroup_state(&self, wanted: bool, root: bool) -> CgroupState {
        let method = self.method;
        if !wanted || method == Method::None {
            if wanted && !root { CgroupState::NotRoot } else { CgroupState::DisabledByOption }
        } else if !root {
            CgroupState::NotRoot
        } else if memory_cgroup_missing() {
            CgroupState::Unavailable(
                "the cgroup v1 memory controller is not mounted at /sys/fs/cgroup/memory".into(),
            )
        } else if method == Method::Blkio && blkio_cgroup_missing() {
            CgroupState::Unavailable(
                "the cgroup v1 blkio controller is not mounted at /sys/fs/cgroup/blkio".into(),
            )
        } else if method == Method::Blkio && self.device.starts_with("unknown") {
            CgroupState::Unavailable(format!(
                "cannot tell which disk holds {}",
                self.data_dir.display()
            ))
        } else {
            CgroupState::Applied
        }
    }

    /// Unmounts the FUSE disk of this plan (when this is its last clone) and keeps the
    /// description, so the next model can mount its own.
    pub fn release(&mut self) {
        self.mount = None;
    }

    /// Whether the emulated disk is in force: the FUSE disk or the blkio throttle, with the
    /// memory cgroup that keeps the data set from staying cached.
    pub fn applied(&self) -> bool {
        self.method != Method::None && self.cgroups == CgroupState::Applied
    }

    /// The FUSE disk's model, when it is in force.
    pub fn model(&self) -> Option<slowdisk::Model> {
        self.slowdisk.as_ref().map(|i| i.options.model)
    }

    /// A few words for figure subtitles: the model's name and what it is.
    pub fn short(&self) -> String {
        format!("{}: {}", self.name, self.what())
    }

    fn what(&self) -> String {
        match (self.method, self.applied(), self.model()) {
            (Method::Fuse, applied, Some(m)) => format!(
                "FUSE slow disk ({} ms + {} MB/s, {} arm{}){}",
                m.seek_ms,
                m.mbps,
                m.arms,
                if m.arms == 1 { "" } else { "s" },
                if applied { " + memory cgroup" } else { ", NO memory limit" }
            ),
            (Method::Blkio, true, _) => format!(
                "blkio throttle {} reads/s{} + memory cgroup",
                self.read_iops.unwrap_or(0),
                self.bytes_cap_phrase()
            ),
            _ => "NO disk emulation".into(),
        }
    }

    /// " and N MB/s" when the throttle caps bytes too.
    fn bytes_cap_phrase(&self) -> String {
        self.read_bps.map_or(String::new(), |bps| format!(" and {} MB/s", bps as f64 / 1e6))
    }

    /// What was done before each server to start it cold, in words.
    fn evict_phrase(&self) -> &'static str {
        match (self.evict, self.slowdisk.is_some()) {
            (Evict::DropCaches, false) => "the page cache was dropped (sync; drop_caches = 3)",
            (Evict::DropCaches, true) => {
                "the page cache was dropped (sync; drop_caches = 3), the slow disk's cached pages, entries and attributes with it"
            }
            (Evict::Fadvise, false) => {
                "the data set was evicted from the page cache (posix_fadvise DONTNEED)"
            }
            (Evict::Fadvise, true) => {
                "the slow disk's cached pages, entries and attributes were invalidated (FUSE notifications)"
            }
        }
    }

    /// Why the memory cgroup was not applied (empty when it was).
    fn why_no_cgroup(&self) -> String {
        match &self.cgroups {
            CgroupState::NotRoot => "amplab was not run as root".to_string(),
            CgroupState::DisabledByOption if self.method == Method::None => {
                self.method_reason.clone()
            }
            CgroupState::DisabledByOption => "--no-cgroups was given".to_string(),
            CgroupState::Unavailable(r) => r.clone(),
            CgroupState::Applied => String::new(),
        }
    }

    /// One plain paragraph for summaries.
    pub fn describe(&self) -> String {
        let mib = self.memory_limit_bytes >> 20;
        let evict = self.evict_phrase();
        let why_no_cgroup = || self.why_no_cgroup();
        match (self.method, &self.slowdisk) {
            (Method::Fuse, Some(info)) => {
                let disk = format!(
                    "**FUSE slow disk, model {}** ({}). Every server read the data set through the FUSE slow disk mounted at {} (a read-only passthrough of {}): each request that missed the kernel's caches cost {} on the emulated disk; the page cache, entries and attributes ({} s) stayed cached in the kernel as usual, so only misses paid.",
                    self.name,
                    self.method_reason,
                    info.mount_point.display(),
                    info.source.display(),
                    info.options.model.describe(),
                    info.options.ttl_s
                );
                if self.applied() {
                    format!(
                        "{disk} Each server ran in a memory cgroup limited to {mib} MiB, so the data set could not stay cached; before each server {evict}."
                    )
                } else {
                    format!(
                        "{disk} **No memory limit** ({}): nothing kept the data set from staying cached after its first read, so after the warm-up what is measured is mostly a cached server. Before each server {evict}.",
                        why_no_cgroup()
                    )
                }
            }
            (Method::Blkio, _) if self.applied() => format!(
                "**blkio throttle, model {}** ({}). Each server ran in a memory cgroup limited to {mib} MiB and a blkio cgroup throttled to {} reads/s{} on device {}; before each server {evict}. The throttle caps the rate of reads{} only: below it a miss costs this machine's fast disk.",
                self.name,
                self.method_reason,
                self.read_iops.unwrap_or_default(),
                self.bytes_cap_phrase(),
                self.device,
                if self.read_bps.is_some() { " and bytes" } else { "" },
            ),
            _ => format!(
                "**No disk emulation**: {}, so there was no memory limit and no slow disk \
                 (the planned {mib} MiB limit was not applied). Before each server {evict}, so \
                 the run starts cold, but after the warm-up this machine's memory holds the whole data \
                 set: what is measured is a cached server, not a disk-bound one.",
                why_no_cgroup()
            ),
        }
    }

    /// Creates the cgroups for one server (named after amplab's pid and `tag`), if applied:
    /// the memory cgroup, and with blkio the throttled blkio cgroup.
    pub fn cgroup(&self, tag: &str) -> io::Result<Option<Cgroup>> {
        if !self.applied() {
            return Ok(None);
        }
        let name = format!("amplab-{}-{tag}", std::process::id());
        let memory = Path::new(MEMORY_ROOT).join(&name);
        fs::create_dir_all(&memory)?;
        let blkio = (self.method == Method::Blkio).then(|| Path::new(BLKIO_ROOT).join(&name));
        if let Some(b) = &blkio {
            fs::create_dir_all(b)?;
        }
        let cg = Cgroup { memory, blkio, device: self.device.clone() };
        fs::write(cg.memory.join("memory.limit_in_bytes"), self.memory_limit_bytes.to_string())?;
        if let Some(b) = &cg.blkio {
            fs::write(
                b.join("blkio.throttle.read_iops_device"),
                format!("{} {}", self.device, self.read_iops.unwrap_or(u32::MAX)),
            )?;
            if let Some(bps) = self.read_bps {
                fs::write(
                    b.join("blkio.throttle.read_bps_device"),
                    format!("{} {bps}", self.device),
                )?;
            }
        }
        Ok(Some(cg))
    }

    /// The directory servers serve for the data set at `root` (under the data folder): on the
    /// FUSE disk's mount when there is one, else `root` itself.
    pub fn served(&self, root: &Path) -> Result<PathBuf, String> {
        let Some(m) = &self.mount else { return Ok(root.to_path_buf()) };
        let source = &m.0.info().source;
        let rel = root
            .strip_prefix(&self.data_dir)
            .or_else(|_| root.strip_prefix(source))
            .map_err(|_| {
                format!(
                    "{} is not under the data folder {} that the slow disk serves",
                    root.display(),
                    self.data_dir.display()
                )
            })?;
        Ok(m.0.mount_point().join(rel))
    }

    /// The FUSE disk's counters so far (method fuse).
    pub fn slowdisk_stats(&self) -> Option<Snapshot> {
        self.mount.as_ref().map(|m| m.0.stats())
    }

    /// Makes the data set served at `served` leave the page cache.
    pub fn evict(&self, served: &Path) -> io::Result<()> {
        match (self.evict, &self.mount) {
            (Evict::DropCaches, _) => {
                let _ = Command::new("sync").status();
                fs::write("/proc/sys/vm/drop_caches", "3\n")
            }
            (Evict::Fadvise, Some(m)) => {
                m.0.invalidate();
                Ok(())
            }
            (Evict::Fadvise, None) => {
                for path in files_under(served) {
                    let file = fs::File::open(&path)?;
                    // DONTNEED leaves dirty pages cached: a freshly written data set must
                    // reach the disk first, or its first reads never do.
                    file.sync_data()?;
                    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
                }
                Ok(())
            }
        }
    }
}

impl Cgroup {
    /// The cgroup.procs files a server is moved into.
    pub fn procs(&self) -> CgroupProcs {
        CgroupProcs {
            memory: self.memory.join("cgroup.procs"),
            blkio: self.blkio.as_ref().map(|b| b.join("cgroup.procs")),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> CgroupStats {
        let num = |p: PathBuf| {
            fs::read_to_string(p).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
        };
        let oom_kills = fs::read_to_string(self.memory.join("memory.oom_control"))
            .ok()
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok()))
            .unwrap_or(0);
        let (disk_reads, disk_read_bytes) = self.disk_io().unwrap_or((0, 0));
        CgroupStats {
            memory_max_usage_bytes: num(self.memory.join("memory.max_usage_in_bytes")),
            memory_failcnt: num(self.memory.join("memory.failcnt")),
            oom_kills,
            blkio: self.blkio.is_some(),
            disk_reads,
            disk_read_bytes,
        }
    }

    /// Reads and bytes read from the throttled device so far (blkio only), read often while
    /// a windowed run lasts.
    pub fn disk_io(&self) -> Option<(u64, u64)> {
        let blkio = self.blkio.as_ref()?;
        let io_line = |file: &str| {
            fs::read_to_string(blkio.join(file)).ok().and_then(|t| {
                t.lines().find_map(|l| {
                    let mut it = l.split_whitespace();
                    (it.next() == Some(self.device.as_str()) && it.next() == Some("Read"))
                        .then(|| it.next()?.parse().ok())?
                })
            })
        };
        Some((
            io_line("blkio.throttle.io_serviced").unwrap_or(0),
            io_line("blkio.throttle.io_service_bytes").unwrap_or(0),
        ))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Empty by now (the server was stopped first); rmdir fails harmlessly otherwise.
        let _ = fs::remove_dir(&self.memory);
        if let Some(b) = &self.blkio {
            let _ = fs::remove_dir(b);
        }
    }
}

/// `major:minor` of the whole disk holding `path` (a partition's parent disk).
pub fn disk_of(path: &Path) -> io::Result<String> {
    let mut probe = path.to_path_buf();
    while !probe.exists() {
        if !probe.pop() {
            break;
        }
    }
    let st = rustix::fs::stat(&probe)?;
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists() {
        let real = fs::canonicalize(&sys)?;
        if let Some(parent) = real.parent()
            && let Ok(dev) = fs::read_to_string(parent.join("dev"))
        {
            return Ok(dev.trim().to_string());
        }
    }
    if major == 0 {
        return Err(io::Error::other(format!(
            "{} is not on a block device (device {major}:{minor})",
            probe.display()
        )));
    }
    Ok(format!("{major}:{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(method: Option<Method>, cgroups: bool) -> Wanted {
        Wanted {
            name: match method {
                Some(Method::Fuse) => "fuse",
                Some(Method::Blkio) => "blkio",
                Some(Method::None) => "none",
                None => "default",
            },
            memory_limit_bytes: 1 << 20,
            read_iops: 1,
            read_bps: None,
            cgroups,
            evict: Some(Evict::Fadvise),
            method,
            slowdisk: slowdisk::Options::new(slowdisk::Model {
                seek_ms: 5.0,
                mbps: 40.0,
                meta_ms: 5.0,
                arms: 1,
            }),
            quick: true,
        }
    }

    fn plain(method: Method, cgroups: CgroupState) -> DiskEmulation {
        DiskEmulation {
            name: "m".into(),
            method,
            requested: None,
            method_reason: "the default when not root".into(),
            memory_limit_bytes: 128 << 20,
            read_iops: (method == Method::Blkio).then_some(300),
            read_bps: None,
            device: "254:0".into(),
            cgroups,
            evict: Evict::Fadvise,
            slowdisk: None,
            mount: None,
            data_dir: "/data".into(),
        }
    }

    #[test]
    fn describes_a_run_without_cgroups_plainly() {
        let d = plain(Method::None, CgroupState::NotRoot);
        let text = d.describe();
        assert!(text.contains("No disk emulation") && text.contains("not run as root"), "{text}");
        assert!(!d.applied());
        assert_eq!(d.short(), "m: NO disk emulation");
        assert_eq!(d.served(Path::new("/data/set")).unwrap(), PathBuf::from("/data/set"));
    }

    #[test]
    fn describes_the_blkio_throttle_and_what_it_does_not_do() {
        let d = plain(Method::Blkio, CgroupState::Applied);
        let text = d.describe();
        assert!(
            text.contains("**blkio throttle, model m**") && text.contains("300 reads/s"),
            "{text}"
        );
        assert!(text.contains("rate of reads only"), "{text}");
        assert!(d.applied());
        assert_eq!(d.short(), "m: blkio throttle 300 reads/s + memory cgroup");
        let off = plain(Method::Blkio, CgroupState::DisabledByOption);
        assert!(off.describe().contains("--no-cgroups was given"));
    }

    #[test]
    fn fadvise_eviction_needs_no_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), vec![1u8; 100_000]).unwrap();
        let d = DiskEmulation::plan(&wanted(None, false), dir.path()).unwrap();
        assert_eq!(d.cgroups, CgroupState::DisabledByOption);
        assert_eq!(d.method, Method::None);
        assert!(d.describe().contains("--no-cgroups was given"));
        d.evict(dir.path()).unwrap();
    }

    #[test]
    fn explicit_none_is_no_emulation() {
        let dir = tempfile::tempdir().unwrap();
        let d = DiskEmulation::plan(&wanted(Some(Method::None), true), dir.path()).unwrap();
        assert_eq!(d.method, Method::None);
        assert!(!d.applied());
        let text = d.describe();
        assert!(
            text.contains("No disk emulation") && text.contains("--disk-emulation none"),
            "{text}"
        );
    }

    #[test]
    fn explicit_fuse_without_fuse_is_an_error() {
        if slowdisk::unavailable().is_none() {
            eprintln!("skipped: FUSE is available here (the mount is tested in tests/slowdisk.rs)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let e = DiskEmulation::plan(&wanted(Some(Method::Fuse), true), dir.path()).unwrap_err();
        assert!(e.starts_with("--disk-emulation fuse:"), "{e}");
    }
}
