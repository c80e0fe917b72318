//! Data sets, generated reproducibly from a seed: single files of given sizes, SPECweb99-like
//! file sets with Zipf request traces, and file sets that match a user's access log.
//!
//! Everything created is world-readable (directories 0755, files 0644), because peers that
//! start as root serve files as an unprivileged worker user.

pub mod replay;
pub mod single;
pub mod specweb;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use amped_workload::SplitMix64;

/// amplab's generator for `seed`: the shared SplitMix64 started from the seed mixed with a
/// fixed salt (as amplab always did), so the data sets and traces a seed names stay the same.
pub fn rng(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ 0x5DEE_CE66_D1CE_4E5B)
}

/// A block of noise that file contents are cut from (1 MiB).
pub struct Noise(Vec<u8>);

impl Noise {
    /// Noise from `seed`.
    pub fn new(seed: u64) -> Noise {
        let mut block = vec![0u8; 1 << 20];
        rng(seed).fill(&mut block);
        Noise(block)
    }

    /// Writes `size` bytes to `path` (a random cut of the block, repeated for large files),
    /// world-readable.
    pub fn write_file(&self, path: &Path, size: u64, rng: &mut SplitMix64) -> io::Result<()> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
        let mut left = size;
        let mut offset = rng.below(self.0.len() as u64) as usize;
        while left > 0 {
            let piece = (self.0.len() - offset).min(left as usize);
            out.write_all(&self.0[offset..offset + piece])?;
            left -= piece as u64;
            offset = 0;
        }
        out.flush()?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o644))
    }
}

/// Creates `dir` and its missing parents, world-readable.
pub fn make_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
}

/// Writes a small JSON marker saying which parameters made a data set.
pub fn write_marker(path: &Path, params: &serde_json::Value) -> io::Result<()> {
    fs::write(path, serde_json::to_string_pretty(params).unwrap_or_default())
}

/// Whether the marker at `path` records exactly `params`.
pub fn marker_matches(path: &Path, params: &serde_json::Value) -> bool {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| &v == params)
}

/// Every regular file under `root` (recursively).
pub fn files_under(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => out.push(entry.path()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
