//! `amplab <experiment> --quick` against amped alone: the output folder exists, its CSV and
//! JSON parse and hold the expected series, and every SVG is XML with the expected series.

mod common;
#[path = "common/fuse.rs"]
mod fuse;

use common::{amplab, f};

#[test]
fn single_file_quick() {
    let run = amplab(&["single-file", "--servers", "amped,sped"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    // 2 servers × 2 modes × 3 sizes, one round.
    assert_eq!(rows.len(), 12);
    for row in &rows {
        assert!(f(row, "rps") > 0.0, "{row:?}");
        assert_eq!(row["error"], "", "{row:?}");
    }
    assert!(
        rows.iter().any(|r| r["server"] == "sped"
            && r["mode"] == "keepalive"
            && r["size_bytes"] == "102400")
    );
    assert_eq!(run.csv("medians.csv").len(), 12);
    let cells = run.json("results.json");
    assert_eq!(cells.as_array().map(Vec::len), Some(12));
    for fig in
        ["bandwidth-close.svg", "rate-close.svg", "bandwidth-keepalive.svg", "rate-keepalive.svg"]
    {
        assert_eq!(run.svg_series(fig), vec!["amped", "sped"], "{fig}");
    }
    let setup = run.json("setup.json");
    assert_eq!(setup["experiment"], "single-file");
    assert_eq!(setup["quick"], true);
    assert!(setup["versions"]["amped"].as_str().is_some_and(|v| v.contains("amped")));
    assert!(setup["machine"]["cpus"].as_u64().is_some());
    assert_eq!(setup["servers"].as_array().map(Vec::len), Some(2));
    let summary = run.read("summary.md");
    assert!(
        summary.contains("Quick run") && summary.contains("Compared with the paper"),
        "{summary}"
    );
    assert!(summary.contains("No verdict (quick run)") && !summary.contains("Holds"), "{summary}");
    assert!(run.out.join("rate-close.png").is_file() || summary.contains("No PNG figures"));
    // `amplab report` rebuilds the same summary (and the figures) from the raw results.
    let svg = run.read("rate-close.svg");
    std::fs::remove_file(run.out.join("rate-close.svg")).unwrap();
    let (before, after) = run.report();
    assert_eq!(before, after);
    assert_eq!(run.read("rate-close.svg"), svg);
    run.assert_report_rebuilds();
}

/// A peer's cells are profiled from outside: /proc while measured, then a `perf trace` slice,
/// and the summary's "who blocked where" table has its row (skipped, saying why, where perf
/// trace or the peer is missing).
#[test]
fn a_peer_is_profiled_from_outside() {
    if program_missing("lighttpd") {
        eprintln!("skipped: lighttpd is not installed (amplab install-peers)");
        return;
    }
    let perf_works = std::process::Command::new("perf")
        .args(["trace", "-s", "--", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !perf_works {
        eprintln!("skipped: `perf trace` does not work here (not installed, or not root)");
        return;
    }
    let run = amplab(&["single-file", "--servers", "amped,lighttpd", "--sizes", "1K,100K"]);
    run.assert_ok();
    let summary = run.read("summary.md");
    let who = summary.split("## Who blocked where").nth(1).expect("a who-blocked-where section");
    let row =
        who.lines().find(|l| l.starts_with("| lighttpd |")).unwrap_or_else(|| panic!("{who}"));
    assert!(row.contains("perf trace") && row.contains("slice"), "{row}");
    assert!(who.lines().any(|l| l.starts_with("| amped |")), "{who}");
    assert!(who.contains("Ranked by") || who.contains("Nobody blocks"), "{who}");
    assert!(run.out.join("profiles/lighttpd.perf.txt").is_file());
    let profiles = run.json("profiles.json");
    let lighttpd = profiles
        .as_array()
        .and_then(|a| a.iter().find(|p| p["server"] == "lighttpd"))
        .expect("lighttpd's profile");
    let slice = &lighttpd["profile"]["slice"];
    assert!(slice["requests"].as_u64().is_some_and(|n| n > 0), "{lighttpd}");
    assert!(slice["roles"]["loop"]["counters"]["threads"] == 1, "one lighttpd loop: {lighttpd}");
    assert!(slice["calls"]["loop epoll_wait"]["count"].as_u64().is_some_and(|n| n > 0));
    // The summary is rebuilt the same from profiles.json.
    let (before, after) = run.report();
    assert_eq!(before, after);
    // --no-profile: no profile at all.
    let plain = amplab(&["single-file", "--servers", "lighttpd", "--sizes", "1K", "--no-profile"]);
    plain.assert_ok();
    assert!(!plain.read("summary.md").contains("Who blocked where"));
    assert!(!plain.out.join("profiles").exists());
}

#[test]
fn optimizations_quick() {
    let run = amplab(&["optimizations"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    assert_eq!(rows.len(), 8 * 2, "8 combinations × 2 sizes, close mode");
    let series = run.svg_series("rate-close.svg");
    assert_eq!(series.len(), 8);
    assert_eq!(series[0], "amped");
    assert_eq!(series[7], "amped:no-path-cache:no-header-cache:no-file-cache");
    assert!(rows.iter().all(|r| f(r, "rps") > 0.0));
    assert!(run.read("summary.md").contains("Without the path cache alone"));
    run.assert_report_rebuilds();
}

#[test]
fn disk_bound_quick() {
    // Root or not: the cgroups are used when possible, and the run works either way. As root
    // with /dev/fuse the hdd model goes through the FUSE disk; otherwise only none runs.
    let models = if fuse_here() { "none,hdd" } else { "none" };
    let run = amplab(&[
        "disk-bound",
        "--servers",
        "amped,sped",
        "--disk-emulation",
        models,
        "--window",
        "0.5",
    ]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    let setup = run.json("setup.json");
    for model in models.split(',') {
        check_model_cells(&run, model, &rows);
    }
    let summary = run.read("summary.md");
    for model in models.split(',') {
        assert!(summary.contains(&format!("## Disk model {model}")), "{summary}");
    }
    assert!(summary.contains("Latency over time from a cold start"), "{summary}");
    assert!(summary.contains("| disk reads, all windows |"), "{summary}");
    assert!(summary.contains("one ampload run whose consecutive 0.5 s windows"), "{summary}");
    assert!(summary.contains("at every rate") || summary.contains("stops holding at"), "{summary}");
    if models.contains("hdd") {
        // The FUSE disk counts its bytes: every needed byte is read at least about once.
        let hdd: Vec<_> =
            rows.iter().filter(|r| r["model"] == "hdd" && r["phase"] != "windows").collect();
        for r in &hdd {
            assert!(f(r, "disk_read_bytes_with_warmup") > 0.0, "{r:?}");
            assert!(f(r, "read_amplification") > 0.8, "{r:?}");
            assert!(f(r, "disk_busy") > 0.0, "{r:?}");
        }
        assert_eq!(setup["disk_emulation"][1]["name"], "hdd");
        assert_eq!(setup["disk_emulation"][1]["slowdisk"]["model"]["arms"], 1);
        assert!(summary.contains("FUSE slow disk, model hdd"), "{summary}");
        // The reads until the last answer include those served while the windows lasted.
        let hdd = &summary[summary.find("## Disk model hdd").expect("hdd section")..];
        let during = table_numbers(hdd, "| disk reads, all windows |");
        let to_end = table_numbers(hdd, "| disk reads, to the last answer |");
        assert_eq!(during.len(), 2, "{hdd}");
        assert_eq!(to_end.len(), 2, "{hdd}");
        for (d, e) in during.iter().zip(&to_end) {
            assert!(*e > 0.0 && e >= d, "{during:?} {to_end:?}");
        }
    } else {
        let cg = setup["disk_emulation"]["cgroups"]["state"].as_str().unwrap_or_default();
        assert_eq!(cg, "disabled-by-option", "none has no cgroups");
    }
    let none = rows.iter().find(|r| r["model"] == "none").unwrap();
    assert_eq!(none["read_amplification"], "", "no disk counters without a slow disk");
    check_page_floors(&run, &rows, models.split(',').count());
    assert!(setup["parameters"]["rate"].as_f64().is_some_and(|r| r > 0.0));
    assert!(run.read("summary.md").contains("measured latency histogram"));
    // Both are amped architectures, so both were profiled while measured.
    let who = summary.split("## Who blocked where").nth(1).expect("a who-blocked-where section");
    assert!(who.contains("| amped |") && who.contains("| sped |"), "{who}");
    run.assert_report_rebuilds();
}

type CsvRow = std::collections::BTreeMap<String, String>;

/// One model's cells of the disk-bound quick run: the phases in order, the rate sweep from the
/// capacities, back-to-back windows, and the figures.
fn check_model_cells(run: &common::Run, model: &str, rows: &[CsvRow]) {
    let mine: Vec<_> = rows.iter().filter(|r| r["model"] == model).collect();
    let phases: Vec<(&str, &str)> =
        mine.iter().map(|r| (r["phase"].as_str(), r["server"].as_str())).collect();
    // Capacity of each, then a sweep of 2 rates, then 4 windows of 0.5 s per server.
    let mut want = vec![("capacity", "amped"), ("capacity", "sped")];
    want.extend([("fixed-rate", "amped"), ("fixed-rate", "sped")].repeat(2));
    want.extend([("windows", "amped")].repeat(4));
    want.extend([("windows", "sped")].repeat(4));
    assert_eq!(phases, want, "{model}");
    for r in &mine {
        assert!(f(r, "rps") > 0.0 && f(r, "p50_ms") > 0.0 && f(r, "mean_ms") > 0.0, "{r:?}");
    }
    // The rates spread from 40 % to 90 % of the best other server's capacity.
    let cap = mine
        .iter()
        .filter(|r| r["phase"] == "capacity" && r["server"] == "sped")
        .map(|r| f(r, "rps"))
        .next()
        .unwrap();
    let rates: Vec<f64> =
        mine.iter().filter(|r| r["phase"] == "fixed-rate").map(|r| f(r, "rate")).collect();
    assert_eq!(
        rates,
        vec![(0.4 * cap).round(), (0.4 * cap).round(), (0.9 * cap).round(), (0.9 * cap).round()]
    );
    // One ampload run: windows of 0.5 s back to back, with no gap, from just after the
    // cold start; each holds the requests due in it.
    let windows: Vec<_> =
        mine.iter().filter(|r| r["phase"] == "windows" && r["server"] == "amped").collect();
    let spans: Vec<(f64, f64)> =
        windows.iter().map(|r| (f(r, "t_start_s"), f(r, "t_end_s"))).collect();
    assert!(spans.windows(2).all(|w| (w[1].0 - w[0].1).abs() < 1e-6), "{spans:?}");
    assert!(spans.iter().all(|(a, b)| (b - a - 0.5).abs() < 1e-6), "{spans:?}");
    assert!(spans[0].0 >= 0.0 && spans[0].0 < 2.0, "{spans:?}");
    let rate = f(windows[0], "rate");
    for w in &windows {
        assert!(f(w, "requests") + f(w, "errors") >= (rate * 0.5).floor() - 1.0, "{w:?}");
        if model == "hdd" {
            assert!(!w["disk_reads"].is_empty() && !w["disk_busy"].is_empty(), "{w:?}");
        }
    }
    if model == "hdd" {
        let reads: f64 = windows.iter().map(|w| f(w, "disk_reads")).sum();
        assert!(reads > 0.0, "a cold start reads from the disk: {windows:?}");
    }
    for fig in ["latency-cdf", "latency-summary", "latency-vs-rate-p95", "latency-vs-rate-mean"] {
        assert_eq!(run.svg_series(&format!("{fig}-{model}.svg")), vec!["amped", "sped"], "{fig}");
    }
    assert_eq!(
        run.svg_series(&format!("latency-over-time-p95-{model}.svg")),
        vec!["amped", "sped"]
    );
}

/// Every run's page-rounded floor, from its files alone: SPECweb99's sub-page files put it
/// above 1. It stands beside the read amplification in each rate's table and under each of
/// the `models` windows tables, and in results.json.
fn check_page_floors(run: &common::Run, rows: &[CsvRow], models: usize) {
    let summary = run.read("summary.md");
    for r in rows.iter().filter(|r| r["phase"] != "windows") {
        let floor = f(r, "read_amplification_floor");
        assert!(floor > 1.0 && floor < 4.0, "{r:?}");
    }
    assert!(summary.contains("| read amplification | page floor | disk busy % |"), "{summary}");
    let floors: Vec<&str> = summary.lines().filter(|l| l.starts_with("| page floor |")).collect();
    assert_eq!(floors.len(), models, "one under each model's windows");
    let mut json_floors = Vec::new();
    values_of(&run.json("results.json"), "read_amplification_floor", &mut json_floors);
    assert!(json_floors.iter().any(|v| v.as_f64().is_some_and(|v| v > 1.0)), "{json_floors:?}");
}

#[test]
fn disk_bound_given_rates_rounds_and_a_heavy_tailed_trace() {
    let run = amplab(&[
        "disk-bound",
        "--servers",
        "amped",
        "--no-cgroups",
        "--rates",
        "150,300",
        "--rounds",
        "2",
        "--zipf",
        "1.2",
        "--class-mix",
        "10,60,25,5",
        "--large-files",
        "0.01",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--window",
        "0.65",
        "--no-profile",
    ]);
    run.assert_ok();
    // --no-profile: amped ran without --debox, so no "who blocked where".
    assert!(!run.read("summary.md").contains("## Who blocked where"), "profiled anyway");
    let rows = run.csv("results.csv");
    let cells: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r["round"].as_str(), r["phase"].as_str(), r["rate"].as_str()))
        .collect();
    // 2 rounds of both rates, then a windowed run per round at the highest (2 windows each).
    let sweep = [("0", "fixed-rate", "150"), ("0", "fixed-rate", "300")];
    let mut want = sweep.to_vec();
    want.extend(sweep.map(|(_, p, r)| ("1", p, r)));
    want.extend([("0", "windows", "300"), ("0", "windows", "300")]);
    want.extend([("1", "windows", "300"), ("1", "windows", "300")]);
    assert_eq!(cells, want);
    assert!(rows.iter().all(|r| r["model"] == "none"));
    // One line per server; the rounds' min–max are whiskers on it.
    assert_eq!(run.svg_series("latency-over-time-mean-none.svg"), vec!["amped"]);
    assert!(run.read("latency-over-time-mean-none.svg").contains(r#"class="spread""#));
    assert!(rows.iter().all(|r| r["timeouts"] == "0" && !r["p999_ms"].is_empty()));
    assert_eq!(run.svg_series("latency-vs-rate-p95-none.svg"), vec!["amped"]);
    let summary = run.read("summary.md");
    assert!(
        summary.contains("Zipf α = 1.2, class mix 10/60/25/5 %, 1 % of requests for large files"),
        "{summary}"
    );
    assert!(summary.contains("+ 3 large files"), "{summary}");
    assert!(summary.contains("| 99.9% ms | max ms | timeouts |"), "{summary}");
    assert!(summary.contains("Rates: 150, 300 req/s (given)"), "{summary}");
    let setup = run.json("setup.json");
    assert_eq!(setup["parameters"]["shape"]["zipf"], 1.2);
    assert_eq!(setup["parameters"]["models"][0]["rates"], serde_json::json!([150.0, 300.0]));
    run.assert_report_rebuilds();
    // A run from before setup.json recorded the trace facts: amplab report draws the traces
    // again from the seed and writes the same summary (large files and cold shares included).
    let mut old = setup.clone();
    old["parameters"].as_object_mut().unwrap().remove("workload");
    old["parameters"]["models"][0].as_object_mut().unwrap().remove("cold");
    std::fs::write(run.out.join("setup.json"), old.to_string()).unwrap();
    let (before, after) = run.report();
    assert_eq!(before, after);
}

#[test]
fn capacity_runs_each_model_side_by_side() {
    // Two FUSE models in a row: the first one's mount must be gone before the second mounts.
    let models = if fuse_here() { "none,hdd,ssd" } else { "none" };
    let run = amplab(&[
        "capacity",
        "--servers",
        "amped",
        "--disk-emulation",
        models,
        "--scales",
        "1.5",
        "--duration",
        "0.5",
        "--warmup",
        "0.3",
    ]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    let got: Vec<&str> = rows.iter().map(|r| r["model"].as_str()).collect();
    assert_eq!(got, models.split(',').collect::<Vec<_>>());
    let summary = run.read("summary.md");
    for model in models.split(',') {
        assert_eq!(run.svg_series(&format!("capacity-{model}.svg")), vec!["amped"]);
        assert!(summary.contains(&format!("## Disk model {model}")), "{summary}");
    }
    if models.contains("ssd") {
        let ssd = &rows[1];
        assert!(f(ssd, "read_amplification") > 0.5, "{ssd:?}");
        assert!(summary.contains("32 arms"), "{summary}");
    }
    run.assert_report_rebuilds();
    // A run from before setup.json recorded the trace shape: it comes from the command line.
    let mut old = run.json("setup.json");
    old["parameters"].as_object_mut().unwrap().remove("shape").expect("the shape is recorded");
    std::fs::write(run.out.join("setup.json"), old.to_string()).unwrap();
    let (before, after) = run.report();
    assert_eq!(before, after);
}

#[test]
fn bad_disk_options_are_one_line_errors() {
    for args in [
        &["disk-bound", "--disk-emulation", "floppy"][..],
        &["disk-bound", "--class-mix", "1,2,3"],
        &["disk-bound", "--zipf", "-1"],
        &["capacity", "--large-files", "0.9"],
        &["disk-bound", "--rate", "100", "--rates", "100,200"],
    ] {
        let run = amplab(args);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("error:"), "{args:?}: {}", run.stderr);
    }
    let run = amplab(&["trace", "--disk-emulation", "none,hdd", "--servers", "amped"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("trace runs on one disk model"), "{}", run.stderr);
}

/// Whether amplab can mount its FUSE disk here (root, /dev/fuse, fuse in the kernel).
fn fuse_here() -> bool {
    fuse::skip_reason().is_none()
}

#[test]
fn disk_bound_without_cgroups_says_so() {
    let run = amplab(&["disk-bound", "--servers", "amped", "--no-cgroups", "--rate", "200"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    assert_eq!(rows.len(), 1, "with --rate there is no capacity pass");
    assert_eq!(rows[0]["disk_reads"], "");
    assert!((f(&rows[0], "rps") - 200.0).abs() < 20.0, "{:?}", rows[0]);
    let summary = run.read("summary.md");
    assert!(summary.contains("No disk emulation") && summary.contains("--no-cgroups"), "{summary}");
    let setup = run.json("setup.json");
    assert_eq!(setup["disk_emulation"]["cgroups"]["state"], "disabled-by-option");
    assert_eq!(setup["disk_emulation"]["evict"], "fadvise");
    run.assert_report_rebuilds();
}

#[test]
fn linux_comparison_quick() {
    let run = amplab(&["linux-comparison", "--servers", "staged,sped,amped", "--rounds", "2"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    let cells: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r["scale"].as_str(), r["round"].as_str(), r["server"].as_str()))
        .collect();
    // Both rounds of each data set, interleaved, the order rotated in the second.
    let mut want = Vec::new();
    for scale in ["0.5", "1.5"] {
        want.extend([(scale, "0", "staged"), (scale, "0", "sped"), (scale, "0", "amped")]);
        want.extend([(scale, "1", "sped"), (scale, "1", "amped"), (scale, "1", "staged")]);
    }
    assert_eq!(cells, want);
    assert_eq!(run.json("setup.json")["parameters"]["rounds"], 2);
    for r in &rows {
        assert!(f(r, "body_mbps") > 0.0 && f(r, "p50_ms") > 0.0, "{r:?}");
    }
    assert_eq!(run.svg_series("throughput.svg"), vec!["staged", "sped", "amped"]);
    assert_eq!(run.svg_series("latency-cdf.svg"), vec!["staged", "sped", "amped"]);
    for stage in ["read", "resolve"] {
        let threads = run.svg_series(&format!("staged-threads-{stage}.svg"));
        assert_eq!(threads, ["staged 32 MiB (0.5×)", "staged 96 MiB (1.5×)"], "{stage}");
    }
    let samples = run.csv("staged-threads.csv");
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|s| s["server"] == "staged" && f(s, "threads") >= 1.0));
    let summary = run.read("summary.md");
    for needle in [
        "Compared with the paper",
        "amped/sped = ",
        "Haboob worst on latency",
        "Excess parallelism",
        "mean threads",
        "Why Haboob's rank can differ",
        "staged/amped throughput = ",
    ] {
        assert!(summary.contains(needle), "{needle}: {summary}");
    }
    assert!(summary.contains("no verdict: quick run") && !summary.contains("**holds**"));
    // Medians over the 2 rounds with their range, in the tables and the throughput figure.
    assert!(summary.contains("2 rounds per cell, interleaved"), "{summary}");
    assert!(summary.contains("Medians of 2 rounds per cell"), "{summary}");
    for server in ["staged", "sped", "amped"] {
        let throughput = table_row(&summary, "## Throughput", server);
        assert_eq!(throughput.len(), 2, "{throughput:?}");
        assert!(throughput.iter().all(|c| is_range(c)), "{server}: {throughput:?}");
        let latency = table_row(&summary, "## Latency on the largest set", server);
        assert!(latency.iter().all(|c| is_range(c)), "{server}: {latency:?}");
    }
    let bars = run.read("throughput.svg");
    assert_eq!(bars.matches("(min ").count(), 6, "a min–max per bar: {bars}");
    assert!(bars.contains("Medians of 2 rounds per"), "{bars}");
    run.assert_report_rebuilds();
}

/// `amplab capacity --rounds 2`: each server runs twice per data set, the rounds interleaved,
/// and the summary and figure give medians with the rounds' min–max.
#[test]
fn capacity_rounds_give_medians_and_ranges() {
    let args = "capacity --servers amped,sped --disk-emulation none --scales 1.5 --rounds 2";
    let mut args: Vec<&str> = args.split(' ').collect();
    args.extend(["--duration", "0.5", "--warmup", "0.3"]);
    let run = amplab(&args);
    run.assert_ok();
    let rows = run.csv("results.csv");
    let cells: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["round"].as_str(), r["server"].as_str())).collect();
    assert_eq!(cells, [("0", "amped"), ("0", "sped"), ("1", "sped"), ("1", "amped")]);
    assert!(rows.iter().all(|r| f(r, "body_mbps") > 0.0), "{rows:?}");
    let summary = run.read("summary.md");
    assert!(summary.contains("2 rounds per cell, interleaved"), "{summary}");
    for server in ["amped", "sped"] {
        let throughput = table_row(&summary, "## Disk model none", server);
        assert_eq!(throughput.len(), 1, "{throughput:?}");
        assert!(is_range(&throughput[0]), "{server}: {throughput:?}");
    }
    // The largest set's disk table: each run's page floor beside its read amplification.
    let floor = table_row(&summary, "| read amplification | page floor |", "amped");
    assert!(is_range(&floor[3]), "{floor:?}");
    let bars = run.read("capacity-none.svg");
    assert_eq!(bars.matches("(min ").count(), 2, "a min–max per bar: {bars}");
    assert!(bars.contains("Medians of 2 rounds per"), "{bars}");
    assert_eq!(run.json("setup.json")["parameters"]["rounds"], 2);
    run.assert_report_rebuilds();
}

/// Every value of `key` anywhere in `v`.
fn values_of(v: &serde_json::Value, key: &str, out: &mut Vec<serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            out.extend(m.get(key).cloned());
            m.values().for_each(|v| values_of(v, key, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| values_of(v, key, out)),
        _ => {}
    }
}

/// The cells after the server's name in the first table row for `server` after `heading`.
fn table_row(summary: &str, heading: &str, server: &str) -> Vec<String> {
    let after = summary.split(heading).nth(1).unwrap_or_else(|| panic!("{heading}: {summary}"));
    let line = after
        .lines()
        .find(|l| l.starts_with(&format!("| {server} |")))
        .unwrap_or_else(|| panic!("no row for {server} after {heading}: {summary}"));
    line.split('|').map(str::trim).filter(|c| !c.is_empty()).skip(1).map(String::from).collect()
}

/// Whether a table cell reads `median (min–max)`, three numbers with min ≤ median ≤ max.
fn is_range(cell: &str) -> bool {
    let Some((median, rest)) = cell.split_once(" (") else { return false };
    let Some((lo, hi)) = rest.trim_end_matches(')').split_once('–') else { return false };
    let n = |t: &str| t.parse::<f64>().ok();
    matches!((n(median), n(lo), n(hi)), (Some(m), Some(a), Some(b)) if a <= m && m <= b)
}

#[test]
fn report_refuses_runs_before_the_disk_models_in_one_line() {
    for experiment in ["disk-bound", "capacity"] {
        let tmp = tempfile::tempdir().unwrap();
        let setup = serde_json::json!({
            "experiment": experiment,
            "quick": false,
            "command_line": ["amplab", experiment, "--rate", "950"],
            "parameters": {"rate": 950.0, "scales": [0.5], "connections": 1020},
            "disk_emulation": {"method": "fuse"},
        });
        std::fs::write(tmp.path().join("setup.json"), setup.to_string()).unwrap();
        std::fs::write(
            tmp.path().join("results.json"),
            r#"[{"round":0,"phase":"fixed-rate","cell":{"server":"amped"}}]"#,
        )
        .unwrap();
        std::fs::write(tmp.path().join("summary.md"), "as the run wrote it").unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_amplab"))
            .arg("report")
            .arg(tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("amplab:")).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(lines[0].contains("predates the disk models"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let summary = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
        assert_eq!(summary, "as the run wrote it");
    }
}

#[test]
fn pool_vs_nopool_quick() {
    let run = amplab(&["pool-vs-nopool"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    // 2 servers × 2 files × 2 concurrency levels.
    assert_eq!(rows.len(), 8);
    for r in &rows {
        assert!(f(r, "rps") > 0.0 && f(r, "p99_ms") >= 0.0, "{r:?}");
        assert_eq!(r["error"], "", "{r:?}");
    }
    let generator = &rows[0]["generator"];
    let summary = run.read("summary.md");
    if generator == "ampload" {
        assert!(summary.contains("ab is not installed"), "{summary}");
    } else {
        assert_eq!(generator, "ab");
        assert!(rows.iter().all(|r| f(r, "sd_ms") >= 0.0));
    }
    assert_eq!(
        run.svg_series("small-latency.svg"),
        vec!["mt median", "mt p99", "pool:threads=5 median", "pool:threads=5 p99"]
    );
    assert_eq!(run.svg_series("large-throughput.svg"), vec!["mt", "pool:threads=5"]);
    run.assert_report_rebuilds();
}

#[test]
fn pool_vs_nopool_with_ampload_standing_in() {
    let run = amplab(&["pool-vs-nopool", "--generator", "ampload", "--concurrency", "3"]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["generator"] == "ampload" && r["sd_ms"].is_empty()));
    assert!(run.read("summary.md").contains("ampload --close stood in"));
}

#[test]
fn trace_replays_an_access_log() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("access.log");
    std::fs::write(
        &log,
        "199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] \"GET /history/apollo/ HTTP/1.0\" 200 6245\n\
         unicomp6.unicomp.net - - [01/Jul/1995:00:00:06 -0400] \"GET /shuttle/countdown/ HTTP/1.0\" 200 3985\n\
         burger.letters.com - - [01/Jul/1995:00:00:11 -0400] \"GET /shuttle/countdown/liftoff.html HTTP/1.0\" 304 0\n\
         this line is broken\n\
         d104.aa.net - - [01/Jul/1995:00:00:13 -0400] \"GET /images/NASA-logosmall.gif HTTP/1.0\" 200 786\n",
    )
    .unwrap();
    let run =
        amplab(&["trace", "--servers", "amped", "--no-cgroups", "--clf", log.to_str().unwrap()]);
    run.assert_ok();
    let rows = run.csv("results.csv");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["workload"], "access-log");
    assert!(f(&rows[0], "requests") > 0.0);
    assert_eq!(run.svg_series("throughput.svg"), vec!["amped"]);
    assert!(run.stderr.contains("line 4: no [date]"), "{}", run.stderr);
    let summary = run.read("summary.md");
    assert!(summary.contains("1 lines rejected"));
    assert!(summary.contains("closed-loop clients") && summary.contains("### Latency\n"));
    assert!(
        summary.contains("| server | p50 | p95 | p99 | p99.9 | max | unanswered |"),
        "{summary}"
    );
    assert!(
        summary.lines().any(|l| l.starts_with("| amped |") && l.ends_with("| 0 |")),
        "{summary}"
    );
    run.assert_report_rebuilds();

    // The same log at a fixed rate: open loop, latency from the intended send times.
    let run = amplab(&[
        "trace",
        "--servers",
        "amped",
        "--no-cgroups",
        "--clf",
        log.to_str().unwrap(),
        "--rate",
        "40",
    ]);
    run.assert_ok();
    let summary = run.read("summary.md");
    assert!(summary.contains("40 req/s (open loop) over 8 connections"), "{summary}");
    assert!(summary.contains("### Latency (from each request's intended send time)"));
    assert_eq!(run.json("setup.json")["parameters"]["rate"], 40.0);
    let rows = run.csv("results.csv");
    assert!(f(&rows[0], "requests") > 0.0 && f(&rows[0], "rps") < 60.0, "{:?}", rows[0]);
    run.assert_report_rebuilds();
}

#[test]
fn unknown_servers_and_missing_peers() {
    let run = amplab(&["single-file", "--servers", "zeus"]);
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("unknown server \"zeus\""), "{}", run.stderr);
    if program_missing("apache2") {
        let run = amplab(&["pool-vs-nopool", "--servers", "mt,apache-event", "--concurrency", "2"]);
        run.assert_ok();
        assert!(
            run.stderr.contains("skipping apache-event: apache2 is not installed"),
            "{}",
            run.stderr
        );
        assert!(run.read("summary.md").contains("apache-event: apache2 is not installed"));
        assert_eq!(run.json("setup.json")["skipped_servers"][0]["label"], "apache-event");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_amplab"))
        .args(["install-peers", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("apt-get install")
            && text.contains("apache2-bin")
            && text.contains("apache2-utils"),
        "{text}"
    );
}

/// Whether a program is absent from the PATH and the sbin folders.
fn program_missing(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    !std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(std::path::PathBuf::from))
        .any(|d| d.join(program).is_file())
}

/// The first number of each server's cell in the summary table row starting with `row`.
fn table_numbers(summary: &str, row: &str) -> Vec<f64> {
    let line = summary.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("{row}"));
    line[row.len()..]
        .split('|')
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(f64::NAN))
        .collect()
}
