//! Mount-table housekeeping: finding slow-disk mounts in /proc/self/mountinfo (never by
//! touching the mount point, which hangs on a stuck FUSE mount), telling live ones from stale
//! ones, and lazy unmounts (`umount -l`).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The `fsname` of every slow-disk mount (the mount's source in the mount table).
pub const FSNAME: &str = "amplab-slowdisk";

/// One line of /proc/self/mountinfo, the fields used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
}

impl MountEntry {
    /// Whether this is a slow-disk mount.
    pub fn is_slowdisk(&self) -> bool {
        self.fs_type.starts_with("fuse") && self.source == FSNAME
    }
}

/// Parses mountinfo text (see proc(5)); malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split(' ').nth(4)?;
            let mut r = right.split(' ');
            let fs_type = r.next()?.to_string();
            let source = unescape(r.next()?).into_string().ok()?;
            Some(MountEntry { mount_point: PathBuf::from(unescape(mount_point)), fs_type, source })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134` `\`).
fn unescape(field: &str) -> OsString {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    OsString::from_vec(out)
}

/// The current mount table.
pub fn mounts() -> io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// What is mounted at `path` (the topmost mount), if anything.
pub fn mounted_at(path: &Path) -> io::Result<Option<MountEntry>> {
    Ok(mounts()?.into_iter().rev().find(|m| m.mount_point == path))
}

/// `umount -l PATH`: detaches the mount now; the kernel frees it when its last user is gone.
/// Not mounted is not an error.
pub fn lazy_unmount(path: &Path) -> io::Result<()> {
    match rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether the file system at `path` answers a statfs within `within` (run in a helper
/// thread, so a stuck daemon cannot hang the caller; that thread is left behind then).
pub fn answers(path: &Path, within: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    let spawned = thread::Builder::new()
        .name("slowdisk-probe".into())
        .spawn(move || {
            let _ = tx.send(rustix::fs::statfs(&p).is_ok());
        })
        .is_ok();
    spawned && rx.recv_timeout(within).unwrap_or(false)
}

/// Makes `mount_point` usable for a new slow disk: a stale slow-disk mount there (its daemon
/// gone or stuck) is lazily unmounted; a live one, or any other file system, is an error.
pub fn clear_stale(mount_point: &Path) -> io::Result<()> {
    for _ in 0..8 {
        let Some(m) = mounted_at(mount_point)? else { return Ok(()) };
        if !m.is_slowdisk() {
            return Err(io::Error::other(format!(
                "{} is a mount point already ({} from {})",
                mount_point.display(),
                m.fs_type,
                m.source
            )));
        }
        if answers(mount_point, Duration::from_secs(2)) {
            return Err(io::Error::other(format!(
                "a live slow disk is mounted at {} already (unmount it first: umount -l {})",
                mount_point.display(),
                mount_point.display()
            )));
        }
        eprintln!("[amplab slowdisk] {} was a stale mount: umount -l", mount_point.display());
        lazy_unmount(mount_point)?;
    }
    Err(io::Error::other(format!("{} stays mounted", mount_point.display())))
}

/// The mount point amplab's experiments use: `/var/tmp/amplab-slowdisk-<pid>`.
pub fn run_mount_point(pid: u32) -> PathBuf {
    PathBuf::from(format!("/var/tmp/amplab-slowdisk-{pid}"))
}

/// Lazily unmounts (and removes) the experiment mount points of amplab processes that are
/// gone (killed before they could unmount). Mounts of live amplab processes are left alone.
/// Returns the mount points cleared.
pub fn clear_dead_runs() -> Vec<PathBuf> {
    let mut cleared = Vec::new();
    for m in mounts().unwrap_or_default() {
        if !m.is_slowdisk() {
            continue;
        }
        let Some(pid) = m
            .mount_point
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("amplab-slowdisk-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if m.mount_point != run_mount_point(pid) || amplab_alive(pid) {
            continue;
        }
        if lazy_unmount(&m.mount_point).is_ok() {
            let _ = std::fs::remove_dir(&m.mount_point);
            cleared.push(m.mount_point);
        }
    }
    cleared
}

fn amplab_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "amplab")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw
90 27 0:55 / /var/tmp/amplab-slowdisk-4242 ro,nosuid,nodev,relatime - fuse amplab-slowdisk ro,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072
91 27 0:56 / /mnt/with\\040space rw - fuse.sshfs host:/x rw
bad line
";

    #[test]
    fn parses_mountinfo() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[1],
            MountEntry {
                mount_point: "/".into(),
                fs_type: "ext4".into(),
                source: "/dev/vda1".into()
            }
        );
        assert!(m[2].is_slowdisk());
        assert_eq!(m[2].mount_point, run_mount_point(4242));
        assert_eq!(m[3].mount_point, PathBuf::from("/mnt/with space"));
        assert!(!m[3].is_slowdisk() && !m[0].is_slowdisk());
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape(r"a\040b\134c\011"), OsString::from("a b\\c\t"));
        assert_eq!(unescape(r"trailing\04"), OsString::from(r"trailing\04"));
        assert_eq!(unescape(r"not\999"), OsString::from(r"not\999"));
    }

    #[test]
    fn nothing_is_mounted_on_a_fresh_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(mounted_at(dir.path()).unwrap(), None);
        clear_stale(dir.path()).unwrap();
        lazy_unmount(dir.path()).ok();
        assert!(answers(dir.path(), Duration::from_secs(2)));
    }
}
