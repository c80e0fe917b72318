//! One server on a file set under the emulated disk: evict the data set, create the server's
//! cgroups, start it inside them (serving the FUSE slow disk's mount when that is the
//! emulation), warm it up, measure, read the disk's counters, stop it. Shared by E2 (trace),
//! E4 (disk-bound) and E5 (capacity). [`run_windows`] instead measures consecutive windows from
//! the cold start on (latency over time) in one ampload run.
//!
//! Disk counters per phase come from the FUSE slow disk's own counters (READ requests, bytes,
//! arm time) or from the blkio cgroup (`io_serviced`, `io_service_bytes`); the read
//! amplification is the bytes read from the disk over the warm-up and the measurement divided
//! by the bytes of the distinct files those phases asked for (what a cold start must read once).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Lab, outside_profile};
use crate::cli::{DiskArgs, DiskEmulationArg};
use crate::datasets::specweb::{self, FileSet, Request};
use crate::diskemu::{Cgroup, CgroupStats, DiskEmulation, Method, Wanted};
use crate::load::Measurement;
use crate::load::ampload::{self, Ampload};
use crate::report::csv::{Csv, num};
use crate::servers::{RunningServer, ServerSpec};
use crate::slowdisk::Model;

/// What the disk did during one phase of a server run.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct DiskUse {
    /// Reads that reached the emulated disk (FUSE READ requests; blkio: dispatched reads).
    pub reads: u64,
    /// Bytes they read.
    pub read_bytes: u64,
    /// fuse: share of the arms' time spent serving requests; blkio: reads/s over the
    /// throttle's rate (1 = at the cap).
    pub busy: Option<f64>,
}

/// One window of a latency-over-time run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Window {
    /// Seconds since the server answered its probe, cold: when the window's load started,
    /// and when its last answer came (a window runs late when answers do).
    pub start_s: f64,
    pub end_s: f64,
    pub measurement: Option<Measurement>,
    pub timeouts: u64,
    pub disk: Option<DiskUse>,
    pub error: Option<String>,
}

/// How the windows of a latency-over-time run were measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowSource {
    /// One ampload run with `--interval --interval-by start`: each window holds the requests
    /// due in it (answered whenever they were), the windows back to back with no gap; the disk
    /// counters are read at the windows' boundaries.
    OneRun,
    /// One ampload run per window, back to back (runs before the one-run windows): each
    /// window opened its connections anew and ran late when its answers did.
    SeparateRuns,
}

impl WindowSource {
    /// What runs that predate the field measured.
    pub fn separate_runs() -> WindowSource {
        WindowSource::SeparateRuns
    }
}

/// What one server run produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskCell {
    pub server: String,
    /// The disk model it ran on.
    pub model: String,
    pub measurement: Option<Measurement>,
    pub error: Option<String>,
    /// The cgroups' counters at the end (warm-up and measurement together).
    pub cgroup: Option<CgroupStats>,
    /// Reads the server issued to the emulated disk (blkio: the throttled device; fuse: READ
    /// requests reaching the slow disk) during the measured phase only.
    pub measured_disk_reads: Option<u64>,
    /// Bytes those reads read.
    pub measured_disk_read_bytes: Option<u64>,
    /// fuse: the fraction of the slow disk's arm time spent serving requests during the
    /// measured phase, from its start to its last answer (1 = saturated); blkio: reads/s over
    /// the throttle.
    pub measured_disk_busy: Option<f64>,
    /// Length of the measured phase, s (until its last answer).
    pub measured_s: f64,
    /// Bytes read from the disk over the warm-up and the measurement.
    pub disk_read_bytes_with_warmup: Option<u64>,
    /// Bytes of the distinct files the warm-up and the measurement asked for.
    pub needed_bytes: Option<u64>,
    /// `disk_read_bytes_with_warmup / needed_bytes` (1 = every needed byte read once).
    pub read_amplification: Option<f64>,
    /// The least read amplification a server reading whole pages can reach on this run: the
    /// bytes its distinct files take rounded up to whole 4 KiB pages ÷ their bytes (absent in
    /// runs before it was recorded).
    #[serde(default)]
    pub read_amplification_floor: Option<f64>,
    /// Requests of the measured phase that got no answer within the timeout.
    pub timeouts: u64,
    /// fuse: the slow disk's counters over the whole server run (warm-up and measurement).
    pub slowdisk: Option<crate::slowdisk::Snapshot>,
    /// Latency over time (windowed runs only).
    pub windows: Vec<Window>,
    /// amped: who blocked where while measured (its DeBox profile's difference).
    #[serde(default)]
    pub debox: Option<super::debox_probe::Blocking>,
    /// amped: what its own counters (`--stats-path`) moved while measured — cold chunks by
    /// path, residency misses, page yields (`super::counters_probe`).
    #[serde(default)]
    pub counters: Option<std::collections::BTreeMap<String, u64>>,
    /// Every server: its threads read from /proc while measured; a peer also gets a `perf
    /// trace` slice after the measured phase (docs/DEBOX.md §6).
    #[serde(default)]
    pub outside: Option<super::outside_profile::OutsideProfile>,
    pub raw: Value,
}

/// The CSV columns every disk-bound experiment writes for a cell, after its own key columns.
pub const CELL_COLUMNS: [&str; 24] = [
    "model",
    "server",
    "requests",
    "errors",
    "timeouts",
    "rps",
    "body_mbps",
    "p5_ms",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "mean_ms",
    "disk_reads",
    "disk_reads_with_warmup",
    "disk_read_bytes",
    "disk_read_bytes_with_warmup",
    "read_amplification",
    "read_amplification_floor",
    "disk_busy",
    "memory_max_mib",
    "error",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// One phase's numbers for [`CELL_COLUMNS`].
struct PhaseFields<'a> {
    m: Option<&'a Measurement>,
    timeouts: u64,
    disk: Option<DiskUse>,
}

/// The run's totals over warm-up and measurement for [`CELL_COLUMNS`] (none for a window).
#[derive(Default)]
struct Totals {
    reads: Option<u64>,
    read_bytes: Option<u64>,
    amplification: Option<f64>,
    amplification_floor: Option<f64>,
}

/// [`CELL_COLUMNS`] of `cell` with one phase's numbers and the run's totals.
fn fields(
    cell: &DiskCell,
    phase: &PhaseFields,
    totals: &Totals,
    error: Option<&str>,
) -> Vec<String> {
    let m = phase.m.cloned().unwrap_or_default();
    let (l, disk) = (&m.latency, phase.disk);
    vec![
        cell.model.clone(),
        cell.server.clone(),
        m.requests.to_string(),
        m.errors.to_string(),
        phase.timeouts.to_string(),
        num(m.rps),
        num(m.body_mbps),
        num(l.p5),
        num(l.p50),
        num(l.p90),
        num(l.p95),
        num(l.p99),
        num(l.p999),
        num(l.max),
        num(l.mean),
        opt(disk.map(|d| d.reads)),
        opt(totals.reads),
        opt(disk.map(|d| d.read_bytes)),
        opt(totals.read_bytes),
        totals.amplification.map_or(String::new(), num),
        totals.amplification_floor.map_or(String::new(), num),
        disk.and_then(|d| d.busy).map_or(String::new(), num),
        cell.cgroup
            .as_ref()
            .map_or(String::new(), |c| num(c.memory_max_usage_bytes as f64 / 1048576.0)),
        error.unwrap_or_default().to_string(),
    ]
}

impl DiskCell {
    /// This cell with `error`, for a server that could not be started.
    fn failed(mut self, error: String) -> DiskCell {
        self.error = Some(error);
        self
    }

    fn new(server: &str, model: &str) -> DiskCell {
        DiskCell {
            server: server.to_string(),
            model: model.to_string(),
            measurement: None,
            error: None,
            cgroup: None,
            measured_disk_reads: None,
            measured_disk_read_bytes: None,
            measured_disk_busy: None,
            measured_s: 0.0,
            disk_read_bytes_with_warmup: None,
            needed_bytes: None,
            read_amplification: None,
            read_amplification_floor: None,
            timeouts: 0,
            slowdisk: None,
            windows: Vec::new(),
            debox: None,
            counters: None,
            outside: None,
            raw: Value::Null,
        }
    }

    /// The cell's values for [`CELL_COLUMNS`], in that order.
    pub fn csv_fields(&self) -> Vec<String> {
        let disk = self.measured_disk_reads.map(|reads| DiskUse {
            reads,
            read_bytes: self.measured_disk_read_bytes.unwrap_or(0),
            busy: self.measured_disk_busy,
        });
        let totals = Totals {
            reads: self.disk_reads_with_warmup(),
            read_bytes: self.disk_read_bytes_with_warmup,
            amplification: self.read_amplification,
            amplification_floor: self.read_amplification_floor,
        };
        let phase = PhaseFields { m: self.measurement.as_ref(), timeouts: self.timeouts, disk };
        fields(self, &phase, &totals, self.error.as_deref())
    }

    /// The values for [`CELL_COLUMNS`] of window `i` (the run's totals left empty).
    pub fn window_fields(&self, i: usize) -> Vec<String> {
        let w = &self.windows[i];
        let phase = PhaseFields { m: w.measurement.as_ref(), timeouts: w.timeouts, disk: w.disk };
        fields(self, &phase, &Totals::default(), w.error.as_deref())
    }

    /// What the run needed from the disk (the sizes of its distinct files), and from it the
    /// read amplification (with the bytes read already set) and its page-rounded floor.
    fn set_needed(&mut self, sizes: &[u64]) {
        let needed = sizes.iter().sum();
        self.needed_bytes = Some(needed);
        self.read_amplification = amplification(self.disk_read_bytes_with_warmup, needed);
        self.read_amplification_floor = page_floor(sizes);
    }

    /// Disk reads over the warm-up and the measured phase, when the emulated disk counts them.
    pub fn disk_reads_with_warmup(&self) -> Option<u64> {
        match (&self.slowdisk, &self.cgroup) {
            (Some(s), _) => Some(s.reads),
            (None, Some(c)) if c.blkio => Some(c.disk_reads),
            _ => None,
        }
    }

    /// Disk reads per second while measured.
    pub fn disk_reads_per_s(&self) -> Option<f64> {
        self.measured_disk_reads.map(|n| n as f64 / self.measured_s.max(1e-9))
    }

    /// Bytes read from the disk per second while measured.
    pub fn disk_bytes_per_s(&self) -> Option<f64> {
        self.measured_disk_read_bytes.map(|n| n as f64 / self.measured_s.max(1e-9))
    }
}

/// The requests of a warm-up list and a measured list (in file order) and the file set they
/// name: what a run needed from the disk, and the stream windows continue.
#[derive(Clone, Debug)]
pub struct Needs {
    pub set: Arc<FileSet>,
    pub warm: Arc<Vec<Request>>,
    pub measure: Arc<Vec<Request>>,
}

impl Needs {
    /// The two traces of `n` requests a run draws over `set` with `seed`: the measured one
    /// from `seed`, the warm-up from `seed + 1` (a different draw).
    pub fn draw(set: FileSet, n: usize, seed: u64, shape: &specweb::Shape) -> Needs {
        let large = set.large.len() as u32;
        let draw = |seed| specweb::shaped_trace(set.dirs, large, n, seed, shape);
        let (measure, warm) = (draw(seed), draw(seed + 1));
        Needs { set: Arc::new(set), warm: Arc::new(warm), measure: Arc::new(measure) }
    }

    /// Sizes of the distinct files among the first `warm` lines of the warm-up list and the
    /// first `measure` lines of the measured list (ampload takes a list's lines in order and
    /// starts over at its end).
    pub fn sizes(&self, warm: u64, measure: u64) -> Vec<u64> {
        let head = |list: &[Request], n: u64| -> usize { (n as usize).min(list.len()) };
        specweb::distinct_sizes(
            &self.set,
            self.warm[..head(&self.warm, warm)]
                .iter()
                .chain(&self.measure[..head(&self.measure, measure)]),
        )
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
    /// The traces as requests, for the read amplification (none: not computed).
    pub needs: Option<Needs>,
}

/// A SPECweb99-like workload: the file set and its two traces, written for ampload.
pub struct Workload {
    pub needs: Needs,
    pub warm_urls: PathBuf,
    pub measure_urls: PathBuf,
}

impl Workload {
    /// The set of about `bytes` (with large files when the shape asks for them) under the
    /// data folder, and traces of `n` requests written under the run's tmp/ as
    /// `<prefix>warm.urls` and `<prefix>measure.urls`.
    pub fn specweb(
        lab: &Lab,
        bytes: u64,
        shape: &specweb::Shape,
        n: usize,
        prefix: &str,
    ) -> Result<Workload, String> {
        let mut set = specweb::generate(&lab.data_dir, bytes, lab.seed)
            .map_err(|e| format!("cannot write the file set: {e}"))?;
        if shape.large_share > 0.0 {
            let (count, range) = specweb::large_plan(lab.quick);
            specweb::add_large_files(&mut set, count, range, lab.seed)
                .map_err(|e| format!("cannot write the large files: {e}"))?;
        }
        let needs = Needs::draw(set, n, lab.seed, shape);
        let tmp = lab.run.tmp();
        let (warm_urls, measure_urls) =
            (tmp.join(format!("{prefix}warm.urls")), tmp.join(format!("{prefix}measure.urls")));
        specweb::write_urls(&measure_urls, &needs.measure).map_err(|e| e.to_string())?;
        specweb::write_urls(&warm_urls, &needs.warm).map_err(|e| e.to_string())?;
        Ok(Workload { needs, warm_urls, measure_urls })
    }

    /// The path every server is probed with.
    pub fn probe(&self) -> String {
        let small = self.needs.measure.iter().find(|r| r.class != specweb::LARGE_CLASS);
        small.map_or("/".into(), Request::path)
    }
}

/// A SPECweb99-like file set of `scale` × the memory limit and its closed-loop load (the
/// capacity experiments' workload: a measured trace and a different warm-up draw).
pub struct ScaledSet {
    pub set: Arc<FileSet>,
    /// A small file the measured trace asks for (for the start-up probe).
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

/// Generates (or reuses) the file set of `scale`, shaped by `shape`, and writes its two
/// traces to the run's scratch folder.
pub fn scaled_set(
    lab: &Lab,
    emu: &DiskEmulation,
    scale: f64,
    closed: &ClosedLoop,
    shape: &specweb::Shape,
) -> Result<ScaledSet, String> {
    let bytes = (emu.memory_limit_bytes as f64 * scale) as u64;
    let w = Workload::specweb(lab, bytes, shape, closed.trace_len, &format!("{scale}-"))?;
    let load = Load {
        warm_urls: w.warm_urls.clone(),
        measure_urls: w.measure_urls.clone(),
        warmup_s: closed.warmup_s,
        duration_s: closed.duration_s,
        connections: closed.connections,
        requests_per_conn: Some(closed.requests_per_conn),
        rate: None,
        timeout_s: 30.0,
        needs: Some(w.needs.clone()),
    };
    Ok(ScaledSet { set: w.needs.set.clone(), probe: w.probe(), load })
}

/// The FUSE disk of the `ssd` model: 0.1 ms + 500 MB/s, 32 arms.
pub const SSD: Model = Model { seek_ms: 0.1, mbps: 500.0, meta_ms: 0.1, arms: 32 };
/// The FUSE disk of the `hdd` model: 5 ms + 40 MB/s, one arm.
pub const HDD: Model = Model { seek_ms: 5.0, mbps: 40.0, meta_ms: 5.0, arms: 1 };

/// The `volume` model's byte cap where `--read-mbps` is not given, MB/s: with 300 reads/s it
/// binds before the reads do for every server on the heavy-tailed log (~1 MB per read, so ~300
/// MB/s by reads alone), as on a cloud volume whose bandwidth is the scarcer of its two limits
/// (docs/BENCHMARKS.md §3b, session 22).
pub const VOLUME_MBPS: f64 = 60.0;

/// The byte cap of `model`, MB/s: `--read-mbps` where given (any blkio model), else
/// [`VOLUME_MBPS`] for `volume` and none for the others.
pub fn read_mbps(d: &DiskArgs, model: Option<DiskEmulationArg>) -> Option<f64> {
    match (d.read_mbps, model) {
        (Some(mbps), _) => Some(mbps),
        (None, Some(DiskEmulationArg::Volume)) => Some(VOLUME_MBPS),
        (None, _) => None,
    }
}

/// The disk models a run asks for (`None` in the list: the default method).
pub fn models(d: &DiskArgs) -> Vec<Option<DiskEmulationArg>> {
    match d.models() {
        Some(list) => list.into_iter().map(Some).collect(),
        None => vec![None],
    }
}

/// The disk emulation of `model` (`None`: the default), from the shared options
/// (`memory_default_mib` is the experiment's default limit). With a FUSE model this mounts the
/// data folder; the mount lives as long as the returned plan (and its clones), so plan one
/// model at a time.
pub fn plan_disk(
    lab: &Lab,
    d: &DiskArgs,
    model: Option<DiskEmulationArg>,
    memory_default_mib: u64,
) -> Result<DiskEmulation, String> {
    let mib = d.memory_mb.unwrap_or(memory_default_mib);
    let custom = d.model.model();
    let (name, method, fuse_model) = match model {
        None => ("default", None, custom),
        Some(m @ DiskEmulationArg::Hdd) => (m.name(), Some(Method::Fuse), HDD),
        Some(m @ DiskEmulationArg::Ssd) => (m.name(), Some(Method::Fuse), SSD),
        Some(m @ DiskEmulationArg::Fuse) => (m.name(), Some(Method::Fuse), custom),
        Some(m @ (DiskEmulationArg::Iops | DiskEmulationArg::Blkio | DiskEmulationArg::Volume)) => {
            (m.name(), Some(Method::Blkio), custom)
        }
        Some(m @ DiskEmulationArg::None) => (m.name(), Some(Method::None), custom),
    };
    let slowdisk = crate::slowdisk::Options::new(fuse_model);
    slowdisk.validate()?;
    let emu = DiskEmulation::plan(
        &Wanted {
            name,
            memory_limit_bytes: mib << 20,
            read_iops: d.read_iops,
            read_bps: read_mbps(d, model).map(|mbps| (mbps * 1e6) as u64),
            cgroups: !d.no_cgroups,
            evict: d.evict.map(evict_of),
            method,
            slowdisk,
            quick: lab.quick,
        },
        &lab.data_dir,
    )?;
    let mut emu = emu;
    if model.is_none() {
        // The default is named after what it resolved to.
        emu.name = match emu.method {
            Method::Fuse => "fuse",
            Method::Blkio => "blkio",
            Method::None => "none",
        }
        .to_string();
    }
    eprintln!("[amplab {}] {}", lab.experiment, emu.describe().replace("**", ""));
    Ok(emu)
}

fn evict_of(e: crate::cli::EvictArg) -> crate::diskemu::Evict {
    match e {
        crate::cli::EvictArg::DropCaches => crate::diskemu::Evict::DropCaches,
        crate::cli::EvictArg::Fadvise => crate::diskemu::Evict::Fadvise,
    }
}

/// A server started cold under the emulated disk, with its cgroups.
struct Session<'a> {
    lab: &'a Lab,
    emu: &'a DiskEmulation,
    server: RunningServer,
    cgroup: Option<Cgroup>,
}

/// A reading of the disk's cumulative counters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mark {
    reads: u64,
    bytes: u64,
    busy_ns: u64,
}

impl Mark {
    /// The counters at `t` (seconds, on the clock of `samples`), interpolated linearly between
    /// the readings around it (`samples` in time order; the first or last beyond them).
    fn at(samples: &[(f64, Mark)], t: f64) -> Option<Mark> {
        let after = samples.partition_point(|(ts, _)| *ts < t);
        let (a, b) = match (after.checked_sub(1).map(|i| samples[i]), samples.get(after)) {
            (Some(a), Some(b)) => (a, *b),
            (Some(only), None) | (None, Some(&only)) => return Some(only.1),
            (None, None) => return None,
        };
        let share = if b.0 > a.0 { (t - a.0) / (b.0 - a.0) } else { 1.0 };
        let mix = |x: u64, y: u64| x + ((y.saturating_sub(x)) as f64 * share).round() as u64;
        Some(Mark {
            reads: mix(a.1.reads, b.1.reads),
            bytes: mix(a.1.bytes, b.1.bytes),
            busy_ns: mix(a.1.busy_ns, b.1.busy_ns),
        })
    }
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl<'a> Session<'a> {
    /// Evicts the data set, creates the cgroups and starts `spec` serving `root` (probed with
    /// `probe`); on failure, the reason.
    fn open(
        lab: &'a Lab,
        emu: &'a DiskEmulation,
        spec: &ServerSpec,
        root: &Path,
        probe: &str,
        tag: &str,
    ) -> Result<Session<'a>, String> {
        let root = emu.served(root)?;
        emu.evict(&root).map_err(|e| format!("cannot evict the data set: {e}"))?;
        let cgroup = emu.cgroup(tag).map_err(|e| format!("cannot create the cgroups: {e}"))?;
        let server = lab.start(spec, &root, cgroup.as_ref(), probe)?;
        Ok(Session { lab, emu, server, cgroup })
    }

    /// The disk's counters now (None: this emulation counts nothing).
    fn mark(&self) -> Option<Mark> {
        if let Some(s) = self.emu.slowdisk_stats() {
            return Some(Mark { reads: s.reads, bytes: s.read_bytes, busy_ns: s.busy_ns });
        }
        let (reads, bytes) = self.cgroup.as_ref()?.disk_io()?;
        Some(Mark { reads, bytes, busy_ns: 0 })
    }

    /// What the disk did from `from` to `to`, over `secs` seconds.
    fn used(&self, from: Option<Mark>, to: Option<Mark>, secs: f64) -> Option<DiskUse> {
        let (a, b) = (from?, to?);
        let reads = b.reads.saturating_sub(a.reads);
        let read_bytes = b.bytes.saturating_sub(a.bytes);
        let busy = match (self.emu.model(), self.emu.read_iops) {
            (Some(m), _) => {
                Some(b.busy_ns.saturating_sub(a.busy_ns) as f64 / (secs * 1e9 * f64::from(m.arms)))
            }
            (None, Some(iops)) => {
                let of_reads = reads as f64 / secs / f64::from(iops.max(1));
                let of_bytes = self
                    .emu
                    .read_bps
                    .map_or(0.0, |bps| read_bytes as f64 / secs / bps.max(1) as f64);
                Some(of_reads.max(of_bytes))
            }
            _ => None,
        };
        Some(DiskUse { reads, read_bytes, busy })
    }

    /// The warm-up phase, if the load has one (an error is only reported: the measured phase
    /// still runs); returns the requests it sent.
    fn warm_up(&self, load: &Load, label: &str) -> u64 {
        let has_warm_up = load.warmup_s > 0.0;
        if !has_warm_up {
            return 0;
        }
        let warm = self.ampload(load, &load.warm_urls, load.warmup_s);
        if let Some(e) = &warm.error {
            eprintln!("[amplab {}]   warm-up of {label}: {e}", self.lab.experiment);
        }
        warm.sent
    }

    /// One ampload run of `secs` on `urls`: the measurement (or the error), the raw report,
    /// the lines it took from the list, and its length until the last answer.
    fn ampload(&self, load: &Load, urls: &Path, secs: f64) -> Phase {
        self.ampload_watched(load, urls, secs, None, &mut || {})
    }

    /// [`ampload`](Self::ampload), with windows of `interval_s` by the requests' start when
    /// given, calling `watch` every 20 ms or so while it runs.
    fn ampload_watched(
        &self,
        load: &Load,
        urls: &Path,
        secs: f64,
        interval_s: Option<f64>,
        watch: &mut dyn FnMut(),
    ) -> Phase {
        let from = Instant::now();
        let run = Ampload {
            url: self.server.url("/"),
            connections: load.connections,
            duration_s: Some(secs),
            requests: None,
            rate: load.rate,
            requests_per_conn: load.requests_per_conn,
            urls_file: Some(urls.to_path_buf()),
            timeout_s: load.timeout_s,
            interval_s,
            interval_by_start: interval_s.is_some(),
        }
        .run_watched(&self.lab.bins.ampload, self.lab.client_cpus(), watch);
        let secs = from.elapsed().as_secs_f64().max(secs);
        match run {
            Ok((m, raw)) => {
                let sent = raw["sent"].as_u64().unwrap_or(m.requests + m.errors);
                let timeouts = raw["errors"]["timeout"].as_u64().unwrap_or(0);
                Phase { measurement: Some(m), raw, sent, timeouts, secs, error: None }
            }
            Err(e) => Phase {
                measurement: None,
                raw: Value::Null,
                sent: 0,
                timeouts: 0,
                secs,
                error: Some(e.to_string()),
            },
        }
    }

    /// Stops the server and records the end of the run in `cell` (cgroup counters, a server
    /// that died).
    fn close(mut self, cell: &mut DiskCell) {
        cell.cgroup = self.cgroup.as_ref().map(Cgroup::stats);
        if !self.server.alive() {
            let oom = cell.cgroup.as_ref().is_some_and(|c| c.oom_kills > 0);
            cell.error = Some(format!(
                "server exited during the run{}; see {}",
                if oom {
                    " (killed by the memory cgroup's OOM killer: raise --memory-mb)"
                } else {
                    ""
                },
                self.server.log.display()
            ));
        }
        self.server.stop();
        drop(self.cgroup.take());
    }
}

/// One ampload run's outcome.
struct Phase {
    measurement: Option<Measurement>,
    raw: Value,
    /// Lines taken from the URL list (requests sent).
    sent: u64,
    timeouts: u64,
    /// Until its last answer (at least the scheduled length).
    secs: f64,
    error: Option<String>,
}

impl Phase {
    /// The failure to report, if any: the run's error, or its failed requests and non-2xx
    /// answers by kind.
    fn failure(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        self.measurement.as_ref()?.problems()
    }
}

/// Runs `spec` on `root` once, as the module doc says. `tag` names its cgroups; `started` is
/// called once the server answers, before the warm-up (e.g. to sample its stats endpoint
/// while the load runs; `&mut |_| {}` when nothing is watched).
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    lab: &Lab,
    emu: &DiskEmulation,
    spec: &ServerSpec,
    root: &Path,
    probe: &str,
    load: &Load,
    tag: &str,
    started: &mut dyn FnMut(&RunningServer),
) -> DiskCell {
    let mut cell = DiskCell::new(&spec.label, &emu.name);
    let spec = &if lab.profile {
        super::debox_probe::profiled(spec)
    } else {
        super::counters_probe::with_stats_path(spec)
    };
    let session = match Session::open(lab, emu, spec, root, probe, tag) {
        Ok(s) => s,
        Err(e) => return cell.failed(e),
    };
    // After the start and the probe: the disk's counters of this server's load alone.
    let start = session.mark();
    let fuse_start = emu.slowdisk_stats();
    started(&session.server);
    let warm_sent = session.warm_up(load, &spec.label);
    let before = session.mark();
    let port = session.server.port;
    let profile_before =
        super::debox_probe::is_profiled(spec).then(|| super::debox_probe::fetch(port)).flatten();
    let counters_before = super::counters_probe::fetch(spec, port);
    let mut watch = lab.profile.then(|| outside_profile::Watch::begin(spec, &session.server));
    let phase = session.ampload(load, &load.measure_urls, load.duration_s);
    let after = session.mark();
    if let Some(w) = watch.as_mut() {
        w.end_measured(load_result(&phase));
    }
    cell.debox = profile_before.and_then(|b| super::debox_probe::fetch(port).map(|a| a.since(&b)));
    cell.counters = counters_before.and_then(|b| {
        super::counters_probe::fetch(spec, port).map(|a| super::counters_probe::since(&a, &b))
    });
    cell.error = phase.failure();
    cell.measured_s = phase.secs;
    cell.timeouts = phase.timeouts;
    if let Some(used) = session.used(before, after, phase.secs) {
        cell.measured_disk_reads = Some(used.reads);
        cell.measured_disk_read_bytes = Some(used.read_bytes);
        cell.measured_disk_busy = used.busy;
    }
    cell.disk_read_bytes_with_warmup =
        start.zip(after).map(|(a, b)| b.bytes.saturating_sub(a.bytes));
    cell.slowdisk = emu.slowdisk_stats().zip(fuse_start).map(|(now, s)| now.since(&s));
    if let Some(needs) = &load.needs {
        cell.set_needed(&needs.sizes(warm_sent, phase.sent));
    }
    cell.outside = watch.map(|w| profile_outside(lab, &session, spec, load, &phase, w, tag));
    cell.measurement = phase.measurement;
    cell.raw = phase.raw;
    session.close(&mut cell);
    cell
}

/// What a phase gave, for the profile from outside.
fn load_result(phase: &Phase) -> outside_profile::LoadResult {
    let m = phase.measurement.as_ref();
    outside_profile::LoadResult {
        requests: m.map_or(0, |m| m.requests),
        secs: phase.secs,
        mean_ms: m.map_or(0.0, |m| m.latency.mean),
    }
}

/// The profile from outside of a cell: amped's ends with the measured phase (it has DeBox);
/// a peer's adds a `perf trace` slice with the measured load continued (the URL stream from
/// where the measured phase stopped; the measured list again when there is no stream), its
/// output kept under profiles/.
fn profile_outside(
    lab: &Lab,
    session: &Session,
    spec: &ServerSpec,
    load: &Load,
    phase: &Phase,
    watch: outside_profile::Watch,
    tag: &str,
) -> outside_profile::OutsideProfile {
    if super::debox_probe::is_profiled(spec) {
        return watch.without_slice("amped: its own DeBox profile");
    }
    if phase.measurement.is_none() {
        return watch.without_slice("the measured phase failed");
    }
    static SLICES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SLICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let slug = crate::servers::launch::slug(&spec.label);
    let urls = match &load.needs {
        Some(needs) if !needs.measure.is_empty() => {
            let stream = &needs.measure;
            let rps = load.rate.or(phase.measurement.as_ref().map(|m| m.rps)).unwrap_or(1000.0);
            let count = ((rps * lab.profile_slice_s * 1.5) as usize + 64).min(2_000_000);
            let start = phase.sent as usize;
            let lines: Vec<String> =
                (0..count).map(|k| stream[(start + k) % stream.len()].path()).collect();
            let path = lab.run.tmp().join(format!("slice-{tag}-{slug}-{n}.urls"));
            if let Err(e) = write_urls(&path, &lines) {
                return watch.without_slice(&e);
            }
            path
        }
        _ => load.measure_urls.clone(),
    };
    let keep = lab
        .run
        .path
        .join("profiles")
        .join(format!("{tag}-{}-{slug}-{n}.perf.txt", session.emu.name));
    watch.with_slice(&keep, || {
        let slice = session.ampload(load, &urls, lab.profile_slice_s);
        slice.measurement.is_some().then(|| load_result(&slice))
    })
}

/// Latency over time from a cold start: starts `spec` cold and applies `load` (its rate,
/// connections, requests per connection, its measured URL list from the first line) as one
/// ampload run of `total_s` with windows of `window_s` by the requests' intended send time
/// (`--interval-by start`), so the windows follow each other with no gap and each holds the
/// requests due in it, however late they were answered. The disk's counters are read every
/// 20 ms or so while ampload runs and taken at each window's boundaries (interpolated between
/// the readings around them). The cell's totals (read amplification, disk reads) and its
/// measurement cover the whole run.
#[allow(clippy::too_many_arguments)]
pub fn run_windows(
    lab: &Lab,
    emu: &DiskEmulation,
    spec: &ServerSpec,
    root: &Path,
    load: &Load,
    needs: &Needs,
    window_s: f64,
    total_s: f64,
) -> DiskCell {
    let mut cell = DiskCell::new(&spec.label, &emu.name);
    let small = needs.measure.iter().find(|r| r.class != specweb::LARGE_CLASS);
    let probe = small.map_or("/".to_string(), Request::path);
    let session = match Session::open(lab, emu, spec, root, &probe, "win") {
        Ok(s) => s,
        Err(e) => return cell.failed(e),
    };
    let start = session.mark();
    let fuse_start = emu.slowdisk_stats();
    let cold = unix_now();
    let mut samples: Vec<(f64, Mark)> = Vec::new();
    let mut sample = || {
        if let Some(m) = session.mark() {
            samples.push((unix_now(), m));
        }
    };
    let phase =
        session.ampload_watched(load, &load.measure_urls, total_s, Some(window_s), &mut sample);
    let end = session.mark();
    cell.windows = windows_of(&session, &phase.raw, cold, &samples);
    cell.timeouts = phase.timeouts;
    cell.error = phase.failure();
    cell.measured_s = phase.secs;
    cell.disk_read_bytes_with_warmup = start.zip(end).map(|(a, b)| b.bytes.saturating_sub(a.bytes));
    cell.slowdisk = emu.slowdisk_stats().zip(fuse_start).map(|(now, s)| now.since(&s));
    cell.set_needed(&needs.sizes(0, phase.sent));
    cell.measurement = phase.measurement;
    cell.raw = phase.raw;
    session.close(&mut cell);
    cell
}

/// The windows of a windowed ampload run (`raw`, its report), timed from the cold start at
/// `cold` (Unix seconds), with the disk's use between their boundaries from `samples`.
fn windows_of(session: &Session, raw: &Value, cold: f64, samples: &[(f64, Mark)]) -> Vec<Window> {
    let Ok(report) = serde_json::from_value::<ampload::Report>(raw.clone()) else {
        return Vec::new();
    };
    // ampload's time zero: when its schedule started, after its connections were opened.
    let zero = report.time_zero_unix_s;
    report
        .intervals
        .iter()
        .map(|w| {
            let (from, to) = (zero + w.start_s, zero + w.start_s + w.length_s);
            let m = ampload::interval_measurement(w);
            Window {
                start_s: from - cold,
                end_s: to - cold,
                timeouts: w.errors.get("timeout").copied().unwrap_or(0),
                disk: session.used(Mark::at(samples, from), Mark::at(samples, to), w.length_s),
                error: m.problems(),
                measurement: Some(m),
            }
        })
        .collect()
}

/// Bytes read from the disk ÷ bytes the run needed (None without a disk count or a need).
pub fn amplification(read: Option<u64>, needed: u64) -> Option<f64> {
    read.filter(|_| needed > 0).map(|read| read as f64 / needed as f64)
}

/// The page the kernel reads a file in: a read from the disk brings whole pages.
pub const PAGE_BYTES: u64 = 4096;

/// The least read amplification on files of `sizes` for a server whose reads bring whole
/// pages: the bytes they take rounded up to whole [`PAGE_BYTES`] pages ÷ their bytes (None
/// when they have none). Small files set it: a 100-byte file costs a 4 KiB page.
pub fn page_floor(sizes: &[u64]) -> Option<f64> {
    let bytes: u64 = sizes.iter().sum();
    let pages: u64 = sizes.iter().map(|s| s.div_ceil(PAGE_BYTES) * PAGE_BYTES).sum();
    (bytes > 0).then(|| pages as f64 / bytes as f64)
}

/// A path list file for ampload.
pub fn write_urls<T: AsRef<str>>(
    path: &Path,
    urls: impl IntoIterator<Item = T>,
) -> Result<(), String> {
    std::fs::write(path, amped_workload::lists::url_list(urls))
        .map_err(|e| format!("{}: {e}", path.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn needs() -> Needs {
        let r = |dir, class, file| Request { dir, class, file };
        let set = FileSet { root: "/x".into(), dirs: 3, bytes: 0, large: vec![7_000_000] };
        Needs {
            set: Arc::new(set),
            // class1_2 = 2048 B, class0_1 = 102 B, large file 0 = 7 MB, class2_1 = 10240 B.
            warm: Arc::new(vec![r(0, 1, 2), r(1, 0, 1), r(0, 1, 2)]),
            measure: Arc::new(vec![r(1, 0, 1), r(0, specweb::LARGE_CLASS, 0), r(2, 2, 1)]),
        }
    }

    #[test]
    fn a_run_needs_the_distinct_files_of_the_lines_it_sent() {
        let n = needs();
        let bytes = |warm, measure| n.sizes(warm, measure).iter().sum::<u64>();
        assert_eq!(bytes(0, 0), 0);
        assert_eq!(bytes(1, 0), 2048);
        assert_eq!(bytes(3, 1), 2048 + 102, "a file asked for twice is needed once");
        assert_eq!(bytes(2, 2), 2048 + 102 + 7_000_000);
        assert_eq!(bytes(1000, 1000), 2048 + 102 + 7_000_000 + 10_240, "lists start over");
    }

    #[test]
    fn the_volume_model_caps_bytes_unless_told_its_cap_and_iops_only_when_told() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let disk = |args: &[&str]| {
            let mut all = vec!["amplab", "disk-bound"];
            all.extend_from_slice(args);
            let Command::DiskBound(a) = Cli::try_parse_from(all).unwrap().command else {
                panic!("not disk-bound")
            };
            a.disk
        };
        let both = disk(&["--disk-emulation", "iops,volume"]);
        let models = models(&both);
        assert_eq!(models, [Some(DiskEmulationArg::Iops), Some(DiskEmulationArg::Volume)]);
        assert_eq!(read_mbps(&both, models[0]), None, "iops: reads only");
        assert_eq!(read_mbps(&both, models[1]), Some(VOLUME_MBPS));
        let told = disk(&["--disk-emulation", "iops,volume", "--read-mbps", "25"]);
        assert_eq!(read_mbps(&told, Some(DiskEmulationArg::Volume)), Some(25.0));
        assert_eq!(read_mbps(&told, Some(DiskEmulationArg::Iops)), Some(25.0), "as before");
        assert_eq!(read_mbps(&disk(&[]), None), None, "the default model: no byte cap");
    }

    #[test]
    fn read_amplification_is_bytes_read_over_bytes_needed() {
        assert_eq!(amplification(Some(3000), 2000), Some(1.5));
        assert_eq!(amplification(Some(2000), 2000), Some(1.0));
        assert_eq!(amplification(Some(0), 2000), Some(0.0));
        assert_eq!(amplification(None, 2000), None, "no disk counters: none");
        assert_eq!(amplification(Some(10), 0), None, "nothing needed: none");
    }

    #[test]
    fn the_read_amplification_floor_rounds_each_file_up_to_whole_pages() {
        // 100 B and 5000 B take one and two pages: 4096 + 4096 + 8192 over 9196 bytes.
        let floor = page_floor(&[100, 4096, 5000]).unwrap();
        assert!((floor - 16384.0 / 9196.0).abs() < 1e-12, "{floor}");
        assert_eq!(page_floor(&[4096, 8192]), Some(1.0), "whole pages: no floor above 1");
        assert_eq!(page_floor(&[1]), Some(4096.0));
        assert_eq!(page_floor(&[0, 4096]), Some(1.0), "an empty file costs no page");
        assert_eq!(page_floor(&[]), None);
        assert_eq!(page_floor(&[0]), None);
    }

    #[test]
    fn a_run_sets_its_floor_from_the_files_it_needed() {
        let mut cell = DiskCell::new("amped", "hdd");
        cell.disk_read_bytes_with_warmup = Some(20_000);
        cell.set_needed(&needs().sizes(3, 1));
        // class1_2 (2048 B) and class0_1 (102 B): a page each.
        assert_eq!(cell.needed_bytes, Some(2150));
        assert_eq!(cell.read_amplification, Some(20_000.0 / 2150.0));
        assert_eq!(cell.read_amplification_floor, Some(8192.0 / 2150.0));
        assert_eq!(
            cell.csv_fields()
                [CELL_COLUMNS.iter().position(|c| *c == "read_amplification_floor").unwrap()],
            num(8192.0 / 2150.0)
        );
    }

    #[test]
    fn disk_counters_are_interpolated_at_a_window_boundary() {
        let mark = |reads, bytes| Mark { reads, bytes, busy_ns: reads * 10 };
        let samples = [(10.0, mark(0, 0)), (10.02, mark(4, 400)), (10.04, mark(4, 400))];
        assert_eq!(Mark::at(&samples, 10.01), Some(mark(2, 200)));
        assert_eq!(Mark::at(&samples, 10.02), Some(mark(4, 400)), "on a reading");
        assert_eq!(Mark::at(&samples, 9.0), Some(mark(0, 0)), "before the first: the first");
        assert_eq!(Mark::at(&samples, 11.0), Some(mark(4, 400)), "after the last: the last");
        assert_eq!(Mark::at(&[], 10.0), None);
    }

    #[test]
    fn csv_fields_match_the_columns() {
        let mut cell = DiskCell::new("amped", "hdd");
        cell.measured_disk_reads = Some(10);
        cell.measured_disk_read_bytes = Some(4096);
        cell.read_amplification = Some(1.25);
        cell.windows.push(Window {
            start_s: 0.0,
            end_s: 5.0,
            measurement: None,
            timeouts: 2,
            disk: Some(DiskUse { reads: 3, read_bytes: 300, busy: Some(0.5) }),
            error: Some("late".into()),
        });
        let col = |v: &[String], name: &str| {
            v[CELL_COLUMNS.iter().position(|c| *c == name).unwrap()].clone()
        };
        let v = cell.csv_fields();
        assert_eq!(v.len(), CELL_COLUMNS.len());
        assert_eq!(
            (col(&v, "model"), col(&v, "disk_reads"), col(&v, "disk_read_bytes")),
            ("hdd".into(), "10".into(), "4096".into())
        );
        assert_eq!(col(&v, "read_amplification"), "1.25");
        let w = cell.window_fields(0);
        assert_eq!(w.len(), CELL_COLUMNS.len());
        assert_eq!((col(&w, "timeouts"), col(&w, "disk_reads")), ("2".into(), "3".into()));
        assert_eq!((col(&w, "disk_busy"), col(&w, "error")), ("0.5".into(), "late".into()));
        assert_eq!(col(&w, "read_amplification"), "", "a window has no run totals");
        assert_eq!(col(&w, "read_amplification_floor"), "", "nor a floor");
    }
}
