//! E4's outputs: results.csv and results.json over every model, and per disk model the
//! figures (latency against offered load, the CDF and Table 7's statistics at the highest
//! rate, latency over time from a cold start) and a section of summary.md.

use super::standing::{self, Entry, Standing};
use super::{ModelRun, Params, Phase, Row, TraceFacts};
use crate::datasets::specweb;
use crate::diskemu::Method;
use crate::experiments::diskrun::{CELL_COLUMNS, DiskCell, WindowSource};
use crate::experiments::who_blocked;
use crate::experiments::{Lab, failures_section};
use crate::load::Measurement;
use crate::report::csv::{Csv, num};
use crate::report::markdown::table;
use crate::stats::{Spread, cdf_note, fmt, median, ratio, spread, whiskers_note};
use crate::svg::{Bars, Chart, Plot, Scale, Series};
use crate::verdict::{Cmp, judge, ratios};

/// A statistic of a measurement.
type Stat = fn(&Measurement) -> f64;

/// Writes the figures and returns summary.md's text (the same from a run and from `amplab
/// report`).
pub fn outputs(
    lab: &mut Lab,
    p: &Params,
    facts: &TraceFacts,
    runs: &[ModelRun],
) -> Result<String, String> {
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    // amped is compared with the peers, or without any with every other server.
    let mut peers: Vec<bool> = lab.servers.iter().map(|s| !s.is_amped()).collect();
    if !peers.contains(&true) {
        peers = labels.iter().map(|l| l != "amped").collect();
    }
    let workload = format!(
        "SPECweb99-like file set of {} directories (~{} MiB{}), {}, mean response {:.1} KB; ampload open loop at fixed rates over {} persistent connections, {} requests per connection, latency from each request's intended send time; {} s warm-up (another draw of the trace), {} s measured, {} round(s) per rate; disk models {}",
        p.dirs,
        (u64::from(p.dirs) * specweb::dir_bytes()) >> 20,
        if facts.large_files.is_empty() {
            String::new()
        } else {
            format!(
                " + {} large files of {:.0}-{:.0} MB",
                facts.large_files.len(),
                facts.large_files.iter().min().copied().unwrap_or(0) as f64 / 1e6,
                facts.large_files.iter().max().copied().unwrap_or(0) as f64 / 1e6
            )
        },
        p.shape.describe(),
        facts.mean_response_bytes / 1000.0,
        p.connections,
        p.requests_per_conn,
        p.warmup_s,
        p.duration_s,
        p.rounds,
        runs.iter().map(|r| r.emu.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let mut s = lab
        .summary_head("E4 disk-bound static workload (DeBox 2004, Table 7 and Fig 11)", &workload);
    s.push_str("Per model: percentiles and mean (medians over rounds, min–max in brackets when there are several), **timeouts** (no answer within 30 s), **disk reads/s** and **MB read/s** while measured, **read amplification** (bytes read from the disk over the warm-up and the measurement ÷ bytes of the distinct files those requests asked for: 1.00 = every needed byte read once; FUSE models count the slow disk's own READ bytes, iops the blkio cgroup's io_service_bytes, which include metadata blocks and readahead), **page floor** (the least read amplification a server reading whole pages can reach on that run: the bytes its distinct files take rounded up to whole 4 KiB pages ÷ their bytes; small files put it above 1, and a read amplification near it is as good as reads of whole pages get), **disk busy %** (FUSE: the share of arm time serving requests; iops: reads/s ÷ the throttle, or with `--read-mbps` bytes/s ÷ the byte cap when that is higher).\n\n");
    s.push_str("Paper (Table 7, FreeBSD, 3.3 GB, 2300 req/s), ms 5% / median / 95% / mean: New Flash 0.37 / 0.79 / 7.45 / 7.56; New Flash 4p 0.38 / 0.82 / 7.51 / 7.72; Old Flash 3.36 / 37.59 / 326.40 / 92.37; Old Flash 4p 7.05 / 142.65 / 1924.42 / 420.85; Apache 150p 0.70 / 6.64 / 1599.50 / 360.62; Apache 300p 0.78 / 124.98 / 2201.63 / 545.93.\n\n");
    for run in runs {
        let figures = figures(lab, p, run, &labels)?;
        s.push_str(&section(run, &labels, &peers, &figures, p, lab.quick));
    }
    let failures: Vec<String> = runs
        .iter()
        .flat_map(|run| &run.rows)
        .filter_map(|r| {
            let rate = r.rate.map_or(String::new(), |x| format!(" at {x} req/s"));
            r.cell.error.as_ref().map(|e| {
                format!("{} {}{rate} {}: {e}", r.cell.model, r.phase.name(), r.cell.server)
            })
        })
        .collect();
    s.push_str(&failures_section(&failures));
    Ok(s)
}

/// results.csv (a row per cell, and per window of a windowed run) and results.json.
pub fn write_raw(lab: &mut Lab, runs: &[ModelRun]) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let keys = ["round", "phase", "rate", "window", "t_start_s", "t_end_s"];
    let header: Vec<&str> = keys.iter().copied().chain(CELL_COLUMNS).collect();
    let mut csv = Csv::new(&header);
    let rows: Vec<&Row> = runs.iter().flat_map(|r| &r.rows).collect();
    for r in &rows {
        let key = |window: String, from: String, to: String| {
            vec![
                r.round.to_string(),
                r.phase.name().to_string(),
                r.rate.map_or(String::new(), num),
                window,
                from,
                to,
            ]
        };
        if r.cell.windows.is_empty() {
            let mut fields = key(String::new(), String::new(), String::new());
            fields.extend(r.cell.csv_fields());
            csv.row(fields);
        }
        for (i, win) in r.cell.windows.iter().enumerate() {
            let mut fields = key((i + 1).to_string(), num(win.start_s), num(win.end_s));
            fields.extend(r.cell.window_fields(i));
            csv.row(fields);
        }
    }
    lab.run.write("results.csv", &csv.render()).map_err(io)?;
    lab.run.write_json("results.json", &rows).map_err(io)
}

/// The fixed-rate cells of `server` at `rate`, one per round.
fn cells<'a>(run: &'a ModelRun, server: &str, rate: f64) -> Vec<&'a DiskCell> {
    run.rows
        .iter()
        .filter(|r| r.phase == Phase::FixedRate && r.rate == Some(rate) && r.cell.server == server)
        .map(|r| &r.cell)
        .collect()
}

/// Values of `f` over the rounds of `server` at `rate`.
fn values(run: &ModelRun, server: &str, rate: f64, f: Stat) -> Vec<f64> {
    cells(run, server, rate).iter().filter_map(|c| c.measurement.as_ref().map(f)).collect()
}

fn med(run: &ModelRun, server: &str, rate: f64, f: Stat) -> f64 {
    median(&values(run, server, rate, f))
}

/// Median over rounds of a cell quantity.
fn med_cell(run: &ModelRun, server: &str, rate: f64, f: fn(&DiskCell) -> Option<f64>) -> f64 {
    let v: Vec<f64> = cells(run, server, rate).into_iter().filter_map(f).collect();
    median(&v)
}

fn capacity(run: &ModelRun, server: &str) -> f64 {
    run.rows
        .iter()
        .find(|r| r.phase == Phase::Capacity && r.cell.server == server)
        .and_then(|r| r.cell.measurement.as_ref())
        .map_or(f64::NAN, |m| m.rps)
}

fn top_rate(run: &ModelRun) -> Option<f64> {
    run.rates.iter().copied().max_by(|a, b| a.total_cmp(b))
}

/// The latency figures of one disk model: what they share.
struct LatencyFigures<'a> {
    p: &'a Params,
    run: &'a ModelRun,
    labels: &'a [String],
    /// The workload, and the disk model's short description.
    subtitle: &'a str,
}

impl LatencyFigures<'_> {
    /// `long` latency against offered load: a line per server, medians over rounds.
    fn vs_rate(&self, long: &str, f: Stat) -> Chart {
        let (p, run, labels, subtitle) = (self.p, self.run, self.labels, self.subtitle);
        let model = &run.emu.name;
        let mut series = Vec::new();
        for l in labels {
            let spreads: Vec<(f64, Spread)> =
                run.rates.iter().map(|&r| (r, Spread::of(&values(run, l, r, f)))).collect();
            series.push(with_spread(l, &spreads));
        }
        Chart {
            title: format!("Disk-bound workload on {model}: {long} latency vs offered load"),
            subtitle: subtitle.to_string(),
            x_label: "offered load (requests/s)".into(),
            y_label: format!("{long} response time (ms, log scale)"),
            x_scale: Scale::Span,
            y_scale: Scale::Log,
            plot: Plot::Lines(series),
            note: whiskers_note(p.rounds, "rate"),
        }
    }

    /// `long` latency over time from a cold start, window by window; `None` when no server ran
    /// the windows.
    fn over_time(&self, long: &str, f: Stat) -> Option<Chart> {
        let (p, run, labels, subtitle) = (self.p, self.run, self.labels, self.subtitle);
        let model = &run.emu.name;
        let mut series = Vec::new();
        for l in labels {
            let Some(first) = window_cells(run, l).first().copied() else { continue };
            let spreads: Vec<(f64, Spread)> = (0..first.windows.len())
                .map(|i| (first.windows[i].end_s, Spread::of(&window_values(run, l, i, f))))
                .collect();
            series.push(with_spread(l, &spreads));
        }
        if series.is_empty() {
            return None;
        }
        Some(Chart {
            title: format!(
                "Disk-bound workload on {model}: {long} latency over time from a cold start"
            ),
            subtitle: format!(
                "{} req/s from the moment the page cache was dropped, {} s windows{}; {subtitle}",
                top_rate(run).unwrap_or(0.0),
                p.window_s.unwrap_or(0.0),
                match p.windows_from {
                    WindowSource::OneRun => " of one ampload run (requests by due time)",
                    WindowSource::SeparateRuns => ", one ampload run each",
                }
            ),
            x_label: "end of window (s since the cold start)".into(),
            y_label: format!("{long} response time (ms, log scale)"),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            plot: Plot::Lines(series),
            note: whiskers_note(p.rounds, "window"),
        })
    }
}

/// The model's figures; returns their file names.
fn figures(
    lab: &mut Lab,
    p: &Params,
    run: &ModelRun,
    labels: &[String],
) -> Result<Vec<String>, String> {
    let io = |e: std::io::Error| e.to_string();
    let model = &run.emu.name;
    let subtitle = format!(
        "SPECweb99-like set ~{} MiB, {}; {} clients × {} requests/connection; {}",
        (u64::from(p.dirs) * specweb::dir_bytes()) >> 20,
        p.shape.describe(),
        p.connections,
        p.requests_per_conn,
        run.emu.short()
    );
    let figures = LatencyFigures { p, run, labels, subtitle: &subtitle };
    let mut out = Vec::new();
    let stats: [(&str, &str, Stat); 3] = [
        ("p50", "median", |m| m.latency.p50),
        ("p95", "95th percentile", |m| m.latency.p95),
        ("mean", "mean", |m| m.latency.mean),
    ];
    for (short, long, f) in stats {
        let chart = figures.vs_rate(long, f);
        out.push(
            lab.run.write_chart(&format!("latency-vs-rate-{short}-{model}"), &chart).map_err(io)?,
        );
    }
    if let Some(top) = top_rate(run) {
        out.extend(top_rate_figures(lab, run, labels, (top, p.rounds), &subtitle)?);
    }
    for (short, long, f) in [("p95", "95th percentile", stats[1].2), ("mean", "mean", stats[2].2)] {
        if let Some(chart) = figures.over_time(long, f) {
            out.push(
                lab.run
                    .write_chart(&format!("latency-over-time-{short}-{model}"), &chart)
                    .map_err(io)?,
            );
        }
    }
    Ok(out)
}

/// A server's line through the medians over rounds, with their min–max as whiskers.
fn with_spread(server: &str, points: &[(f64, Spread)]) -> Series {
    Series {
        name: server.to_string(),
        points: points.iter().map(|(x, s)| (*x, s.median)).collect(),
        spread: points.iter().map(|(_, s)| s.range()).collect(),
    }
}

/// The CDF and Table 7's statistics at the highest rate.
fn top_rate_figures(
    lab: &mut Lab,
    run: &ModelRun,
    labels: &[String],
    (top, rounds): (f64, u32),
    subtitle: &str,
) -> Result<Vec<String>, String> {
    let subtitle = format!("{top} req/s; {subtitle}");
    let cdf = cdf_figure(lab, run, labels, top, subtitle.clone())?;
    let bars = table7_figure(lab, run, labels, (top, rounds), subtitle)?;
    Ok(vec![cdf, bars])
}

/// The response-time CDF of each server at `top` req/s (its last round).
fn cdf_figure(
    lab: &mut Lab,
    run: &ModelRun,
    labels: &[String],
    top: f64,
    subtitle: String,
) -> Result<String, String> {
    let model = &run.emu.name;
    let measured = cdf_measured(run, labels, top);
    let cdf: Vec<Series> = labels
        .iter()
        .map(|l| {
            let m = cdf_cell(run, l, top);
            Series::new(l.clone(), m.map_or(Vec::new(), |m| m.cdf().0))
        })
        .collect();
    let title = format!(
        "Disk-bound workload on {model}: response-time CDF{}",
        if measured { "" } else { " (through 8 percentiles only)" }
    );
    let chart = Chart::latency_cdf(title, subtitle, cdf, cdf_note(measured));
    lab.run.write_chart(&format!("latency-cdf-{model}"), &chart).map_err(|e| e.to_string())
}

/// Table 7's statistics (5 %, median, 95 %, mean) of each server at `top` req/s as bars:
/// medians over the rounds with their min–max.
fn table7_figure(
    lab: &mut Lab,
    run: &ModelRun,
    labels: &[String],
    (top, rounds): (f64, u32),
    subtitle: String,
) -> Result<String, String> {
    let model = &run.emu.name;
    let stats: [(&str, Stat); 4] = [
        ("5%", |m| m.latency.p5),
        ("median", |m| m.latency.p50),
        ("95%", |m| m.latency.p95),
        ("mean", |m| m.latency.mean),
    ];
    let series = labels
        .iter()
        .map(|l| {
            let spreads: Vec<Spread> =
                stats.iter().map(|(_, f)| Spread::of(&values(run, l, top, *f))).collect();
            Bars {
                name: l.clone(),
                values: spreads.iter().map(|s| s.median).collect(),
                spread: spreads.iter().map(Spread::range).collect(),
            }
        })
        .collect();
    let chart = Chart {
        title: format!(
            "Disk-bound workload on {model}: latency 5% / median / 95% / mean (Table 7)"
        ),
        subtitle,
        x_label: "statistic".into(),
        y_label: "response time (ms, log scale)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        plot: Plot::Bars { categories: stats.iter().map(|(n, _)| n.to_string()).collect(), series },
        note: whiskers_note(rounds, "bar"),
    };
    lab.run.write_chart(&format!("latency-summary-{model}"), &chart).map_err(|e| e.to_string())
}

/// The measurement whose CDF is drawn for `server` at `rate`: its last round's.
fn cdf_cell<'a>(run: &'a ModelRun, server: &str, rate: f64) -> Option<&'a Measurement> {
    cells(run, server, rate).last().and_then(|c| c.measurement.as_ref())
}

/// Whether every CDF drawn at `rate` is a measured histogram (runs before ampload exported
/// one have only its percentiles).
fn cdf_measured(run: &ModelRun, labels: &[String], rate: f64) -> bool {
    labels.iter().filter_map(|l| cdf_cell(run, l, rate)).all(|m| m.cdf().1)
}

/// The standing of every server at `rate`.
fn rate_standing(run: &ModelRun, labels: &[String], peers: &[bool], rate: f64) -> Option<Standing> {
    let entries: Vec<Entry> = labels
        .iter()
        .zip(peers)
        .map(|(l, &peer)| Entry {
            server: l.clone(),
            peer,
            p95: med(run, l, rate, |m| m.latency.p95),
            mean: med(run, l, rate, |m| m.latency.mean),
        })
        .collect();
    standing::standing(&entries, "amped")
}

/// One line about a standing.
fn standing_line(what: &str, s: &Standing) -> String {
    let ratio = |r: &Option<(String, f64)>| {
        r.as_ref().map_or("-".to_string(), |(peer, v)| format!("{}× ({peer})", fmt(*v, 1)))
    };
    format!(
        "- {what}: lowest 95% {} ({} ms), lowest mean {} ({} ms); best peer ÷ amped (above 1: amped lower): 95% {}, mean {}{}\n",
        s.lowest_p95.0,
        fmt(s.lowest_p95.1, 1),
        s.lowest_mean.0,
        fmt(s.lowest_mean.1, 1),
        ratio(&s.p95_ratio),
        ratio(&s.mean_ratio),
        if s.amped_ahead { "; amped below every peer in both" } else { "" }
    )
}

/// The claim line over a list of cells (rates or windows).
fn claim(kind: &str, cells: &[(String, Option<Standing>)]) -> String {
    if cells.iter().all(|(_, s)| s.as_ref().is_none_or(|s| s.p95_ratio.is_none())) {
        return String::new();
    }
    match standing::first_break(cells) {
        None => format!(
            "**amped's default has a 95% and mean at most every peer's at every {kind}.**\n"
        ),
        Some(at) => format!(
            "**The claim \"amped's default has a 95% and mean at most every peer's\" stops holding at {at}** (first {kind} where it does not).\n"
        ),
    }
}

/// One model's section of summary.md.
fn section(
    run: &ModelRun,
    labels: &[String],
    peers: &[bool],
    figures: &[String],
    p: &Params,
    quick: bool,
) -> String {
    let emu = &run.emu;
    let mut s = format!("## Disk model {}\n\nDisk: {}\n\n", emu.name, emu.describe());
    s.push_str(&rates_part(run, labels));
    s.push_str(&per_rate_part(run, labels, peers));
    s.push_str(&below_throttle(run));
    s.push_str(&windows_part(run, labels, peers, p));
    s.push_str(&figures_line(run, labels, figures));
    if let Some(top) = top_rate(run) {
        s.push_str(&format!("### Compared with the paper ({top} req/s)\n\n"));
        s.push_str(&comparison(run, labels, top, quick));
    }
    s.push_str(&who_blocked(run, labels));
    s
}

/// The rates and where they came from, with each server's capacity when they were derived
/// from the capacities.
fn rates_part(run: &ModelRun, labels: &[String]) -> String {
    let mut s = match &run.reference {
        Some((name, cap)) => format!(
            "Rates: {} req/s, 40 % to 90 % of {name}'s capacity here ({cap:.0} req/s: the best peer's, or without peers the best other server's; each server's capacity was measured first, closed loop, same clients).\n\n",
            run.rates.iter().map(|r| fmt(*r, 0)).collect::<Vec<_>>().join(", ")
        ),
        None => format!(
            "Rates: {} req/s (given).\n\n",
            run.rates.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    if run.reference.is_some() {
        let caps: Vec<Vec<String>> =
            labels.iter().map(|l| vec![l.clone(), fmt(capacity(run, l), 0)]).collect();
        s.push_str(&table(&["server", "capacity req/s"], &caps));
        s.push('\n');
    }
    s
}

/// A part per rate (its cold share, table and standing), then the claim over the rates.
fn per_rate_part(run: &ModelRun, labels: &[String], peers: &[bool]) -> String {
    let fuse = run.emu.method == Method::Fuse;
    let mut s = String::new();
    let mut claims = Vec::new();
    for (i, &rate) in run.rates.iter().enumerate() {
        s.push_str(&format!(
            "### {rate} req/s\n\nCold by construction: {:.1} % of the measured requests ask for a file no earlier request of the server's run asked for{}.\n\n",
            run.cold.get(i).copied().unwrap_or(f64::NAN) * 100.0,
            if run.cold.get(i).is_some_and(|c| *c > 0.05) {
                " (above 5 %: every server's 95th percentile includes a disk access)"
            } else {
                ""
            }
        ));
        s.push_str(&rate_table(run, labels, rate, fuse));
        let st = rate_standing(run, labels, peers, rate);
        if let Some(st) = &st {
            s.push('\n');
            s.push_str(&standing_line(&format!("{rate} req/s"), st));
        }
        claims.push((format!("{rate} req/s"), st));
        s.push('\n');
    }
    s.push_str(&claim("rate", &claims));
    s
}

/// A warning when the blkio throttle was never approached (empty otherwise).
fn below_throttle(run: &ModelRun) -> String {
    let emu = &run.emu;
    let Some(iops) = emu.read_iops.filter(|_| emu.applied()) else { return String::new() };
    let fixed = || run.rows.iter().filter(|r| r.phase == Phase::FixedRate);
    let busiest = fixed().filter_map(|r| r.cell.disk_reads_per_s()).fold(0.0, f64::max);
    let most_bytes = fixed().filter_map(|r| r.cell.disk_bytes_per_s()).fold(0.0, f64::max);
    let near_bytes_cap = emu.read_bps.is_some_and(|bps| most_bytes >= 0.8 * bps as f64);
    if busiest >= 0.8 * f64::from(iops) || near_bytes_cap {
        return String::new();
    }
    let bytes = emu.read_bps.map_or(String::new(), |bps| {
        format!(" and {:.1} MB/s (cap {:.1})", most_bytes / 1e6, bps as f64 / 1e6)
    });
    format!(
        "\n**Below the throttle**: no server issued more than {busiest:.0} disk reads/s{bytes} while measured, under the {iops} reads/s throttle. The blkio throttle delays reads only above its rate; below it a miss costs this machine's fast disk, so these latencies show no disk-bound tail. Raise --rates or --dataset, steepen the trace (--class-mix, --zipf), or lower --read-iops, to load the emulated disk.\n"
    )
}

/// The links to the model's figures and what they draw.
fn figures_line(run: &ModelRun, labels: &[String], figures: &[String]) -> String {
    let links = figures.iter().map(|f| format!("[{f}]({f})")).collect::<Vec<_>>().join(", ");
    let cdf = match top_rate(run) {
        Some(top) if !cdf_measured(run, labels, top) => {
            "passes through the 8 percentiles ampload reported (min, 5, 50, 90, 95, 99, 99.9 %, max; this run predates ampload's histogram export), last round"
        }
        _ => "is each server's measured latency histogram, last round",
    };
    format!(
        "\nFigures: {links} (the CDF, at the highest rate, {cdf}; lines and bars are medians over rounds with min–max whiskers).\n\n"
    )
}

/// "Who blocked where": each server's profile over its last fixed-rate run at the highest
/// rate that did not fail (amped's DeBox; a peer's from outside), ranked by the median p95 there.
fn who_blocked(run: &ModelRun, labels: &[String]) -> String {
    let top = top_rate(run);
    let rows: Vec<who_blocked::Row> = labels
        .iter()
        .filter_map(|l| {
            // The last run at the top rate that was measured without failing, else the last.
            let at_top = |r: &&Row| {
                r.phase == Phase::FixedRate
                    && &r.cell.server == l
                    && (top.is_none() || r.rate == top)
            };
            let ok = |r: &&Row| r.cell.measurement.is_some() && r.cell.error.is_none();
            let r = run
                .rows
                .iter()
                .rev()
                .filter(at_top)
                .find(ok)
                .or_else(|| run.rows.iter().rev().find(at_top))?;
            who_blocked::cell_row(&r.cell)
        })
        .collect();
    let values = labels
        .iter()
        .filter_map(|l| Some((l.clone(), med(run, l, top?, |m| m.latency.p95))))
        .collect();
    let ranking = who_blocked::Ranking { metric: "p95 latency", values, higher_better: false };
    let at = top.map_or(String::new(), |t| format!(" at {t} req/s"));
    who_blocked::section(&format!("last run{at} that did not fail"), &rows, &ranking)
}

/// The table of one rate.
fn rate_table(run: &ModelRun, labels: &[String], rate: f64, fuse: bool) -> String {
    let rows: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            let v = |f: Stat| values(run, l, rate, f);
            let c = |f: fn(&DiskCell) -> Option<f64>| med_cell(run, l, rate, f);
            vec![
                l.clone(),
                fmt(med(run, l, rate, |m| m.latency.p50), 2),
                spread(&v(|m| m.latency.p95), 1),
                spread(&v(|m| m.latency.mean), 1),
                fmt(med(run, l, rate, |m| m.latency.p99), 1),
                fmt(med(run, l, rate, |m| m.latency.p999), 1),
                fmt(med(run, l, rate, |m| m.latency.max), 0),
                fmt(c(|c| Some(c.timeouts as f64)), 0),
                fmt(med(run, l, rate, |m| m.errors as f64), 0),
                fmt(med(run, l, rate, |m| m.rps), 0),
                fmt(c(DiskCell::disk_reads_per_s), 0),
                fmt(c(DiskCell::disk_bytes_per_s) / 1e6, 2),
                fmt(c(|c| c.read_amplification), 2),
                fmt(c(|c| c.read_amplification_floor), 2),
                if fuse || run.emu.read_iops.is_some() {
                    fmt(c(|c| c.measured_disk_busy) * 100.0, 0)
                } else {
                    "-".into()
                },
            ]
        })
        .collect();
    table(
        &[
            "server",
            "median ms",
            "95% ms",
            "mean ms",
            "99% ms",
            "99.9% ms",
            "max ms",
            "timeouts",
            "errors",
            "req/s",
            "disk reads/s",
            "MB read/s",
            "read amplification",
            "page floor",
            "disk busy %",
        ],
        &rows,
    )
}

/// The windowed runs of `server`, one per round.
fn window_cells<'a>(run: &'a ModelRun, server: &str) -> Vec<&'a DiskCell> {
    run.rows
        .iter()
        .filter(|r| r.phase == Phase::Windows && r.cell.server == server)
        .map(|r| &r.cell)
        .collect()
}

/// Values of `f` in window `i` of `server`'s windowed runs, one per round.
fn window_values(run: &ModelRun, server: &str, i: usize, f: Stat) -> Vec<f64> {
    window_cells(run, server)
        .iter()
        .filter_map(|c| c.windows.get(i)?.measurement.as_ref().map(f))
        .collect()
}

/// Latency over time from a cold start: a table of windows × servers and the standings.
fn windows_part(run: &ModelRun, labels: &[String], peers: &[bool], p: &Params) -> String {
    let window_s = p.window_s.unwrap_or(0.0);
    let servers: Vec<(&String, bool)> = labels
        .iter()
        .zip(peers.iter().copied())
        .filter(|(l, _)| !window_cells(run, l).is_empty())
        .collect();
    let Some(first) = run.rows.iter().find(|r| r.phase == Phase::Windows) else {
        return String::new();
    };
    let how = match p.windows_from {
        WindowSource::OneRun => format!(
            "was loaded by one ampload run whose consecutive {window_s} s windows (`--interval --interval-by start`, from the moment its schedule started) each hold the requests due in them, however late they were answered; a window's disk reads are those the disk served while it lasted (results.csv: `windows` rows, `t_start_s`/`t_end_s` in seconds since the cold server answered its probe)"
        ),
        WindowSource::SeparateRuns => "was measured in consecutive windows, one ampload run each, back to back (each opening its connections anew; the times are as scheduled, results.csv has when each really started and ended, a window whose answers came late ending late), the request stream continuing from one to the next".to_string(),
    };
    let mut s = format!(
        "\n### Latency over time from a cold start ({} req/s)\n\nEach server started cold (the page cache dropped) and {how}; 95% / mean ms per window (medians over rounds, min–max in brackets when there are several), and over the whole run its read amplification beside its page-rounded floor, the reads the disk served while its windows lasted, and those it served until the run's last answer (all the reads its requests caused: a server still behind when the last window ends reads on after it):\n\n",
        first.rate.unwrap_or(0.0)
    );
    let (mut body, claims) = window_rows(run, &servers, window_s);
    for (name, f, digits) in [
        ("read amplification", (|c: &DiskCell| c.read_amplification) as fn(&DiskCell) -> _, 2),
        ("page floor", |c| c.read_amplification_floor, 2),
        ("disk reads, all windows", window_disk_reads, 0),
        ("disk reads, to the last answer", cold_run_disk_reads, 0),
    ] {
        let mut row = vec![name.to_string()];
        row.extend(servers.iter().map(|(l, _)| {
            let v: Vec<f64> = window_cells(run, l).iter().filter_map(|c| f(c)).collect();
            spread(&v, digits)
        }));
        body.push(row);
    }
    let mut header = vec!["window (s)"];
    header.extend(servers.iter().map(|(l, _)| l.as_str()));
    s.push_str(&table(&header, &body));
    s.push('\n');
    for (label, st) in &claims {
        if let Some(st) = st {
            s.push_str(&standing_line(label, st));
        }
    }
    s.push_str(&claim("window", &claims));
    s
}

/// The reads the disk served from the cold start to the last window's end (issue 9: a
/// server's disk reads after a cold start against the best peer's); `None` if a window has no
/// disk counters.
fn window_disk_reads(c: &DiskCell) -> Option<f64> {
    if c.windows.is_empty() {
        return None;
    }
    c.windows.iter().map(|w| w.disk.as_ref().map(|d| d.reads as f64)).sum()
}

/// The reads the disk served from the cold start until the run's last answer: all the reads
/// the windows' requests caused. A server still behind when the last window ends has reads
/// of those requests left, which [`window_disk_reads`] does not count; compare servers'
/// reads with this one.
fn cold_run_disk_reads(c: &DiskCell) -> Option<f64> {
    if c.windows.is_empty() {
        return None;
    }
    c.disk_reads_with_warmup().map(|n| n as f64)
}

/// Each cell's (rate or window) label and standing, for [`claim`].
type Claims = Vec<(String, Option<Standing>)>;

/// A row per window (its scheduled times, then each server's 95% / mean), and the standing
/// in each window.
fn window_rows(
    run: &ModelRun,
    servers: &[(&String, bool)],
    window_s: f64,
) -> (Vec<Vec<String>>, Claims) {
    let n = run.rows.iter().map(|r| r.cell.windows.len()).max().unwrap_or(0);
    let mut body = Vec::new();
    let mut claims = Vec::new();
    for i in 0..n {
        // Scheduled times (separate runs: a window whose answers came late ended later).
        let label =
            format!("{}–{}", fmt(i as f64 * window_s, 1), fmt((i + 1) as f64 * window_s, 1));
        let mut row = vec![label.clone()];
        let mut entries = Vec::new();
        for (l, peer) in servers {
            let p95 = window_values(run, l, i, |m| m.latency.p95);
            let mean = window_values(run, l, i, |m| m.latency.mean);
            row.push(format!("{} / {}", spread(&p95, 1), spread(&mean, 1)));
            entries.push(Entry {
                server: l.to_string(),
                peer: *peer,
                p95: median(&p95),
                mean: median(&mean),
            });
        }
        body.push(row);
        claims.push((format!("the {label} s window"), standing::standing(&entries, "amped")));
    }
    (body, claims)
}

fn comparison(run: &ModelRun, labels: &[String], rate: f64, quick: bool) -> String {
    let has = |l: &str| labels.iter().any(|x| x == l);
    let med = |l: &str, f: Stat| med(run, l, rate, f);
    let mut out = String::new();
    if !run.emu.applied() {
        out.push_str("Without the emulated disk nothing here is disk-bound, so the paper's comparison does not apply to these numbers; they show each server's latency at this rate on a cached data set.\n\n");
    }
    if has("amped") && has("sped") {
        let m = ratio(med("sped", |m| m.latency.p50), med("amped", |m| m.latency.p50));
        let mean = |l: &str| values(run, l, rate, |m| m.latency.mean);
        let j = judge(&ratios(&mean("sped"), &mean("amped")), Cmp::AtLeast(2.0), quick);
        out.push_str(&format!(
            "- *New Flash cuts old Flash's latency (47× median, 12× mean)*: sped/amped = {}× median, {}× mean. {}\n",
            fmt(m, 1),
            fmt(j.spread.median, 1),
            j.text("Holds in direction: sped blocks its only loop on every miss, amped's helpers keep the loop answering cached requests", "Does not hold here")
        ));
    }
    if has("amped") && has("amped:instances=2") {
        let r =
            ratio(med("amped:instances=2", |m| m.latency.mean), med("amped", |m| m.latency.mean));
        out.push_str(&format!("- *More instances do not hurt New Flash (7.56 vs 7.72 ms mean)*: amped:instances=2 / amped mean = {}.\n", fmt(r, 2)));
    }
    for l in labels.iter().filter(|l| l.starts_with("apache-prefork")) {
        if has("amped") {
            let r = ratio(med(l, |m| m.latency.p95), med("amped", |m| m.latency.p95));
            out.push_str(&format!("- *Apache prefork has second-long tails (95% 1.6–2.2 s)*: {l} 95% = {} ms, {}× amped's.\n", fmt(med(l, |m| m.latency.p95), 1), fmt(r, 1)));
        }
    }
    if has("nginx") && has("nginx-aio") {
        let r = ratio(med("nginx", |m| m.latency.p95), med("nginx-aio", |m| m.latency.p95));
        out.push_str(&format!("- nginx without / with `aio threads`: 95% ratio {} (thread-pool reads are nginx's answer to the same blocking problem AMPED's helpers solve).\n", fmt(r, 1)));
    }
    out.push_str(&format!(
        "\nWhy modern Linux differs: sendfile on Linux still blocks on a page-cache miss, and so does read(); \
         an event loop without helpers (sped, nginx, lighttpd, h2o) stalls every connection while one miss is \
         served, exactly the 2004 problem. What changed is the cost of a miss (emulated here: {}) and the \
         kernel's readahead and page-cache policy inside the memory cgroup.\n\n",
        run.emu.short()
    ));
    out
}
