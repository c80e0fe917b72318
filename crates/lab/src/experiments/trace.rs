//! E2, trace replay (Flash §6.2, Fig 8): throughput per server on an "Owlnet-like" small,
//! cache-friendly data set and a "CS-like" large, disk-bound one (the Rice traces are not
//! public: both are SPECweb99-like sets with Zipf traces, sized against the memory limit), or
//! on a user's own Common Log Format log replayed in order against a matching file set.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::diskrun::{self, DiskCell, Load};
use super::{Lab, failures_section};
use crate::cli::TraceArgs;
use crate::datasets::{replay, specweb};
use crate::diskemu::DiskEmulation;
use crate::progress::Progress;
use crate::report::markdown::table;
use crate::stats::{Spread, fmt, ratio};
use crate::svg::{Bars, Chart, Plot, Scale};
use crate::verdict::{Cmp, judge};

/// The Flash paper's line-up (Flash, SPED, MT, MP) plus uring and the peers: the same servers
/// as the single-file experiment.
pub const DEFAULT_SERVERS: &[&str] = super::single_file::DEFAULT_SERVERS;

/// A workload: a file set and its request list.
struct Workload {
    name: String,
    description: String,
    root: std::path::PathBuf,
    urls: Vec<String>,
    warm_urls: Vec<String>,
    bytes: u64,
}

/// One measured (workload, server).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub workload: String,
    pub round: u32,
    pub cell: DiskCell,
}

/// The run's parameters, defaults filled in.
struct Params {
    connections: u32,
    /// Open loop at this rate; closed loop when `None`.
    rate: Option<f64>,
    requests_per_conn: u32,
    warmup: f64,
    duration: f64,
    rounds: u32,
}

/// Runs E2 and writes its folder.
pub fn run(a: &TraceArgs) -> Result<std::path::PathBuf, String> {
    let q = a.common.quick;
    let mut lab = Lab::open("trace", &a.common, DEFAULT_SERVERS)?;
    let models = diskrun::models(&a.disk);
    if models.len() > 1 {
        return Err("trace runs on one disk model: give --disk-emulation one model".into());
    }
    let emu = diskrun::plan_disk(&lab, &a.disk, models[0], if q { 64 } else { 128 })?;
    let mut notes = Vec::new();
    let workloads = match &a.clf {
        Some(log) => vec![clf_workload(log, &lab, &mut notes)?],
        None => specweb_workloads(&lab, &emu, if q { 20_000 } else { 400_000 })?,
    };
    let p = Params {
        connections: a.connections.unwrap_or(if q { 8 } else { 64 }),
        rate: a.rate,
        requests_per_conn: a.requests_per_conn,
        warmup: a.common.warmup.unwrap_or(if q { 0.5 } else { 10.0 }),
        duration: a.common.duration.unwrap_or(if q { 1.0 } else { 20.0 }),
        rounds: a.common.rounds.unwrap_or(1),
    };
    let rows = measure(&mut lab, &emu, &p, &workloads)?;
    diskrun::write_raw(&mut lab, &["workload", "round"], &rows, |r| {
        (vec![r.workload.clone(), r.round.to_string()], &r.cell)
    })?;
    let names: Vec<String> = workloads.iter().map(|w| w.name.clone()).collect();
    let figure = chart(&mut lab, &emu, &p, &rows, &names)?;
    let s = summary(&lab, &emu, &p, &rows, &workloads, &figure);
    if !emu.applied() {
        notes.push(emu.describe());
    }
    let params = json!({"workloads": workloads.iter().map(|w| json!({"name": w.name, "description": w.description, "bytes": w.bytes, "requests": w.urls.len()})).collect::<Vec<_>>(), "connections": p.connections, "rate": p.rate, "requests_per_conn": p.requests_per_conn, "warmup_s": p.warmup, "duration_s": p.duration, "rounds": p.rounds});
    lab.finish(params, Some(json!(emu)), notes, &s)
}

/// The user's access log replayed in order against a file set built to match it.
fn clf_workload(
    log: &std::path::Path,
    lab: &Lab,
    notes: &mut Vec<String>,
) -> Result<Workload, String> {
    let r = replay::build(log, &lab.data_dir, lab.seed)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    if r.requests == 0 {
        return Err(format!(
            "{}: no replayable GET request ({} lines rejected: {})",
            log.display(),
            r.lines_rejected,
            r.first_rejections.join("; ")
        ));
    }
    if r.lines_rejected > 0 {
        eprintln!(
            "[amplab trace] {}: {} lines rejected, first: {}",
            log.display(),
            r.lines_rejected,
            r.first_rejections.join("; ")
        );
    }
    notes.push(format!(
        "access log {}: {}",
        log.display(),
        serde_json::to_string(&r).unwrap_or_default()
    ));
    Ok(Workload {
        name: "access-log".into(),
        description: format!(
            "{} replayed in order ({} GET requests, {} files, {:.1} MiB; {} lines rejected, {} non-GET, {} unusable paths)",
            log.display(),
            r.requests,
            r.files,
            r.bytes as f64 / 1048576.0,
            r.lines_rejected,
            r.skipped_methods,
            r.skipped_paths
        ),
        root: r.root.clone(),
        warm_urls: r.urls.clone(),
        urls: r.urls,
        bytes: r.bytes,
    })
}

/// The Owlnet-like (half the memory limit) and CS-like (4× the limit) SPECweb99-like sets.
fn specweb_workloads(
    lab: &Lab,
    emu: &DiskEmulation,
    trace_len: usize,
) -> Result<Vec<Workload>, String> {
    let mut out = Vec::new();
    for (name, scale, what) in
        [("owlnet-like", 0.5, "small, cache-friendly"), ("cs-like", 4.0, "large, disk-bound")]
    {
        let bytes = (emu.memory_limit_bytes as f64 * scale) as u64;
        let set = specweb::generate(&lab.data_dir, bytes, lab.seed)
            .map_err(|e| format!("cannot write the file set: {e}"))?;
        let path =
            |t: Vec<specweb::Request>| t.iter().map(specweb::Request::path).collect::<Vec<_>>();
        out.push(Workload {
            name: name.into(),
            description: format!(
                "{what}: SPECweb99-like set of {:.0} MiB ({scale}× the memory limit), Zipf trace",
                set.bytes as f64 / 1048576.0
            ),
            root: set.root,
            urls: path(specweb::trace(set.dirs, trace_len, lab.seed)),
            warm_urls: path(specweb::trace(set.dirs, trace_len, lab.seed + 1)),
            bytes: set.bytes,
        });
    }
    Ok(out)
}

/// Every (workload, round, server) cell; the server order rotates each round.
fn measure(
    lab: &mut Lab,
    emu: &DiskEmulation,
    p: &Params,
    workloads: &[Workload],
) -> Result<Vec<Row>, String> {
    let steps = workloads.len() * lab.servers.len() * p.rounds as usize;
    let per_cell = p.warmup + p.duration + 3.0;
    let mut progress = Progress::new(lab.experiment, steps, steps as f64 * per_cell);
    let mut rows = Vec::new();
    for w in workloads {
        let tmp = lab.run.tmp();
        let (warm, measure) =
            (tmp.join(format!("{}-warm.urls", w.name)), tmp.join(format!("{}.urls", w.name)));
        diskrun::write_urls(&warm, &w.warm_urls)?;
        diskrun::write_urls(&measure, &w.urls)?;
        let load = Load {
            warm_urls: warm,
            measure_urls: measure,
            warmup_s: p.warmup,
            duration_s: p.duration,
            connections: p.connections,
            requests_per_conn: Some(p.requests_per_conn),
            rate: p.rate,
            timeout_s: 30.0,
            needs: None,
        };
        for round in 0..p.rounds {
            for spec in lab.order(round) {
                let what = format!("{}: {} (round {}/{})", w.name, spec.label, round + 1, p.rounds);
                progress.step(&what, per_cell);
                let cell = diskrun::run_one(
                    lab,
                    emu,
                    &spec,
                    &w.root,
                    &w.urls[0],
                    &load,
                    "trace",
                    &mut |_| {},
                );
                if let Some(m) = &cell.measurement {
                    progress.note(&format!(
                        "{}: {:.1} Mb/s, {:.0} req/s",
                        spec.label, m.body_mbps, m.rps
                    ));
                }
                if let Some(e) = &cell.error {
                    progress.note(&format!("{}: {e}", spec.label));
                }
                rows.push(Row { workload: w.name.clone(), round, cell });
            }
        }
    }
    Ok(rows)
}

/// A server's median body throughput over the rounds of workload `w` (NaN if none).
fn mbps(rows: &[Row], w: &str, server: &str) -> f64 {
    mbps_spread(rows, w, server).median
}

fn mbps_spread(rows: &[Row], w: &str, server: &str) -> Spread {
    cell_spread(rows, w, server, |c| c.measurement.as_ref().map(|m| m.body_mbps))
}

/// The spread over rounds of `f` of `server`'s cells on workload `w`.
fn cell_spread(
    rows: &[Row],
    w: &str,
    server: &str,
    f: impl Fn(&DiskCell) -> Option<f64>,
) -> Spread {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.workload == w && r.cell.server == server)
        .filter_map(|r| f(&r.cell))
        .collect();
    Spread::of(&v)
}

/// `amplab report`: the figure and summary of a recorded E2 run, from its results.json.
pub fn rebuild(lab: &mut Lab, setup: &serde_json::Value) -> Result<String, String> {
    let q = &setup["parameters"];
    let num = |k: &str| q[k].as_f64().unwrap_or(f64::NAN);
    let p = Params {
        connections: num("connections") as u32,
        rate: q["rate"].as_f64(),
        requests_per_conn: num("requests_per_conn") as u32,
        warmup: num("warmup_s"),
        duration: num("duration_s"),
        rounds: num("rounds") as u32,
    };
    let workloads: Vec<Workload> = q["workloads"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| Workload {
                    name: w["name"].as_str().unwrap_or_default().to_string(),
                    description: w["description"].as_str().unwrap_or_default().to_string(),
                    root: std::path::PathBuf::new(),
                    urls: Vec::new(),
                    warm_urls: Vec::new(),
                    bytes: w["bytes"].as_u64().unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    let emu: DiskEmulation = super::rebuild::parameters(&setup["disk_emulation"])?;
    let (rows, labels) = super::rebuild::disk_rows(&lab.run.path, |r: &mut Row| &mut r.cell)?;
    lab.servers = super::rebuild::specs(&labels);
    let names: Vec<String> = workloads.iter().map(|w| w.name.clone()).collect();
    let figure = chart(lab, &emu, &p, &rows, &names)?;
    Ok(summary(lab, &emu, &p, &rows, &workloads, &figure))
}

/// Throughput per server, a group of bars per workload. Returns the figure's file name.
fn chart(
    lab: &mut Lab,
    emu: &DiskEmulation,
    p: &Params,
    rows: &[Row],
    names: &[String],
) -> Result<String, String> {
    let series = lab
        .servers
        .iter()
        .map(|s| {
            let spreads: Vec<Spread> =
                names.iter().map(|w| mbps_spread(rows, w, &s.label)).collect();
            Bars {
                name: s.label.clone(),
                values: spreads.iter().map(|v| v.median).collect(),
                spread: spreads.iter().map(Spread::range).collect(),
            }
        })
        .collect();
    lab.run
        .write_chart(
            "throughput",
            &Chart {
                title: format!("Trace replay: throughput per server ({})", names.join(", ")),
                subtitle: format!(
                    "{} × {} requests/connection, {} s measured after {} s warm-up; {}",
                    p.load_text(),
                    p.requests_per_conn,
                    p.duration,
                    p.warmup,
                    emu.short()
                ),
                x_label: "workload".into(),
                y_label: "throughput, response bodies (Mb/s)".into(),
                x_scale: Scale::Linear,
                y_scale: Scale::Linear,
                plot: Plot::Bars { categories: names.to_vec(), series },
                note: String::new(),
            },
        )
        .map_err(|e| e.to_string())
}

impl Params {
    /// "64 closed-loop clients" or "100 req/s over 64 connections".
    fn load_text(&self) -> String {
        match self.rate {
            Some(r) => {
                format!("{} req/s (open loop) over {} connections", fmt(r, 0), self.connections)
            }
            None => format!("{} closed-loop clients", self.connections),
        }
    }
}

/// Per workload, a row per server: latency percentiles and the requests left unanswered
/// (medians over rounds; a timeout is a request with no answer within 30 s).
fn latency_section(rows: &[Row], labels: &[String], names: &[String], open_loop: bool) -> String {
    let mut s = format!(
        "\n### Latency{}\n\n",
        if open_loop { " (from each request's intended send time)" } else { "" }
    );
    for w in names {
        let body: Vec<Vec<String>> = labels
            .iter()
            .map(|l| {
                let lat = |pick: fn(&crate::load::Latency) -> f64| {
                    cell_spread(rows, w, l, |c| c.measurement.as_ref().map(|m| pick(&m.latency)))
                        .text(1)
                };
                vec![
                    l.clone(),
                    lat(|x| x.p50),
                    lat(|x| x.p95),
                    lat(|x| x.p99),
                    lat(|x| x.p999),
                    lat(|x| x.max),
                    cell_spread(rows, w, l, |c| Some(c.timeouts as f64)).text(0),
                ]
            })
            .collect();
        s.push_str(&format!("{w}, ms:\n\n"));
        s.push_str(&table(&["server", "p50", "p95", "p99", "p99.9", "max", "unanswered"], &body));
        s.push('\n');
    }
    s
}

/// A row per server, a column per workload: Mb/s, median and the rounds' min–max.
fn throughput_table(rows: &[Row], labels: &[String], names: &[String]) -> String {
    let header: Vec<String> = std::iter::once("server".to_string())
        .chain(names.iter().map(|n| format!("{n} Mb/s")))
        .collect();
    let body: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            std::iter::once(l.clone())
                .chain(names.iter().map(|w| mbps_spread(rows, w, l).text(1)))
                .collect()
        })
        .collect();
    table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &body)
}

/// "SPED does well on the cache-friendly trace and falls behind on the disk-bound one":
/// sped/amped on the second (disk-bound) workload over the first, per round.
fn sped_finding(lab: &Lab, rows: &[Row], labels: &[String], names: &[String]) -> String {
    let mbps = |w: &str, l: &str| mbps(rows, w, l);
    let has = |label: &str| labels.iter().any(|l| l == label);
    if !(names.len() == 2 && has("sped") && has("amped")) {
        return String::new();
    }
    let owl = ratio(mbps(&names[0], "sped"), mbps(&names[0], "amped"));
    let cs = ratio(mbps(&names[1], "sped"), mbps(&names[1], "amped"));
    // Per round: sped/amped on the disk-bound trace over sped/amped on the cached one.
    let rounds = rows.iter().map(|r| r.round + 1).max().unwrap_or(0);
    let in_round = |r: u32, w: &str, l: &str| {
        rows.iter()
            .find(|x| x.round == r && x.workload == w && x.cell.server == l)
            .and_then(|x| x.cell.measurement.as_ref().map(|m| m.body_mbps))
            .unwrap_or(f64::NAN)
    };
    let sped_share = |r: u32, w: &str| ratio(in_round(r, w, "sped"), in_round(r, w, "amped"));
    let per_round: Vec<f64> =
        (0..rounds).map(|r| ratio(sped_share(r, &names[1]), sped_share(r, &names[0]))).collect();
    let j = judge(&per_round, Cmp::Below(0.9), lab.quick);
    format!(
        "- *SPED does well on the cache-friendly trace and falls behind on the disk-bound one*: sped/amped = {} on {}, {} on {} (disk-bound over cached: {}). {}\n",
        fmt(owl, 2),
        names[0],
        fmt(cs, 2),
        names[1],
        fmt(j.spread.median, 2),
        j.text("Holds", "Does not hold here: the disk waits cost every architecture alike")
    )
}

/// A line per workload naming its fastest server, beside the paper's.
fn fastest_lines(rows: &[Row], labels: &[String], names: &[String]) -> String {
    let mut s = String::new();
    for w in names {
        let best = labels
            .iter()
            .filter(|l| mbps(rows, w, l).is_finite())
            .max_by(|a, b| mbps(rows, w, a).total_cmp(&mbps(rows, w, b)));
        s.push_str(&format!(
            "- {w}: fastest is {} (paper: Flash/AMPED fastest on both traces, Apache slowest).\n",
            best.map_or("-", |b| b.as_str())
        ));
    }
    s
}

/// "Who blocked where" over workload `w`'s last round.
fn who_blocked_last_round(rows: &[Row], labels: &[String], w: &str) -> String {
    let last = rows.iter().filter(|r| r.workload == w).map(|r| r.round).max();
    let cell_of = |l: &str| {
        rows.iter()
            .find(|r| r.workload == w && Some(r.round) == last && r.cell.server == l)
            .map(|r| &r.cell)
    };
    super::who_blocked::throughput_section(&format!("{w}, last round"), labels, cell_of, |l| {
        mbps(rows, w, l)
    })
}

/// summary.md: the table and the comparison with the paper.
fn summary(
    lab: &Lab,
    emu: &DiskEmulation,
    p: &Params,
    rows: &[Row],
    workloads: &[Workload],
    figure: &str,
) -> String {
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    let names: Vec<String> = workloads.iter().map(|w| w.name.clone()).collect();
    let workload_text = workloads
        .iter()
        .map(|w| format!("{} — {}", w.name, w.description))
        .collect::<Vec<_>>()
        .join("; ");
    let mut s = lab.summary_head(
        "E2 trace replay (Flash 1999 §6.2, Fig 8)",
        &format!(
            "{workload_text}. {}, {} requests per persistent connection; {} s warm-up on another draw, {} s measured; {} round(s), medians",
            p.load_text(), p.requests_per_conn, p.warmup, p.duration, p.rounds
        ),
    );
    s.push_str(&format!("Disk: {}\n\n", emu.describe()));
    s.push_str(&throughput_table(rows, &labels, &names));
    s.push_str(&if p.rounds > 1 {
        format!("\nMedians over {} rounds with the rounds' min–max in parentheses (the figure's whiskers).\n", p.rounds)
    } else {
        "\nOne round: the noise between rounds was not measured.\n".to_string()
    });
    s.push_str(&latency_section(rows, &labels, &names, p.rate.is_some()));
    s.push_str(&format!("\nFigure: [{figure}]({figure})\n\n## Compared with the paper\n\n"));
    s.push_str(&fastest_lines(rows, &labels, &names));
    s.push_str(&sped_finding(lab, rows, &labels, &names));
    for w in &names {
        s.push_str(&who_blocked_last_round(rows, &labels, w));
    }
    s.push_str(&format!("\nThe data sets total {:.0} MiB; the Rice CS and Owlnet traces are not public, so their shape (small and cache-resident vs large and disk-bound) is what is reproduced, not their numbers.\n", workloads.iter().map(|w| w.bytes).sum::<u64>() as f64 / 1048576.0));
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.cell.error.as_ref().map(|e| format!("{} {}: {e}", r.workload, r.cell.server))
        })
        .collect();
    s.push_str(&failures_section(&failures));
    s
}
