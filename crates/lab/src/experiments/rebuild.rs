//! `amplab report RUN_DIR`: rebuilds every figure and the summary of a run folder from what it
//! recorded — setup.json (parameters, command line, pinning, disk emulation) and results.json
//! (every cell, with the load generator's raw report) — so a change to the figures or verdicts
//! never needs a re-run. Nothing is measured and setup.json and results.json are left as they
//! are; the figures, medians.csv and summary.md are rewritten. A folder holding several runs
//! (`amplab all --out DIR`) is rebuilt run by run.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Lab;
use super::diskrun::DiskCell;
use crate::cli::Command;
use crate::datasets::specweb::Shape;
use crate::diskemu::DiskEmulation;
use crate::load::Measurement;
use crate::load::ampload;
use crate::servers::ServerSpec;

/// Rebuilds `dir` (a run, or a folder of runs); returns the folders rewritten.
pub fn run(dir: &Path) -> Result<Vec<PathBuf>, String> {
    if dir.join("setup.json").is_file() {
        return one(dir).map(|p| vec![p]);
    }
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("setup.json").is_file())
        .collect();
    runs.sort();
    if runs.is_empty() {
        return Err(format!("{}: no setup.json here or in its sub-folders", dir.display()));
    }
    runs.iter().map(|r| one(r)).collect()
}

/// Rebuilds one run folder.
fn one(dir: &Path) -> Result<PathBuf, String> {
    let setup: Value = read_json(&dir.join("setup.json"))?;
    let mut lab = Lab::reopen(dir, &setup)?;
    eprintln!("[amplab report] {} ({})", dir.display(), lab.experiment);
    let summary = match lab.experiment {
        "single-file" => super::single_file::rebuild(&mut lab, &setup)?,
        "optimizations" => super::optimizations::rebuild(&mut lab, &setup)?,
        "trace" => super::trace::rebuild(&mut lab, &setup)?,
        "disk-bound" => super::disk_bound::rebuild(&mut lab, &setup)?,
        "capacity" => super::capacity::rebuild(&mut lab, &setup)?,
        "linux-comparison" => super::linux_comparison::rebuild(&mut lab, &setup)?,
        _ => super::pool::rebuild(&mut lab, &setup)?,
    };
    lab.finish_rebuilt(&summary)
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The cells of the run's results.json.
pub fn results<T: DeserializeOwned>(dir: &Path) -> Result<Vec<T>, String> {
    read_json(&dir.join("results.json"))
}

/// The rows of a disk-bound experiment (trace, disk-bound, capacity), each cell refreshed, and
/// the servers in their order.
pub fn disk_rows<R: DeserializeOwned>(
    dir: &Path,
    cell: impl Fn(&mut R) -> &mut DiskCell,
) -> Result<(Vec<R>, Vec<String>), String> {
    let mut rows: Vec<R> = results(dir).map_err(|e| {
        format!(
            "{e}: a results layout this amplab cannot read; the run's figures and summary stand"
        )
    })?;
    let mut servers = Vec::new();
    for r in &mut rows {
        let c = cell(r);
        refresh(&mut c.measurement, &c.raw, &mut c.error);
        servers.push(c.server.clone());
    }
    Ok((rows, labels(servers.iter())))
}

/// The one line that says a run's raw results are of a layout `amplab report` cannot read
/// (`why`), and that its figures and summary stand as the run wrote them.
pub fn old_layout(lab: &Lab, why: &str) -> String {
    format!(
        "{}: cannot rebuild this {} run: {why}; its figures and summary stand as the run wrote them",
        lab.run.path.display(),
        lab.experiment
    )
}

/// setup.json's `disk_emulation`: one model (an object) or several (an array).
pub fn emulations(value: &Value) -> Result<Vec<DiskEmulation>, String> {
    match value {
        Value::Array(_) => parameters(value),
        _ => parameters(value).map(|e| vec![e]),
    }
}

/// The trace shape (`--zipf`, `--class-mix`, `--large-files`) of the command line setup.json
/// recorded, for runs that predate recording the shape itself.
pub fn command_shape(setup: &Value) -> Result<Shape, String> {
    use clap::Parser;
    let argv: Vec<&str> = setup["command_line"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let cli = crate::cli::Cli::try_parse_from(&argv).map_err(|e| {
        let first = e.to_string().lines().next().unwrap_or_default().to_string();
        format!(
            "setup.json's command line no longer parses ({first}), so its trace shape is unknown"
        )
    })?;
    match cli.command {
        Command::DiskBound(a) => Ok(a.shape.shape()),
        Command::Capacity(a) => Ok(a.shape.shape()),
        Command::LinuxComparison(a) => Ok(a.capacity.shape.shape()),
        Command::All(a) => Ok(a.shape.shape()),
        _ => Err("setup.json's command line runs no experiment with a trace shape".into()),
    }
}

/// A part of setup.json's `parameters`.
pub fn parameters<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_json::from_value(value.clone()).map_err(|e| format!("setup.json: {e}"))
}

/// Server labels in order of first appearance (the run's server order: round 0 runs them in
/// the order they were given).
pub fn labels<'a>(servers: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in servers {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// The servers of `labels` as specs (for experiments whose outputs walk `lab.servers`).
pub fn specs(labels: &[String]) -> Vec<ServerSpec> {
    labels.iter().filter_map(|l| ServerSpec::parse(l).ok()).collect()
}

/// Re-reads a cell's measurement from ampload's raw report, if it has one, so what newer
/// code takes from the report (failures by kind, statuses, the measured CDF) is there for old
/// runs too; an error line that only summed the failures is replaced by the one by kind.
pub fn refresh(measurement: &mut Option<Measurement>, raw: &Value, error: &mut Option<String>) {
    if raw.get("latency_us").is_none() {
        return;
    }
    let Ok(report) = serde_json::from_value::<ampload::Report>(raw.clone()) else { return };
    let m = ampload::measurement(&report);
    let summed = error.as_deref().is_some_and(|e| {
        e.contains(" requests failed (")
            || e.split_once(" errors (").is_some_and(|(n, _)| n.parse::<u64>().is_ok())
    });
    if summed {
        *error = m.problems();
    }
    *measurement = Some(m);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_splits_old_error_lines_by_kind() {
        let raw: Value = serde_json::from_str(
            r#"{"requests":6022,"ok":5838,"status":{"200":5838,"404":184},"latency_us":{"p50":10},
                "errors":{"timeout":25},"errors_total":25,"first_errors":{"timeout":"no response within 30s"}}"#,
        )
        .unwrap();
        let mut m = None;
        let mut error =
            Some("209 of 6206 requests failed (timeout: no response within 30s)".into());
        refresh(&mut m, &raw, &mut error);
        let error = error.unwrap();
        assert!(error.starts_with("25 of 6047 requests got no answer (timeout 25"), "{error}");
        assert!(error.ends_with("184 of 6022 answers were not 2xx (404 × 184)"), "{error}");
        assert_eq!(m.unwrap().failed(), 25);
        let mut kept = Some("server exited during the run".to_string());
        refresh(&mut None, &raw, &mut kept);
        assert_eq!(kept.as_deref(), Some("server exited during the run"));
    }

    #[test]
    fn labels_keep_first_appearance_order() {
        let servers = ["b", "a", "b", "c", "a"].map(String::from);
        assert_eq!(labels(servers.iter()), ["b", "a", "c"]);
    }
}
