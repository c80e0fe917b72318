//! `amplab report --index`: INDEX.md in the runs folder, one section per run (a folder with a
//! setup.json, also inside folders of runs like `amplab all`'s), newest first: experiment,
//! date, quick or not, the command, a link to its summary and its figures (PNG shown inline
//! where there is one, else the SVG).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Writes `runs/INDEX.md`; returns its path.
pub fn write(runs: &Path) -> Result<PathBuf, String> {
    let mut found = Vec::new();
    collect(runs, runs, 0, &mut found);
    if found.is_empty() {
        return Err(format!("{}: no run folder (with a setup.json) under it", runs.display()));
    }
    // Newest first: by start time, then by folder name.
    found.sort_by(|a, b| (&b.started, &b.rel).cmp(&(&a.started, &a.rel)));
    let mut md = String::from("# amplab runs\n\n");
    md.push_str(&format!(
        "{} runs under this folder, newest first; written by `amplab report --index` (rebuild a run's figures and summary from its raw data with `amplab report RUN_DIR`).\n\n",
        found.len()
    ));
    for run in &found {
        md.push_str(&run.section());
    }
    let path = runs.join("INDEX.md");
    std::fs::write(&path, md).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// One run folder.
struct Run {
    /// Path relative to the runs folder, `/`-separated.
    rel: String,
    experiment: String,
    started: String,
    quick: bool,
    command: String,
    /// Figure files (relative to the run), SVG names; the PNG is used when present.
    figures: Vec<(String, bool)>,
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Run>) {
    if let Some(run) = read(root, dir) {
        out.push(run);
        return;
    }
    if depth >= 2 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut subs: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    subs.sort();
    for sub in subs {
        collect(root, &sub, depth + 1, out);
    }
}

fn read(root: &Path, dir: &Path) -> Option<Run> {
    let text = std::fs::read_to_string(dir.join("setup.json")).ok()?;
    let setup: Value = serde_json::from_str(&text).ok()?;
    let rel = dir.strip_prefix(root).ok()?.to_string_lossy().replace('\\', "/");
    let mut figures: Vec<(String, bool)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".svg"))
        .map(|n| {
            let png = dir.join(n.replace(".svg", ".png")).is_file();
            (n, png)
        })
        .collect();
    figures.sort();
    let command = setup["command_line"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    Some(Run {
        rel,
        experiment: setup["experiment"].as_str().unwrap_or("?").to_string(),
        started: setup["started_utc"].as_str().unwrap_or_default().to_string(),
        quick: setup["quick"].as_bool().unwrap_or(false),
        command,
        figures,
    })
}

impl Run {
    fn section(&self) -> String {
        let mut s = format!(
            "## {} — {}{}\n\n",
            self.rel,
            self.experiment,
            if self.quick { " (quick run: not results)" } else { "" }
        );
        s.push_str(&format!(
            "Started {}; `{}`; [summary]({}/summary.md)\n\n",
            if self.started.is_empty() { "?" } else { &self.started },
            self.command,
            self.rel
        ));
        for (svg, png) in &self.figures {
            let name = svg.trim_end_matches(".svg");
            if *png {
                s.push_str(&format!(
                    "[![{name}]({rel}/{name}.png)]({rel}/{svg})\n",
                    rel = self.rel
                ));
            } else {
                s.push_str(&format!("- [{name}]({}/{svg}) (SVG only)\n", self.rel));
            }
        }
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_runs_newest_first_with_their_figures() {
        let root = tempfile::tempdir().unwrap();
        let mk = |rel: &str, exp: &str, started: &str, figs: &[&str]| {
            let dir = root.path().join(rel);
            std::fs::create_dir_all(&dir).unwrap();
            let setup = serde_json::json!({"experiment": exp, "started_utc": started, "quick": exp == "trace", "command_line": ["amplab", exp]});
            std::fs::write(dir.join("setup.json"), setup.to_string()).unwrap();
            for f in figs {
                std::fs::write(dir.join(f), "x").unwrap();
            }
        };
        mk("old", "single-file", "2026-01-01T00:00:00Z", &["rate-close.svg", "rate-close.png"]);
        mk("full/trace", "trace", "2026-02-01T00:00:00Z", &["throughput.svg"]);
        std::fs::create_dir_all(root.path().join("not-a-run")).unwrap();
        let path = write(root.path()).unwrap();
        let md = std::fs::read_to_string(path).unwrap();
        let (new, old) = (md.find("## full/trace").unwrap(), md.find("## old").unwrap());
        assert!(new < old, "{md}");
        assert!(md.contains("[![rate-close](old/rate-close.png)](old/rate-close.svg)"), "{md}");
        assert!(md.contains("- [throughput](full/trace/throughput.svg) (SVG only)"), "{md}");
        assert!(
            md.contains("(quick run: not results)") && md.contains("[summary](old/summary.md)")
        );
        assert!(md.starts_with("# amplab runs\n\n2 runs"));
        assert!(write(&root.path().join("not-a-run")).is_err());
    }
}
