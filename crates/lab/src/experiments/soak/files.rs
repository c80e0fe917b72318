//! The soak's files and their histories: small and large files that never change, and churn
//! files that a mutator rewrites (atomically, by rename), truncates in place, and removes and
//! re-creates while they are served. Every state is recorded in the file's [`History`]
//! before or as it becomes visible, so an answer can be judged against it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use amped_workload::rng::SplitMix64;

use super::content::{History, byte_words};

/// What part a file plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Small,
    Large,
    Churn,
}

/// Sizes of the set.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SetPlan {
    pub small: usize,
    pub small_max: u64,
    pub large: Vec<u64>,
    pub churn: usize,
    pub churn_min: u64,
    pub churn_max: u64,
}

/// The served files and their histories.
pub struct FileSet {
    pub root: PathBuf,
    pub paths: Vec<String>,
    pub kinds: Vec<Kind>,
    histories: Vec<Mutex<History>>,
    plan: SetPlan,
}

/// What the mutator did.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Mutations {
    pub renamed: u64,
    pub truncated: u64,
    pub recreated: u64,
    pub errors: u64,
}

impl FileSet {
    /// Writes the set under `root` (created, world-readable: some peers' workers run as
    /// nobody); `seed` makes every content distinct per run and server.
    pub fn create(root: &Path, plan: &SetPlan, seed: u64) -> io::Result<FileSet> {
        let mut rng = SplitMix64::new(seed);
        for dir in ["", "s", "l", "c"] {
            fs::create_dir_all(root.join(dir))?;
            fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755))?;
        }
        let mut set = FileSet {
            root: root.to_path_buf(),
            paths: Vec::new(),
            kinds: Vec::new(),
            histories: Vec::new(),
            plan: plan.clone(),
        };
        for i in 0..plan.small {
            // 0 bytes, then spread up to small_max.
            let len = if i == 0 { 0 } else { 1 + rng.below(plan.small_max) };
            set.add(format!("/s/small-{i}.bin"), Kind::Small, len, &mut rng, false)?;
        }
        for (i, &len) in plan.large.iter().enumerate() {
            set.add(format!("/l/large-{i}.bin"), Kind::Large, len, &mut rng, false)?;
        }
        for i in 0..plan.churn {
            let len = set.churn_len(&mut rng);
            set.add(format!("/c/churn-{i}.bin"), Kind::Churn, len, &mut rng, true)?;
        }
        Ok(set)
    }

    fn add(
        &mut self,
        url: String,
        kind: Kind,
        len: u64,
        rng: &mut SplitMix64,
        churn: bool,
    ) -> io::Result<()> {
        let seed = rng.next_u64();
        write_version(&self.file(&url), seed, len)?;
        let mut h = History::fixed(seed, len);
        h.fixed = !churn;
        self.paths.push(url);
        self.kinds.push(kind);
        self.histories.push(Mutex::new(h));
        Ok(())
    }

    fn churn_len(&self, rng: &mut SplitMix64) -> u64 {
        let (lo, hi) = (self.plan.churn_min as f64, self.plan.churn_max as f64);
        // Log-uniform: small and several-MiB versions alike.
        (lo * (hi / lo).powf(rng.next_f64())) as u64
    }

    /// The file behind a URL path.
    pub fn file(&self, url: &str) -> PathBuf {
        self.root.join(url.trim_start_matches('/'))
    }

    /// Indices of the files of `kind`.
    pub fn of_kind(&self, kind: Kind) -> Vec<usize> {
        (0..self.paths.len()).filter(|&i| self.kinds[i] == kind).collect()
    }

    /// A copy of file `i`'s history.
    pub fn history(&self, i: usize) -> History {
        self.histories[i].lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// The length of file `i` now (0 if absent).
    pub fn current_len(&self, i: usize) -> u64 {
        self.histories[i].lock().ok().and_then(|h| h.current().map(|v| v.len)).unwrap_or(0)
    }

    /// Changes the churn files every `every` until `stop`, recording each state; `t` gives
    /// the soak's clock.
    pub fn mutate(
        &self,
        seed: u64,
        every: Duration,
        stop: &AtomicBool,
        t: &dyn Fn() -> f64,
    ) -> Mutations {
        let mut rng = SplitMix64::new(seed);
        let churn = self.of_kind(Kind::Churn);
        let mut done = Mutations::default();
        let mut next = Instant::now() + every;
        while !stop.load(Ordering::Relaxed) && !churn.is_empty() {
            let now = Instant::now();
            if now < next {
                std::thread::sleep((next - now).min(Duration::from_millis(100)));
                continue;
            }
            next += every;
            let i = churn[rng.below(churn.len() as u64) as usize];
            let result = match rng.below(3) {
                0 => self.rename_over(i, &mut rng, t).map(|()| done.renamed += 1),
                1 => self.truncate(i, &mut rng, t).map(|()| done.truncated += 1),
                _ => self.recreate(i, &mut rng, t, stop).map(|()| done.recreated += 1),
            };
            if result.is_err() {
                done.errors += 1;
            }
        }
        done
    }

    /// A new version written beside the file and renamed over it (atomic for readers).
    fn rename_over(&self, i: usize, rng: &mut SplitMix64, t: &dyn Fn() -> f64) -> io::Result<()> {
        let path = self.file(&self.paths[i]);
        let tmp = path.with_file_name(format!(".tmp-{i}"));
        let (seed, len) = (rng.next_u64(), self.churn_len(rng));
        write_version(&tmp, seed, len)?;
        let mut h = self.histories[i].lock().map_err(|_| io::Error::other("poisoned"))?;
        h.push(seed, len, false, t());
        fs::rename(&tmp, &path)
    }

    /// The file cut to a shorter length in place (same inode: a reader mid-body runs short).
    fn truncate(&self, i: usize, rng: &mut SplitMix64, t: &dyn Fn() -> f64) -> io::Result<()> {
        let path = self.file(&self.paths[i]);
        let mut h = self.histories[i].lock().map_err(|_| io::Error::other("poisoned"))?;
        let Some(cur) = h.current().cloned() else { return Ok(()) };
        let len = if rng.below(4) == 0 { 0 } else { rng.below(cur.len.max(1)) };
        let file = File::options().write(true).open(&path)?;
        h.push(cur.seed, len, false, t());
        file.set_len(len)
    }

    /// Removed, absent for 50-400 ms, then created anew and written (a reader may see any
    /// prefix while it is written).
    fn recreate(
        &self,
        i: usize,
        rng: &mut SplitMix64,
        t: &dyn Fn() -> f64,
        stop: &AtomicBool,
    ) -> io::Result<()> {
        let path = self.file(&self.paths[i]);
        {
            let mut h = self.histories[i].lock().map_err(|_| io::Error::other("poisoned"))?;
            fs::remove_file(&path)?;
            h.end(t());
        }
        let gap = Duration::from_millis(50 + rng.below(350));
        let until = Instant::now() + gap;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (seed, len) = (rng.next_u64(), self.churn_len(rng));
        self.record(i, |h| h.push(seed, len, true, t()))?;
        let written = write_version(&path, seed, len);
        self.record(i, |h| h.push(seed, len, false, t()))?;
        written
    }

    fn record(&self, i: usize, change: impl FnOnce(&mut History)) -> io::Result<()> {
        let mut h = self.histories[i].lock().map_err(|_| io::Error::other("poisoned"))?;
        change(&mut h);
        Ok(())
    }
}

/// Writes the version with `seed` and `len` to `path` (mode 0644).
fn write_version(path: &Path, seed: u64, len: u64) -> io::Result<()> {
    let mut f = File::create(path)?;
    f.set_permissions(fs::Permissions::from_mode(0o644))?;
    let mut buf = vec![0u8; 256 << 10];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(buf.len() as u64) as usize;
        byte_words(seed, off, &mut buf[..n]);
        f.write_all(&buf[..n])?;
        off += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::soak::content::matches;

    #[test]
    fn the_set_holds_what_its_histories_say() {
        let dir = tempfile::tempdir().unwrap();
        let plan = SetPlan {
            small: 3,
            small_max: 3000,
            large: vec![100_000],
            churn: 2,
            churn_min: 1000,
            churn_max: 50_000,
        };
        let set = FileSet::create(dir.path(), &plan, 9).unwrap();
        let check = |set: &FileSet| {
            for (i, url) in set.paths.iter().enumerate() {
                let h = set.history(i);
                let bytes = fs::read(set.file(url)).unwrap();
                let v = h.current().unwrap();
                assert_eq!(bytes.len() as u64, v.len, "{url}");
                assert!(matches(v.seed, 0, &bytes), "{url}");
            }
        };
        check(&set);
        assert_eq!(set.of_kind(Kind::Churn).len(), 2);
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let clock = || t0.elapsed().as_secs_f64();
        let mut rng = SplitMix64::new(1);
        let c = set.of_kind(Kind::Churn)[0];
        set.rename_over(c, &mut rng, &clock).unwrap();
        set.truncate(c, &mut rng, &clock).unwrap();
        set.recreate(c, &mut rng, &clock, &stop).unwrap();
        check(&set);
        let h = set.history(c);
        // fixed, renamed, truncated, (removed) being written, written.
        assert_eq!(h.versions.len(), 5, "{h:?}");
        assert!(!h.fixed && h.versions[3].prefix_ok && h.versions[2].died.is_some());
        assert_eq!(h.versions[1].seed, h.versions[2].seed, "a truncation keeps the bytes");
    }
}
