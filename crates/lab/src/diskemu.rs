//! The emulated 2004 disk for disk-bound runs.
//!
//! As root with cgroup v1, each server runs in a fresh memory cgroup (`memory.limit_in_bytes`:
//! its page cache cannot hold a larger data set) and a blkio cgroup
//! (`blkio.throttle.read_iops_device` on the disk holding the data: a miss costs what it cost
//! then). Before each server the data set leaves the page cache (global drop_caches, or
//! posix_fadvise DONTNEED on its files). Not root, or without cgroup v1: no limit and no
//! throttle; only the eviction happens, and every report says so.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::datasets::files_under;
use crate::proc::CgroupProcs;

const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";

/// How the data set leaves the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evict {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` (root; page cache, dentries and inodes).
    DropCaches,
    /// posix_fadvise(DONTNEED) on each file of the data set (no root needed; file pages only).
    Fadvise,
}

/// Whether the cgroups are in force, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum CgroupState {
    Applied,
    NotRoot,
    DisabledByOption,
    Unavailable(String),
}

/// The disk-emulation settings of a run, as recorded in setup.json.
#[derive(Clone, Debug, Serialize)]
pub struct DiskEmulation {
    pub memory_limit_bytes: u64,
    pub read_iops: u32,
    /// `major:minor` of the whole disk holding the data.
    pub device: String,
    pub cgroups: CgroupState,
    pub evict: Evict,
}

/// One server's cgroups; removed when dropped (after the server has exited).
#[derive(Debug)]
pub struct Cgroup {
    memory: PathBuf,
    blkio: PathBuf,
    device: String,
}

/// What a cgroup saw while a server ran in it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CgroupStats {
    pub memory_max_usage_bytes: u64,
    pub memory_failcnt: u64,
    pub oom_kills: u64,
    /// Reads dispatched to the throttled device.
    pub disk_reads: u64,
    pub disk_read_bytes: u64,
}

impl DiskEmulation {
    /// Settles the plan for data under `data_dir`: cgroups when possible (and wanted).
    pub fn plan(
        memory_limit_bytes: u64,
        read_iops: u32,
        want_cgroups: bool,
        evict: Option<Evict>,
        quick: bool,
        data_dir: &Path,
    ) -> DiskEmulation {
        let root = crate::machine::is_root();
        let device = disk_of(data_dir).unwrap_or_else(|e| format!("unknown ({e})"));
        let cgroups = if !want_cgroups {
            CgroupState::DisabledByOption
        } else if !root {
            CgroupState::NotRoot
        } else if !Path::new(MEMORY_ROOT).join("cgroup.procs").exists()
            || !Path::new(BLKIO_ROOT).join("blkio.throttle.read_iops_device").exists()
        {
            CgroupState::Unavailable("cgroup v1 memory and blkio controllers are not mounted at /sys/fs/cgroup/{memory,blkio}".into())
        } else if device.starts_with("unknown") {
            CgroupState::Unavailable(format!("cannot tell which disk holds {}", data_dir.display()))
        } else {
            CgroupState::Applied
        };
        let evict = match evict {
            Some(Evict::DropCaches) if !root => Evict::Fadvise,
            Some(e) => e,
            None if root && !quick => Evict::DropCaches,
            None => Evict::Fadvise,
        };
        DiskEmulation { memory_limit_bytes, read_iops, device, cgroups, evict }
    }

    /// Whether the cgroups are in force.
    pub fn applied(&self) -> bool {
        self.cgroups == CgroupState::Applied
    }

    /// One plain sentence for summaries.
    pub fn describe(&self) -> String {
        let mib = self.memory_limit_bytes >> 20;
        let evict = match self.evict {
            Evict::DropCaches => "the page cache was dropped (sync; drop_caches = 3)",
            Evict::Fadvise => {
                "the data set was evicted from the page cache (posix_fadvise DONTNEED)"
            }
        };
        match &self.cgroups {
            CgroupState::Applied => format!(
                "Each server ran in a memory cgroup limited to {mib} MiB and a blkio cgroup throttled to {} reads/s on device {}; before each server {evict}.",
                self.read_iops, self.device
            ),
            other => {
                let why = match other {
                    CgroupState::NotRoot => "amplab was not run as root".to_string(),
                    CgroupState::DisabledByOption => "--no-cgroups was given".to_string(),
                    CgroupState::Unavailable(r) => r.clone(),
                    CgroupState::Applied => String::new(),
                };
                format!(
                    "**No disk emulation**: {why}, so there was no memory limit and no disk throttle \
                     (the planned {mib} MiB / {} reads/s were not applied). Before each server {evict}, so \
                     the run starts cold, but after the warm-up this machine's memory holds the whole data \
                     set: what is measured is a cached server, not a disk-bound one.",
                    self.read_iops
                )
            }
        }
    }

    /// Creates the cgroups for one server (named after amplab's pid and `tag`), if applied.
    pub fn cgroup(&self, tag: &str) -> io::Result<Option<Cgroup>> {
        if !self.applied() {
            return Ok(None);
        }
        let name = format!("amplab-{}-{tag}", std::process::id());
        let memory = Path::new(MEMORY_ROOT).join(&name);
        let blkio = Path::new(BLKIO_ROOT).join(&name);
        fs::create_dir_all(&memory)?;
        fs::create_dir_all(&blkio)?;
        let cg = Cgroup { memory, blkio, device: self.device.clone() };
        fs::write(cg.memory.join("memory.limit_in_bytes"), self.memory_limit_bytes.to_string())?;
        fs::write(
            cg.blkio.join("blkio.throttle.read_iops_device"),
            format!("{} {}", self.device, self.read_iops),
        )?;
        Ok(Some(cg))
    }

    /// Makes the data set under `root` leave the page cache.
    pub fn evict(&self, root: &Path) -> io::Result<()> {
        let _ = Command::new("sync").status();
        match self.evict {
            Evict::DropCaches => fs::write("/proc/sys/vm/drop_caches", "3\n"),
            Evict::Fadvise => {
                for path in files_under(root) {
                    let file = fs::File::open(&path)?;
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
            blkio: self.blkio.join("cgroup.procs"),
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
        let io_line = |file: &str| {
            fs::read_to_string(self.blkio.join(file))
                .ok()
                .and_then(|t| {
                    t.lines().find_map(|l| {
                        let mut it = l.split_whitespace();
                        (it.next() == Some(self.device.as_str()) && it.next() == Some("Read"))
                            .then(|| it.next()?.parse().ok())?
                    })
                })
                .unwrap_or(0)
        };
        CgroupStats {
            memory_max_usage_bytes: num(self.memory.join("memory.max_usage_in_bytes")),
            memory_failcnt: num(self.memory.join("memory.failcnt")),
            oom_kills,
            disk_reads: io_line("blkio.throttle.io_serviced"),
            disk_read_bytes: io_line("blkio.throttle.io_service_bytes"),
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Empty by now (the server was stopped first); rmdir fails harmlessly otherwise.
        let _ = fs::remove_dir(&self.memory);
        let _ = fs::remove_dir(&self.blkio);
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

    #[test]
    fn describes_a_run_without_cgroups_plainly() {
        let d = DiskEmulation {
            memory_limit_bytes: 128 << 20,
            read_iops: 300,
            device: "254:0".into(),
            cgroups: CgroupState::NotRoot,
            evict: Evict::Fadvise,
        };
        let text = d.describe();
        assert!(text.contains("No disk emulation") && text.contains("not run as root"), "{text}");
        assert!(!d.applied());
    }

    #[test]
    fn fadvise_eviction_needs_no_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), vec![1u8; 100_000]).unwrap();
        let d = DiskEmulation::plan(1 << 20, 1, false, Some(Evict::Fadvise), true, dir.path());
        assert_eq!(d.cgroups, CgroupState::DisabledByOption);
        d.evict(dir.path()).unwrap();
    }
}
