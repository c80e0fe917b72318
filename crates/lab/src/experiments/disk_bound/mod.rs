//! E4, the DeBox disk-bound static workload (Ruan & Pai 2004 §6.3, Table 7, Fig 11): 1020
//! clients, 5 requests per persistent connection, fixed request rates, a data set larger than
//! the server's memory. Latency 5% / median / 95% / mean per server, and the latency CDF.
//!
//! Each disk model of `--disk-emulation` (hdd, ssd, iops, none, …) is run in turn: without
//! `--rates`, each server's capacity on that model (closed loop, same clients and data) is
//! measured first and the model's rates spread from 40 % to 90 % of the best peer's; every
//! rate is run `--rounds` times per server (near a disk's cap single runs are bistable). With
//! `--window`, each server is then started cold again at the highest rate, once per round, and
//! measured in consecutive windows (latency over time from a cold start). [`report`] writes the figures
//! and the summary; [`standing`] decides who is ahead.

mod report;
pub mod standing;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Lab;
use super::diskrun::{self, DiskCell, Load, Needs, Workload};
use crate::cli::DiskBoundArgs;
use crate::datasets::specweb;
use crate::diskemu::DiskEmulation;
use crate::progress::Progress;
use crate::servers::ServerSpec;

/// New Flash vs old Flash, several instances, Apache 150/300 processes, nginx with and
/// without thread-pool reads, lighttpd, h2o.
pub const DEFAULT_SERVERS: &[&str] = &[
    "sped",
    "amped",
    "amped:instances=2",
    "uring",
    "nginx",
    "nginx-aio",
    "apache-prefork-150",
    "apache-prefork-300",
    "lighttpd",
    "h2o",
];

/// The run's parameters (setup.json's `parameters`, with `rate`, `models` and `workload`
/// beside them).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Params {
    pub dataset_bytes: u64,
    pub dirs: u32,
    pub connections: u32,
    pub requests_per_conn: u32,
    /// Rates given on the command line (else spread per model).
    pub rates: Option<Vec<f64>>,
    /// Rates per model when spread from the capacity.
    pub rate_count: usize,
    pub capacity_s: f64,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub rounds: u32,
    pub trace_requests: usize,
    /// Latency-over-time windows, s (None: no windowed run).
    pub window_s: Option<f64>,
    /// How the windows were measured (runs before one ampload run with `--interval`: one
    /// ampload run per window).
    #[serde(default = "diskrun::WindowSource::separate_runs")]
    pub windows_from: diskrun::WindowSource,
    pub shape: specweb::Shape,
}

/// What a server run was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Closed loop, to find the server's capacity (the rates spread from the best peer's).
    Capacity,
    /// Open loop at a fixed rate, one round.
    FixedRate,
    /// Latency over time from a cold start.
    Windows,
}

impl Phase {
    /// The name results.csv and the summary use.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Capacity => "capacity",
            Phase::FixedRate => "fixed-rate",
            Phase::Windows => "windows",
        }
    }
}

/// What the summary says about the traces (recorded in setup.json, so `amplab report` needs
/// neither the data set nor the traces).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceFacts {
    /// Mean response body of the measured trace, bytes.
    pub mean_response_bytes: f64,
    /// Sizes of the large files, bytes (empty without `--large-files`).
    pub large_files: Vec<u64>,
}

impl TraceFacts {
    fn of(needs: &Needs) -> TraceFacts {
        TraceFacts {
            mean_response_bytes: specweb::mean_bytes(&needs.set, &needs.measure),
            large_files: needs.set.large.clone(),
        }
    }
}

/// One disk model as setup.json's `parameters.models` records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ModelRecord {
    model: String,
    rates: Vec<f64>,
    reference: Option<(String, f64)>,
    /// Share of measured requests cold by construction, per rate (absent in runs before it
    /// was recorded: computed again from the traces).
    #[serde(default)]
    cold: Option<Vec<f64>>,
}

/// One measured server: a capacity cell, a fixed-rate cell of one round, or a windowed run
/// from a cold start.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub round: u32,
    pub phase: Phase,
    /// The offered rate (fixed-rate and windows).
    pub rate: Option<f64>,
    pub cell: DiskCell,
}

/// What one disk model produced.
pub struct ModelRun {
    pub emu: DiskEmulation,
    pub rates: Vec<f64>,
    /// The server whose capacity set the rates, and that capacity (spread rates only).
    pub reference: Option<(String, f64)>,
    pub rows: Vec<Row>,
    /// Share of measured requests cold by construction, per rate.
    pub cold: Vec<f64>,
}

impl Params {
    fn new(a: &DiskBoundArgs) -> Params {
        let q = a.common.quick;
        let dataset = a.dataset.unwrap_or(if q { 96 << 20 } else { 2 << 30 });
        let window = a.window.unwrap_or(if q { 0.0 } else { 5.0 });
        Params {
            dataset_bytes: dataset,
            dirs: specweb::dirs_for(dataset),
            connections: a.connections.unwrap_or(if q { 20 } else { 1020 }),
            requests_per_conn: a.requests_per_conn,
            rates: a.rates.clone().or(a.rate.map(|r| vec![r])),
            rate_count: if q { 2 } else { 4 },
            capacity_s: a.common.duration.map_or(if q { 1.0 } else { 20.0 }, |d| d.min(20.0)),
            warmup_s: a.common.warmup.unwrap_or(if q { 0.5 } else { 15.0 }),
            duration_s: a.common.duration.unwrap_or(if q { 1.5 } else { 20.0 }),
            rounds: a.common.rounds.unwrap_or(1),
            trace_requests: if q { 20_000 } else { 400_000 },
            window_s: (window > 0.0).then_some(window),
            windows_from: diskrun::WindowSource::OneRun,
            shape: a.shape.shape(),
        }
    }

    /// Seconds one server run takes, about.
    fn per_cell(&self, secs: f64) -> f64 {
        self.warmup_s + secs + 3.0
    }
}

/// Runs E4 and writes its folder.
pub fn run(a: &DiskBoundArgs) -> Result<std::path::PathBuf, String> {
    let q = a.common.quick;
    let mut lab = Lab::open("disk-bound", &a.common, DEFAULT_SERVERS)?;
    let p = Params::new(a);
    let models = diskrun::models(&a.disk);
    eprintln!(
        "[amplab disk-bound] file set: {} directories (~{} MiB) under {}",
        p.dirs,
        (u64::from(p.dirs) * specweb::dir_bytes()) >> 20,
        lab.data_dir.display()
    );
    let w = Workload::specweb(&lab, p.dataset_bytes, &p.shape, p.trace_requests, "")?;
    let total = steps(&p, lab.servers.len()) * models.len();
    let mut progress =
        Progress::new(lab.experiment, total, total as f64 * p.per_cell(p.duration_s));
    let mut runs = Vec::new();
    for model in models {
        // One model at a time: a FUSE model's mount lives as long as its plan.
        let emu = diskrun::plan_disk(&lab, &a.disk, model, if q { 64 } else { 128 })?;
        runs.push(run_model(&lab, &mut progress, &p, &w, emu)?);
    }
    report::write_raw(&mut lab, &runs)?;
    let facts = TraceFacts::of(&w.needs);
    let summary = report::outputs(&mut lab, &p, &facts, &runs)?;
    let notes = runs.iter().filter(|r| !r.emu.applied()).map(|r| r.emu.describe()).collect();
    let emus: Vec<&DiskEmulation> = runs.iter().map(|r| &r.emu).collect();
    let disk = if emus.len() == 1 { json!(emus[0]) } else { json!(emus) };
    let mut params = json!(p);
    params["rate"] = json!(runs.first().and_then(|r| r.rates.last()));
    let models: Vec<ModelRecord> = runs
        .iter()
        .map(|r| ModelRecord {
            model: r.emu.name.clone(),
            rates: r.rates.clone(),
            reference: r.reference.clone(),
            cold: Some(r.cold.clone()),
        })
        .collect();
    params["models"] = json!(models);
    params["workload"] = json!(facts);
    lab.finish(params, Some(disk), notes, &summary)
}

/// Server runs per model, for the progress estimate.
fn steps(p: &Params, servers: usize) -> usize {
    let rates = p.rates.as_ref().map_or(p.rate_count, Vec::len);
    let capacity = usize::from(p.rates.is_none());
    let windows = usize::from(p.window_s.is_some());
    servers * (capacity + (rates + windows) * p.rounds as usize)
}

/// Every cell of one disk model; its FUSE disk is unmounted at the end.
fn run_model(
    lab: &Lab,
    progress: &mut Progress,
    p: &Params,
    w: &Workload,
    mut emu: DiskEmulation,
) -> Result<ModelRun, String> {
    let run = measure_model(lab, progress, p, w, &emu);
    emu.release();
    let (rates, reference, rows) = run?;
    let cold = rates.iter().map(|&r| cold_share(p, &w.needs, r)).collect();
    Ok(ModelRun { emu, rates, reference, rows, cold })
}

/// The rates, the reference capacity and the rows of one disk model.
type Measured = (Vec<f64>, Option<(String, f64)>, Vec<Row>);

fn measure_model(
    lab: &Lab,
    progress: &mut Progress,
    p: &Params,
    w: &Workload,
    emu: &DiskEmulation,
) -> Result<Measured, String> {
    let sweep = Sweep { lab, p, w, emu, root: w.needs.set.root.clone(), probe: w.probe() };
    let mut rows = Vec::new();
    let mut load = Load {
        warm_urls: w.warm_urls.clone(),
        measure_urls: w.measure_urls.clone(),
        warmup_s: p.warmup_s,
        duration_s: p.capacity_s,
        connections: p.connections,
        requests_per_conn: Some(p.requests_per_conn),
        rate: None,
        timeout_s: 30.0,
        needs: Some(w.needs.clone()),
    };
    let (rates, reference) = match &p.rates {
        Some(r) => (r.clone(), None),
        None => {
            let (rates, name, cap) = sweep.capacities(progress, &load, &mut rows)?;
            (rates, Some((name, cap)))
        }
    };
    load.duration_s = p.duration_s;
    sweep.fixed_rates(progress, &mut load, &rates, &mut rows);
    if let (Some(window), Some(&top)) = (p.window_s, rates.iter().max_by(|a, b| a.total_cmp(b))) {
        load.rate = Some(top);
        sweep.windows(progress, &load, window, &mut rows);
    }
    Ok((rates, reference, rows))
}

/// One disk model's runs: its servers, parameters, workload and file set.
struct Sweep<'a> {
    lab: &'a Lab,
    p: &'a Params,
    w: &'a Workload,
    emu: &'a DiskEmulation,
    root: std::path::PathBuf,
    probe: String,
}

impl Sweep<'_> {
    /// Each server's capacity (closed loop); returns the rates to offer (40–90 % of the
    /// reference server's capacity), that server and its capacity.
    fn capacities(
        &self,
        progress: &mut Progress,
        load: &Load,
        rows: &mut Vec<Row>,
    ) -> Result<(Vec<f64>, String, f64), String> {
        let (lab, p, emu) = (self.lab, self.p, self.emu);
        for spec in lab.servers.clone() {
            progress.step(
                &format!(
                    "{}: capacity of {} (closed loop, {} clients)",
                    emu.name, spec.label, p.connections
                ),
                p.per_cell(p.capacity_s),
            );
            let cell = self.run(&spec, load, "cap");
            note(progress, &cell);
            rows.push(Row { round: 0, phase: Phase::Capacity, rate: None, cell });
        }
        let (name, cap) = reference(&lab.servers, rows).ok_or_else(|| {
            format!(
                "{}: no server's capacity could be measured (see the logs in the run folder)",
                emu.name
            )
        })?;
        let rates = standing::spread_rates(cap, p.rate_count);
        progress.note(&format!(
            "{}: rates {rates:?} req/s (40-90 % of {name}'s capacity, {cap:.0} req/s)",
            emu.name
        ));
        Ok((rates, name, cap))
    }

    /// One run of `spec` on this model's data set, its cgroups named by `tag`.
    fn run(&self, spec: &ServerSpec, load: &Load, tag: &str) -> DiskCell {
        let (root, probe) = (&self.root, &self.probe);
        diskrun::run_one(self.lab, self.emu, spec, root, probe, load, tag, &mut |_| {})
    }

    /// Every round: each rate offered to each server (in the round's order).
    fn fixed_rates(
        &self,
        progress: &mut Progress,
        load: &mut Load,
        rates: &[f64],
        rows: &mut Vec<Row>,
    ) {
        let (lab, p, emu) = (self.lab, self.p, self.emu);
        for round in 0..p.rounds {
            for &rate in rates {
                load.rate = Some(rate);
                for spec in lab.order(round) {
                    progress.step(
                        &format!(
                            "{}: round {}/{}: {} at {rate} req/s",
                            emu.name,
                            round + 1,
                            p.rounds,
                            spec.label
                        ),
                        p.per_cell(p.duration_s),
                    );
                    let cell = self.run(&spec, load, "lat");
                    note(progress, &cell);
                    rows.push(Row { round, phase: Phase::FixedRate, rate: Some(rate), cell });
                }
            }
        }
    }

    /// Every round: each server from a cold start at `load`'s rate, measured in windows of
    /// `window` seconds.
    fn windows(&self, progress: &mut Progress, load: &Load, window: f64, rows: &mut Vec<Row>) {
        let (lab, p, emu) = (self.lab, self.p, self.emu);
        let top = load.rate.unwrap_or_default();
        let total = p.warmup_s + p.duration_s;
        for round in 0..p.rounds {
            for spec in lab.order(round) {
                progress.step(
                    &format!(
                        "{}: round {}/{}: {} from a cold start at {top} req/s, {window} s windows",
                        emu.name,
                        round + 1,
                        p.rounds,
                        spec.label
                    ),
                    total + 3.0,
                );
                let cell = diskrun::run_windows(
                    lab,
                    emu,
                    &spec,
                    &self.root,
                    load,
                    &self.w.needs,
                    window,
                    total,
                );
                note(progress, &cell);
                rows.push(Row { round, phase: Phase::Windows, rate: load.rate, cell });
            }
        }
    }
}

/// The server whose capacity sets the rates: the best peer's, else the best other than
/// amped's, else amped's.
fn reference(servers: &[ServerSpec], rows: &[Row]) -> Option<(String, f64)> {
    let capacity = |s: &ServerSpec| {
        rows.iter()
            .find(|r| r.phase == Phase::Capacity && r.cell.server == s.label)
            .and_then(|r| r.cell.measurement.as_ref())
            .map(|m| m.rps)
            .filter(|r| *r > 0.0)
    };
    let best = |keep: &dyn Fn(&ServerSpec) -> bool| {
        servers
            .iter()
            .filter(|s| keep(s))
            .filter_map(|s| capacity(s).map(|c| (s.label.clone(), c)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    best(&|s| !s.is_amped()).or_else(|| best(&|s| s.label != "amped")).or_else(|| best(&|_| true))
}

/// Share of the measured requests at `rate` that no earlier request of the server's run
/// asked for (ampload takes the lines in order: the warm-up sends the first rate × warm-up
/// of its list, the measured window the first rate × duration of its own).
fn cold_share(p: &Params, needs: &Needs, rate: f64) -> f64 {
    let sent = |secs: f64, of: &[specweb::Request]| {
        (rate * secs).round().clamp(0.0, of.len() as f64) as usize
    };
    let (warm, measure) = (&needs.warm, &needs.measure);
    specweb::first_time_share(
        &warm[..sent(p.warmup_s, warm)],
        &measure[..sent(p.duration_s, measure)],
    )
}

fn note(progress: &Progress, cell: &DiskCell) {
    if let Some(m) = &cell.measurement {
        progress.note(&format!(
            "{}: {:.0} req/s, p50 {:.2} ms, p95 {:.1} ms, mean {:.1} ms{}",
            cell.server,
            m.rps,
            m.latency.p50,
            m.latency.p95,
            m.latency.mean,
            cell.read_amplification
                .map_or(String::new(), |a| format!(", read amplification {a:.2}"))
        ));
    }
    if let Some(e) = &cell.error {
        progress.note(&format!("{}: {e}", cell.server));
    }
}

/// `amplab report` on a disk-bound run: its figures and summary again from setup.json and
/// results.json. Runs from before the disk models (no `parameters.models`) cannot be rebuilt.
pub fn rebuild(lab: &mut Lab, setup: &Value) -> Result<String, String> {
    let q = &setup["parameters"];
    if q.get("models").is_none() {
        return Err(super::rebuild::old_layout(
            lab,
            "it predates the disk models (setup.json has no parameters.models)",
        ));
    }
    let p: Params = super::rebuild::parameters(q)?;
    let records: Vec<ModelRecord> = super::rebuild::parameters(&q["models"])?;
    let emus = super::rebuild::emulations(&setup["disk_emulation"])?;
    let (rows, labels) = super::rebuild::disk_rows(&lab.run.path, |r: &mut Row| &mut r.cell)?;
    lab.servers = super::rebuild::specs(&labels);
    let recorded: Option<TraceFacts> =
        q.get("workload").map(super::rebuild::parameters).transpose()?;
    // Runs before the trace facts were recorded: the traces are drawn again from the seed.
    let drawn = std::cell::OnceCell::new();
    let needs = || drawn.get_or_init(|| redrawn(lab, &p));
    let facts = recorded.unwrap_or_else(|| TraceFacts::of(needs()));
    let mut runs = Vec::new();
    for (record, emu) in records.into_iter().zip(emus) {
        let cold = record
            .cold
            .unwrap_or_else(|| record.rates.iter().map(|&r| cold_share(&p, needs(), r)).collect());
        let mine = rows.iter().filter(|r| r.cell.model == record.model).cloned().collect();
        runs.push(ModelRun {
            emu,
            rates: record.rates,
            reference: record.reference,
            rows: mine,
            cold,
        });
    }
    report::outputs(lab, &p, &facts, &runs)
}

/// The traces of a run drawn again from its parameters and seed (no file is written).
fn redrawn(lab: &Lab, p: &Params) -> Needs {
    let large = if p.shape.large_share > 0.0 {
        let (count, range) = specweb::large_plan(lab.quick);
        specweb::large_sizes(count, range, lab.seed)
    } else {
        Vec::new()
    };
    let set = specweb::FileSet { root: Default::default(), dirs: p.dirs, bytes: 0, large };
    Needs::draw(set, p.trace_requests, lab.seed, &p.shape)
}
