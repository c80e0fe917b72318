//! SPECweb99-like file sets and Zipf request traces (peers-and-methods §2.4).
//!
//! Layout: `dir00000/` … each with `class{0..3}_{1..9}`; class c file i has
//! `CLASS_BASE[c] * i` bytes (0.1–0.9 KB, 1–9 KB, 10–90 KB, 100–900 KB), so a directory holds
//! about 5.12 MB. Requests: directory by Zipf(α = 1), class by the 35/50/14/1 % mix, file
//! within the class by Zipf over its 9 files. The number of directories is chosen to reach the
//! requested total size.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Noise, make_dir, marker_matches, write_marker};
use crate::rng::{Rng, Weighted, Zipf};

/// Base size of each class (bytes); file i of class c has `CLASS_BASE[c] * i` bytes.
pub const CLASS_BASE: [u64; 4] = [102, 1024, 10_240, 102_400];
/// Share of requests going to each class.
pub const CLASS_MIX: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
/// Files per class.
pub const FILES_PER_CLASS: u64 = 9;

/// Bytes in one directory (36 files).
pub fn dir_bytes() -> u64 {
    CLASS_BASE.iter().map(|b| b * (1..=FILES_PER_CLASS).sum::<u64>()).sum()
}

/// Directories needed for about `total` bytes (at least one).
pub fn dirs_for(total: u64) -> u32 {
    ((total as f64 / dir_bytes() as f64).round() as u32).max(1)
}

/// A generated file set.
#[derive(Clone, Debug)]
pub struct FileSet {
    pub root: PathBuf,
    pub dirs: u32,
    pub bytes: u64,
}

/// Creates (or reuses, when a previous run made the same one) a set of about `total` bytes
/// under `parent/specweb-<dirs>d-s<seed>/`.
pub fn generate(parent: &Path, total: u64, seed: u64) -> io::Result<FileSet> {
    let dirs = dirs_for(total);
    let root = parent.join(format!("specweb-{dirs}d-s{seed}"));
    let marker = parent.join(format!("specweb-{dirs}d-s{seed}.params.json"));
    let params = json!({"dirs": dirs, "seed": seed, "dir_bytes": dir_bytes(), "format": 1});
    let set = FileSet { root: root.clone(), dirs, bytes: u64::from(dirs) * dir_bytes() };
    if marker_matches(&marker, &params) && root.is_dir() {
        return Ok(set);
    }
    let _ = std::fs::remove_file(&marker);
    make_dir(&root)?;
    let noise = Noise::new(seed);
    let mut rng = Rng::new(seed);
    for d in 0..dirs {
        let dir = root.join(format!("dir{d:05}"));
        make_dir(&dir)?;
        for (c, base) in CLASS_BASE.iter().enumerate() {
            for i in 1..=FILES_PER_CLASS {
                noise.write_file(&dir.join(format!("class{c}_{i}")), base * i, &mut rng)?;
            }
        }
    }
    write_marker(&marker, &params)?;
    Ok(set)
}

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    pub dir: u32,
    pub class: u8,
    pub file: u8,
}

impl Request {
    /// `/dir00012/class1_3`.
    pub fn path(&self) -> String {
        format!("/dir{:05}/class{}_{}", self.dir, self.class, self.file)
    }

    /// Size of the file it asks for.
    pub fn bytes(&self) -> u64 {
        CLASS_BASE[usize::from(self.class)] * u64::from(self.file)
    }
}

/// `n` requests over a set of `dirs` directories, drawn as the module doc says.
pub fn trace(dirs: u32, n: usize, seed: u64) -> Vec<Request> {
    let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(17));
    let dir_zipf = Zipf::new(dirs as usize, 1.0);
    let file_zipf = Zipf::new(FILES_PER_CLASS as usize, 1.0);
    let class = Weighted::new(&CLASS_MIX);
    (0..n)
        .map(|_| Request {
            dir: dir_zipf.sample(&mut rng) as u32,
            class: class.sample(&mut rng) as u8,
            file: file_zipf.sample(&mut rng) as u8 + 1,
        })
        .collect()
}

/// Writes a trace as one path per line (ampload `--urls`).
pub fn write_urls(path: &Path, requests: &[Request]) -> io::Result<()> {
    let mut text = String::with_capacity(requests.len() * 22);
    for r in requests {
        text.push_str(&r.path());
        text.push('\n');
    }
    std::fs::write(path, text)
}

/// Share of `measured` whose file was not asked for before: not in `earlier` (the warm-up's
/// requests) nor earlier in `measured`. Those requests are cold by construction: whatever
/// the server, each needs the disk.
pub fn first_time_share(earlier: &[Request], measured: &[Request]) -> f64 {
    let mut seen: std::collections::HashSet<Request> = earlier.iter().copied().collect();
    let new = measured.iter().filter(|r| seen.insert(**r)).count();
    new as f64 / measured.len().max(1) as f64
}

/// Mean response body of a trace (bytes).
pub fn mean_bytes(requests: &[Request]) -> f64 {
    requests.iter().map(|r| r.bytes() as f64).sum::<f64>() / requests.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_time_share_counts_files_not_seen_before() {
        let r = |dir, file| Request { dir, class: 0, file };
        let earlier = [r(0, 1), r(1, 1)];
        let measured = [r(0, 1), r(2, 1), r(2, 1), r(3, 2)];
        assert_eq!(first_time_share(&earlier, &measured), 0.5);
        assert_eq!(first_time_share(&[], &[]), 0.0);
    }

    #[test]
    fn directory_size_matches_specweb() {
        assert_eq!(dir_bytes(), 45 * (102 + 1024 + 10_240 + 102_400));
        assert_eq!(dirs_for(1), 1);
        assert_eq!(dirs_for(1 << 30), 210);
    }

    fn digest(root: &Path) -> (u64, u64) {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut total = 0;
        for f in crate::datasets::files_under(root) {
            let bytes = std::fs::read(&f).unwrap();
            total += bytes.len() as u64;
            let name = f.strip_prefix(root).unwrap().display().to_string();
            for b in name.bytes().chain(bytes) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        (h, total)
    }

    #[test]
    fn generation_is_deterministic_and_sized() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let want = 12 << 20;
        let sa = generate(a.path(), want, 3).unwrap();
        let sb = generate(b.path(), want, 3).unwrap();
        let (ha, ta) = digest(&sa.root);
        assert_eq!((ha, ta), digest(&sb.root), "same seed, same bytes");
        assert_eq!(ta, sa.bytes, "the files add up to the reported size");
        assert_eq!(crate::datasets::files_under(&sa.root).len(), sa.dirs as usize * 36);
        assert!(ta.abs_diff(want) <= dir_bytes() / 2, "{ta} bytes for {want} requested");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            digest(&generate(other.path(), want, 4).unwrap().root).0,
            ha,
            "another seed, other bytes"
        );
        // A second call with the same parameters reuses the set.
        let again = generate(a.path(), want, 3).unwrap();
        assert_eq!(digest(&again.root).0, ha);
    }

    #[test]
    fn trace_follows_the_class_mix_and_zipf() {
        let n = 200_000;
        let t = trace(50, n, 9);
        assert_eq!(t, trace(50, n, 9), "same seed, same trace");
        let mut class = [0usize; 4];
        let mut dir0 = 0;
        for r in &t {
            class[usize::from(r.class)] += 1;
            dir0 += usize::from(r.dir == 0);
        }
        for (c, want) in CLASS_MIX.iter().enumerate() {
            let got = class[c] as f64 / n as f64;
            assert!((got - want).abs() < 0.006, "class {c}: {got} vs {want}");
        }
        let h50: f64 = (1..=50).map(|k| 1.0 / f64::from(k)).sum();
        let got = dir0 as f64 / n as f64;
        assert!((got - 1.0 / h50).abs() < 0.01, "directory 0 drew {got}, Zipf says {}", 1.0 / h50);
    }

    #[test]
    fn trace_paths_name_existing_files() {
        let t = trace(3, 1000, 1);
        assert!(t.iter().all(|r| r.dir < 3 && r.class < 4 && (1..=9).contains(&r.file)));
        assert_eq!(Request { dir: 12, class: 1, file: 3 }.path(), "/dir00012/class1_3");
    }
}
