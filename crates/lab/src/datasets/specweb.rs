//! SPECweb99-like file sets and Zipf request traces (peers-and-methods §2.4).
//!
//! Layout: `dir00000/` … each with `class{0..3}_{1..9}`; class c file i has
//! `CLASS_BASE[c] * i` bytes (0.1–0.9 KB, 1–9 KB, 10–90 KB, 100–900 KB), so a directory holds
//! about 5.12 MB. Requests: directory by Zipf(α, default 1), class by a mix (default the
//! 35/50/14/1 % of SPECweb99), file within the class by Zipf over its 9 files. The number of
//! directories is chosen to reach the requested total size.
//!
//! A heavy-tailed variant adds `large/file000` … (see [`add_large_files`]): a few files of
//! 10–100 MB that a given share of requests asks for, the shape of a real site's downloads.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Noise, make_dir, marker_matches, write_marker};
use amped_workload::{Weighted, Zipf};

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
    /// Bytes of all its files (large ones included).
    pub bytes: u64,
    /// Sizes of `large/file000`… (empty without large files).
    pub large: Vec<u64>,
}

impl FileSet {
    /// Size of the file `r` asks for.
    pub fn bytes_of(&self, r: &Request) -> u64 {
        if r.class == LARGE_CLASS {
            self.large.get(r.dir as usize).copied().unwrap_or(0)
        } else {
            r.bytes()
        }
    }
}

/// What a trace looks like: the directory Zipf exponent, the class mix and the share of
/// requests for large files.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    pub zipf: f64,
    pub class_mix: [f64; 4],
    pub large_share: f64,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape { zipf: 1.0, class_mix: CLASS_MIX, large_share: 0.0 }
    }
}

impl Shape {
    /// A few words for summaries, e.g. "Zipf α = 1, class mix 35/50/14/1 %".
    pub fn describe(&self) -> String {
        let total: f64 = self.class_mix.iter().sum();
        let mix: Vec<String> = self.class_mix.iter().map(|w| trim(w / total * 100.0)).collect();
        let mut s = format!("Zipf α = {}, class mix {} %", trim(self.zipf), mix.join("/"));
        if self.large_share > 0.0 {
            s.push_str(&format!(
                ", {} % of requests for large files",
                trim(self.large_share * 100.0)
            ));
        }
        s
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The class number of a request for a large file (`/large/file<dir>`).
pub const LARGE_CLASS: u8 = 4;

/// Large files added by [`add_large_files`] (quick runs: [`LARGE_FILES_QUICK`]).
pub const LARGE_FILES: u32 = 12;
/// Large files in quick runs.
pub const LARGE_FILES_QUICK: u32 = 3;
/// Size range of the large files, bytes (log-uniform): 10–100 MB.
pub const LARGE_RANGE: (u64, u64) = (10_000_000, 100_000_000);
/// The same in quick runs: 1–4 MiB.
pub const LARGE_RANGE_QUICK: (u64, u64) = (1 << 20, 4 << 20);

/// How many large files a run adds and their size range (quick runs: fewer and smaller).
pub fn large_plan(quick: bool) -> (u32, (u64, u64)) {
    if quick { (LARGE_FILES_QUICK, LARGE_RANGE_QUICK) } else { (LARGE_FILES, LARGE_RANGE) }
}

/// Sizes of `count` large files in `range` (log-uniform), from `seed`.
pub fn large_sizes(count: u32, range: (u64, u64), seed: u64) -> Vec<u64> {
    let mut rng = super::rng(seed ^ 0x1A46_E5F1);
    let (lo, hi) = ((range.0 as f64).ln(), (range.1 as f64).ln());
    (0..count).map(|_| (lo + rng.next_f64() * (hi - lo)).exp().round() as u64).collect()
}

/// Adds `count` large files (sizes from [`large_sizes`]) under `set.root/large/` (or reuses
/// them when a previous run made the same ones) and records them in `set`.
pub fn add_large_files(
    set: &mut FileSet,
    count: u32,
    range: (u64, u64),
    seed: u64,
) -> io::Result<()> {
    let sizes = large_sizes(count, range, seed);
    let dir = set.root.join("large");
    let marker = set.root.with_extension("large.params.json");
    let params = json!({"sizes": sizes, "seed": seed, "format": 1});
    if !(marker_matches(&marker, &params) && dir.is_dir()) {
        let _ = std::fs::remove_file(&marker);
        if dir.is_dir() {
            std::fs::remove_dir_all(&dir)?;
        }
        make_dir(&dir)?;
        let noise = Noise::new(seed ^ 0x1A46_E5F1);
        let mut rng = super::rng(seed ^ 0x1A46_E5F2);
        for (i, size) in sizes.iter().enumerate() {
            noise.write_file(&dir.join(format!("file{i:03}")), *size, &mut rng)?;
        }
        write_marker(&marker, &params)?;
    }
    set.bytes = u64::from(set.dirs) * dir_bytes() + sizes.iter().sum::<u64>();
    set.large = sizes;
    Ok(())
}

/// Creates (or reuses, when a previous run made the same one) a set of about `total` bytes
/// under `parent/specweb-<dirs>d-s<seed>/`.
pub fn generate(parent: &Path, total: u64, seed: u64) -> io::Result<FileSet> {
    let dirs = dirs_for(total);
    let root = parent.join(format!("specweb-{dirs}d-s{seed}"));
    let marker = parent.join(format!("specweb-{dirs}d-s{seed}.params.json"));
    let params = json!({"dirs": dirs, "seed": seed, "dir_bytes": dir_bytes(), "format": 1});
    let set = FileSet {
        root: root.clone(),
        dirs,
        bytes: u64::from(dirs) * dir_bytes(),
        large: Vec::new(),
    };
    if marker_matches(&marker, &params) && root.is_dir() {
        return Ok(set);
    }
    let _ = std::fs::remove_file(&marker);
    make_dir(&root)?;
    let noise = Noise::new(seed);
    let mut rng = super::rng(seed);
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
    /// `/dir00012/class1_3`, or `/large/file002` for the large file 2.
    pub fn path(&self) -> String {
        if self.class == LARGE_CLASS {
            return format!("/large/file{:03}", self.dir);
        }
        format!("/dir{:05}/class{}_{}", self.dir, self.class, self.file)
    }

    /// Size of the file it asks for (0 for a large file: see [`FileSet::bytes_of`]).
    pub fn bytes(&self) -> u64 {
        CLASS_BASE.get(usize::from(self.class)).map_or(0, |b| b * u64::from(self.file))
    }
}

/// `n` requests over a set of `dirs` directories, drawn as the module doc says, with the
/// default shape (Zipf α = 1, the SPECweb99 class mix, no large files).
pub fn trace(dirs: u32, n: usize, seed: u64) -> Vec<Request> {
    shaped_trace(dirs, 0, n, seed, &Shape::default())
}

/// `n` requests over `dirs` directories and `large` large files, shaped by `shape`.
pub fn shaped_trace(dirs: u32, large: u32, n: usize, seed: u64, shape: &Shape) -> Vec<Request> {
    let mut rng = super::rng(seed.wrapping_mul(0x9E37_79B9).wrapping_add(17));
    let dir_zipf = Zipf::new(dirs as usize, shape.zipf);
    let file_zipf = Zipf::new(FILES_PER_CLASS as usize, 1.0);
    let class = Weighted::new(&shape.class_mix);
    let large_share = if large > 0 { shape.large_share } else { 0.0 };
    (0..n)
        .map(|_| {
            if large_share > 0.0 && rng.next_f64() < large_share {
                let file = rng.below(u64::from(large)) as u32;
                return Request { dir: file, class: LARGE_CLASS, file: 0 };
            }
            Request {
                dir: dir_zipf.sample(&mut rng) as u32,
                class: class.sample(&mut rng) as u8,
                file: file_zipf.sample(&mut rng) as u8 + 1,
            }
        })
        .collect()
}

/// The sizes of the distinct files among `requests`, in order of first request.
pub fn distinct_sizes<'a>(
    set: &FileSet,
    requests: impl IntoIterator<Item = &'a Request>,
) -> Vec<u64> {
    let mut seen = std::collections::HashSet::new();
    requests.into_iter().filter(|r| seen.insert(**r)).map(|r| set.bytes_of(r)).collect()
}

/// Writes a trace as one path per line (ampload `--urls`).
pub fn write_urls(path: &Path, requests: &[Request]) -> io::Result<()> {
    std::fs::write(path, amped_workload::lists::url_list(requests.iter().map(Request::path)))
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
pub fn mean_bytes(set: &FileSet, requests: &[Request]) -> f64 {
    requests.iter().map(|r| set.bytes_of(r) as f64).sum::<f64>() / requests.len().max(1) as f64
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
    fn the_shape_sets_the_zipf_exponent_and_the_class_mix() {
        let n = 200_000;
        let shape = Shape { zipf: 1.5, class_mix: [0.0, 50.0, 40.0, 10.0], large_share: 0.0 };
        let t = shaped_trace(50, 0, n, 9, &shape);
        let mut class = [0usize; 4];
        let mut dir0 = 0;
        for r in &t {
            class[usize::from(r.class)] += 1;
            dir0 += usize::from(r.dir == 0);
        }
        for (c, want) in [0.0, 0.5, 0.4, 0.1].iter().enumerate() {
            let got = class[c] as f64 / n as f64;
            assert!((got - want).abs() < 0.006, "class {c}: {got} vs {want}");
        }
        let h: f64 = (1..=50).map(|k| 1.0 / f64::from(k).powf(1.5)).sum();
        let got = dir0 as f64 / n as f64;
        assert!((got - 1.0 / h).abs() < 0.01, "directory 0 drew {got}, Zipf(1.5) says {}", 1.0 / h);
        assert!(got > 0.3, "a steeper Zipf concentrates more on directory 0: {got}");
        assert_eq!(shape.describe(), "Zipf α = 1.5, class mix 0/50/40/10 %");
        assert_eq!(Shape::default().describe(), "Zipf α = 1, class mix 35/50/14/1 %");
    }

    #[test]
    fn large_files_are_generated_in_range_and_asked_for_at_their_share() {
        let dir = tempfile::tempdir().unwrap();
        let mut set = generate(dir.path(), 1, 5).unwrap();
        let base = set.bytes;
        add_large_files(&mut set, 3, (100_000, 400_000), 5).unwrap();
        assert_eq!(set.large.len(), 3);
        assert!(set.large.iter().all(|s| (100_000..=400_000).contains(s)), "{:?}", set.large);
        assert_eq!(set.bytes, base + set.large.iter().sum::<u64>());
        for (i, size) in set.large.iter().enumerate() {
            let f = set.root.join(format!("large/file{i:03}"));
            assert_eq!(std::fs::metadata(&f).unwrap().len(), *size, "{}", f.display());
        }
        // Same parameters: reused as they are; another count: rewritten.
        let mut again = generate(dir.path(), 1, 5).unwrap();
        add_large_files(&mut again, 3, (100_000, 400_000), 5).unwrap();
        assert_eq!(again.large, set.large);
        add_large_files(&mut again, 2, (100_000, 400_000), 5).unwrap();
        assert!(!set.root.join("large/file002").exists());
        assert_eq!(large_sizes(12, LARGE_RANGE, 1), large_sizes(12, LARGE_RANGE, 1));
        assert!(
            large_sizes(200, LARGE_RANGE, 1)
                .iter()
                .all(|s| (LARGE_RANGE.0..=LARGE_RANGE.1).contains(s))
        );

        let shape = Shape { large_share: 0.02, ..Shape::default() };
        let n = 100_000;
        let t = shaped_trace(10, 3, n, 2, &shape);
        let large: Vec<&Request> = t.iter().filter(|r| r.class == LARGE_CLASS).collect();
        let share = large.len() as f64 / n as f64;
        assert!((share - 0.02).abs() < 0.002, "{share}");
        assert!(large.iter().all(|r| r.dir < 3));
        assert_eq!(large[0].path(), format!("/large/file{:03}", large[0].dir));
        assert_eq!(set.bytes_of(large[0]), set.large[large[0].dir as usize]);
        // Without large files in the set, the share is ignored.
        assert!(shaped_trace(10, 0, 1000, 2, &shape).iter().all(|r| r.class < LARGE_CLASS));
    }

    #[test]
    fn distinct_sizes_count_each_file_once() {
        let set = FileSet { root: "/x".into(), dirs: 2, bytes: 0, large: vec![5_000_000] };
        let r = |dir, class, file| Request { dir, class, file };
        let reqs = [r(0, 1, 2), r(0, 1, 2), r(1, 0, 1), r(0, LARGE_CLASS, 0), r(0, LARGE_CLASS, 0)];
        assert_eq!(distinct_sizes(&set, &reqs), [2048, 102, 5_000_000]);
        assert!(distinct_sizes(&set, &[]).is_empty());
    }

    #[test]
    fn trace_paths_name_existing_files() {
        let t = trace(3, 1000, 1);
        assert!(t.iter().all(|r| r.dir < 3 && r.class < 4 && (1..=9).contains(&r.file)));
        assert_eq!(Request { dir: 12, class: 1, file: 3 }.path(), "/dir00012/class1_3");
    }
}
