//! The "who blocked where" table every experiment's summary ends with: one row per server,
//! amped's from its DeBox profile (docs/DEBOX.md §1), a peer's from outside
//! ([`super::outside_profile`]), and one generated sentence saying whether blocking explains
//! the experiment's ranking.

use super::debox_probe::Blocking;
use super::outside_profile::{OutsideProfile, SLOW_MS};
use crate::stats::fmt;

/// One server's row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    /// How it was profiled.
    pub how: String,
    /// Event-loop threads' seconds asleep (outside idle waits) per second, summed (None: no
    /// profile).
    pub loop_asleep: Option<f64>,
    /// Whether the server has event-loop threads at all (Apache, mt, pool, mp have none).
    pub has_loop: bool,
    /// Helpers' and workers' seconds asleep per second, summed over their threads.
    pub others_asleep: Option<f64>,
    /// Loop calls that can wait for the disk and took 1 ms or longer.
    pub loop_stalls: Option<u64>,
    pub major_faults_per_request: Option<f64>,
    /// Block-I/O delay per second while measured (loop; others), with delay accounting.
    pub blkio: Option<(f64, f64)>,
    /// The longest sleepers, as text.
    pub top: String,
    /// The loop's longest sleepers, as text.
    pub loop_top: String,
}

/// An amped server's row: its DeBox profile while measured (`outside`: the same run's /proc
/// readings, for the block-I/O column).
pub fn amped_row(
    label: &str,
    b: &Blocking,
    measured_s: f64,
    requests: u64,
    outside: Option<&OutsideProfile>,
) -> Row {
    let has_loop = b.calls.keys().any(|k| k.starts_with("loop "));
    Row {
        label: label.to_string(),
        how: "DeBox, measured phase".into(),
        loop_asleep: Some(b.asleep_share("loop", measured_s)),
        has_loop,
        others_asleep: Some(
            b.asleep_share("helper", measured_s) + b.asleep_share("worker", measured_s),
        ),
        loop_stalls: Some(b.loop_disk_stalls),
        major_faults_per_request: Some(b.major_faults() as f64 / requests.max(1) as f64),
        blkio: outside.and_then(blkio),
        top: b.top(3),
        loop_top: b.top_of("loop", 2),
    }
}

fn blkio(p: &OutsideProfile) -> Option<(f64, f64)> {
    Some((p.blkio_share(&["loop"])?, p.blkio_share(&["helper", "worker", "all"])?))
}

/// The row of a disk-runner cell: amped's DeBox profile, or the profile from outside.
pub fn cell_row(cell: &super::diskrun::DiskCell) -> Option<Row> {
    let requests = cell.measurement.as_ref().map_or(0, |m| m.requests);
    match (&cell.debox, &cell.outside) {
        (Some(b), o) => Some(amped_row(&cell.server, b, cell.measured_s, requests, o.as_ref())),
        (None, Some(o)) => Some(outside_row(&cell.server, o)),
        (None, None) => None,
    }
}

/// A row from a profile gathered from outside.
pub fn outside_row(label: &str, p: &OutsideProfile) -> Row {
    let how = match &p.slice {
        Some(s) => format!(
            "perf trace {:.1} s slice{}",
            s.secs,
            s.speed.map_or(String::new(), |v| format!(" at {v:.2}× the measured rate"))
        ),
        None => format!("/proc only ({})", p.note.as_deref().unwrap_or("no perf slice")),
    };
    let has_loop = p.slice.as_ref().is_some_and(|s| s.roles.contains_key("loop"));
    let others = match (p.asleep_share("helper"), p.asleep_share("worker")) {
        (Some(h), Some(w)) => Some(h + w),
        _ => None,
    };
    Row {
        label: label.to_string(),
        how,
        loop_asleep: p.asleep_share("loop").filter(|_| has_loop),
        has_loop,
        others_asleep: others,
        loop_stalls: p.slice.as_ref().map(|s| s.loop_disk_stalls),
        major_faults_per_request: Some(p.major_faults_per_request()),
        blkio: blkio(p),
        top: p.top(3),
        loop_top: p.top_of("loop", 2),
    }
}

/// The ranking the sentence explains: a metric per server, and which way is better.
pub struct Ranking<'a> {
    /// e.g. "requests/s" or "p95 latency".
    pub metric: &'a str,
    pub values: Vec<(String, f64)>,
    pub higher_better: bool,
}

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let with_blkio = rows.iter().any(|r| r.blkio.is_some());
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v * 100.0));
    let body: Vec<Vec<String>> =
        rows.iter()
            .map(|r| {
                let mut row = vec![
                    r.label.clone(),
                    if r.has_loop { pct(r.loop_asleep) } else { "no loop".into() },
                    r.others_asleep.map_or("-".into(), |v| format!("{v:.2}")),
                    r.loop_stalls.map_or("-".into(), |v| v.to_string()),
                    r.major_faults_per_request.map_or("-".into(), |v| format!("{v:.3}")),
                ];
                if with_blkio {
                    row.push(r.blkio.map_or("-".into(), |(l, o)| {
                        format!("{:.2}; {:.2}", l.max(0.0), o.max(0.0))
                    }));
                }
                row.push(r.top.clone());
                row.push(r.how.clone());
                row
            })
            .collect();
    let mut head = vec![
        "server",
        "loop asleep %",
        "helpers/workers asleep (threads)",
        "loop disk stalls",
        "major faults / req",
    ];
    if with_blkio {
        head.push("block-I/O wait s/s (loop; others)");
    }
    head.extend(["longest sleepers (role call: times blocked, ms)", "profile"]);
    crate::report::markdown::table(&head, &body)
}

/// The one sentence: does blocking explain the ranking?
pub fn explain(rows: &[Row], ranking: &Ranking) -> String {
    let known: Vec<&Row> = rows.iter().filter(|r| r.loop_asleep.is_some() || !r.has_loop).collect();
    if known.is_empty() {
        return "No server could be profiled, so nothing here says who blocked.".into();
    }
    let quiet = |r: &&Row| {
        r.loop_asleep.unwrap_or(0.0) < 0.01
            && r.others_asleep.unwrap_or(0.0) < 0.05
            && r.loop_stalls.unwrap_or(0) == 0
    };
    let names = best_first(ranking);
    if known.iter().all(quiet) {
        return format!(
            "Nobody blocks: no event loop slept as much as 1 % of the time outside its idle waits, no helper or worker slept 0.05 s per second, and there was no loop stall on the disk, so the ranking by {} ({}) is CPU work per request, not blocking.",
            ranking.metric,
            names.join(" > ")
        );
    }
    let row_of = |l: &str| rows.iter().find(|r| r.label == l);
    let ranked: Vec<&str> = names.iter().copied().filter(|l| row_of(l).is_some()).collect();
    let pct = |l: &str| {
        loop_asleep(rows, l)
            .map_or_else(|| "no loop".to_string(), |a| format!("{} %", fmt(a * 100.0, 1)))
    };
    let list = ranked.iter().map(|l| format!("{l} {}", pct(l))).collect::<Vec<_>>().join(", ");
    let asleep: Vec<&str> = ranked.iter().copied().filter(|l| blocks(rows, l)).collect();
    let worst = asleep
        .iter()
        .filter_map(|l| row_of(l))
        .max_by(|a, b| a.loop_asleep.unwrap_or(0.0).total_cmp(&b.loop_asleep.unwrap_or(0.0)));
    let where_ = worst
        .map(|r| format!(" {}'s loop slept most, in {}.", r.label, r.loop_top))
        .unwrap_or_default();
    let head = format!(
        "Ranked by {} (best first), with the share of time each event loop slept outside its idle waits: {list}.",
        ranking.metric
    );
    let body = split_sentence(rows, &ranked);
    let within = within_sentence(rows, &asleep);
    let workers = workers_sentence(rows);
    format!("{head}{body}{within}{where_}{workers}")
}

/// The ranking's labels with a finite value, best first.
fn best_first<'r>(ranking: &'r Ranking<'_>) -> Vec<&'r str> {
    let mut order: Vec<&(String, f64)> =
        ranking.values.iter().filter(|(_, v)| v.is_finite()).collect();
    order.sort_by(
        |a, b| {
            if ranking.higher_better { b.1.total_cmp(&a.1) } else { a.1.total_cmp(&b.1) }
        },
    );
    order.iter().map(|(l, _)| l.as_str()).collect()
}

/// The share of time server `label`'s event loop slept, if it has one and it was profiled.
fn loop_asleep(rows: &[Row], label: &str) -> Option<f64> {
    rows.iter().find(|r| r.label == label).and_then(|r| r.loop_asleep)
}

/// A server "blocks" when its event loop slept 1 % of the time or more; one without a loop
/// (workers) or whose loop stayed awake does not.
fn blocks(rows: &[Row], label: &str) -> bool {
    loop_asleep(rows, label).is_some_and(|a| a >= 0.01)
}

/// Whether every server whose loop stayed awake ranks ahead of every one whose loop slept.
fn split_sentence(rows: &[Row], ranked: &[&str]) -> String {
    let awake: Vec<&str> = ranked.iter().copied().filter(|l| !blocks(rows, l)).collect();
    let asleep: Vec<&str> = ranked.iter().copied().filter(|l| blocks(rows, l)).collect();
    let last_awake = ranked.iter().rposition(|l| !blocks(rows, l));
    let first_asleep = ranked.iter().position(|l| blocks(rows, l));
    let split = match (last_awake, first_asleep) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    };
    if asleep.is_empty() {
        " No event loop slept 1 % of the time: the ranking is not explained by blocking on a loop; see the helpers' and workers' sleep.".to_string()
    } else if awake.is_empty() {
        " Every event loop slept.".to_string()
    } else if split {
        format!(
            " Every server whose event loop stayed awake ({}) ranks ahead of every one whose loop slept ({}): blocking on the event loop explains the ranking's main split.",
            awake.join(", "),
            asleep.join(", ")
        )
    } else {
        let (a, b) = (last_awake.unwrap_or(0), first_asleep.unwrap_or(0));
        format!(
            " Blocking on the loop does not explain the ranking alone: {} ranks below {} although its loop stayed awake.",
            ranked[a], ranked[b]
        )
    }
}

/// Among the servers whose loop slept (best first): the more it slept, the lower it ranks?
/// (5 points of tolerance: rates close to the disk's limit move these by that much.)
fn within_sentence(rows: &[Row], asleep: &[&str]) -> String {
    let mut out_of_order = Vec::new();
    for (i, better) in asleep.iter().enumerate() {
        for worse in &asleep[i + 1..] {
            if let (Some(a), Some(b)) = (loop_asleep(rows, better), loop_asleep(rows, worse))
                && a - b > 0.05
            {
                out_of_order
                    .push(format!("{better} ranks above {worse} though its loop slept more"));
            }
        }
    }
    if asleep.len() < 2 {
        String::new()
    } else if out_of_order.is_empty() {
        " Among those whose loop slept, the more it slept the lower it ranks.".to_string()
    } else {
        format!(
            " Among those whose loop slept, the order does not follow how much ({}): once a loop sleeps much of the time, what it sleeps in and what else waits decide.",
            out_of_order.into_iter().take(2).collect::<Vec<_>>().join("; ")
        )
    }
}

/// The servers without an event loop, whose threads or processes sleep by design.
fn workers_sentence(rows: &[Row]) -> String {
    let no_loop: Vec<&str> =
        rows.iter().filter(|r| !r.has_loop).map(|r| r.label.as_str()).collect();
    if no_loop.is_empty() {
        return String::new();
    }
    format!(
        " {} {} no event loop: {} threads or processes sleep by design, which costs only the requests they serve.",
        no_loop.join(", "),
        if no_loop.len() == 1 { "has" } else { "have" },
        if no_loop.len() == 1 { "its" } else { "their" }
    )
}

/// The section for disk-run cells ranked by throughput: a row per server of `labels` (in that
/// order) whose cell `cell_of` finds and that was profiled, ranked by `mbps` (higher first).
pub fn throughput_section<'c>(
    what: &str,
    labels: &[String],
    cell_of: impl Fn(&str) -> Option<&'c super::diskrun::DiskCell>,
    mbps: impl Fn(&str) -> f64,
) -> String {
    let profiled: Vec<Row> =
        labels.iter().filter_map(|l| cell_of(l)).filter_map(cell_row).collect();
    let ranking = Ranking {
        metric: "Mb/s",
        values: labels.iter().map(|l| (l.clone(), mbps(l))).collect(),
        higher_better: true,
    };
    section(what, &profiled, &ranking)
}

/// The summary section: title, table, sentence, and how to read it.
pub fn section(what: &str, rows: &[Row], ranking: &Ranking) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let peers = rows.iter().any(|r| r.how.starts_with("perf") || r.how.starts_with("/proc"));
    let mut s = format!("### Who blocked where ({what})\n\n{}\n", table(rows));
    s.push_str(&explain(rows, ranking));
    s.push_str("\n\n");
    s.push_str("Loop asleep % is the share of the time the event loop(s) slept inside system calls other than their idle waits (every such sleep stalls every connection of that loop); helpers/workers asleep is their threads' sleeping time per second, summed (sleeping is their job).");
    if peers {
        s.push_str(&format!(" Servers profiled from outside: their measured phase is read from /proc only (major faults, block-I/O delay), and who slept in which call comes from a separate `perf trace` slice right after it with the same load (the tracer slows a server too much to run while measuring; the profile column gives the slice's rate against the measured one). A peer's time asleep is its time in calls that blocked: calls other than idle waits (`epoll_wait`, `futex`, `accept`…), on a file rather than a socket, that took {SLOW_MS} ms or longer and during which the thread went to sleep (a `sched_switch` away in state S or D; calls only preempted by a busy machine are not counted; shorter sleeps are not seen); its loop disk stalls are those calls on an event loop, as amped counts its own. The block-I/O column (delay accounting, measured phase) is shown only where every thread's figure fits in the measured time."));
    }
    s.push_str(" Fields and how they map to DeBox: docs/DEBOX.md.\n\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, loop_asleep: f64, stalls: u64) -> Row {
        Row {
            label: label.into(),
            how: "x".into(),
            loop_asleep: Some(loop_asleep),
            has_loop: true,
            others_asleep: Some(0.0),
            loop_stalls: Some(stalls),
            major_faults_per_request: Some(0.0),
            blkio: None,
            top: "loop openat: 3× ≥1 ms, 40 ms".into(),
            loop_top: "loop openat: 3× ≥1 ms, 40 ms".into(),
        }
    }

    fn ranking(values: &[(&str, f64)]) -> Ranking<'static> {
        Ranking {
            metric: "requests/s",
            values: values.iter().map(|(l, v)| (l.to_string(), *v)).collect(),
            higher_better: true,
        }
    }

    #[test]
    fn nobody_blocks_when_every_loop_is_awake() {
        let rows = [row("amped", 0.001, 0), row("nginx", 0.0, 0)];
        let s = explain(&rows, &ranking(&[("amped", 10.0), ("nginx", 12.0)]));
        assert!(s.starts_with("Nobody blocks") && s.contains("nginx > amped"), "{s}");
    }

    #[test]
    fn the_split_between_awake_and_sleeping_loops_explains_the_ranking() {
        let rows = [row("amped", 0.0, 0), row("lighttpd", 0.6, 40), row("nginx", 0.2, 9)];
        let s = explain(&rows, &ranking(&[("amped", 30.0), ("nginx", 20.0), ("lighttpd", 5.0)]));
        assert!(s.contains("amped 0.0 %, nginx 20.0 %, lighttpd 60.0 %."), "{s}");
        assert!(
            s.contains(
                "stayed awake (amped) ranks ahead of every one whose loop slept (nginx, lighttpd)"
            ),
            "{s}"
        );
        assert!(s.contains("the more it slept the lower it ranks"), "{s}");
        assert!(s.contains("lighttpd's loop slept most, in loop openat"), "{s}");
        let s = explain(&rows, &ranking(&[("lighttpd", 30.0), ("nginx", 20.0), ("amped", 5.0)]));
        assert!(
            s.contains("does not explain the ranking alone: amped ranks below lighttpd"),
            "{s}"
        );
        assert!(s.contains("does not follow how much (lighttpd ranks above nginx"), "{s}");
        // Within 5 points is not out of order.
        let close = [row("a", 0.74, 1), row("b", 0.72, 1)];
        let s = explain(&close, &ranking(&[("a", 2.0), ("b", 1.0)]));
        assert!(s.contains("the more it slept the lower it ranks"), "{s}");
    }

    #[test]
    fn the_table_has_a_row_per_server_and_says_which_have_no_loop() {
        let mut apache = row("apache-event", 0.0, 0);
        apache.has_loop = false;
        apache.loop_asleep = None;
        apache.blkio = Some((0.0, 0.4));
        let t = table(&[row("nginx", 0.25, 3), apache.clone()]);
        assert!(t.contains("| nginx | 25.0 | 0.00 | 3 | 0.000 | - |"), "{t}");
        assert!(t.contains("| apache-event | no loop |"), "{t}");
        assert!(t.contains("0.00; 0.40"), "{t}");
        let s = explain(&[row("nginx", 0.25, 3), apache], &ranking(&[("nginx", 1.0)]));
        assert!(s.contains("apache-event has no event loop"), "{s}");
    }
}
