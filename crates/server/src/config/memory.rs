//! How much memory the server has to cache files in: its memory cgroup's limit (cgroup v2
//! `memory.max`, v1 `memory.limit_in_bytes`) where there is one, else the machine's memory.
//! Read once, when the configuration is resolved; the defaults that scale with memory
//! (`--direct-io-above`) are computed from it.

use std::path::Path;

/// The memory the process may use, in bytes; `None` when even the machine's is unknown.
pub fn available() -> Option<u64> {
    let machine = machine_memory();
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_limit(&c, Path::new("/sys/fs/cgroup")));
    match (cgroup, machine) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

/// `MemTotal` of /proc/meminfo.
fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The limit of the memory cgroup named in `proc_cgroup` (the text of /proc/self/cgroup),
/// under the cgroup file systems mounted at `root`; `None` without a limit ("max", or v1's
/// near-2^63 "unlimited") or a cgroup to read.
fn cgroup_limit(proc_cgroup: &str, root: &Path) -> Option<u64> {
    let read = |file: &Path| -> Option<u64> {
        let text = std::fs::read_to_string(file).ok()?;
        text.trim().parse::<u64>().ok().filter(|&n| n < 1 << 60)
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            return read(&root.join("memory").join(rel).join("memory.limit_in_bytes"));
        }
        if controllers.is_empty()
            && let Some(n) = read(&root.join(rel).join("memory.max"))
        {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_of_the_cgroup_the_process_is_in_v1_or_v2() {
        let root = std::env::temp_dir().join(format!("amped-cgroup-{}", std::process::id()));
        let v1 = root.join("memory/lab/srv");
        let v2 = root.join("svc.slice/amped.service");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "134217728\n").unwrap();
        std::fs::write(v2.join("memory.max"), "1073741824\n").unwrap();
        let v1_text = "12:blkio:/lab/srv\n4:memory:/lab/srv\n0::/user.slice\n";
        assert_eq!(cgroup_limit(v1_text, &root), Some(128 << 20));
        assert_eq!(cgroup_limit("0::/svc.slice/amped.service\n", &root), Some(1 << 30));
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit("0::/svc.slice/amped.service\n", &root), None, "no limit");
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(v1_text, &root), None, "v1's unlimited");
        assert_eq!(cgroup_limit("0::/elsewhere\n", &root), None, "no such cgroup");
        std::fs::remove_dir_all(&root).unwrap();
        assert!(available().is_some_and(|n| n > 0), "this machine's memory is known");
    }
}
