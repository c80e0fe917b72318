//! Facts about the machine a run happened on, read from /proc and /etc, for setup.json.

use std::fs;

use serde::Serialize;

/// What setup.json records about the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub os: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_total_mib: u64,
    pub load_average: String,
    pub root: bool,
    pub cgroup_v1_memory: bool,
    pub cgroup_v1_blkio: bool,
    pub nofile_limit: String,
}

impl Machine {
    /// Reads everything now (missing files give empty fields, never an error).
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
            .map(|(_, m)| m.trim().to_string())
            .unwrap_or_default();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mem_total_mib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024);
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default();
        let nofile = read("/proc/self/limits")
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .map(|l| {
                l.split_whitespace().skip(3).take(2).collect::<Vec<_>>().join(" soft, ") + " hard"
            })
            .unwrap_or_default();
        Machine {
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os,
            cpu_model,
            cpus,
            mem_total_mib,
            load_average: read("/proc/loadavg")
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
            root: is_root(),
            cgroup_v1_memory: fs::metadata("/sys/fs/cgroup/memory/cgroup.procs").is_ok(),
            cgroup_v1_blkio: fs::metadata("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device")
                .is_ok(),
            nofile_limit: nofile,
        }
    }
}

/// Whether amplab runs as root (cgroups, drop_caches, apt-get).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn read(path: &str) -> String {
    fs::read_to_string(path).unwrap_or_default()
}
