//! One server on a file set under the emulated disk: evict the data set, create the server's
//! cgroups, start it inside them (serving the FUSE slow disk's mount when that is the
//! emulation), warm it up, measure, read the disk's counters, stop it. Shared by E2 (trace),
//! E4 (disk-bound) and E5 (capacity).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::Lab;
use crate::cli::{DiskArgs, DiskEmulationArg};
use crate::diskemu::{CgroupStats, DiskEmulation, Method, Wanted};
use crate::load::Measurement;
use crate::load::ampload::Ampload;
use crate::report::csv::{Csv, num};
use crate::servers::{RunningServer, ServerSpec};

/// What one server run produced.
#[derive(Clone, Debug, Serialize)]
pub struct DiskCell {
    pub server: String,
    pub measurement: Option<Measurement>,
    pub error: Option<String>,
    /// The cgroups' counters at the end (warm-up and measurement together).
    pub cgroup: Option<CgroupStats>,
    /// Reads the server issued to the emulated disk (blkio: the throttled device; fuse: READ
    /// requests reaching the slow disk) during the measured phase only.
    pub measured_disk_reads: Option<u64>,
    /// fuse: the fraction of the slow disk's arm time spent serving requests during the
    /// measured phase, from its start to its last answer (1 = saturated).
    pub measured_disk_busy: Option<f64>,
    /// fuse: the slow disk's counters over the whole server run (warm-up and measurement).
    pub slowdisk: Option<crate::slowdisk::Snapshot>,
    pub raw: Value,
}

/// The CSV columns every disk-bound experiment writes for a cell, after its own key columns.
pub const CELL_COLUMNS: [&str; 11] = [
    "server",
    "requests",
    "errors",
    "rps",
    "body_mbps",
    "p50_ms",
    "p95_ms",
    "mean_ms",
    "disk_reads",
    "disk_reads_with_warmup",
    "error",
];

impl DiskCell {
    /// The cell's values for [`CELL_COLUMNS`], in that order.
    pub fn csv_fields(&self) -> Vec<String> {
        let m = self.measurement.clone().unwrap_or_default();
        vec![
            self.server.clone(),
            m.requests.to_string(),
            m.errors.to_string(),
            num(m.rps),
            num(m.body_mbps),
            num(m.latency.p50),
            num(m.latency.p95),
            num(m.latency.mean),
            self.measured_disk_reads.map_or(String::new(), |n| n.to_string()),
            self.disk_reads_with_warmup().map_or(String::new(), |n| n.to_string()),
            self.error.clone().unwrap_or_default(),
        ]
    }

    /// Disk reads over the warm-up and the measured phase, when the emulated disk counts them.
    pub fn disk_reads_with_warmup(&self) -> Option<u64> {
        match (&self.slowdisk, &self.cgroup) {
            (Some(s), _) => Some(s.reads),
            (None, Some(c)) => Some(c.disk_reads),
            (None, None) => None,
        }
    }
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
/// experiment's default limit). With the FUSE disk this mounts the data folder; the mount
/// lives as long as the returned plan (and its clones).
pub fn plan_disk(
    lab: &Lab,
    d: &DiskArgs,
    memory_default_mib: u64,
) -> Result<DiskEmulation, String> {
    let mib = d.memory_mb.unwrap_or(memory_default_mib);
    let slowdisk = crate::slowdisk::Options::new(d.model.model());
    slowdisk.validate()?;
    let emu = DiskEmulation::plan(
        &Wanted {
            memory_limit_bytes: mib << 20,
            read_iops: d.read_iops,
            cgroups: !d.no_cgroups,
            evict: d.evict.map(evict_of),
            method: d.disk_emulation.map(|m| match m {
                DiskEmulationArg::Fuse => Method::Fuse,
                DiskEmulationArg::Blkio => Method::Blkio,
                DiskEmulationArg::None => Method::None,
            }),
            slowdisk,
            quick: lab.quick,
        },
        &lab.data_dir,
    )?;
    eprintln!("[amplab {}] {}", lab.experiment, emu.describe().replace("**", ""));
    Ok(emu)
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
    run_one_watched(lab, emu, spec, root, probe, load, tag, &mut |_| {})
}

/// [`run_one`], calling `started` once the server answers, before the warm-up (e.g. to
/// sample its stats endpoint while the load runs).
#[allow(clippy::too_many_arguments)]
pub fn run_one_watched(
    lab: &Lab,
    emu: &DiskEmulation,
    spec: &ServerSpec,
    root: &Path,
    probe: &str,
    load: &Load,
    tag: &str,
    started: &mut dyn FnMut(&RunningServer),
) -> DiskCell {
    let mut cell = DiskCell {
        server: spec.label.clone(),
        measurement: None,
        error: None,
        cgroup: None,
        measured_disk_reads: None,
        measured_disk_busy: None,
        slowdisk: None,
        raw: Value::Null,
    };
    let root = match emu.served(root) {
        Ok(r) => r,
        Err(e) => {
            cell.error = Some(e);
            return cell;
        }
    };
    let root = root.as_path();
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
    // After the start and the probe: the slow disk's counters of this server's load alone.
    let fuse_start = emu.slowdisk_stats();
    started(&server);
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
    let fuse_before = emu.slowdisk_stats();
    let measured_from = std::time::Instant::now();
    let result =
        make(&load.measure_urls, load.duration_s).run(&lab.bins.ampload, lab.client_cpus());
    // The measured phase lasts until its last answer (longer than --duration when late).
    let measured_s = measured_from.elapsed().as_secs_f64().max(load.duration_s);
    match result {
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
    match (emu.slowdisk_stats(), fuse_before, fuse_start) {
        (Some(now), Some(before), Some(start)) => {
            let measured = now.since(&before);
            cell.measured_disk_reads = Some(measured.reads);
            let arms = emu.model().map_or(1, |m| m.arms);
            cell.measured_disk_busy =
                Some(measured.busy_ns as f64 / (measured_s * 1e9 * f64::from(arms)));
            cell.slowdisk = Some(now.since(&start));
        }
        _ => {
            cell.measured_disk_reads =
                cell.cgroup.as_ref().zip(before).map(|(c, b)| c.disk_reads.saturating_sub(b));
        }
    }
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

/// A SPECweb99-like file set of `scale` × the memory limit and its closed-loop load (the
/// capacity experiments' workload: a measured trace and a different warm-up draw).
pub struct ScaledSet {
    pub set: crate::datasets::specweb::FileSet,
    /// The measured trace's first path, a file that exists (for the start-up probe).
    pub probe: String,
    pub load: Load,
}

/// The closed-loop shape of a [`ScaledSet`]'s load.
pub struct ClosedLoop {
    pub connections: u32,
    pub requests_per_conn: u32,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub trace_len: usize,
}

/// Generates (or reuses) the file set of `scale` and writes its two traces to the run's
/// scratch folder.
pub fn scaled_set(
    lab: &Lab,
    emu: &DiskEmulation,
    scale: f64,
    shape: &ClosedLoop,
) -> Result<ScaledSet, String> {
    use crate::datasets::specweb;
    let bytes = (emu.memory_limit_bytes as f64 * scale) as u64;
    let set = specweb::generate(&lab.data_dir, bytes, lab.seed)
        .map_err(|e| format!("cannot write the file set: {e}"))?;
    let tmp = lab.run.tmp();
    let (warm, measure) =
        (tmp.join(format!("warm-{scale}.urls")), tmp.join(format!("measure-{scale}.urls")));
    let trace = specweb::trace(set.dirs, shape.trace_len, lab.seed);
    specweb::write_urls(&measure, &trace).map_err(|e| e.to_string())?;
    specweb::write_urls(&warm, &specweb::trace(set.dirs, shape.trace_len, lab.seed + 1))
        .map_err(|e| e.to_string())?;
    let load = Load {
        warm_urls: warm,
        measure_urls: measure,
        warmup_s: shape.warmup_s,
        duration_s: shape.duration_s,
        connections: shape.connections,
        requests_per_conn: Some(shape.requests_per_conn),
        rate: None,
        timeout_s: 30.0,
    };
    Ok(ScaledSet { probe: trace[0].path(), set, load })
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

/// Writes results.json (`rows` as they are) and results.csv: the `keys` columns `key` gives
/// for a row, then its cell's [`CELL_COLUMNS`].
pub fn write_raw<R: Serialize>(
    lab: &mut Lab,
    keys: &[&str],
    rows: &[R],
    key: impl Fn(&R) -> (Vec<String>, &DiskCell),
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let header: Vec<&str> = keys.iter().copied().chain(CELL_COLUMNS).collect();
    let mut csv = Csv::new(&header);
    for r in rows {
        let (mut fields, cell) = key(r);
        fields.extend(cell.csv_fields());
        csv.row(fields);
    }
    lab.run.write("results.csv", &csv.render()).map_err(io)?;
    lab.run.write_json("results.json", &rows).map_err(io)
}
