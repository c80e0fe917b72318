//! `amplab report --index`: INDEX.md in the runs folder, one section per run (a folder with a
//! setup.json, also inside folders of runs like `amplab all`'s), newest first: experiment,
//! date, quick or not, the command, a link to its summary and its figures (PNG shown inline
//! where there is one, else the SVG), each under its title. A run whose CDF figures only pass
//! through the reported percentiles (runs before ampload's histogram export; their titles say
//! "percentiles only") gets a line saying so.

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
    figures: Vec<Figure>,
}

/// One figure of a run.
struct Figure {
    /// The SVG's file name (in the run's folder).
    svg: String,
    /// Whether a PNG copy sits beside it (shown inline).
    png: bool,
    /// Its title, as the SVG says it.
    title: String,
}

/// The text of the SVG's title element (`class="title"`), if any.
fn svg_title(svg: &str) -> Option<String> {
    let at = svg.find(r#"class="title""#)?;
    let text = &svg[at..];
    let text = &text[text.find('>')? + 1..];
    let title = &text[..text.find('<')?];
    Some(
        title
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
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
    let mut figures: Vec<Figure> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".svg"))
        .map(|svg| {
            let png = dir.join(svg.replace(".svg", ".png")).is_file();
            let text = std::fs::read_to_string(dir.join(&svg)).unwrap_or_default();
            let title = svg_title(&text).unwrap_or_else(|| svg.trim_end_matches(".svg").into());
            Figure { svg, png, title }
        })
        .collect();
    figures.sort_by(|a, b| a.svg.cmp(&b.svg));
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
        if self.figures.iter().any(|f| f.title.contains("percentiles only")) {
            s.push_str("CDF: not a measured distribution: straight lines through the 8 percentiles ampload reported (the run predates ampload's histogram export).\n\n");
        }
        for f in &self.figures {
            let (rel, svg) = (&self.rel, &f.svg);
            let name = svg.trim_end_matches(".svg");
            let title = f.title.replace('[', "(").replace(']', ")");
            if f.png {
                s.push_str(&format!("[![{title}]({rel}/{name}.png)]({rel}/{svg})\n"));
            } else {
                s.push_str(&format!("- [{title}]({rel}/{svg}) (SVG only)\n"));
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
        let cdf = r#"<svg><text class="title" x="1">Disk-bound: CDF (through 8 percentiles only) &amp; more</text></svg>"#;
        mk("interpolated", "disk-bound", "2025-12-01T00:00:00Z", &[]);
        std::fs::write(root.path().join("interpolated/latency-cdf.svg"), cdf).unwrap();
        std::fs::create_dir_all(root.path().join("not-a-run")).unwrap();
        let path = write(root.path()).unwrap();
        let md = std::fs::read_to_string(path).unwrap();
        let (new, old) = (md.find("## full/trace").unwrap(), md.find("## old").unwrap());
        assert!(new < old, "{md}");
        assert!(md.contains("[![rate-close](old/rate-close.png)](old/rate-close.svg)"), "{md}");
        assert!(md.contains("- [throughput](full/trace/throughput.svg) (SVG only)"), "{md}");
        let interpolated = md.split("## interpolated").nth(1).unwrap();
        assert!(
            interpolated.contains(
                "- [Disk-bound: CDF (through 8 percentiles only) & more](interpolated/latency-cdf.svg)"
            ),
            "{md}"
        );
        assert!(interpolated.contains("not a measured distribution"), "{md}");
        assert!(!md.split("## interpolated").next().unwrap().contains("not a measured"));
        assert!(
            md.contains("(quick run: not results)") && md.contains("[summary](old/summary.md)")
        );
        assert!(md.starts_with("# amplab runs\n\n3 runs"));
        assert!(write(&root.path().join("not-a-run")).is_err());
    }
}
