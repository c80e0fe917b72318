//! E4, the DeBox disk-bound static workload (Ruan & Pai 2004 §6.3, Table 7, Fig 11): 1020
//! clients, 5 requests per persistent connection, a fixed request rate of about 90% of the
//! slowest server's capacity, a data set larger than the server's memory. Latency 5% / median /
//! 95% / mean per server, and the latency CDF.
//!
//! Without `--rate`, each server's capacity (closed loop, same clients and data) is measured
//! first, and the rate is 90% of the smallest.

use serde::Serialize;
use serde_json::json;

use super::diskrun::{self, DiskCell, Load};
use super::{Lab, failures_section};
use crate::cli::DiskBoundArgs;
use crate::datasets::specweb;
use crate::diskemu::{DiskEmulation, Method};
use crate::load::Measurement;
use crate::progress::Progress;
use crate::report::csv::{Csv, num};
use crate::report::markdown::table;
use crate::stats::{fmt, median, ratio};
use crate::svg::{Chart, Plot, Scale, Series};

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

/// The run's parameters.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub dataset_bytes: u64,
    pub dirs: u32,
    pub connections: u32,
    pub requests_per_conn: u32,
    pub rate: Option<f64>,
    pub capacity_s: f64,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub rounds: u32,
    pub trace_requests: usize,
}

/// One measured server in one round.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub round: u32,
    pub phase: &'static str,
    pub cell: DiskCell,
}

/// Runs E4 and writes its folder.
pub fn run(a: &DiskBoundArgs) -> Result<std::path::PathBuf, String> {
    let q = a.common.quick;
    let mut lab = Lab::open("disk-bound", &a.common, DEFAULT_SERVERS)?;
    let emu = diskrun::plan_disk(&lab, &a.disk, if q { 64 } else { 128 })?;
    let dataset = a.dataset.unwrap_or(if q { 96 << 20 } else { 2 << 30 });
    let mut p = Params {
        dataset_bytes: dataset,
        dirs: specweb::dirs_for(dataset),
        connections: a.connections.unwrap_or(if q { 20 } else { 1020 }),
        requests_per_conn: a.requests_per_conn,
        rate: a.rate,
        capacity_s: a.common.duration.map_or(if q { 1.0 } else { 20.0 }, |d| d.min(20.0)),
        warmup_s: a.common.warmup.unwrap_or(if q { 0.5 } else { 15.0 }),
        duration_s: a.common.duration.unwrap_or(if q { 1.5 } else { 20.0 }),
        rounds: a.common.rounds.unwrap_or(1),
        trace_requests: if q { 20_000 } else { 400_000 },
    };
    eprintln!(
        "[amplab disk-bound] file set: {} directories (~{} MiB) under {}",
        p.dirs,
        (u64::from(p.dirs) * specweb::dir_bytes()) >> 20,
        lab.data_dir.display()
    );
    let set = specweb::generate(&lab.data_dir, dataset, lab.seed)
        .map_err(|e| format!("cannot write the file set: {e}"))?;
    let tmp = lab.run.tmp();
    let (warm, measure) = (tmp.join("warm.urls"), tmp.join("measure.urls"));
    let measured = specweb::trace(set.dirs, p.trace_requests, lab.seed);
    let warming = specweb::trace(set.dirs, p.trace_requests, lab.seed + 1);
    specweb::write_urls(&measure, &measured).map_err(|e| e.to_string())?;
    specweb::write_urls(&warm, &warming).map_err(|e| e.to_string())?;
    let probe = measured[0].path();
    let per = |secs: f64| p.warmup_s + secs + 3.0;
    let passes = if p.rate.is_none() { 2 } else { 1 };
    let steps = lab.servers.len() * (p.rounds as usize) * passes;
    let mut progress = Progress::new(lab.experiment, steps, steps as f64 * per(p.duration_s));
    let mut rows = Vec::new();
    let mut load = Load {
        warm_urls: warm,
        measure_urls: measure,
        warmup_s: p.warmup_s,
        duration_s: p.capacity_s,
        connections: p.connections,
        requests_per_conn: Some(p.requests_per_conn),
        rate: None,
        timeout_s: 30.0,
    };
    if p.rate.is_none() {
        for spec in lab.servers.clone() {
            progress.step(
                &format!("capacity of {} (closed loop, {} clients)", spec.label, p.connections),
                per(p.capacity_s),
            );
            let cell = diskrun::run_one(&lab, &emu, &spec, &set.root, &probe, &load, "cap");
            report(&progress, &cell);
            rows.push(Row { round: 0, phase: "capacity", cell });
        }
        let slowest = rows
            .iter()
            .filter_map(|r| r.cell.measurement.as_ref().map(|m| m.rps))
            .filter(|r| *r > 0.0)
            .fold(f64::INFINITY, f64::min);
        if !slowest.is_finite() {
            return Err(
                "no server's capacity could be measured (see the logs in the run folder)".into()
            );
        }
        p.rate = Some((slowest * 0.9).max(1.0).round());
        progress.note(&format!(
            "fixed rate: {} req/s (90% of the slowest capacity, {slowest:.0} req/s)",
            p.rate.unwrap_or(0.0)
        ));
    }
    load.rate = p.rate;
    load.duration_s = p.duration_s;
    for round in 0..p.rounds {
        for spec in lab.order(round) {
            progress.step(
                &format!(
                    "round {}/{}: {} at {} req/s",
                    round + 1,
                    p.rounds,
                    spec.label,
                    p.rate.unwrap_or(0.0)
                ),
                per(p.duration_s),
            );
            let cell = diskrun::run_one(&lab, &emu, &spec, &set.root, &probe, &load, "lat");
            report(&progress, &cell);
            rows.push(Row { round, phase: "fixed-rate", cell });
        }
    }
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    let figures = write_outputs(&mut lab, &p, &rows, &labels, &emu.short())?;
    // ampload takes the lines in order: the warm-up sends the first rate × warm-up of its
    // list, the measured window the first rate × duration of its own.
    let sent = |secs: f64, of: &[specweb::Request]| {
        (p.rate.unwrap_or(0.0) * secs).round().clamp(0.0, of.len() as f64) as usize
    };
    let cold = specweb::first_time_share(
        &warming[..sent(p.warmup_s, &warming)],
        &measured[..sent(p.duration_s, &measured)],
    );
    let traffic = Traffic { mean_bytes: specweb::mean_bytes(&measured), cold };
    let summary = summary(&lab, &p, &rows, &labels, &figures, &emu, &traffic);
    let notes = if emu.applied() { Vec::new() } else { vec![emu.describe()] };
    lab.finish(json!(p), Some(json!(emu)), notes, &summary)
}

/// What the measured requests ask for.
struct Traffic {
    /// Mean response body, bytes.
    mean_bytes: f64,
    /// Share of measured requests for a file not requested before in the server's run.
    cold: f64,
}

/// A statistic of a measurement.
type Stat = fn(&Measurement) -> f64;

fn report(progress: &Progress, cell: &DiskCell) {
    if let Some(m) = &cell.measurement {
        progress.note(&format!(
            "{}: {:.0} req/s, p50 {:.2} ms, p95 {:.1} ms, mean {:.1} ms",
            cell.server, m.rps, m.latency.p50, m.latency.p95, m.latency.mean
        ));
    }
    if let Some(e) = &cell.error {
        progress.note(&format!("{}: {e}", cell.server));
    }
}

/// Median over rounds of a statistic of the fixed-rate rows of `server`.
fn med(rows: &[Row], server: &str, f: Stat) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.phase == "fixed-rate" && r.cell.server == server)
        .filter_map(|r| r.cell.measurement.as_ref().map(f))
        .collect();
    median(&v)
}

/// Disk reads per second during the measured fixed-rate phase (median over rounds).
fn measured_reads_per_s(rows: &[Row], server: &str, duration_s: f64) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.phase == "fixed-rate" && r.cell.server == server)
        .filter_map(|r| r.cell.measured_disk_reads.map(|n| n as f64 / duration_s))
        .collect();
    median(&v)
}

fn capacity(rows: &[Row], server: &str) -> f64 {
    rows.iter()
        .find(|r| r.phase == "capacity" && r.cell.server == server)
        .and_then(|r| r.cell.measurement.as_ref())
        .map_or(f64::NAN, |m| m.rps)
}

fn write_outputs(
    lab: &mut Lab,
    p: &Params,
    rows: &[Row],
    labels: &[String],
    disk: &str,
) -> Result<Vec<String>, String> {
    let io = |e: std::io::Error| e.to_string();
    let mut csv = Csv::new(&[
        "round",
        "phase",
        "server",
        "requests",
        "ok",
        "errors",
        "rps",
        "body_mbps",
        "p5_ms",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "mean_ms",
        "max_ms",
        "disk_reads",
        "disk_reads_with_warmup",
        "disk_busy",
        "memory_max_mib",
        "error",
    ]);
    for r in rows {
        let m = r.cell.measurement.clone().unwrap_or_default();
        let cg = r.cell.cgroup.clone().unwrap_or_default();
        let l = &m.latency;
        csv.row(vec![
            r.round.to_string(),
            r.phase.into(),
            r.cell.server.clone(),
            m.requests.to_string(),
            m.ok.to_string(),
            m.errors.to_string(),
            num(m.rps),
            num(m.body_mbps),
            num(l.p5),
            num(l.p50),
            num(l.p90),
            num(l.p95),
            num(l.p99),
            num(l.mean),
            num(l.max),
            r.cell.measured_disk_reads.map_or(String::new(), |n| n.to_string()),
            r.cell.disk_reads_with_warmup().map_or(String::new(), |n| n.to_string()),
            r.cell.measured_disk_busy.map_or(String::new(), num),
            if r.cell.cgroup.is_some() {
                num(cg.memory_max_usage_bytes as f64 / 1048576.0)
            } else {
                String::new()
            },
            r.cell.error.clone().unwrap_or_default(),
        ]);
    }
    lab.run.write("results.csv", &csv.render()).map_err(io)?;
    lab.run.write_json("results.json", &rows).map_err(io)?;
    let rate = p.rate.unwrap_or(0.0);
    let subtitle = format!(
        "SPECweb99-like set ~{} MiB, Zipf trace, {} req/s fixed, {} clients × {} requests/connection; {}",
        (u64::from(p.dirs) * crate::datasets::specweb::dir_bytes()) >> 20,
        rate,
        p.connections,
        p.requests_per_conn,
        disk
    );
    let cdf: Vec<Series> = labels
        .iter()
        .map(|l| {
            let m = rows
                .iter()
                .rev()
                .find(|r| r.phase == "fixed-rate" && &r.cell.server == l)
                .and_then(|r| r.cell.measurement.clone());
            Series {
                name: l.clone(),
                points: m
                    .map(|m| m.latency.cdf_points().into_iter().map(|(f, v)| (v, f)).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let mut figures = vec![
        lab.run
            .write_chart(
                "latency-cdf",
                &Chart {
                    title: "Disk-bound static workload: response-time CDF".into(),
                    subtitle: subtitle.clone(),
                    x_label: "response time (ms, log scale)".into(),
                    y_label: "fraction of requests answered within".into(),
                    x_scale: Scale::Log,
                    y_scale: Scale::Linear,
                    plot: Plot::Lines(cdf),
                },
            )
            .map_err(io)?,
    ];
    let stats: [(&str, Stat); 4] = [
        ("5%", |m| m.latency.p5),
        ("median", |m| m.latency.p50),
        ("95%", |m| m.latency.p95),
        ("mean", |m| m.latency.mean),
    ];
    let series = labels
        .iter()
        .map(|l| (l.clone(), stats.iter().map(|(_, f)| med(rows, l, *f)).collect()))
        .collect();
    figures.push(
        lab.run
            .write_chart(
                "latency-summary",
                &Chart {
                    title: "Disk-bound static workload: latency 5% / median / 95% / mean (Table 7)"
                        .into(),
                    subtitle,
                    x_label: "statistic".into(),
                    y_label: "response time (ms, log scale)".into(),
                    x_scale: Scale::Linear,
                    y_scale: Scale::Log,
                    plot: Plot::Bars {
                        categories: stats.iter().map(|(n, _)| n.to_string()).collect(),
                        series,
                    },
                },
            )
            .map_err(io)?,
    );
    Ok(figures)
}

/// Fraction of the slow disk's arm time busy while measured (median over rounds).
fn measured_busy(rows: &[Row], server: &str) -> f64 {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.phase == "fixed-rate" && r.cell.server == server)
        .filter_map(|r| r.cell.measured_disk_busy)
        .collect();
    median(&v)
}

fn summary(
    lab: &Lab,
    p: &Params,
    rows: &[Row],
    labels: &[String],
    figures: &[String],
    emu: &DiskEmulation,
    traffic: &Traffic,
) -> String {
    let disk = &emu.describe();
    let read_iops = emu.read_iops.filter(|_| emu.applied());
    let fuse = emu.method == Method::Fuse;
    let workload = format!(
        "SPECweb99-like file set of {} directories (~{} MiB), Zipf (α = 1) trace, mean response {:.1} KB; ampload open loop at {} req/s fixed over {} persistent connections, {} requests per connection, latency from each request's intended send time; {} s warm-up (another draw of the trace), {} s measured, {} round(s)",
        p.dirs,
        (u64::from(p.dirs) * specweb::dir_bytes()) >> 20,
        traffic.mean_bytes / 1000.0,
        p.rate.unwrap_or(0.0),
        p.connections,
        p.requests_per_conn,
        p.warmup_s,
        p.duration_s,
        p.rounds
    );
    let mut s = lab
        .summary_head("E4 disk-bound static workload (DeBox 2004, Table 7 and Fig 11)", &workload);
    s.push_str(&format!("Disk: {disk}\n\n"));
    if rows.iter().any(|r| r.phase == "capacity") {
        s.push_str("The rate is 90% of the slowest server's capacity, measured first with the same clients in closed loop.\n\n");
    }
    s.push_str(&format!(
        "Cold by construction: {:.1} % of the measured requests ask for a file that no request of the server's run (warm-up or earlier in the window) asked for before; whatever the server, each of those waits for the disk{}.\n\n",
        traffic.cold * 100.0,
        if traffic.cold > 0.05 {
            ", so every server's 95th percentile includes a disk access"
        } else {
            ""
        }
    ));
    let rows_md: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            let mut row = vec![
                l.clone(),
                fmt(med(rows, l, |m| m.latency.p5), 2),
                fmt(med(rows, l, |m| m.latency.p50), 2),
                fmt(med(rows, l, |m| m.latency.p95), 1),
                fmt(med(rows, l, |m| m.latency.mean), 1),
                fmt(med(rows, l, |m| m.latency.p99), 1),
                fmt(med(rows, l, |m| m.rps), 0),
                fmt(capacity(rows, l), 0),
                fmt(med(rows, l, |m| m.errors as f64), 0),
                fmt(measured_reads_per_s(rows, l, p.duration_s), 0),
            ];
            if fuse {
                row.push(fmt(measured_busy(rows, l) * 100.0, 0));
            }
            row
        })
        .collect();
    let mut header = vec![
        "server",
        "5% ms",
        "median ms",
        "95% ms",
        "mean ms",
        "99% ms",
        "req/s",
        "capacity req/s",
        "errors",
        "disk reads/s",
    ];
    if fuse {
        header.push("disk busy %");
    }
    s.push_str(&table(&header, &rows_md));
    if fuse {
        s.push_str("\nDisk reads/s are the READ requests that reached the FUSE slow disk while measured (page-cache misses, up to 128 KiB each); disk busy % is the share of its arm time spent serving them and lookups (near 100 % the emulated disk is saturated and queueing dominates).\n");
    }
    if let Some(iops) = read_iops {
        let busiest =
            labels.iter().map(|l| measured_reads_per_s(rows, l, p.duration_s)).fold(0.0, f64::max);
        if busiest < 0.8 * f64::from(iops) {
            s.push_str(&format!(
                "\n**Below the throttle**: no server issued more than {busiest:.0} disk reads/s while measured, under the {iops} reads/s throttle. The blkio throttle delays reads only above its rate; below it a miss costs this machine's fast disk, so these latencies show no disk-bound tail. Raise --rate or --dataset, or lower --read-iops, to load the emulated disk.\n"
            ));
        }
    }
    s.push_str("\nPaper (Table 7, FreeBSD, 3.3 GB, 2300 req/s), ms 5% / median / 95% / mean: New Flash 0.37 / 0.79 / 7.45 / 7.56; New Flash 4p 0.38 / 0.82 / 7.51 / 7.72; Old Flash 3.36 / 37.59 / 326.40 / 92.37; Old Flash 4p 7.05 / 142.65 / 1924.42 / 420.85; Apache 150p 0.70 / 6.64 / 1599.50 / 360.62; Apache 300p 0.78 / 124.98 / 2201.63 / 545.93.\n\n");
    s.push_str("Figures: ");
    s.push_str(&figures.iter().map(|f| format!("[{f}]({f})")).collect::<Vec<_>>().join(", "));
    s.push_str(" (the CDF passes through the percentiles ampload reports: min, 5, 50, 90, 95, 99, 99.9 %, max).\n\n## Compared with the paper\n\n");
    s.push_str(&comparison(rows, labels, emu));
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.cell.error.as_ref().map(|e| format!("{} {}: {e}", r.phase, r.cell.server))
        })
        .collect();
    s.push_str(&failures_section(&failures));
    s
}

fn comparison(rows: &[Row], labels: &[String], emu: &DiskEmulation) -> String {
    let has = |l: &str| labels.iter().any(|x| x == l);
    let mut out = String::new();
    if !emu.applied() {
        out.push_str("Without the emulated disk nothing here is disk-bound, so the paper's comparison does not apply to these numbers; they show each server's latency at this rate on a cached data set.\n\n");
    }
    if has("amped") && has("sped") {
        let m = ratio(med(rows, "sped", |m| m.latency.p50), med(rows, "amped", |m| m.latency.p50));
        let mean =
            ratio(med(rows, "sped", |m| m.latency.mean), med(rows, "amped", |m| m.latency.mean));
        out.push_str(&format!(
            "- *New Flash cuts old Flash's latency (47× median, 12× mean)*: sped/amped = {}× median, {}× mean. {}\n",
            fmt(m, 1),
            fmt(mean, 1),
            single_verdict(mean >= 2.0, "Holds in direction: sped blocks its only loop on every miss, amped's helpers keep the loop answering cached requests", "Does not hold here")
        ));
    }
    if has("amped") && has("amped:instances=2") {
        let r = ratio(
            med(rows, "amped:instances=2", |m| m.latency.mean),
            med(rows, "amped", |m| m.latency.mean),
        );
        out.push_str(&format!("- *More instances do not hurt New Flash (7.56 vs 7.72 ms mean)*: amped:instances=2 / amped mean = {}.\n", fmt(r, 2)));
    }
    for l in labels.iter().filter(|l| l.starts_with("apache-prefork")) {
        if has("amped") {
            let r = ratio(med(rows, l, |m| m.latency.p95), med(rows, "amped", |m| m.latency.p95));
            out.push_str(&format!("- *Apache prefork has second-long tails (95% 1.6–2.2 s)*: {l} 95% = {} ms, {}× amped's.\n", fmt(med(rows, l, |m| m.latency.p95), 1), fmt(r, 1)));
        }
    }
    if has("nginx") && has("nginx-aio") {
        let r =
            ratio(med(rows, "nginx", |m| m.latency.p95), med(rows, "nginx-aio", |m| m.latency.p95));
        out.push_str(&format!("- nginx without / with `aio threads`: 95% ratio {} (thread-pool reads are nginx's answer to the same blocking problem AMPED's helpers solve).\n", fmt(r, 1)));
    }
    out.push_str(&format!(
        "\nWhy modern Linux differs: sendfile on Linux still blocks on a page-cache miss, and so does read(); \
         an event loop without helpers (sped, nginx, lighttpd, h2o) stalls every connection while one miss is \
         served, exactly the 2004 problem. What changed is the cost of a miss (emulated here: {}) and the \
         kernel's readahead and page-cache policy inside the memory cgroup.\n",
        emu.short()
    ));
    out
}

fn single_verdict(ok: bool, yes: &str, no: &str) -> String {
    super::single_file::verdict(ok, yes, no)
}
