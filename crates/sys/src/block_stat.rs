//! The read counts a block device keeps (`/sys/dev/block/MAJ:MIN/stat`): requests completed
//! and bytes moved since boot, for the device that holds a file. A throttled or capped volume
//! shows here what it lets through, whatever the process asked for.

use std::path::PathBuf;

/// The stat file of the block device `dev` (a file's `st_dev`); `None` where the device
/// number is anonymous (FUSE, NFS, tmpfs, overlayfs: no block device to count).
pub fn stat_path(dev: u64) -> Option<PathBuf> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    crate::direct::on_block_device(dev)
        .then(|| PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat")))
}

/// Reads completed, reads merged and bytes read, from the text of a device's stat file.
pub fn parse(text: &str) -> Option<DeviceReads> {
    let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
    let requests = fields.next()?.ok()?;
    let merged = fields.next()?.ok()?;
    let sectors = fields.next()?.ok()?;
    Some(DeviceReads { requests, merged, bytes: sectors * 512 })
}

/// The device's read counters now, from the file at `path` ([`stat_path`]).
pub fn read(path: &std::path::Path) -> Option<DeviceReads> {
    parse(&std::fs::read_to_string(path).ok()?)
}

/// A block device's cumulative read counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceReads {
    /// Read requests completed.
    pub requests: u64,
    /// Reads the block layer merged into a request already queued: `requests + merged` is how
    /// many reads were submitted (what a blkio throttle counts; a volume behind the device
    /// counts `requests`).
    pub merged: u64,
    /// Bytes read (sectors of 512 bytes, whatever the device's own block size).
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_three_fields() {
        let line = " 6685276  1089975 8953627554 13804544   724495   597312 211654528  2054943 0 3377464 16156415\n";
        let r = parse(line).unwrap();
        let want =
            DeviceReads { requests: 6_685_276, merged: 1_089_975, bytes: 8_953_627_554 * 512 };
        assert_eq!(r, want);
        assert_eq!(parse("12 x"), None, "not a stat file");
    }

    #[test]
    fn anonymous_devices_have_none() {
        assert_eq!(stat_path(libc::makedev(0, 45)), None, "FUSE, tmpfs, overlayfs");
        let p = stat_path(libc::makedev(253, 1)).unwrap();
        assert_eq!(p, PathBuf::from("/sys/dev/block/253:1/stat"));
    }
}
