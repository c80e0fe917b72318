//! E6, the student experiment (flash-papers §6.3): a thread per connection ("nopool", amped
//! `mt`) against a pool of 5 threads (amped `pool --threads 5`), measured as the seed did:
//! `ab -n 1000 -c C -H 'Connection: close'` on a 37-byte file and `ab -n 200 -c C` on a 10 MB
//! file, C in {2, 3, 4, 5, 10, 20}; median, 99th percentile and standard deviation per cell.
//! Without ab, ampload `--close` stands in (it reports no standard deviation), and the summary
//! says so.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Lab, failures_section};
use crate::cli::{AbGeneratorArg, PoolArgs};
use crate::datasets::single;
use crate::load::ampload::Ampload;
use crate::load::{LoadError, Measurement, ab};
use crate::progress::Progress;
use crate::report::csv::{Csv, num};
use crate::report::markdown::table;
use crate::stats::{Spread, fmt, median, ratio};
use crate::svg::{Chart, Plot, Scale, Series};
use crate::verdict::{Cmp, judge};

/// nopool vs pool 5, as in the seed.
pub const DEFAULT_SERVERS: &[&str] = &["mt", "pool:threads=5"];

/// The 10 MB file (10 MiB).
const LARGE_BYTES: u64 = 10 << 20;

/// One measured cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub round: u32,
    pub server: String,
    pub file: String,
    pub concurrency: u32,
    pub requests: u64,
    pub measurement: Option<Measurement>,
    pub error: Option<String>,
    pub raw: Value,
}

/// Runs E6 and writes its folder.
pub fn run(a: &PoolArgs) -> Result<std::path::PathBuf, String> {
    let q = a.common.quick;
    let mut lab = Lab::open("pool-vs-nopool", &a.common, DEFAULT_SERVERS)?;
    let conc = a
        .concurrency
        .clone()
        .unwrap_or_else(|| if q { vec![2, 5] } else { vec![2, 3, 4, 5, 10, 20] });
    if conc.contains(&0) {
        return Err("--concurrency values must be positive".into());
    }
    let small_n = a.small_requests.unwrap_or(if q { 200 } else { 1000 });
    let large_n = a.large_requests.unwrap_or(if q { 10 } else { 200 });
    let rounds = a.common.rounds.unwrap_or(if q { 1 } else { 3 });
    let generator = Generator::choose(a.generator)?;
    if let Some(n) = &generator.note {
        eprintln!("[amplab pool-vs-nopool] {n}");
    }
    let (root, files) = single::generate_student(&lab.data_dir, LARGE_BYTES, lab.seed)
        .map_err(|e| format!("cannot write the files: {e}"))?;
    let files = vec![
        FileLoad { name: "small", path: files[0].0.clone(), bytes: files[0].1, requests: small_n },
        FileLoad { name: "large", path: files[1].0.clone(), bytes: files[1].1, requests: large_n },
    ];
    let cells = measure_rounds(&lab, &generator, &root, &files, &conc, rounds);
    let labels: Vec<String> = lab.servers.iter().map(|s| s.label.clone()).collect();
    write_results(&mut lab, &cells)?;
    let note = generator.note;
    let plan = Plan {
        concurrency: conc.clone(),
        small_requests: small_n,
        large_requests: large_n,
        rounds,
        generator: generator.name.to_string(),
        note: note.clone(),
    };
    let s = outputs(&mut lab, &plan, &cells, &labels)?;
    let params = json!({"concurrency": conc, "small_requests": small_n, "large_requests": large_n, "large_bytes": LARGE_BYTES, "rounds": rounds, "generator": generator.name});
    lab.finish(params, None, note.into_iter().collect(), &s)
}

/// The load generator of a run: ab when it is installed (as the seed used), else ampload
/// `--close`, with a note saying so.
struct Generator {
    /// `"ab"` or `"ampload"`.
    name: &'static str,
    /// ab's path when ab runs.
    ab: Option<std::path::PathBuf>,
    /// Why ampload stood in for ab, if it did.
    note: Option<String>,
}

impl Generator {
    /// The generator `--generator` asks for; an error if it asks for ab and ab is missing.
    fn choose(arg: AbGeneratorArg) -> Result<Generator, String> {
        let ab_path = crate::tools::which("ab");
        match (arg, ab_path) {
            (AbGeneratorArg::Ab, None) => Err("ab is not installed (apt-get install apache2-utils, or amplab install-peers)".into()),
            (AbGeneratorArg::Ampload, _) | (AbGeneratorArg::Auto, None) => Ok(Generator {
                name: "ampload",
                ab: None,
                note: Some("ab is not installed here (or --generator ampload was given): ampload --close stood in for it. It opens a connection per request like ab without -k, but reports no standard deviation, and its latency includes the TCP handshake as ab's does.".to_string()),
            }),
            (_, Some(ab)) => Ok(Generator { name: "ab", ab: Some(ab), note: None }),
        }
    }

    /// `n` requests for `url` over `c` connections, a connection per request.
    fn measure(
        &self,
        lab: &Lab,
        url: String,
        n: u64,
        c: u32,
        bytes: u64,
    ) -> Result<(Measurement, Value), LoadError> {
        match &self.ab {
            Some(ab) => ab::run(ab, &url, n, c, bytes, lab.client_cpus()),
            None => {
                let mut load = Ampload::closed(url, c, 0.0);
                load.duration_s = None;
                load.requests = Some(n);
                load.requests_per_conn = Some(1);
                load.timeout_s = 30.0;
                load.run(&lab.bins.ampload, lab.client_cpus())
            }
        }
    }
}

/// One of the two files, and how many requests each cell sends for it.
struct FileLoad {
    name: &'static str,
    path: String,
    bytes: u64,
    requests: u64,
}

/// Every round: each server (in the round's order) started, measured at every file and
/// concurrency, and stopped. A server that does not start gets a failed cell for each.
fn measure_rounds(
    lab: &Lab,
    generator: &Generator,
    root: &std::path::Path,
    files: &[FileLoad],
    conc: &[u32],
    rounds: u32,
) -> Vec<Cell> {
    let steps = rounds as usize * lab.servers.len();
    let per = conc.len() as f64 * 2.0 + 1.0;
    let mut progress = Progress::new(lab.experiment, steps, steps as f64 * per);
    let mut cells = Vec::new();
    for round in 0..rounds {
        for spec in lab.order(round) {
            progress.step(&format!("round {}/{rounds}: {}", round + 1, spec.label), per);
            let cell = |file: &FileLoad, c: u32| Cell {
                round,
                server: spec.label.clone(),
                file: file.name.into(),
                concurrency: c,
                requests: file.requests,
                measurement: None,
                error: None,
                raw: Value::Null,
            };
            let server = match lab.start(&spec, root, None, &files[0].path) {
                Ok(s) => s,
                Err(why) => {
                    progress.note(&why);
                    for file in files {
                        cells.extend(
                            conc.iter()
                                .map(|&c| Cell { error: Some(why.clone()), ..cell(file, c) }),
                        );
                    }
                    continue;
                }
            };
            for file in files {
                for &c in conc {
                    let url = server.url(&file.path);
                    let mut measured = cell(file, c);
                    match generator.measure(lab, url, file.requests, c, file.bytes) {
                        Ok((m, raw)) => {
                            measured.error = m.problems();
                            (measured.measurement, measured.raw) = (Some(m), raw);
                        }
                        Err(e) => measured.error = Some(e.to_string()),
                    }
                    cells.push(measured);
                }
            }
            server.stop();
        }
    }
    cells
}

/// Medians over rounds of one cell's statistics.
struct Stat {
    rps: f64,
    p50: f64,
    p99: f64,
    sd: f64,
}

/// A line of `f` over the concurrency levels: medians over rounds with their min–max, named
/// `server` or `server what`.
fn series(
    cells: &[Cell],
    conc: &[u32],
    server: &str,
    what: &str,
    file: &str,
    f: fn(&Measurement) -> f64,
) -> Series {
    let spreads: Vec<(f64, Spread)> = conc
        .iter()
        .map(|&c| {
            let v: Vec<f64> = cells
                .iter()
                .filter(|x| x.server == server && x.file == file && x.concurrency == c)
                .filter_map(|x| x.measurement.as_ref().map(f))
                .collect();
            (f64::from(c), Spread::of(&v))
        })
        .collect();
    Series {
        name: if what.is_empty() { server.to_string() } else { format!("{server} {what}") },
        points: spreads.iter().map(|(x, s)| (*x, s.median)).collect(),
        spread: spreads.iter().map(|(_, s)| s.range()).collect(),
    }
}

fn stat(cells: &[Cell], server: &str, file: &str, c: u32) -> Stat {
    let ms: Vec<&Measurement> = cells
        .iter()
        .filter(|x| x.server == server && x.file == file && x.concurrency == c)
        .filter_map(|x| x.measurement.as_ref())
        .collect();
    let pick = |f: fn(&Measurement) -> f64| median(&ms.iter().map(|m| f(m)).collect::<Vec<_>>());
    Stat {
        rps: pick(|m| m.rps),
        p50: pick(|m| m.latency.p50),
        p99: pick(|m| m.latency.p99),
        sd: pick(|m| m.latency.std_dev),
    }
}

/// Writes the raw results: results.csv and results.json.
fn write_results(lab: &mut Lab, cells: &[Cell]) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let mut csv = Csv::new(&[
        "round",
        "server",
        "file",
        "concurrency",
        "requests",
        "generator",
        "ok",
        "errors",
        "rps",
        "mean_ms",
        "sd_ms",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "max_ms",
        "error",
    ]);
    for c in cells {
        let m = c.measurement.clone().unwrap_or_default();
        let l = &m.latency;
        csv.row(vec![
            c.round.to_string(),
            c.server.clone(),
            c.file.clone(),
            c.concurrency.to_string(),
            c.requests.to_string(),
            m.generator.clone(),
            m.ok.to_string(),
            m.errors.to_string(),
            num(m.rps),
            num(l.mean),
            num(l.std_dev),
            num(l.p50),
            num(l.p90),
            num(l.p99),
            num(l.max),
            c.error.clone().unwrap_or_default(),
        ]);
    }
    lab.run.write("results.csv", &csv.render()).map_err(io)?;
    lab.run.write_json("results.json", &cells).map_err(io)
}

/// Writes the figures; returns their files.
fn write_outputs(
    lab: &mut Lab,
    cells: &[Cell],
    labels: &[String],
    plan: &Plan,
) -> Result<Vec<String>, String> {
    let io = |e: std::io::Error| e.to_string();
    let (conc, generator, small_n, large_n) =
        (&plan.concurrency[..], plan.generator.as_str(), plan.small_requests, plan.large_requests);
    let mut latency = Vec::new();
    for l in labels {
        latency.push(series(cells, conc, l, "median", "small", |m| m.latency.p50));
        latency.push(series(cells, conc, l, "p99", "small", |m| m.latency.p99));
    }
    let small = lab
        .run
        .write_chart(
            "small-latency",
            &Chart {
                title: "37-byte file, a connection per request: latency vs concurrency".into(),
                subtitle: format!(
                    "{generator} -n {small_n} -c C -H 'Connection: close'; median of rounds, whiskers min–max"
                ),
                x_label: "concurrent clients (ab -c)".into(),
                y_label: "response time (ms)".into(),
                x_scale: Scale::Linear,
                y_scale: Scale::Linear,
                plot: Plot::Lines(latency),
                note: String::new(),
            },
        )
        .map_err(io)?;
    let throughput =
        labels.iter().map(|l| series(cells, conc, l, "", "large", |m| m.rps)).collect();
    let large = lab
        .run
        .write_chart(
            "large-throughput",
            &Chart {
                title: format!(
                    "{} MiB file, a connection per request: throughput vs concurrency",
                    LARGE_BYTES >> 20
                ),
                subtitle: format!(
                    "{generator} -n {large_n} -c C -H 'Connection: close'; median of rounds, whiskers min–max"
                ),
                x_label: "concurrent clients (ab -c)".into(),
                y_label: "requests per second (req/s)".into(),
                x_scale: Scale::Linear,
                y_scale: Scale::Linear,
                plot: Plot::Lines(throughput),
                note: String::new(),
            },
        )
        .map_err(io)?;
    Ok(vec![small, large])
}

/// What a pool-vs-nopool run measured, as setup.json records it.
#[derive(Clone, Debug, Deserialize)]
struct Plan {
    concurrency: Vec<u32>,
    small_requests: u64,
    large_requests: u64,
    rounds: u32,
    generator: String,
    /// Why ampload stood in for ab, if it did.
    #[serde(skip)]
    note: Option<String>,
}

/// `amplab report`: the figures and summary of a recorded E6 run, from its results.json.
pub fn rebuild(lab: &mut Lab, setup: &Value) -> Result<String, String> {
    let mut plan: Plan = super::rebuild::parameters(&setup["parameters"])?;
    plan.note = setup["notes"]
        .as_array()
        .and_then(|n| n.iter().filter_map(Value::as_str).find(|n| !super::is_finish_note(n)))
        .map(str::to_string);
    let mut cells: Vec<Cell> = super::rebuild::results(&lab.run.path)?;
    for c in &mut cells {
        super::rebuild::refresh(&mut c.measurement, &c.raw, &mut c.error);
    }
    let labels = super::rebuild::labels(cells.iter().map(|c| &c.server));
    outputs(lab, &plan, &cells, &labels)
}

/// Writes the figures; returns the summary.
fn outputs(
    lab: &mut Lab,
    plan: &Plan,
    cells: &[Cell],
    labels: &[String],
) -> Result<String, String> {
    let figures = write_outputs(lab, cells, labels, plan)?;
    let (conc, generator, small_n, large_n, rounds, note) = (
        &plan.concurrency,
        &plan.generator,
        plan.small_requests,
        plan.large_requests,
        plan.rounds,
        &plan.note,
    );
    let mut s = lab.summary_head(
        "E6 thread pool vs thread per connection (the CSE 124 student experiment)",
        &format!("`{generator}` with a new connection per request (`Connection: close`): {small_n} requests for a 37-byte file and {large_n} for a {} MiB file per cell, concurrency {}; {rounds} round(s), medians of each statistic", LARGE_BYTES >> 20, conc.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")),
    );
    if let Some(n) = &note {
        s.push_str(&format!("**Note**: {n}\n\n"));
    }
    for (file, title) in [("small", "37-byte file"), ("large", "10 MiB file")] {
        s.push_str(&format!("## {title}: req/s, median / 99% / std-dev (ms)\n\n"));
        s.push_str(&file_table(cells, labels, conc, file));
        s.push('\n');
    }
    s.push_str(&round_noise(cells, labels, conc, rounds));
    s.push_str("Seed (2017, student httpd; req/s, p50/p99 ms): small c=5 nopool 928 (5/13), pool 931 (5/13); small c=20 nopool 814 (23/39), pool 867 (22/38); large c=5 nopool 3.29, pool 3.34; large c=20 nopool 3.36, pool 3.28.\n\n");
    s.push_str("Figures: ");
    s.push_str(&figures.iter().map(|f| format!("[{f}]({f})")).collect::<Vec<_>>().join(", "));
    s.push_str("\n\n## Compared with the seed's conclusions\n\n");
    s.push_str(&comparison(cells, labels, conc, rounds, lab.quick));
    let failures: Vec<String> = cells
        .iter()
        .filter_map(|c| {
            c.error.as_ref().map(|e| {
                format!("round {} {} {} c={}: {e}", c.round + 1, c.server, c.file, c.concurrency)
            })
        })
        .collect();
    s.push_str(&failures_section(&failures));
    Ok(s)
}

/// A file's table: a row per concurrency, req/s and p50 / p99 / sd (ms) per server.
fn file_table(cells: &[Cell], labels: &[String], conc: &[u32], file: &str) -> String {
    let mut header = vec!["concurrency".to_string()];
    for l in labels {
        header.push(format!("{l} req/s"));
        header.push(format!("{l} p50 / p99 / sd"));
    }
    let body: Vec<Vec<String>> = conc
        .iter()
        .map(|&c| {
            let mut row = vec![c.to_string()];
            for l in labels {
                let st = stat(cells, l, file, c);
                row.push(fmt(st.rps, 1));
                row.push(format!("{} / {} / {}", fmt(st.p50, 1), fmt(st.p99, 1), fmt(st.sd, 2)));
            }
            row
        })
        .collect();
    table(&header.iter().map(String::as_str).collect::<Vec<_>>(), &body)
}

/// The sentence on the noise between rounds: the spread of req/s over the cells.
fn round_noise(cells: &[Cell], labels: &[String], conc: &[u32], rounds: u32) -> String {
    if rounds <= 1 {
        return "One round: the noise between rounds was not measured.\n\n".to_string();
    }
    let spread: Vec<f64> = labels
        .iter()
        .flat_map(|l| conc.iter().map(move |&c| (l, c)))
        .flat_map(|(l, c)| {
            ["small", "large"].map(|file| {
                let v: Vec<f64> = cells
                    .iter()
                    .filter(|x| &x.server == l && x.file == file && x.concurrency == c)
                    .filter_map(|x| x.measurement.as_ref().map(|m| m.rps))
                    .collect();
                Spread::of(&v).relative()
            })
        })
        .filter(|r| r.is_finite())
        .collect();
    format!(
        "Medians over {rounds} rounds; the rounds' (max − min) / median of req/s is {:.0} % for the median cell and up to {:.0} %; the figures' whiskers show each cell's min–max.\n\n",
        median(&spread) * 100.0,
        spread.iter().copied().fold(0.0, f64::max) * 100.0
    )
}

/// A statistic of one cell in round `r` (NaN if not measured).
fn in_round(
    cells: &[Cell],
    r: u32,
    server: &str,
    file: &str,
    c: u32,
    f: fn(&Measurement) -> f64,
) -> f64 {
    cells
        .iter()
        .find(|x| x.round == r && x.server == server && x.file == file && x.concurrency == c)
        .and_then(|x| x.measurement.as_ref().map(f))
        .unwrap_or(f64::NAN)
}

/// Per round: the largest small-file median difference over the concurrency levels (ms).
fn median_gaps(cells: &[Cell], conc: &[u32], rounds: u32, nopool: &str, pool: &str) -> Vec<f64> {
    let p50 = |m: &Measurement| m.latency.p50;
    worst_per_round(conc, rounds, |r, c| {
        (in_round(cells, r, nopool, "small", c, p50) - in_round(cells, r, pool, "small", c, p50))
            .abs()
    })
}

/// Per round: the largest of `gap(round, level)` over the concurrency levels.
fn worst_per_round(conc: &[u32], rounds: u32, gap: impl Fn(u32, u32) -> f64) -> Vec<f64> {
    (0..rounds).map(|r| conc.iter().map(|&c| gap(r, c)).fold(f64::NAN, f64::max)).collect()
}

/// Per round: at how many concurrency levels the pool's small-file p99 is at most nopool's.
fn p99_wins(cells: &[Cell], conc: &[u32], rounds: u32, nopool: &str, pool: &str) -> Vec<f64> {
    let p99 = |m: &Measurement| m.latency.p99;
    (0..rounds)
        .map(|r| {
            conc.iter()
                .filter(|&&c| {
                    in_round(cells, r, pool, "small", c, p99)
                        <= in_round(cells, r, nopool, "small", c, p99)
                })
                .count() as f64
        })
        .collect()
}

/// Per round: the largest relative difference of pool/nopool large-file req/s over the
/// levels (%).
fn throughput_gaps(
    cells: &[Cell],
    conc: &[u32],
    rounds: u32,
    nopool: &str,
    pool: &str,
) -> Vec<f64> {
    let rps = |m: &Measurement| m.rps;
    worst_per_round(conc, rounds, |r, c| {
        let large = |server| in_round(cells, r, server, "large", c, rps);
        (ratio(large(pool), large(nopool)) - 1.0).abs() * 100.0
    })
}

fn comparison(cells: &[Cell], labels: &[String], conc: &[u32], rounds: u32, quick: bool) -> String {
    let (Some(nopool), Some(pool)) = (
        labels.iter().find(|l| l.starts_with("mt")),
        labels.iter().find(|l| l.starts_with("pool")),
    ) else {
        return "The comparison needs an `mt` and a `pool` server.\n".into();
    };
    let mut out = String::new();
    let diffs = median_gaps(cells, conc, rounds, nopool, pool);
    let j = judge(&diffs, Cmp::AtMost(1.0), quick);
    out.push_str(&format!(
        "- *Medians are equal*: the largest small-file median difference is {} ms. {}\n",
        fmt(j.spread.median, 1),
        j.text("Holds", "Does not hold")
    ));
    let better = p99_wins(cells, conc, rounds, nopool, pool);
    let j = judge(&better, Cmp::AtLeast((conc.len() / 2 + 1) as f64), quick);
    out.push_str(&format!(
        "- *The pool has a lower 99th percentile for small files (no thread creation per connection)*: pool's p99 ≤ nopool's at {} of {} concurrency levels (median over rounds; a majority is needed). {}\n",
        fmt(j.spread.median, 0),
        conc.len(),
        j.text("Holds", "Does not hold here: creating a thread on modern Linux costs tens of microseconds, below ab's 1 ms resolution")
    ));
    let sd_better = conc
        .iter()
        .filter(|&&c| stat(cells, pool, "small", c).sd <= stat(cells, nopool, "small", c).sd)
        .count();
    let sd_known = conc.iter().any(|&c| stat(cells, pool, "small", c).sd.is_finite());
    if sd_known {
        out.push_str(&format!(
            "- *…and a lower standard deviation*: at {sd_better} of {} levels.\n",
            conc.len()
        ));
    }
    let gaps = throughput_gaps(cells, conc, rounds, nopool, pool);
    let j = judge(&gaps, Cmp::AtMost(5.0), quick);
    out.push_str(&format!(
        "- *Large-file throughput is the same (I/O-bound)*: pool/nopool req/s within {}% (per round, the worst level). {}\n",
        fmt(j.spread.median, 1),
        j.text("Holds", "Does not hold: here the 10 MiB transfer is bound by loopback copies on a CPU shared by all threads, and with C above 5 the pool queues connections behind busy workers")
    ));
    out.push_str("\nOn loopback the 10 MiB transfer is CPU-bound (memory copies), not network-bound as on the seed's machine, so absolute req/s are much higher; with C above the pool's 5 threads, extra connections wait in the pool's queue, which shows in the latency of large files.\n");
    out
}
