//! One server on a file set under the emulated disk: evict the data set, create the server's
//! cgroups, start it inside them, warm it up, measure, read the cgroups' counters, stop it.
//! Shared by E2 (trace), E4 (disk-bound) and E5 (capacity).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::Lab;
use crate::cli::DiskArgs;
use crate::diskemu::{CgroupStats, DiskEmulation};
use crate::load::Measurement;
use crate::load::ampload::Ampload;
use crate::servers::ServerSpec;

/// What one server run produced.
#[derive(Clone, Debug, Serialize)]
pub struct DiskCell {
    pub server: String,
    pub measurement: Option<Measurement>,
    pub error: Option<String>,
    /// The cgroups' counters at the end (warm-up and measurement together).
    pub cgroup: Option<CgroupStats>,
    /// Reads the server issued to the throttled disk during the measured phase only.
    pub measured_disk_reads: Option<u64>,
    pub raw: Value,
}

/// The load of one server run: a warm-up trace and a measured trace (different draws, so the
/// measurement is not a replay of exactly what was just cached).
pub struct Load {
    pub warm_urls: PathBuf,
    pub measure_urls: PathBuf,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub connections: u32,
    pub requests_per_conn: Option<u32>,
    /// Open loop at this rate, or closed loop (infinite demand).
    pub rate: Option<f64>,
    pub timeout_s: f64,
}

/// The disk emulation for a run, from the shared options (`memory_default_mib` is the
/// experiment's default limit).
pub fn plan_disk(lab: &Lab, d: &DiskArgs, memory_default_mib: u64) -> DiskEmulation {
    let mib = d.memory_mb.unwrap_or(memory_default_mib);
    let emu = DiskEmulation::plan(
        mib << 20,
        d.read_iops,
        !d.no_cgroups,
        d.evict.map(evict_of),
        lab.quick,
        &lab.data_dir,
    );
    eprintln!("[amplab {}] {}", lab.experiment, emu.describe().replace("**", ""));
    emu
}

fn evict_of(e: crate::cli::EvictArg) -> crate::diskemu::Evict {
    match e {
        crate::cli::EvictArg::DropCaches => crate::diskemu::Evict::DropCaches,
        crate::cli::EvictArg::Fadvise => crate::diskemu::Evict::Fadvise,
    }
}

/// Runs `spec` on `root` once, as the module doc says. `tag` names its cgroups.
pub fn run_one(
    lab: &Lab,
    emu: &DiskEmulation,
    spec: &ServerSpec,
    root: &Path,
    probe: &str,
    load: &Load,
    tag: &str,
) -> DiskCell {
    let mut cell = DiskCell {
        server: spec.label.clone(),
        measurement: None,
        error: None,
        cgroup: None,
        measured_disk_reads: None,
        raw: Value::Null,
    };
    if let Err(e) = emu.evict(root) {
        cell.error = Some(format!("cannot evict the data set: {e}"));
        return cell;
    }
    let cgroup = match emu.cgroup(tag) {
        Ok(c) => c,
        Err(e) => {
            cell.error = Some(format!("cannot create the cgroups: {e}"));
            return cell;
        }
    };
    let mut server = match lab.start(spec, root, cgroup.as_ref(), probe) {
        Ok(s) => s,
        Err(e) => {
            cell.error = Some(e);
            return cell;
        }
    };
    let make = |urls: &Path, secs: f64| Ampload {
        url: server.url("/"),
        connections: load.connections,
        duration_s: Some(secs),
        requests: None,
        rate: load.rate,
        requests_per_conn: load.requests_per_conn,
        urls_file: Some(urls.to_path_buf()),
        timeout_s: load.timeout_s,
    };
    if load.warmup_s > 0.0
        && let Err(e) =
            make(&load.warm_urls, load.warmup_s).run(&lab.bins.ampload, lab.client_cpus())
    {
        eprintln!("[amplab {}]   warm-up of {}: {e}", lab.experiment, spec.label);
    }
    let before = cgroup.as_ref().map(|c| c.stats().disk_reads);
    match make(&load.measure_urls, load.duration_s).run(&lab.bins.ampload, lab.client_cpus()) {
        Ok((m, raw)) => {
            if m.errors > 0 {
                cell.error = Some(format!(
                    "{} of {} requests failed ({})",
                    m.errors,
                    m.requests + m.errors,
                    m.first_error.clone().unwrap_or_default()
                ));
            }
            cell.measurement = Some(m);
            cell.raw = raw;
        }
        Err(e) => cell.error = Some(e.to_string()),
    }
    cell.cgroup = cgroup.as_ref().map(|c| c.stats());
    cell.measured_disk_reads =
        cell.cgroup.as_ref().zip(before).map(|(c, b)| c.disk_reads.saturating_sub(b));
    if !server.alive() {
        let oom = cell.cgroup.as_ref().is_some_and(|c| c.oom_kills > 0);
        cell.error = Some(format!(
            "server exited during the run{}; see {}",
            if oom { " (killed by the memory cgroup's OOM killer: raise --memory-mb)" } else { "" },
            server.log.display()
        ));
    }
    server.stop();
    drop(cgroup);
    cell
}

/// A path list file for ampload.
pub fn write_urls(path: &Path, urls: &[String]) -> Result<(), String> {
    let mut text = String::with_capacity(urls.len() * 24);
    for u in urls {
        text.push_str(u);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
