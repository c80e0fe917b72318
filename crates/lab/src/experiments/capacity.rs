//! E5, capacity at infinite demand vs data-set size (DeBox 2004, Table 8): closed-loop clients
//! with persistent connections (5 requests each) on SPECweb99-like sets. The paper's 500 MB,
//! 1.5 GB and 3.3 GB ran on a 1 GB machine; here the sizes are the same multiples (0.5, 1.5,
//! 3.3) of the memory cgroup's limit, and the summary says so. Several disk models
//! (`--disk-emulation hdd,ssd,iops,none`) are run one after another and reported side by side.
//! With `--rounds N` each data set is run N times per server, the rounds interleaved (every
//! server once per round, the order rotated each round); the tables and figures show the
//! medians with the rounds' min–max.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::diskrun::{self, ClosedLoop, DiskCell, ScaledSet};
use super::{Lab, failures_section};
use crate::cli::CapacityArgs;
use crate::datasets::specweb;
use crate::diskemu::DiskEmulation;
use crate::progress::Progress;
use crate::report::markdown::table;
use crate::servers::ServerSpec;
use crate::stats::{Spread, fmt, median, ratio, spread, whiskers_note};
use crate::svg::{Bars, Chart, Plot, Scale};

/// Apache, old Flash (sped), New Flash (amped), and the other peers.
pub const DEFAULT_SERVERS: &[&str] =
    &["apache-prefork-150", "sped", "amped", "uring", "nginx", "nginx-aio", "lighttpd", "h2o"];

/// One measured (model, data set, server, round).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// From 0 (runs before `--rounds` was honoured have one round, 0).
    #[serde(default)]
    pub round: u32,
    pub model: String,
    pub dataset_bytes: u64,
    pub scale: f64,
    pub cell: DiskCell,
}

/// The run's parameters, defaults filled in (shared with E7, linux-comparison).
pub(super) struct Params {
    pub(super) scales: Vec<f64>,
    pub(super) shape: specweb::Shape,
    pub(super) connections: u32,
    pub(super) requests_per_conn: u32,
    pub(super) warmup: f64,
    pub(super) duration: f64,
    pub(super) trace_len: usize,
    /// Rounds per (data set, server).
    pub(super) rounds: u32,
}

impl Params {
    pub(super) fn new(a: &CapacityArgs) -> Result<Params, String> {
        let q = a.common.quick;
        let scales = a
            .scales
            .clone()
            .unwrap_or_else(|| if q { vec![0.5, 1.5] } else { vec![0.5, 1.5, 3.3] });
        if scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err("--scales must be positive numbers".into());
        }
        Ok(Params {
            scales,
            shape: a.shape.shape(),
            connections: a.connections.unwrap_or(if q { 20 } else { 1020 }),
            requests_per_conn: a.requests_per_conn,
            warmup: a.common.warmup.unwrap_or(if q { 0.5 } else { 15.0 }),
            duration: a.common.duration.unwrap_or(if q { 1.0 } else { 20.0 }),
            trace_len: if q { 20_000 } else { 400_000 },
            rounds: a.common.rounds.unwrap_or(1),
        })
    }

    /// The parameters a run recorded in setup.json (`parameters`); the trace shape from its
    /// command line when the run predates recording it.
    pub(super) fn recorded(setup: &Value) -> Result<Params, String> {
        #[derive(Deserialize)]
        struct Recorded {
            scales: Vec<f64>,
            connections: u32,
            requests_per_conn: u32,
            warmup_s: f64,
            duration_s: f64,
            trace_requests: usize,
            shape: Option<specweb::Shape>,
            /// Absent in runs before `--rounds` was honoured: one round.
            rounds: Option<u32>,
        }
        let r: Recorded = super::rebuild::parameters(&setup["parameters"])?;
        if r.scales.is_empty() {
            return Err("setup.json: parameters.scales is empty".into());
        }
        let shape = match r.shape {
            Some(shape) => shape,
            None => super::rebuild::command_shape(setup)?,
        };
        Ok(Params {
            scales: r.scales,
            shape,
            connections: r.connections,
            requests_per_conn: r.requests_per_conn,
            warmup: r.warmup_s,
            duration: r.duration_s,
            trace_len: r.trace_requests,
            rounds: r.rounds.unwrap_or(1),
        })
    }

    /// setup.json's `parameters` (E7 adds its own).
    pub(super) fn to_json(&self, memory_limit_bytes: u64) -> Value {
        json!({"scales": self.scales, "memory_limit_bytes": memory_limit_bytes, "connections": self.connections, "requests_per_conn": self.requests_per_conn, "warmup_s": self.warmup, "duration_s": self.duration, "trace_requests": self.trace_len, "shape": self.shape, "rounds": self.rounds})
    }

    pub(super) fn scales_text(&self) -> String {
        self.scales.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" / ")
    }

    /// How many rounds, for the summary's workload line.
    pub(super) fn rounds_text(&self) -> String {
        if self.rounds > 1 {
            format!(
                "{} rounds per cell, interleaved (every server once per round, the order rotated each round); medians over the rounds with their min–max in brackets",
                self.rounds
            )
        } else {
            "one round per cell (no spread measured)".into()
        }
    }

    /// Only the rounds' range is a figure's whiskers: none for one round.
    pub(super) fn whiskers(&self, values: &[f64]) -> Vec<(f64, f64)> {
        if self.rounds > 1 { vec![Spread::of(values).range()] } else { Vec::new() }
    }
}

/// Runs E5 and writes its folder.
pub fn run(a: &CapacityArgs) -> Result<std::path::PathBuf, String> {
    let q = a.common.quick;
    let mut lab = Lab::open("capacity", &a.common, DEFAULT_SERVERS)?;
    let p = Params::new(a)?;
    let mut rows = Vec::new();
    let mut emus = Vec::new();
    for model in diskrun::models(&a.disk) {
        // One model at a time: a FUSE model's mount lives as long as its plan.
        let mut emu = diskrun::plan_disk(&lab, &a.disk, model, if q { 64 } else { 128 })?;
        let mine = measure(&mut lab, &emu, &p);
        // Unmounted before the next model mounts its own (the description stays).
        emu.release();
        rows.extend(mine?);
        emus.push(emu);
    }
    diskrun::write_raw(&mut lab, &["round", "dataset_bytes", "scale"], &rows, |r| {
        (vec![r.round.to_string(), r.dataset_bytes.to_string(), r.scale.to_string()], &r.cell)
    })?;
    let s = outputs(&mut lab, &emus, &p, &rows)?;
    let notes: Vec<String> =
        emus.iter().filter(|e| !e.applied()).map(DiskEmulation::describe).collect();
    let mut params = p.to_json(emus.first().map_or(0, |e| e.memory_limit_bytes));
    params["models"] = json!(emus.iter().map(|e| e.name.clone()).collect::<Vec<_>>());
    let disk = if emus.len() == 1 { json!(emus[0]) } else { json!(emus) };
    lab.finish(params, Some(disk), notes, &s)
}

/// The figures, one per model, and summary.md's text (the same from a run and from `amplab
/// report`).
fn outputs(
    lab: &mut Lab,
    emus: &[DiskEmulation],
    p: &Params,
    rows: &[Row],
) -> Result<String, String> {
    let mut sections = String::new();
    for emu in emus {
        let mine: Vec<Row> = rows.iter().filter(|r| r.model == emu.name).cloned().collect();
        let figure = chart(lab, emu, p, &mine)?;
        sections.push_str(&model_section(lab, emu, p, &mine, &figure));
    }
    Ok(summary(lab, emus, p, rows, &sections))
}

/// `amplab report` on a capacity run: its figures and summary again from setup.json and
/// results.json. Runs from before the disk models (no `parameters.models`) cannot be rebuilt.
pub fn rebuild(lab: &mut Lab, setup: &Value) -> Result<String, String> {
    if setup["parameters"].get("models").is_none() {
        return Err(super::rebuild::old_layout(
            lab,
            "it predates the disk models (setup.json has no parameters.models)",
        ));
    }
    let p = Params::recorded(setup)?;
    let emus = super::rebuild::emulations(&setup["disk_emulation"])?;
    let (rows, labels) = super::rebuild::disk_rows(&lab.run.path, |r: &mut Row| &mut r.cell)?;
    lab.servers = super::rebuild::specs(&labels);
    outputs(lab, &emus, &p, &rows)
}

/// Every (data set, server) cell of one disk model, data sets generated as needed.
fn measure(lab: &mut Lab, emu: &DiskEmulation, p: &Params) -> Result<Vec<Row>, String> {
    let cells = measure_with(lab, emu, p, |lab, spec, s| {
        (diskrun::run_one(lab, emu, spec, &s.set.root, &s.probe, &s.load, "cap", &mut |_| {}), ())
    })?;
    Ok(cells
        .into_iter()
        .map(|m| Row {
            round: m.round,
            model: emu.name.clone(),
            dataset_bytes: m.dataset_bytes,
            scale: m.scale,
            cell: m.cell,
        })
        .collect())
}

/// One server run of [`measure_with`]: where and when it ran, its cell, and what else the
/// experiment's `run_cell` returned.
pub(super) struct Measured<X> {
    pub(super) dataset_bytes: u64,
    pub(super) scale: f64,
    pub(super) round: u32,
    pub(super) cell: DiskCell,
    pub(super) extra: X,
}

/// Runs `run_cell` for every (data set, round, server) of `p`, generating each data set once,
/// with progress lines. The rounds of a data set are interleaved: every server runs once per
/// round, in the round's rotated order.
pub(super) fn measure_with<X>(
    lab: &mut Lab,
    emu: &DiskEmulation,
    p: &Params,
    mut run_cell: impl FnMut(&Lab, &ServerSpec, &ScaledSet) -> (DiskCell, X),
) -> Result<Vec<Measured<X>>, String> {
    let steps = p.scales.len() * lab.servers.len() * p.rounds as usize;
    let per_cell = p.warmup + p.duration + 3.0;
    let mut progress = Progress::new(lab.experiment, steps, steps as f64 * per_cell);
    let mut rows = Vec::new();
    let closed = ClosedLoop {
        connections: p.connections,
        requests_per_conn: p.requests_per_conn,
        warmup_s: p.warmup,
        duration_s: p.duration,
        trace_len: p.trace_len,
    };
    for &scale in &p.scales {
        let set = diskrun::scaled_set(lab, emu, scale, &closed, &p.shape)?;
        let mib = set.set.bytes as f64 / 1048576.0;
        for round in 0..p.rounds {
            let of_rounds = if p.rounds > 1 {
                format!("round {}/{}: ", round + 1, p.rounds)
            } else {
                String::new()
            };
            for spec in lab.order(round) {
                progress.step(
                    &format!(
                        "{}: {of_rounds}{} on {mib:.0} MiB ({scale}× memory)",
                        emu.name, spec.label
                    ),
                    per_cell,
                );
                let (cell, extra) = run_cell(lab, &spec, &set);
                note_cell(&mut progress, &spec.label, &cell);
                rows.push(Measured { dataset_bytes: set.set.bytes, scale, round, cell, extra });
            }
        }
    }
    Ok(rows)
}

/// The progress line after a server's run: its throughput, or its error.
fn note_cell(progress: &mut Progress, server: &str, cell: &DiskCell) {
    if let Some(m) = &cell.measurement {
        progress.note(&format!("{server}: {:.1} Mb/s, {:.0} req/s", m.body_mbps, m.rps));
    }
    if let Some(e) = &cell.error {
        progress.note(&format!("{server}: {e}"));
    }
}

/// A server's cells on the data set of `scale`, one per round in round order.
fn cells<'a>(rows: &'a [Row], server: &str, scale: f64) -> Vec<&'a DiskCell> {
    rows.iter().filter(|r| r.cell.server == server && r.scale == scale).map(|r| &r.cell).collect()
}

/// A server's body throughput on the data set of `scale`, one value per round (NaN for a round
/// that measured nothing or got no answer: a server that died before its first answer has no
/// throughput, not 0).
fn mbps_rounds(rows: &[Row], server: &str, scale: f64) -> Vec<f64> {
    cells(rows, server, scale)
        .iter()
        .map(|c| {
            c.measurement.as_ref().filter(|m| m.requests > 0).map_or(f64::NAN, |m| m.body_mbps)
        })
        .collect()
}

/// The median over rounds of [`mbps_rounds`] (NaN if no round measured it).
fn mbps(rows: &[Row], server: &str, scale: f64) -> f64 {
    median(&mbps_rounds(rows, server, scale))
}

/// A data set's name in tables and figures: `192 MiB (1.5×)`.
pub(super) fn scale_name(emu: &DiskEmulation, scale: f64) -> String {
    format!("{:.0} MiB ({scale}×)", emu.memory_limit_bytes as f64 * scale / 1048576.0)
}

/// Throughput per server, a group of bars per data set (a panel each when they differ by
/// more than 10×). Returns the figure's file name.
fn chart(lab: &mut Lab, emu: &DiskEmulation, p: &Params, rows: &[Row]) -> Result<String, String> {
    let series: Vec<Bars> = lab
        .servers
        .iter()
        .map(|spec| Bars {
            name: spec.label.clone(),
            values: p.scales.iter().map(|&sc| mbps(rows, &spec.label, sc)).collect(),
            spread: p
                .scales
                .iter()
                .flat_map(|&sc| p.whiskers(&mbps_rounds(rows, &spec.label, sc)))
                .collect(),
        })
        .collect();
    let limit_mib = emu.memory_limit_bytes >> 20;
    lab.run
        .write_chart(&format!("capacity-{}", emu.name), &Chart {
            title: format!(
                "Capacity at infinite demand on {} vs data-set size (DeBox Table 8, scaled)",
                emu.name
            ),
            subtitle: format!(
                "SPECweb99-like sets at {} × a {limit_mib} MiB memory limit; {} closed-loop clients × {} requests/connection; {}",
                p.scales_text(),
                p.connections,
                p.requests_per_conn,
                emu.short()
            ),
            x_label: "data-set size (× the memory limit)".into(),
            y_label: "throughput, response bodies (Mb/s)".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            plot: Plot::Bars {
                categories: p.scales.iter().map(|&sc| scale_name(emu, sc)).collect(),
                series,
            },
            note: whiskers_note(p.rounds, "bar"),
        })
        .map_err(|e| e.to_string())
}

/// One model's part of summary.md: throughput per data set, the disk's use on the largest,
/// the comparison with the paper.
fn model_section(lab: &Lab, emu: &DiskEmulation, p: &Params, rows: &[Row], figure: &str) -> String {
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    let mut s = format!("## Disk model {}\n\nDisk: {}\n\n", emu.name, emu.describe());
    s.push_str(&throughput_table(emu, p, rows, &labels));
    let first = p.scales[0];
    let last = p.scales[p.scales.len() - 1];
    s.push_str(&format!("\nOn the largest set ({last}× memory): disk reads/s, MB read/s, read amplification (bytes read from the disk ÷ bytes of the distinct files the warm-up and the measurement asked for) and its page floor (those files' bytes rounded up to whole 4 KiB pages ÷ their bytes: the least a server reading whole pages can reach), disk busy %, timeouts (no answer within 30 s), 99.9th percentile and maximum latency:\n\n"));
    s.push_str(&disk_table(rows, &labels, last));
    if p.rounds > 1 {
        s.push_str(&format!(
            "\nEach cell is the median of {} rounds, with the rounds' min–max in brackets.\n",
            p.rounds
        ));
    }
    s.push_str(&format!("\nFigure: [{figure}]({figure})\n\n### Compared with the paper\n\n"));
    for l in &labels {
        let drop = ratio(mbps(rows, l, last), mbps(rows, l, first));
        out_line(
            &mut s,
            &format!("{l}: {} of its small-set throughput at the largest set", fmt(drop, 2)),
        );
    }
    if labels.iter().any(|l| l == "amped") && labels.iter().any(|l| l == "sped") {
        let r = ratio(mbps(rows, "amped", last), mbps(rows, "sped", last));
        out_line(
            &mut s,
            &format!(
                "*New Flash beats old Flash on the largest set (326 vs 265 Mb/s, 1.23×)*: amped/sped = {}",
                fmt(r, 2)
            ),
        );
    }
    if let Some(line) = best_peer_line(lab, rows, last) {
        out_line(&mut s, &line);
    }
    s.push('\n');
    let last_round = if p.rounds > 1 { ", last round" } else { "" };
    s.push_str(&super::who_blocked::throughput_section(
        &format!("{} on the largest set, {last}× memory{last_round}", emu.name),
        &labels,
        |l| cells(rows, l, last).last().copied(),
        |l| mbps(rows, l, last),
    ));
    s
}

/// A row per server, a column per data set: Mb/s.
fn throughput_table(emu: &DiskEmulation, p: &Params, rows: &[Row], labels: &[String]) -> String {
    let mut header = vec!["server".to_string()];
    header.extend(p.scales.iter().map(|&sc| format!("{} Mb/s", scale_name(emu, sc))));
    let body: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            std::iter::once(l.clone())
                .chain(p.scales.iter().map(|&sc| spread(&mbps_rounds(rows, l, sc), 1)))
                .collect()
        })
        .collect();
    table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &body)
}

/// At the data set of `last`: each server's disk reads, bytes read, read amplification and its
/// page floor, disk busy share, timeouts, and tail latency (medians over rounds, their min–max in brackets).
fn disk_table(rows: &[Row], labels: &[String], last: f64) -> String {
    let disk: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            let c = cells(rows, l, last);
            let get = |f: fn(&DiskCell) -> Option<f64>, scale: f64, decimals: usize| {
                let v: Vec<f64> = c.iter().map(|c| f(c).map_or(f64::NAN, |v| v * scale)).collect();
                spread(&v, decimals)
            };
            vec![
                l.clone(),
                get(DiskCell::disk_reads_per_s, 1.0, 0),
                get(DiskCell::disk_bytes_per_s, 1e-6, 1),
                get(|c| c.read_amplification, 1.0, 2),
                get(|c| c.read_amplification_floor, 1.0, 2),
                get(|c| c.measured_disk_busy, 100.0, 0),
                get(|c| Some(c.timeouts as f64), 1.0, 0),
                get(|c| c.measurement.as_ref().map(|m| m.latency.p999), 1.0, 0),
                get(|c| c.measurement.as_ref().map(|m| m.latency.max), 1.0, 0),
            ]
        })
        .collect();
    table(
        &[
            "server",
            "disk reads/s",
            "MB read/s",
            "read amplification",
            "page floor",
            "disk busy %",
            "timeouts",
            "99.9% ms",
            "max ms",
        ],
        &disk,
    )
}

/// amped's throughput against the best other server's on the data set of `scale`.
fn best_peer_line(lab: &Lab, rows: &[Row], scale: f64) -> Option<String> {
    let amped = mbps(rows, "amped", scale);
    let (best, v) = lab
        .servers
        .iter()
        .filter(|s| s.label != "amped")
        .map(|s| (s.label.clone(), mbps(rows, &s.label, scale)))
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    amped.is_finite().then(|| {
        format!(
            "amped / the best other server ({best}, {} Mb/s) on the largest set: {}×",
            fmt(v, 1),
            fmt(ratio(amped, v), 2)
        )
    })
}

/// summary.md: the workload, then each model's section.
fn summary(lab: &Lab, emus: &[DiskEmulation], p: &Params, rows: &[Row], sections: &str) -> String {
    let limit_mib = emus.first().map_or(0, |e| e.memory_limit_bytes >> 20);
    let workload = format!(
        "SPECweb99-like file sets of {} times the server's {limit_mib} MiB memory limit (the paper: 0.5 / 1.5 / 3.3 GB on a 1 GB machine, so the same ratios, not the same sizes), {}; {} closed-loop clients, {} requests per persistent connection (infinite demand); {} s warm-up, {} s measured; {}; disk models {}",
        p.scales_text(),
        p.shape.describe(),
        p.connections,
        p.requests_per_conn,
        p.warmup,
        p.duration,
        p.rounds_text(),
        emus.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let mut s = lab.summary_head("E5 capacity vs data-set size (DeBox 2004, Table 8)", &workload);
    s.push_str("Paper (Mb/s, Apache / Old Flash / New Flash): 500 MB 240.3 / 485.2 / 660.9; 1.5 GB 230.7 / 410.6 / 580.3; 3.3 GB 210.6 / 264.5 / 326.4.\n\n");
    s.push_str(sections);
    s.push_str("Throughput falls as the data set outgrows memory for every server, as in the paper; what separates the servers is whether disk waits stall the whole server (sped, nginx without aio, lighttpd, h2o) or only the requests that miss (amped's helpers, uring, Apache's processes, nginx-aio).\n");
    s.push_str(&cell_failures(rows.iter().map(|r| (r.dataset_bytes, &r.cell))));
    s
}

/// The failed cells of (data-set bytes, cell) pairs, as the summary's closing section.
pub(super) fn cell_failures<'a>(cells: impl Iterator<Item = (u64, &'a DiskCell)>) -> String {
    let failures: Vec<String> = cells
        .filter_map(|(bytes, cell)| {
            let at = format!("{} {} MiB {}", cell.model, bytes >> 20, cell.server);
            cell.error.as_ref().map(|e| format!("{at}: {e}"))
        })
        .collect();
    failures_section(&failures)
}

fn out_line(s: &mut String, text: &str) {
    s.push_str("- ");
    s.push_str(text);
    s.push_str(".\n");
}
