//! The soak's report: a verdict line per server, results.csv (one row per server),
//! samples.csv (RSS and descriptors over time), the RSS and descriptor figures, and
//! summary.md. `amplab report` rebuilds all of it from results.json.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::content::Outcome;
use super::{Knobs, ServerSoak};
use crate::experiments::Lab;
use crate::report::csv::{Csv, num};
use crate::report::markdown::table;
use crate::stats::fmt;
use crate::svg::{Chart, Plot, Scale, Series};

/// A server's verdict.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Verdict {
    /// No failure of any kind (notes allowed).
    pub pass: bool,
    /// One line: PASS or FAIL, what held or what did not, memory and descriptors.
    pub line: String,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// p50, p99 and max of `ms` (sorted in place); NaN when empty.
pub fn percentiles(ms: &mut [f64]) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() as f64 * p) as usize).min(ms.len() - 1)];
    (at(0.5), at(0.99), ms[ms.len() - 1])
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// Thousands with thin spaces, as the docs write them.
fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Mean RSS (KiB) of the samples taken in `[from, to)` of the load.
fn mean_rss(r: &ServerSoak, from: f64, to: f64) -> Option<f64> {
    let v: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.t_s >= from * r.load_s && s.t_s < to * r.load_s)
        .map(|s| s.rss_kb as f64)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// `socket 3, file 20` from a count by kind.
fn kinds_text(m: &std::collections::BTreeMap<String, u64>) -> String {
    m.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// Judges one server's soak.
pub fn verdict(r: &ServerSoak, k: &Knobs) -> Verdict {
    let t = &r.tally;
    let mut problems = request_problems(r);
    let mut notes = Vec::new();
    descriptors_once_idle(r, k, &mut problems, &mut notes);
    problems.extend(rss_growth(r));
    if t.stale_answers > 0 {
        notes.push(format!(
            "{} stale answers (a state older than the request by up to {:.1} s beyond the {} s grace)",
            count(t.stale_answers),
            t.stale_max_s,
            k.grace_s
        ));
    }
    if r.latency_ms.1 > 5000.0 {
        notes.push(format!(
            "normal clients' small-file answers waited up to {:.1} s (p99): slow clients held the server",
            r.latency_ms.1 / 1000.0
        ));
    }
    if r.signals.signal.is_none() {
        notes.push("no reload signal".into());
    }
    let pass = problems.is_empty();
    let line = verdict_line(r, pass, &problems, &notes);
    Verdict { pass, line, problems, notes }
}

/// What went wrong with the requests: the run's error, no right answer at all, failed
/// outcomes and mismatched bytes.
fn request_problems(r: &ServerSoak) -> Vec<String> {
    let t = &r.tally;
    let mut problems = Vec::new();
    if let Some(e) = &r.error {
        problems.push(e.clone());
    }
    if t.count(Outcome::Ok) == 0 && r.error.is_none() {
        problems.push("no request was answered right".into());
    }
    for (o, what) in [
        (Outcome::Mismatch, "answers matched no version of their file"),
        (Outcome::UnexpectedStatus, "unexpected statuses"),
        (Outcome::Timeout, "timeouts"),
        (Outcome::Reset, "connections reset or closed early"),
    ] {
        let n = t.count(o);
        if n > 0 {
            problems.push(format!("{} {what}", count(n)));
        }
    }
    if t.mismatched_bytes > 0 {
        problems.push(format!("{} body bytes in mismatched answers", count(t.mismatched_bytes)));
    }
    problems
}

/// The descriptors a server still holds once idle, against those it held at the start.
fn descriptors_once_idle(
    r: &ServerSoak,
    k: &Knobs,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    // Once idle, a server may keep files open (a cache: at most one per path served, per
    // process) and spare pipes or other descriptors of its own (a reload's extra process has
    // its own Unix sockets), but no TCP connection.
    let kind =
        |m: &std::collections::BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let paths = (k.set.small + k.set.large.len() + k.set.churn) as u64;
    let (start, end) = (&r.fds_start_kinds, &r.fds_end_kinds);
    if kind(end, "connection") > kind(start, "connection") + 2 {
        problems.push(format!(
            "TCP connections {} → {} once idle: left open ({})",
            kind(start, "connection"),
            kind(end, "connection"),
            kinds_text(end)
        ));
    }
    let held = kind(end, "file") + kind(end, "deleted file");
    let procs = r.samples.last().map_or(1, |s| s.procs.max(1));
    if held > kind(start, "file") + (paths + 4) * procs {
        problems.push(format!(
            "{held} files open once idle, more than the {paths} paths served per process"
        ));
    }
    for k in ["socket", "pipe", "anon", "other"] {
        if kind(end, k) > kind(start, k) + 2 {
            notes.push(format!("{k} descriptors {} → {} once idle", kind(start, k), kind(end, k)));
        }
    }
    if kind(end, "deleted file") > 0 {
        notes.push(format!(
            "holds {} removed or replaced files open once idle (its cache: released when the path is next served)",
            kind(end, "deleted file")
        ));
    }
}

/// A problem if the RSS kept growing: the last quarter's mean well above the second's.
fn rss_growth(r: &ServerSoak) -> Option<String> {
    let (q2, q4) = (mean_rss(r, 0.25, 0.5)?, mean_rss(r, 0.75, 1.01)?);
    (q4 > 1.5 * q2 && q4 - q2 > 16.0 * 1024.0).then(|| {
        format!(
            "RSS still growing: {} MB in the second quarter, {} MB in the last",
            mb(q2 as u64),
            mb(q4 as u64)
        )
    })
}

/// The verdict's line: PASS or FAIL, the requests, the bytes checked, RSS and descriptors,
/// then the problems and notes.
fn verdict_line(r: &ServerSoak, pass: bool, problems: &[String], notes: &[String]) -> String {
    let t = &r.tally;
    let bytes = if t.mismatched_answers == 0 && t.bodies_checked > 0 {
        format!(
            "every byte of {} bodies ({} MiB) matched a version of its file",
            count(t.bodies_checked),
            count(t.body_bytes_checked >> 20)
        )
    } else {
        format!(
            "{} of {} bodies matched no version",
            count(t.mismatched_answers),
            count(t.bodies_checked)
        )
    };
    let mut line = format!(
        "{} — {} requests, {}; RSS {} → {} MB (max {}), fds {} → {} (max {})",
        if pass { "PASS" } else { "FAIL" },
        count(t.total()),
        bytes,
        mb(r.rss_kb.start),
        mb(r.rss_kb.end),
        mb(r.rss_kb.max),
        r.fds.start,
        r.fds.end,
        r.fds.max
    );
    if !problems.is_empty() {
        line.push_str(&format!("; {}", problems.join("; ")));
    }
    if !notes.is_empty() {
        line.push_str(&format!(" (notes: {})", notes.join("; ")));
    }
    line
}

/// Writes results.csv, samples.csv and the figures; returns the summary.
pub fn outputs(
    lab: &mut Lab,
    k: &Knobs,
    results: &[ServerSoak],
    notes: &[String],
) -> Result<String, String> {
    let io = |e: std::io::Error| format!("cannot write results: {e}");
    lab.run.write("results.csv", &results_csv(results)).map_err(io)?;
    lab.run.write("samples.csv", &samples_csv(results)).map_err(io)?;
    let figures = over_time_figures(lab, k, results).map_err(io)?;
    Ok(summary(lab, k, results, notes, &figures))
}

/// samples.csv: each server's RSS, descriptors and processes over the soak.
fn samples_csv(results: &[ServerSoak]) -> String {
    let mut samples = Csv::new(&["server", "t_s", "rss_kb", "fds", "procs"]);
    for r in results {
        for s in &r.samples {
            samples.row(vec![
                r.label.clone(),
                num(s.t_s),
                s.rss_kb.to_string(),
                s.fds.to_string(),
                s.procs.to_string(),
            ]);
        }
    }
    samples.render()
}

/// The RSS and descriptors over time, a line per server with samples.
fn over_time_figures(
    lab: &mut Lab,
    k: &Knobs,
    results: &[ServerSoak],
) -> std::io::Result<Vec<String>> {
    let subtitle = format!(
        "soak, {} s per server: {} clients (keep-alive, close, large, slow readers, slowloris, malformed), files changed every {} ms",
        k.duration_s,
        k.clients(),
        k.mutate_every_ms
    );
    let mut figures = Vec::new();
    for (name, title, y_label, f) in [
        (
            "rss-over-time",
            "Server RSS over the soak",
            "RSS, MB (summed over its processes)",
            (|s: &super::Sample| s.rss_kb as f64 / 1024.0) as fn(&super::Sample) -> f64,
        ),
        (
            "fds-over-time",
            "Server open descriptors over the soak",
            "open descriptors (summed over its processes)",
            |s| s.fds as f64,
        ),
    ] {
        let series = results
            .iter()
            .filter(|r| !r.samples.is_empty())
            .map(|r| {
                Series::new(r.label.clone(), r.samples.iter().map(|s| (s.t_s, f(s))).collect())
            })
            .collect::<Vec<_>>();
        if series.is_empty() {
            continue;
        }
        let chart = Chart {
            title: title.into(),
            subtitle: subtitle.clone(),
            x_label: "seconds since the server's soak began".into(),
            y_label: y_label.into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            plot: Plot::Lines(series),
            note: String::new(),
        };
        figures.push(lab.run.write_chart(name, &chart)?);
    }
    Ok(figures)
}

/// results.csv's columns after the outcomes' counts.
const RESULT_COLUMNS: [&str; 23] = [
    "keepalive_retries",
    "bodies_checked",
    "body_bytes_checked",
    "mismatched_answers",
    "mismatched_bytes",
    "stale_max_s",
    "rss_start_kb",
    "rss_end_kb",
    "rss_max_kb",
    "fds_start",
    "fds_end",
    "fds_max",
    "max_procs",
    "signal",
    "signals_sent",
    "renamed",
    "truncated",
    "recreated",
    "latency_p50_ms",
    "latency_p99_ms",
    "alive_at_end",
    "pass",
    "verdict",
];

/// results.csv: a row per server, its outcomes' counts and then [`RESULT_COLUMNS`].
fn results_csv(results: &[ServerSoak]) -> String {
    let mut header = vec!["server", "requests"];
    header.extend(Outcome::ALL.iter().map(|o| o.name()));
    header.extend(RESULT_COLUMNS);
    let mut csv = Csv::new(&header);
    for r in results {
        let t = &r.tally;
        let mut row = vec![r.label.clone(), t.total().to_string()];
        row.extend(Outcome::ALL.iter().map(|&o| t.count(o).to_string()));
        row.extend(result_columns(r));
        csv.row(row);
    }
    csv.render()
}

/// One server's values of [`RESULT_COLUMNS`], in order.
fn result_columns(r: &ServerSoak) -> [String; 23] {
    let t = &r.tally;
    [
        t.keepalive_retries.to_string(),
        t.bodies_checked.to_string(),
        t.body_bytes_checked.to_string(),
        t.mismatched_answers.to_string(),
        t.mismatched_bytes.to_string(),
        num(t.stale_max_s),
        r.rss_kb.start.to_string(),
        r.rss_kb.end.to_string(),
        r.rss_kb.max.to_string(),
        r.fds.start.to_string(),
        r.fds.end.to_string(),
        r.fds.max.to_string(),
        r.max_procs.to_string(),
        r.signals.signal.clone().unwrap_or_default(),
        r.signals.sent.to_string(),
        r.mutations.renamed.to_string(),
        r.mutations.truncated.to_string(),
        r.mutations.recreated.to_string(),
        num(r.latency_ms.0),
        num(r.latency_ms.1),
        r.alive_at_end.to_string(),
        r.verdict.pass.to_string(),
        r.verdict.line.clone(),
    ]
}

/// summary.md: the workload, the verdicts, then a section per table.
fn summary(
    lab: &Lab,
    k: &Knobs,
    results: &[ServerSoak],
    notes: &[String],
    figures: &[String],
) -> String {
    let workload = workload_sentence(k);
    let mut s = lab.summary_head("Soak: reliability side by side", &workload);
    for n in notes {
        s.push_str(&format!("**Note**: {n}\n\n"));
    }
    s.push_str("## Verdicts\n\n");
    for r in results {
        s.push_str(&format!("- **{}**: {}\n", r.label, r.verdict.line));
    }
    s.push_str("\n## Requests by outcome\n\n");
    s.push_str("ok: a right answer, every byte from a version of the file there during the request; stale: right for an earlier state of the file (a cache); expected error: an error status or a close where one is right (404 while a file was removed, a body cut short by a truncation, a malformed request refused, a slowloris head cut off); unexpected status, timeout, reset (closed before a whole answer) and mismatch (bytes or a length no version ever had) count against the server. Keep-alive retries are requests sent again because a kept-alive connection was closed before any byte of the answer (not failures).\n\n");
    s.push_str(&outcome_table(results));
    s.push_str("\n## Bytes, memory and descriptors\n\n");
    s.push_str("RSS and descriptors are summed over the server's processes (its process group), sampled from /proc; start is right after the probe, end after the load and an idle pause.\n\n");
    s.push_str(&bytes_table(results));
    s.push_str("\n## Signals and file changes\n\n");
    s.push_str(&signals_table(results));
    s.push_str("\n## Malformed and oversize requests: what each server answered\n\n");
    s.push_str("Each case was sent on a new connection, in turn; a cell gives the answers (a status, `close` for a close without an answer) and their share when a server answered a case in more than one way. ✗ marks an answer counted against the server (a 2xx to a request RFC 9110/9112 says to refuse, or a timeout).\n\n");
    s.push_str(&malformed_table(results));
    s.push_str("\n## What happened, by reason\n\n");
    s.push_str(&reasons_section(results));
    if !figures.is_empty() {
        s.push_str("## Figures\n\n");
        for f in figures {
            s.push_str(&format!("![{f}]({f})\n\n"));
        }
    }
    s
}

/// The workload sentence at the head of the summary: every knob of the soak.
fn workload_sentence(k: &Knobs) -> String {
    format!(
        "{} s per server, one server at a time, all at once on loopback: {} keep-alive clients (up to {} requests per connection) and {} `Connection: close` clients (GET 75 %, HEAD 10 %, Range 15 % of large and churn files; small files 60 %, large 10 %, churn 30 %), {} large-file clients, {} slow readers ({}–{} KB/s for {}–{} s with a 4 KiB receive buffer, then full speed), {} slowloris heads sent a byte every {} ms and {} that never end (cut off by the server, or a timeout at {} s), one client cycling through {} malformed and oversize requests; {} small files (up to {} KiB), large files of {} MiB, {} churn files of {}–{} KiB changed every {} ms (renamed over, truncated in place, or removed and re-created); a reload signal every {} s; RSS and descriptors sampled every {} s; a request with no byte for {} s is a timeout; an answer showing a file's state older than {} s before the request is stale",
        k.duration_s,
        k.keepalive_clients,
        k.requests_per_conn,
        k.close_clients,
        k.large_clients,
        k.slow_readers,
        k.slow_rate.0 / 1000.0,
        k.slow_rate.1 / 1000.0,
        k.slow_phase_s.0,
        k.slow_phase_s.1,
        k.slowloris,
        k.slowloris_byte_ms,
        k.endless_slowloris,
        k.endless_cap_s,
        super::malformed::CASES.len(),
        k.set.small,
        k.set.small_max >> 10,
        k.set
            .large
            .iter()
            .map(|b| format!("{:.0}", *b as f64 / 1048576.0))
            .collect::<Vec<_>>()
            .join(", "),
        k.set.churn,
        k.set.churn_min >> 10,
        k.set.churn_max >> 10,
        k.mutate_every_ms,
        k.signal_every_s,
        k.sample_every_s,
        k.io_timeout_s,
        k.grace_s,
    )
}

/// The requests of each server by outcome, with the rate and the keep-alive retries.
fn outcome_table(results: &[ServerSoak]) -> String {
    let mut header = vec!["server", "requests", "req/s"];
    header.extend(Outcome::ALL.iter().map(|o| o.name()));
    header.push("keep-alive retries");
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let rate = r.tally.total() as f64 / r.load_s.max(1e-3);
            let mut row = vec![r.label.clone(), count(r.tally.total()), fmt(rate, 0)];
            row.extend(Outcome::ALL.iter().map(|&o| count(r.tally.count(o))));
            row.push(count(r.tally.keepalive_retries));
            row
        })
        .collect();
    table(&header, &rows)
}

/// What each server's bodies were checked against, its memory, descriptors and latency.
fn bytes_table(results: &[ServerSoak]) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let t = &r.tally;
            vec![
                r.label.clone(),
                count(t.bodies_checked),
                count(t.body_bytes_checked >> 20),
                count(t.mismatched_answers),
                count(t.mismatched_bytes),
                if t.stale_answers > 0 {
                    format!("{} ({:.1} s)", count(t.stale_answers), t.stale_max_s)
                } else {
                    "0".into()
                },
                format!("{} / {} / {}", mb(r.rss_kb.start), mb(r.rss_kb.end), mb(r.rss_kb.max)),
                format!("{} / {} / {}", r.fds.start, r.fds.end, r.fds.max),
                kinds_text(&r.fds_end_kinds),
                r.max_procs.to_string(),
                format!("{} / {}", fmt(r.latency_ms.0, 2), fmt(r.latency_ms.1, 1)),
            ]
        })
        .collect();
    table(
        &[
            "server",
            "bodies checked",
            "MiB checked",
            "mismatched answers",
            "mismatched bytes",
            "stale (oldest)",
            "RSS MB start / end / max",
            "fds start / end / max",
            "processes",
            "small-file ms p50 / p99",
        ],
        &rows,
    )
}

/// The reload signals sent to each server and the file changes made under it.
fn signals_table(results: &[ServerSoak]) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                r.signals.signal.clone().unwrap_or_else(|| "-".into()),
                r.signals.sent.to_string(),
                r.signals.note.clone(),
                format!(
                    "{} / {} / {}",
                    r.mutations.renamed, r.mutations.truncated, r.mutations.recreated
                ),
            ]
        })
        .collect();
    table(&["server", "signal", "sent", "what it does", "renamed / truncated / re-created"], &rows)
}

/// A row per malformed or oversize case: what each server answered.
fn malformed_table(results: &[ServerSoak]) -> String {
    let mut header = vec!["case", "rule"];
    header.extend(results.iter().map(|r| r.label.as_str()));
    let rows: Vec<Vec<String>> = super::malformed::CASES
        .iter()
        .map(|case| {
            let mut row = vec![format!("`{}`", case.name), format!("{:?}", case.rule)];
            for r in results {
                let answers = r.tally.malformed.get(case.name);
                row.push(answers.map_or("-".into(), |a| malformed_cell(a, case.rule)));
            }
            row
        })
        .collect();
    table(&header, &rows)
}

/// Per server: what happened by reason, and its first failures.
fn reasons_section(results: &[ServerSoak]) -> String {
    let mut s = String::new();
    for r in results {
        s.push_str(&format!("**{}**\n\n", r.label));
        for (reason, n) in &r.tally.reasons {
            s.push_str(&format!("- {reason}: {}\n", count(*n)));
        }
        if !r.tally.examples.is_empty() {
            s.push_str("\nFirst failures:\n\n");
            for e in r.tally.examples.iter().take(10) {
                s.push_str(&format!("- {e}\n"));
            }
        }
        if r.tally.open_at_end > 0 {
            s.push_str(&format!("\n{} endless slowloris connection(s) were still open when the soak ended (not counted).\n", r.tally.open_at_end));
        }
        s.push('\n');
    }
    s
}

/// `400`, or `400 80 % · close 20 %`, with ✗ on answers that count against the server.
fn malformed_cell(
    answers: &std::collections::BTreeMap<String, u64>,
    rule: super::malformed::Rule,
) -> String {
    let total: u64 = answers.values().sum();
    let mut v: Vec<(&String, &u64)> = answers.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1));
    let bad = |label: &str| {
        label == "timeout"
            || (rule == super::malformed::Rule::Refuse
                && label.parse::<u16>().is_ok_and(|s| s < 400))
    };
    let mark = |label: &str| if bad(label) { format!("{label} ✗") } else { label.to_string() };
    if v.len() == 1 {
        return mark(v[0].0);
    }
    v.iter()
        .map(|(l, n)| format!("{} {:.0} %", mark(l), **n as f64 * 100.0 / total as f64))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `amplab report` of a soak run: figures, CSVs and summary from results.json.
pub fn rebuild(lab: &mut Lab, setup: &Value) -> Result<String, String> {
    let k: Knobs = crate::experiments::rebuild::parameters(&setup["parameters"])?;
    let results: Vec<ServerSoak> = crate::experiments::rebuild::results(&lab.run.path)?;
    let notes: Vec<String> = setup["notes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter_map(Value::as_str)
                .filter(|n| !crate::experiments::is_finish_note(n))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    outputs(lab, &k, &results, &notes)
}
