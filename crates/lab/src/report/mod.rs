//! A run's folder: `bench/runs/<date>-<experiment>[-quick]/` with setup.json, raw results
//! (CSV and JSON), SVG figures, summary.md, the servers' logs and rendered configurations.
//! Scratch files go to `tmp/`, which is removed when the run ends.

pub mod csv;
pub mod index;
pub mod markdown;
pub mod png;
pub mod setup;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::clock::Utc;
use crate::svg::Chart;

/// The output folder of one experiment run.
#[derive(Debug)]
pub struct RunDir {
    pub path: PathBuf,
    /// Why a figure has no PNG copy, if one has none (said once on stderr, then in setup.json
    /// and summary.md by [`crate::experiments::Lab::finish`]).
    pub png_missing: Option<String>,
}

impl RunDir {
    /// Creates `out`, or `<runs>/<date>-<experiment>[-quick]` (with `-2`, `-3`… when taken).
    pub fn create(out: Option<&Path>, experiment: &str, quick: bool) -> io::Result<RunDir> {
        let path = match out {
            Some(p) => p.to_path_buf(),
            None => {
                let base = runs_root().join(format!(
                    "{}-{experiment}{}",
                    Utc::now().date(),
                    if quick { "-quick" } else { "" }
                ));
                let mut candidate = base.clone();
                let mut n = 2;
                while candidate.exists() {
                    candidate = PathBuf::from(format!("{}-{n}", base.display()));
                    n += 1;
                }
                candidate
            }
        };
        for sub in ["", "logs", "configs", "tmp"] {
            fs::create_dir_all(path.join(sub))?;
        }
        // Absolute, because servers are started with paths under it and some (nginx -p)
        // resolve relative paths against their own prefix, not our working directory.
        let path = fs::canonicalize(&path)?;
        Ok(RunDir { path, png_missing: None })
    }

    /// An existing run folder, to rewrite its figures and summary.
    pub fn reopen(path: &Path) -> RunDir {
        RunDir { path: path.to_path_buf(), png_missing: None }
    }

    /// `tmp/` (scratch, removed at the end).
    pub fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }

    /// Writes a text file into the folder.
    pub fn write(&mut self, name: &str, text: &str) -> io::Result<()> {
        fs::write(self.path.join(name), text)
    }

    /// Writes pretty JSON.
    pub fn write_json(&mut self, name: &str, value: &impl serde::Serialize) -> io::Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
        self.write(name, &(text + "\n"))
    }

    /// Writes a figure (`name` without extension) as SVG and as PNG (rendered in-process; if
    /// that fails, the reason is kept in `png_missing` and said on stderr once).
    pub fn write_chart(&mut self, name: &str, chart: &Chart) -> io::Result<String> {
        let file = format!("{name}.svg");
        let svg = chart.render();
        self.write(&file, &svg)?;
        let png = self.path.join(format!("{name}.png"));
        if let Err(why) = png::write(&svg, &png) {
            let _ = fs::remove_file(&png);
            if self.png_missing.is_none() {
                eprintln!("[amplab] warning: {name}.png not written: {why}");
            }
            self.png_missing.get_or_insert(format!("{name}.png not written: {why}"));
        }
        Ok(file)
    }

    /// Removes `tmp/` and empty `logs/`/`configs/` folders.
    pub fn finish(&self) {
        let _ = fs::remove_dir_all(self.tmp());
        for sub in ["logs", "configs"] {
            let _ = fs::remove_dir(self.path.join(sub));
        }
    }
}

/// `bench/runs` of the repository amplab is run in (found by walking up from the current
/// folder to the workspace root), else `./bench/runs`.
pub fn runs_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .find(|dir| dir.join("crates/lab").is_dir() && dir.join("Cargo.toml").is_file())
        .map_or_else(|| cwd.join("bench/runs"), |root| root.join("bench/runs"))
}
