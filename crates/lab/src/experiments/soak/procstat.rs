//! A server's memory and descriptors from /proc, summed over every process of its process
//! group (amplab starts each server as a group of its own: mp workers, nginx's and Apache's
//! children are counted with their parent; a reload's new workers join the same group).
//! RSS is summed as each process reports it, so pages shared between processes count once
//! per process, as `ps` would add them up.

use std::collections::BTreeMap;
use std::fs;

use crate::experiments::outside_profile::group_pids;

/// One look at a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Seconds since the soak of this server began.
    pub t_s: f64,
    /// Resident set size, KiB, summed over the group's processes.
    pub rss_kb: u64,
    /// Open descriptors, summed.
    pub fds: u64,
    /// Processes in the group.
    pub procs: u64,
}

/// Samples process group `pgid` at `t_s`; `None` if no process of it is left.
pub fn sample(pgid: u32, t_s: f64) -> Option<Sample> {
    let page_kb = (rustix::param::page_size() / 1024) as u64;
    let mut s = Sample { t_s, ..Sample::default() };
    for pid in group_pids(pgid) {
        let statm = fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
        let resident: u64 =
            statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        s.rss_kb += resident * page_kb;
        s.fds += fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0);
        s.procs += 1;
    }
    (s.procs > 0).then_some(s)
}

/// The open descriptors of process group `pgid` by kind: `connection` (a TCP socket not
/// listening), `socket` (listening, Unix, …), `file`, `deleted file` (a file removed or
/// renamed over and still held open), `pipe`, `anon` (epoll, eventfd, io_uring…) and `other`.
pub fn fd_kinds(pgid: u32) -> BTreeMap<String, u64> {
    let connections = tcp_connection_inodes();
    let mut kinds = BTreeMap::new();
    for pid in group_pids(pgid) {
        let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in dir.flatten() {
            let target =
                fs::read_link(fd.path()).map(|p| p.display().to_string()).unwrap_or_default();
            let inode = target
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|i| i.parse::<u64>().ok());
            let kind = if inode.is_some_and(|i| connections.contains(&i)) {
                "connection"
            } else if target.starts_with("socket:") {
                "socket"
            } else if target.starts_with("pipe:") {
                "pipe"
            } else if target.starts_with("anon_inode:") {
                "anon"
            } else if target.starts_with('/') && target.ends_with(" (deleted)") {
                "deleted file"
            } else if target.starts_with('/') {
                "file"
            } else {
                "other"
            };
            *kinds.entry(kind.to_string()).or_default() += 1;
        }
    }
    kinds
}

/// The inodes of this network namespace's TCP sockets that are not listening
/// (/proc/net/tcp and tcp6: the state is the fourth field, `0A` is LISTEN; the inode the tenth).
fn tcp_connection_inodes() -> std::collections::HashSet<u64> {
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9
                && f[3] != "0A"
                && let Ok(inode) = f[9].parse::<u64>()
            {
                inodes.insert(inode);
            }
        }
    }
    inodes
}

/// Start, end, maximum of a quantity over the samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Span {
    pub start: u64,
    pub end: u64,
    pub max: u64,
}

impl Span {
    /// Over `samples` (time order) of `f`.
    pub fn of(samples: &[Sample], f: fn(&Sample) -> u64) -> Span {
        Span {
            start: samples.first().map_or(0, f),
            end: samples.last().map_or(0, f),
            max: samples.iter().map(f).max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_group() {
        let me = rustix::process::getpgrp().as_raw_nonzero().get() as u32;
        let s = sample(me, 1.5).expect("our own group");
        assert!(s.procs >= 1 && s.rss_kb > 0 && s.fds >= 3, "{s:?}");
        let kinds = fd_kinds(me);
        assert!(kinds.values().sum::<u64>() >= 3, "{kinds:?}");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (accepted, _) = l.accept().unwrap();
        let inode = |fd: &dyn std::os::fd::AsRawFd| {
            use std::os::unix::fs::MetadataExt;
            fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap().ino()
        };
        let connections = tcp_connection_inodes();
        assert!(connections.contains(&inode(&c)) && connections.contains(&inode(&accepted)));
        assert!(!connections.contains(&inode(&l)), "a listener is not a connection");
        drop((c, accepted, l));
        let span = Span::of(
            &[Sample { rss_kb: 5, ..s }, Sample { rss_kb: 9, ..s }, Sample { rss_kb: 7, ..s }],
            |s| s.rss_kb,
        );
        assert_eq!(span, Span { start: 5, end: 7, max: 9 });
    }
}
