//! E3, the optimization breakdown (Flash §6.3, Fig 11): amped with all 2³ combinations of the
//! pathname-translation cache, the response-header cache and the file cache, on the
//! single-file workload; connection rate vs file size.

use serde_json::json;

use super::single_file::{self, Params, failures, median_of, median_table, per_round, size_name};
use super::{Lab, failures_section};
use crate::cli::{ModeArg, OptimizationsArgs};
use crate::stats::{fmt, ratio};
use crate::verdict::{Cmp, judge, ratios};

/// The caches, in the order of amped's flags.
const CACHES: [(&str, &str); 3] =
    [("path", "no-path-cache"), ("header", "no-header-cache"), ("file", "no-file-cache")];

/// The 8 server specs: all caches on first, none last.
pub fn combinations(arch: &str) -> Vec<String> {
    let mut out = Vec::new();
    for off_count in 0..=3 {
        for mask in 0u8..8 {
            if mask.count_ones() != off_count {
                continue;
            }
            let mut spec = arch.to_string();
            for (i, (_, flag)) in CACHES.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    spec.push(':');
                    spec.push_str(flag);
                }
            }
            out.push(spec);
        }
    }
    out
}

/// Runs E3 and writes its folder.
pub fn run(a: &OptimizationsArgs) -> Result<std::path::PathBuf, String> {
    if a.common.servers.is_some() {
        return Err("optimizations always measures the 8 cache combinations of --arch; --servers does not apply".into());
    }
    let q = a.common.quick;
    let p = Params {
        sizes: a.sizes.clone().unwrap_or_else(|| {
            let kib: &[u64] = if q { &[1, 20] } else { &[0, 1, 2, 5, 10, 20, 50, 100, 200] };
            kib.iter().map(|k| k << 10).collect()
        }),
        modes: a.modes.clone().unwrap_or_else(|| vec![ModeArg::Close]),
        connections: a.connections.unwrap_or(if q { 8 } else { 50 }),
        duration_s: a.common.duration.unwrap_or(if q { 0.4 } else { 5.0 }),
        warmup_s: a.common.warmup.unwrap_or(if q { 0.2 } else { 1.0 }),
        rounds: a.common.rounds.unwrap_or(if q { 1 } else { 3 }),
        generator: single_file::generator_name(a.generator).into(),
    };
    let specs = combinations(&a.arch);
    let defaults: Vec<&str> = specs.iter().map(String::as_str).collect();
    let mut lab = Lab::open("optimizations", &a.common, &defaults)?;
    let cells = single_file::measure(&mut lab, &p)?;
    single_file::write_results(&mut lab, &cells)?;
    let s = outputs(&mut lab, &a.arch, &p, &cells, &specs)?;
    lab.finish(json!({"arch": a.arch, "combinations": specs, "sweep": p}), None, Vec::new(), &s)
}

/// `amplab report`: the figures and summary of a recorded E3 run, from its results.json.
pub fn rebuild(lab: &mut Lab, setup: &serde_json::Value) -> Result<String, String> {
    let parameters = &setup["parameters"];
    let p: Params = super::rebuild::parameters(&parameters["sweep"])?;
    let specs: Vec<String> = super::rebuild::parameters(&parameters["combinations"])?;
    let arch = parameters["arch"].as_str().unwrap_or("amped").to_string();
    let cells = single_file::recorded_cells(lab)?;
    outputs(lab, &arch, &p, &cells, &specs)
}

/// Writes medians.csv and the figures; returns the summary.
fn outputs(
    lab: &mut Lab,
    arch: &str,
    p: &Params,
    cells: &[single_file::Cell],
    specs: &[String],
) -> Result<String, String> {
    let figures = single_file::write_outputs(lab, p, cells, specs, "amped cache combinations")?;
    let mut s = lab.summary_head(
        "E3 optimization breakdown (Flash 1999 §6.3, Fig 11)",
        &format!(
            "amped --arch {arch} with each combination of --no-path-cache / --no-header-cache / --no-file-cache on one cached file, sizes {}; {} closed-loop connections; {} s per cell; {} round(s), medians",
            p.sizes.iter().map(|&z| size_name(z)).collect::<Vec<_>>().join(", "),
            p.connections,
            p.duration_s,
            p.rounds
        ),
    );
    for &mode in &p.modes {
        s.push_str(&format!("## {} — median req/s / Mb/s\n\n", single_file::mode_name(mode)));
        s.push_str(&median_table(p, cells, specs, mode));
        s.push('\n');
    }
    s.push_str(&single_file::spread_note(p, cells, specs));
    s.push_str("Figures: ");
    s.push_str(&figures.iter().map(|f| format!("[{f}]({f})")).collect::<Vec<_>>().join(", "));
    s.push_str("\n\n## Compared with the paper\n\n");
    s.push_str(&comparison(p, cells, specs, lab.quick));
    s.push_str(&failures_section(&failures(cells)));
    Ok(s)
}

fn comparison(p: &Params, cells: &[single_file::Cell], specs: &[String], quick: bool) -> String {
    let mode = p.modes[0];
    let small = p.sizes.iter().copied().filter(|&z| z > 0).min().unwrap_or(0);
    let rate = |spec: &str| median_of(cells, spec, mode, small).rps;
    let all = rate(&specs[0]);
    let none = rate(&specs[7]);
    let mut out = format!(
        "At {} ({}), all caches on: {} req/s; none: {} req/s.\n\n",
        size_name(small),
        single_file::mode_name(mode),
        fmt(all, 0),
        fmt(none, 0)
    );
    let rounds = |spec: &str| per_round(cells, p.rounds, spec, mode, small, |m| m.rps);
    let j = judge(&ratios(&rounds(&specs[7]), &rounds(&specs[0])), Cmp::AtMost(0.7), quick);
    out.push_str(&format!(
        "- *Without any cache, small-file performance roughly halves*: none/all = {}. {}\n",
        fmt(j.spread.median, 2),
        j.text("Holds", "Does not hold to that degree: Linux's dentry and inode caches make a pathname lookup and an open far cheaper than in 1999, so the user-space caches save less")
    ));
    let losses: Vec<(&str, f64)> = CACHES
        .iter()
        .zip(&specs[1..4])
        .map(|((name, _), spec)| (*name, ratio(rate(spec), all)))
        .collect();
    for (name, l) in &losses {
        out.push_str(&format!("- Without the {name} cache alone: {} of all-on.\n", fmt(*l, 2)));
    }
    if let Some((worst, _)) =
        losses.iter().filter(|(_, l)| l.is_finite()).min_by(|a, b| a.1.total_cmp(&b.1))
    {
        // Per round: the path cache's loss over the worst of the other two (< 1: path costs most).
        let all = rounds(&specs[0]);
        let loss = |i: usize| -> Vec<f64> { ratios(&rounds(&specs[i]), &all) };
        let (path, header, file) = (loss(1), loss(2), loss(3));
        let per_round: Vec<f64> =
            (0..path.len()).map(|r| ratio(path[r], header[r].min(file[r]))).collect();
        let j = judge(&per_round, Cmp::Below(1.0), quick);
        out.push_str(&format!(
            "- *The pathname cache helps most*: the cache whose removal costs most here is the {worst} cache (path loss / the other caches' worst = {}). {}\n",
            fmt(j.spread.median, 2),
            j.text("Holds", "Does not hold")
        ));
    }
    out.push_str("\nEach cache helps most for small files, where per-request work dominates; for large files the transfer dominates and the curves converge, as in the paper.\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn eight_combinations_all_first_none_last() {
        let c = super::combinations("amped");
        assert_eq!(c.len(), 8);
        assert_eq!(c[0], "amped");
        assert_eq!(c[1], "amped:no-path-cache");
        assert_eq!(c[7], "amped:no-path-cache:no-header-cache:no-file-cache");
        let unique: std::collections::BTreeSet<_> = c.iter().collect();
        assert_eq!(unique.len(), 8);
    }
}
