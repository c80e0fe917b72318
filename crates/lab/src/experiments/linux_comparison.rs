//! E7, the New Flash paper's Linux comparison (DeBox 2004, Table 10 and Figure 12): Apache,
//! Haboob, old Flash and New Flash on one machine, throughput at three data-set sizes and the
//! latency profile at the largest. Here Haboob is amped's `staged` architecture (SEDA on the
//! same pipeline), old Flash is `sped` and New Flash is `amped`, next to Apache and the other
//! peers. The load and data sets are those of the capacity experiment (E5, closed loop,
//! persistent connections, SPECweb99-like sets at 0.5 / 1.5 / 3.3 × the memory limit), run
//! through [`diskrun`], `--rounds` times per cell with the rounds interleaved as there; while a
//! staged server runs, its stats endpoint is sampled so the summary can say whether its thread
//! counts (the paper's "excess parallelism") explain its results.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Lab;
use super::capacity::{self, scale_name};
use super::diskrun::{self, DiskCell};
use super::stage_sampler::{self, Sample, StageSampler};
use crate::cli::LinuxComparisonArgs;
use crate::diskemu::DiskEmulation;
use crate::load::Measurement;
use crate::report::csv::{Csv, num};
use crate::report::markdown::table;
use crate::servers::{RunningServer, ServerKind, ServerSpec};
use crate::stats::{cdf_note, fmt, median, ratio, spread, whiskers_note};
use crate::svg::{Bars, Chart, Plot, Scale, Series};

/// The paper's four (Apache, Haboob, old Flash, New Flash) and the other peers.
pub const DEFAULT_SERVERS: &[&str] =
    &["apache-prefork-150", "apache-event", "staged", "sped", "amped", "nginx", "h2o", "lighttpd"];

/// Table 10's throughput (Mb/s) as published: (data set, Haboob, Apache, Flash, New Flash).
const PAPER_MBPS: [(&str, f64, f64, f64, f64); 3] = [
    ("500 MB", 324.9, 434.3, 1098.1, 1284.7),
    ("1.5 GB", 303.4, 372.4, 661.7, 822.5),
    ("3.3 GB", 184.1, 177.4, 173.8, 199.1),
];

/// Threads amped runs with its defaults: the loop and 4 helpers in each of two lanes.
const AMPED_DEFAULT_THREADS: u64 = 9;

/// One measured (data set, server, round), with staged's stage samples.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// From 0 (runs before `--rounds` was honoured have one round, 0).
    #[serde(default)]
    pub round: u32,
    pub dataset_bytes: u64,
    pub scale: f64,
    pub cell: DiskCell,
    /// staged only: the stages over time (from the server's start; the measured phase begins
    /// `warmup_s` later).
    pub stage_samples: Vec<Sample>,
}

/// The capacity experiment's parameters and how often staged is sampled.
struct Params {
    base: capacity::Params,
    sample_every: Duration,
}

impl Params {
    fn last(&self) -> f64 {
        self.base.scales[self.base.scales.len() - 1]
    }
}

/// Runs E7 and writes its folder.
pub fn run(a: &LinuxComparisonArgs) -> Result<std::path::PathBuf, String> {
    let q = a.capacity.common.quick;
    let mut lab = Lab::open("linux-comparison", &a.capacity.common, DEFAULT_SERVERS)?;
    let models = diskrun::models(&a.capacity.disk);
    if models.len() > 1 {
        return Err(
            "linux-comparison runs on one disk model: give --disk-emulation one model".into()
        );
    }
    let emu = diskrun::plan_disk(&lab, &a.capacity.disk, models[0], if q { 64 } else { 128 })?;
    let p = Params {
        base: capacity::Params::new(&a.capacity)?,
        sample_every: Duration::from_millis(a.sample_ms),
    };
    let rows = measure(&mut lab, &emu, &p)?;
    diskrun::write_raw(&mut lab, &["round", "dataset_bytes", "scale"], &rows, |r| {
        (vec![r.round.to_string(), r.dataset_bytes.to_string(), r.scale.to_string()], &r.cell)
    })?;
    let s = outputs(&mut lab, &emu, &p, &rows)?;
    let mut params = p.base.to_json(emu.memory_limit_bytes);
    params["stage_sample_ms"] = json!(a.sample_ms);
    let notes = if emu.applied() { Vec::new() } else { vec![emu.describe()] };
    lab.finish(params, Some(json!(emu)), notes, &s)
}

/// staged-threads.csv, the figures and summary.md's text (the same from a run and from
/// `amplab report`).
fn outputs(lab: &mut Lab, emu: &DiskEmulation, p: &Params, rows: &[Row]) -> Result<String, String> {
    write_thread_csv(lab, rows)?;
    let figures = charts(lab, emu, p, rows)?;
    Ok(summary(lab, emu, p, rows, &figures))
}

/// `amplab report` on a linux-comparison run: staged-threads.csv, the figures and the summary
/// again from setup.json and results.json.
pub fn rebuild(lab: &mut Lab, setup: &Value) -> Result<String, String> {
    let p = Params {
        base: capacity::Params::recorded(setup)?,
        sample_every: Duration::from_millis(
            setup["parameters"]["stage_sample_ms"].as_u64().unwrap_or(250),
        ),
    };
    let emu: DiskEmulation = super::rebuild::parameters(&setup["disk_emulation"])?;
    let (rows, labels) = super::rebuild::disk_rows(&lab.run.path, |r: &mut Row| &mut r.cell)?;
    lab.servers = super::rebuild::specs(&labels);
    outputs(lab, &emu, &p, &rows)
}

/// staged servers get a stats endpoint to sample (their label stays as written).
fn observable(spec: &ServerSpec) -> ServerSpec {
    let mut spec = spec.clone();
    if let ServerKind::Amped { arch, options } = &mut spec.kind
        && arch == "staged"
    {
        options.retain(|(name, _)| name != "stats-path");
        options.push(("stats-path".into(), Some(stage_sampler::STATS_PATH.into())));
    }
    spec
}

fn is_staged(spec: &ServerSpec) -> bool {
    matches!(&spec.kind, ServerKind::Amped { arch, .. } if arch == "staged")
}

fn measure(lab: &mut Lab, emu: &DiskEmulation, p: &Params) -> Result<Vec<Row>, String> {
    let cells = capacity::measure_with(lab, emu, &p.base, |lab, spec, s| {
        let mut sampler = None;
        let mut watch = |server: &RunningServer| {
            if is_staged(spec) {
                sampler = Some(StageSampler::start(server.port, p.sample_every));
            }
        };
        let (root, probe, load) = (&s.set.root, &s.probe, &s.load);
        let run_spec = observable(spec);
        let cell = diskrun::run_one(lab, emu, &run_spec, root, probe, load, "linux", &mut watch);
        (cell, sampler.map(StageSampler::finish).unwrap_or_default())
    })?;
    Ok(cells
        .into_iter()
        .map(|m| Row {
            round: m.round,
            dataset_bytes: m.dataset_bytes,
            scale: m.scale,
            cell: m.cell,
            stage_samples: m.extra,
        })
        .collect())
}

/// staged-threads.csv: one line per (server, data set, sample, stage).
fn write_thread_csv(lab: &mut Lab, rows: &[Row]) -> Result<(), String> {
    let mut csv =
        Csv::new(&["server", "scale", "round", "t_s", "stage", "threads", "queue", "refused"]);
    for r in rows {
        for s in &r.stage_samples {
            for (stage, threads) in &s.threads {
                csv.row(vec![
                    r.cell.server.clone(),
                    r.scale.to_string(),
                    r.round.to_string(),
                    num(s.t_s),
                    stage.clone(),
                    threads.to_string(),
                    s.queue.get(stage).copied().unwrap_or(0).to_string(),
                    s.refused.to_string(),
                ]);
            }
        }
    }
    lab.run.write("staged-threads.csv", &csv.render()).map_err(|e| e.to_string())
}

/// A server's measurements on the data set of `scale`, one per round that answered anything.
fn measurements<'a>(rows: &'a [Row], server: &str, scale: f64) -> Vec<&'a Measurement> {
    rows.iter()
        .filter(|r| r.cell.server == server && r.scale == scale)
        .filter_map(|r| r.cell.measurement.as_ref())
        .filter(|m| m.requests > 0)
        .collect()
}

/// `f` of each round's measurement of `server` on the data set of `scale`.
fn per_round(rows: &[Row], server: &str, scale: f64, f: fn(&Measurement) -> f64) -> Vec<f64> {
    measurements(rows, server, scale).into_iter().map(f).collect()
}

/// The median over rounds of `f` (NaN if no round measured it).
fn med(rows: &[Row], server: &str, scale: f64, f: fn(&Measurement) -> f64) -> f64 {
    median(&per_round(rows, server, scale, f))
}

/// The median body throughput over rounds.
fn mbps(rows: &[Row], server: &str, scale: f64) -> f64 {
    med(rows, server, scale, |m| m.body_mbps)
}

/// The rows of `server` on the data set of `scale` in their last round.
fn last_round<'a>(rows: &'a [Row], server: &str, scale: f64) -> Option<&'a Row> {
    rows.iter().filter(|r| r.cell.server == server && r.scale == scale).max_by_key(|r| r.round)
}

/// Throughput bars, the latency CDF at the largest set, staged's threads over time.
fn charts(
    lab: &mut Lab,
    emu: &DiskEmulation,
    p: &Params,
    rows: &[Row],
) -> Result<Vec<String>, String> {
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    let workload = format!(
        "SPECweb99-like sets, {} MiB memory limit, {} closed-loop clients × {} requests/connection; {}",
        emu.memory_limit_bytes >> 20,
        p.base.connections,
        p.base.requests_per_conn,
        emu.short()
    );
    let d = Drawing { emu, p, rows, labels: &labels, workload };
    let mut figures = vec![throughput_chart(lab, &d)?];
    figures.push(cdf_chart(lab, &d)?);
    figures.extend(thread_charts(lab, &d)?);
    Ok(figures)
}

/// What every figure is drawn from: the run, its servers, and the workload as a subtitle.
struct Drawing<'a> {
    emu: &'a DiskEmulation,
    p: &'a Params,
    rows: &'a [Row],
    labels: &'a [String],
    workload: String,
}

/// Throughput per server, a group of bars per data set: medians over the rounds, their
/// min–max as whiskers.
fn throughput_chart(lab: &mut Lab, d: &Drawing) -> Result<String, String> {
    let Drawing { emu, p, rows, labels, workload } = d;
    let categories: Vec<String> = p.base.scales.iter().map(|&s| scale_name(emu, s)).collect();
    let series = labels
        .iter()
        .map(|l| Bars {
            name: l.clone(),
            values: p.base.scales.iter().map(|&s| mbps(rows, l, s)).collect(),
            spread: p
                .base
                .scales
                .iter()
                .flat_map(|&s| p.base.whiskers(&per_round(rows, l, s, |m| m.body_mbps)))
                .collect(),
        })
        .collect();
    let chart = Chart {
        title: "Linux comparison: throughput vs data-set size (DeBox Table 10, scaled)".into(),
        subtitle: workload.to_string(),
        x_label: "data-set size (× memory limit)".into(),
        y_label: "throughput, response bodies (Mb/s)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        plot: Plot::Bars { categories, series },
        note: whiskers_note(p.base.rounds, "bar"),
    };
    lab.run.write_chart("throughput", &chart).map_err(|e| e.to_string())
}

/// The measurement whose CDF is drawn: the last round's, if it answered anything.
fn cdf_measurement<'a>(rows: &'a [Row], server: &str, scale: f64) -> Option<&'a Measurement> {
    last_round(rows, server, scale)
        .and_then(|r| r.cell.measurement.as_ref())
        .filter(|m| m.requests > 0)
}

/// The response-time CDF of each server on the largest set (its last round).
fn cdf_chart(lab: &mut Lab, d: &Drawing) -> Result<String, String> {
    let Drawing { emu, p, rows, labels, workload } = d;
    let last = p.last();
    let measured = labels.iter().filter_map(|l| cdf_measurement(rows, l, last)).all(|m| m.cdf().1);
    let cdf = labels
        .iter()
        .map(|l| {
            let points = cdf_measurement(rows, l, last).map_or(Vec::new(), |m| m.cdf().0);
            Series::new(l.clone(), points)
        })
        .collect();
    let title = format!(
        "Linux comparison: response-time CDF on the largest set, {} (DeBox Fig 12){}",
        scale_name(emu, last),
        if measured { "" } else { " — through 8 percentiles only" }
    );
    let chart = Chart::latency_cdf(title, workload.to_string(), cdf, cdf_note(measured));
    lab.run.write_chart("latency-cdf", &chart).map_err(|e| e.to_string())
}

/// staged's threads over time, a figure per stage, a line per (staged server, data set) from
/// the last round.
fn thread_charts(lab: &mut Lab, d: &Drawing) -> Result<Vec<String>, String> {
    let Drawing { emu, p, rows, workload, .. } = d;
    let last = rows.iter().map(|r| r.round).max().unwrap_or(0);
    let sampled: Vec<&Row> =
        rows.iter().filter(|r| r.round == last && !r.stage_samples.is_empty()).collect();
    let several = sampled.iter().any(|r| r.cell.server != sampled[0].cell.server);
    let mut stages: Vec<String> =
        sampled.iter().flat_map(|r| r.stage_samples[0].threads.keys().cloned()).collect();
    stages.sort();
    stages.dedup();
    let rounds = if p.base.rounds > 1 { ", last round" } else { "" };
    let mut figures = Vec::new();
    for stage in stages {
        let series: Vec<Series> = sampled
            .iter()
            .map(|r| {
                let set = scale_name(emu, r.scale);
                Series::new(
                    if several {
                        format!("{}@{set}", r.cell.server)
                    } else {
                        format!("staged {set}")
                    },
                    r.stage_samples
                        .iter()
                        .map(|s| (s.t_s, s.threads.get(&stage).copied().unwrap_or(0) as f64))
                        .collect(),
                )
            })
            .collect();
        let chart = Chart {
            title: format!(
                "staged (Haboob): threads in its {stage} stage over time, per data set{rounds}"
            ),
            subtitle: format!(
                "{workload}; warm-up {} s, then {} s measured",
                p.base.warmup, p.base.duration
            ),
            x_label: "time since the server started (s)".into(),
            y_label: format!("threads in the {stage} stage"),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            plot: Plot::Lines(series),
            note: format!(
                "Sampled every {} ms from the server's stats; the measured phase begins at {} s.",
                p.sample_every.as_millis(),
                p.base.warmup
            ),
        };
        let name = format!("staged-threads-{stage}");
        figures.push(lab.run.write_chart(&name, &chart).map_err(|e| e.to_string())?);
    }
    Ok(figures)
}

fn summary(lab: &Lab, emu: &DiskEmulation, p: &Params, rows: &[Row], figures: &[String]) -> String {
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    let workload = format!(
        "SPECweb99-like file sets of {} × the server's {} MiB memory limit (the paper: 500 MB / 1.5 GB / 3.3 GB on a 1 GB machine, the same ratios), Zipf trace; {} closed-loop clients, {} requests per persistent connection (infinite demand); {} s warm-up, {} s measured; {}. Haboob = `staged`, old Flash = `sped`, New Flash = `amped`",
        p.base.scales.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" / "),
        emu.memory_limit_bytes >> 20,
        p.base.connections,
        p.base.requests_per_conn,
        p.base.warmup,
        p.base.duration,
        p.base.rounds_text()
    );
    let mut s =
        lab.summary_head("E7 Linux comparison (DeBox 2004, Table 10 and Figure 12)", &workload);
    s.push_str(&format!("Disk: {}\n\n## Throughput (Mb/s)\n\n", emu.describe()));
    s.push_str(&throughput_table(emu, p, rows, &labels));
    s.push_str(&latency_part(emu, p, rows, &labels));
    let last = p.last();
    let which = if p.base.rounds > 1 { ", last round" } else { "" };
    s.push_str(&super::who_blocked::throughput_section(
        &format!("largest set, {}{which}", scale_name(emu, last)),
        &labels,
        |l| last_round(rows, l, last).map(|r| &r.cell),
        |l| mbps(rows, l, last),
    ));
    s.push_str(&threads_section(emu, p, rows));
    s.push_str("\nFigures: ");
    s.push_str(&figures.iter().map(|f| format!("[{f}]({f})")).collect::<Vec<_>>().join(", "));
    s.push_str("\n\n## Compared with the paper\n\n");
    s.push_str(&comparison(emu, p, rows, &labels, lab.quick));
    s.push_str(&capacity::cell_failures(rows.iter().map(|r| (r.dataset_bytes, &r.cell))));
    s
}

/// Throughput per server and data set (medians over rounds, min–max in brackets), then the
/// paper's.
fn throughput_table(emu: &DiskEmulation, p: &Params, rows: &[Row], labels: &[String]) -> String {
    let mut header = vec!["server".to_string()];
    header.extend(p.base.scales.iter().map(|&sc| scale_name(emu, sc)));
    let body: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            std::iter::once(l.clone())
                .chain(
                    p.base
                        .scales
                        .iter()
                        .map(|&sc| spread(&per_round(rows, l, sc, |m| m.body_mbps), 1)),
                )
                .collect()
        })
        .collect();
    let mut s = table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &body);
    s.push_str("\nPaper, Table 10 (Mb/s, Haboob / Apache / Flash / New Flash): ");
    let paper: Vec<String> =
        PAPER_MBPS.iter().map(|(set, h, a, f, n)| format!("{set} {h} / {a} / {f} / {n}")).collect();
    s.push_str(&paper.join("; "));
    s
}

/// Latency on the largest set: 5 %, median, 95 % and mean per server (medians over rounds,
/// min–max in brackets).
fn latency_part(emu: &DiskEmulation, p: &Params, rows: &[Row], labels: &[String]) -> String {
    let mut s =
        format!("\n\n## Latency on the largest set, {} (ms)\n\n", scale_name(emu, p.last()));
    let stats: [fn(&Measurement) -> f64; 4] =
        [|m| m.latency.p5, |m| m.latency.p50, |m| m.latency.p95, |m| m.latency.mean];
    let lat: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            std::iter::once(l.clone())
                .chain(stats.iter().map(|f| spread(&per_round(rows, l, p.last(), *f), 2)))
                .collect()
        })
        .collect();
    s.push_str(&table(&["server", "5%", "median", "95%", "mean"], &lat));
    s.push_str("\nThe paper's latency figures for this test were not retrievable beyond its text: Haboob's profile was the worst of the four.\n\n");
    s
}

/// staged's stage threads during the measured phase, per data set (and round, when several).
fn threads_section(emu: &DiskEmulation, p: &Params, rows: &[Row]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| !r.stage_samples.is_empty())
        .map(|r| {
            let (mean, peak) = stage_sampler::threads_mean_peak(&r.stage_samples, p.base.warmup)
                .unwrap_or((0.0, 0));
            let refused = r.stage_samples.last().map_or(0, |s| s.refused);
            let round =
                if p.base.rounds > 1 { format!(", round {}", r.round + 1) } else { String::new() };
            vec![
                r.cell.server.clone(),
                format!("{}{round}", scale_name(emu, r.scale)),
                fmt(mean, 1),
                peak.to_string(),
                refused.to_string(),
            ]
        })
        .collect();
    if body.is_empty() {
        return String::new();
    }
    let mut s = String::from("## staged's threads (job stages, measured phase)\n\n");
    s.push_str(&table(
        &["server", "data set", "mean threads", "peak threads", "refused (503)"],
        &body,
    ));
    s.push_str(&format!("\nPlus one socket thread (the epoll loop). amped with its defaults runs {AMPED_DEFAULT_THREADS} threads throughout (its loop and 2 lanes × `--helpers 4`).\n\n"));
    s
}

/// The best-measured Apache at `scale` (the paper tuned its Apache), if any ran.
fn apache(rows: &[Row], labels: &[String], scale: f64) -> Option<(String, f64)> {
    labels
        .iter()
        .filter(|l| l.starts_with("apache"))
        .map(|l| (l.clone(), mbps(rows, l, scale)))
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// A verdict on the medians over rounds (one round: the single measurement's); a quick run
/// gives none.
fn verdict(ok: bool, quick: bool) -> &'static str {
    match (quick, ok) {
        (true, _) => "no verdict: quick run",
        (false, true) => "**holds**",
        (false, false) => "**does not hold**",
    }
}

/// The paper's throughput order at the data set of `scale`, each comparison with its verdict:
/// New Flash ≥ old Flash ≥ Apache ≈ Haboob.
fn throughput_order(rows: &[Row], labels: &[String], scale: f64, quick: bool) -> Vec<String> {
    let has = |l: &str| labels.iter().any(|x| x == l);
    let verdict = |ok: bool| verdict(ok, quick);
    let (n, o, h) =
        (mbps(rows, "amped", scale), mbps(rows, "sped", scale), mbps(rows, "staged", scale));
    let mut parts = Vec::new();
    if has("amped") && has("sped") {
        let r = ratio(n, o);
        parts.push(format!(
            "New Flash ≥ old Flash: amped/sped = {} ({})",
            fmt(r, 2),
            verdict(r >= 0.95)
        ));
    }
    let apache_ran = apache(rows, labels, scale);
    if apache_ran.is_none() {
        parts
            .push("old Flash ≥ Apache and Apache ≈ Haboob not checked (no Apache measured)".into());
    }
    if let Some((a, av)) = apache_ran {
        if has("sped") {
            let r = ratio(o, av);
            parts.push(format!(
                "old Flash ≥ Apache: sped/{a} = {} ({})",
                fmt(r, 2),
                verdict(r >= 0.95)
            ));
        }
        if has("staged") {
            let r = ratio(h, av);
            parts.push(format!(
                "Apache ≈ Haboob: staged/{a} = {} ({})",
                fmt(r, 2),
                verdict((0.67..=1.5).contains(&r))
            ));
        }
    }
    parts
}

/// "Haboob's latency is the worst": the highest median and mean among the paper's four at the
/// largest set.
fn haboob_latency(
    emu: &DiskEmulation,
    rows: &[Row],
    labels: &[String],
    last: f64,
    quick: bool,
) -> String {
    let four: Vec<&String> = labels
        .iter()
        .filter(|l| ["staged", "sped", "amped"].contains(&l.as_str()) || l.starts_with("apache"))
        .collect();
    let worst = |f: fn(&Measurement) -> f64| {
        four.iter()
            .map(|l| ((*l).clone(), med(rows, l, last, f)))
            .filter(|(_, v)| v.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    if !(labels.iter().any(|l| l == "staged") && four.len() > 1) {
        return String::new();
    }
    let (wm, wmean) = (worst(|m| m.latency.p50), worst(|m| m.latency.mean));
    let text = |w: &Option<(String, f64)>| {
        w.as_ref().map_or("n/a".to_string(), |(l, v)| format!("{l} ({} ms)", fmt(*v, 2)))
    };
    let holds = wm.as_ref().is_some_and(|(l, _)| l == "staged")
        && wmean.as_ref().is_some_and(|(l, _)| l == "staged");
    format!(
        "- Haboob worst on latency ({}): highest median {}, highest mean {} among {} ({}).\n",
        scale_name(emu, last),
        text(&wm),
        text(&wmean),
        four.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", "),
        verdict(holds, quick)
    )
}

fn comparison(
    emu: &DiskEmulation,
    p: &Params,
    rows: &[Row],
    labels: &[String],
    quick: bool,
) -> String {
    let has = |l: &str| labels.iter().any(|x| x == l);
    let mut s = if p.base.rounds > 1 {
        format!(
            "Medians of {} rounds per cell (their min–max in the tables above): each verdict is the medians'.\n\n",
            p.base.rounds
        )
    } else {
        "One round per cell: the noise between rounds was not measured, so each verdict is one measurement's.\n\n".to_string()
    };
    s.push_str("Paper: New Flash ≥ old Flash ≥ Apache ≈ Haboob on throughput (Haboob below Apache on the in-memory sets, slightly above on the disk-bound one; all four alike at 3.3 GB), and Haboob's latency the worst. \"≥\" is taken as at least 0.95×, \"≈\" as within 0.67–1.5×.\n\n");
    for &scale in &p.base.scales {
        let parts = throughput_order(rows, labels, scale, quick);
        if !parts.is_empty() {
            s.push_str(&format!("- {}: {}.\n", scale_name(emu, scale), parts.join("; ")));
        }
    }
    s.push_str(&haboob_latency(emu, rows, labels, p.last(), quick));
    s.push_str(&parallelism(emu, p, rows));
    if has("staged") && has("amped") {
        s.push_str(&why_haboob_differs(emu, p, rows));
    }
    s
}

/// Why this Haboob need not rank as the paper's did: what the stages cost on the same pipeline.
fn why_haboob_differs(emu: &DiskEmulation, p: &Params, rows: &[Row]) -> String {
    let ratios: Vec<String> = p
        .base
        .scales
        .iter()
        .map(|&sc| {
            let r = ratio(mbps(rows, "staged", sc), mbps(rows, "amped", sc));
            format!("{} at {}", fmt(r, 2), scale_name(emu, sc))
        })
        .collect();
    let p95 = |l: &str| Some(med(rows, l, p.last(), |m| m.latency.p95)).filter(|v| v.is_finite());
    let tail = match (p95("staged"), p95("amped")) {
        (Some(h), Some(n)) => format!(
            " On the largest set its p95 is {} ms against amped's {} ms: bounded stage queues and batching keep its tail short, and there is no garbage collector to pause it.",
            fmt(h, 1),
            fmt(n, 1)
        ),
        _ => String::new(),
    };
    format!(
        "\nWhy Haboob's rank can differ from the paper's: `staged` is not the paper's Haboob but amped's own pipeline (path, header and file caches, small bodies in memory, `sendfile`, the residency test) cut into SEDA stages, where Haboob was a Java server without zero-copy sends; so against Apache it keeps Flash's advantages, and what the stages themselves cost shows against amped on the same pipeline: staged/amped throughput = {}.{tail}\n",
        ratios.join(", ")
    )
}

/// Whether staged's thread counts line up with its throughput deficit against amped, per
/// data set (the median over rounds of the mean threads, the highest peak).
fn parallelism(emu: &DiskEmulation, p: &Params, rows: &[Row]) -> String {
    let mut s = String::new();
    for &scale in &p.base.scales {
        let runs: Vec<(f64, u64)> = rows
            .iter()
            .filter(|r| r.cell.server == "staged" && r.scale == scale)
            .filter_map(|r| stage_sampler::threads_mean_peak(&r.stage_samples, p.base.warmup))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let mean = median(&runs.iter().map(|r| r.0).collect::<Vec<_>>());
        let peak = runs.iter().map(|r| r.1).max().unwrap_or(0);
        let total = mean + 1.0;
        let vs = ratio(mbps(rows, "staged", scale), mbps(rows, "amped", scale));
        s.push_str(&format!(
            "- Excess parallelism, {}: staged ran {} threads on average (peak {}, with its socket thread) against amped's {AMPED_DEFAULT_THREADS}; staged/amped throughput = {}: {}.\n",
            scale_name(emu, scale),
            fmt(total, 1),
            peak + 1,
            fmt(vs, 2),
            parallelism_reading(total > AMPED_DEFAULT_THREADS as f64, vs < 0.95)
        ));
    }
    s
}

/// What more threads than amped (`many`) and less throughput (`behind`) say together.
fn parallelism_reading(many: bool, behind: bool) -> &'static str {
    match (many, behind) {
        (true, true) => {
            "consistent with the paper's excess-parallelism explanation: more threads than amped share the server's CPU and disk, and it delivers less"
        }
        (true, false) => "its extra threads cost it no throughput here",
        (false, true) => {
            "it is behind without running more threads than amped, so thread count alone does not explain it here"
        }
        (false, false) => "neither more threads nor less throughput than amped",
    }
}
