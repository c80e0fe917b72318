//! The Prometheus text metrics (`--metrics-path`): parsed as a scraper would — every sample
//! belongs to a family announced by `# HELP` and `# TYPE`, histogram buckets are cumulative
//! and end with `+Inf` equal to `_count`, with a `_sum` — and the counts follow the requests.

use crate::common::*;
use std::collections::{BTreeMap, HashSet};

const METRICS: &str = "/metrics";

/// One sample: name, labels (as written), value.
type Sample = (String, String, f64);

/// Parses the text format; panics on anything a Prometheus scraper would reject here.
fn parse(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut helped = HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has text");
            assert!(!help.is_empty(), "{line}");
            helped.insert(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            types.insert(name.to_string(), kind.to_string());
        } else {
            let (series, value) = line.rsplit_once(' ').expect("sample has a value");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.strip_suffix('}').expect("labels closed")),
                None => (series, ""),
            };
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "sample of an undeclared family: {line}");
            samples.push((name.to_string(), labels.to_string(), value));
        }
    }
    (types, samples)
}

/// Checks one histogram series (`labels` without `le`) and returns its count.
fn check_histogram(samples: &[Sample], family: &str, labels: &str) -> f64 {
    let sep = if labels.is_empty() { "" } else { "," };
    let buckets: Vec<&Sample> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == &format!("{family}_bucket") && l.starts_with(&format!("{labels}{sep}le="))
        })
        .collect();
    assert!(buckets.len() >= 2, "no buckets for {family}{{{labels}}}");
    for w in buckets.windows(2) {
        assert!(w[0].2 <= w[1].2, "buckets not cumulative: {w:?}");
    }
    let last = buckets.last().unwrap();
    assert!(last.1.ends_with("le=\"+Inf\""), "last bucket is not +Inf: {last:?}");
    let find = |suffix: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == &format!("{family}_{suffix}") && l == labels)
            .unwrap_or_else(|| panic!("no {family}_{suffix}{{{labels}}}"))
            .2
    };
    assert_eq!(find("count"), last.2, "+Inf bucket differs from _count");
    assert!(find("sum") >= 0.0);
    last.2
}

fn value(samples: &[Sample], name: &str) -> f64 {
    samples.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("no {name}")).2
}

arch_tests! {
    /// The metrics parse, and the request histogram, request count and bytes sent follow the
    /// requests made (on one keep-alive connection, so that one `mp` worker saw them all).
    fn metrics_parse_and_follow_the_requests(arch) {
        let s = Server::start(arch, &["--metrics-path", METRICS], |root| write(root, "a.txt", "AAAA"));
        let mut c = s.conn();
        for _ in 0..3 {
            c.send(req("GET", "/a.txt", ""));
            c.response().assert_status(200);
        }
        c.send(get_req(METRICS));
        let r = c.response();
        r.assert_status(200);
        assert!(r.must("Content-Type").starts_with("text/plain; version=0.0.4"), "{r:?}");
        let (types, samples) = parse(&r.text());
        assert_eq!(types["amped_request_duration_seconds"], "histogram");
        assert!(check_histogram(&samples, "amped_request_duration_seconds", "") >= 3.0);
        assert!(check_histogram(&samples, "amped_request_step_duration_seconds", "step=\"parse\"") >= 3.0);
        check_histogram(&samples, "amped_request_step_duration_seconds", "step=\"job_run\"");
        assert!(value(&samples, "amped_requests_total") >= 3.0);
        assert!(value(&samples, "amped_body_bytes_sent_total") >= 12.0);
        assert!(value(&samples, "amped_connections_open") >= 1.0);
        for name in [
            "amped_residency_misses_total",
            "amped_being_read_waits_total",
            "amped_direct_reads_total",
            "amped_direct_budget_full_total",
            "amped_loop_stalls_total",
            "amped_helper_queue_depth",
            "amped_metadata_helpers",
            "amped_metadata_helpers_peak",
            "amped_disk_read_bytes_total",
        ] {
            assert!(value(&samples, name) >= 0.0, "{name}");
        }
    }
}

#[test]
fn metrics_path_must_be_absolute_and_differ_from_the_stats_path() {
    let (st, _, err) = run_expecting_exit(&["--metrics-path".into(), "metrics".into(), ".".into()]);
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("must start with '/'"), "{err}");
    let (st, _, err) = run_expecting_exit(&[
        "--metrics-path".into(),
        "/m".into(),
        "--stats-path".into(),
        "/m".into(),
        ".".into(),
    ]);
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("must differ"), "{err}");
}
