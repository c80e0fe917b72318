//! Running ampload with `--json` and reading its report (schema: crates/load/README.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{Latency, LoadError, Measurement};
use crate::proc::{Pinning, run_tool_watched};

/// One ampload invocation.
#[derive(Clone, Debug)]
pub struct Ampload {
    pub url: String,
    pub connections: u32,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    /// Open loop at this rate; closed loop when `None`.
    pub rate: Option<f64>,
    /// Requests per connection (1 = `--close`); keep-alive when `None`.
    pub requests_per_conn: Option<u32>,
    pub urls_file: Option<PathBuf>,
    pub timeout_s: f64,
    /// Per-window latency histograms of this length (`--interval`), for latency over time.
    pub interval_s: Option<f64>,
    /// Windows hold the requests due in them (`--interval-by start`), not those answered in
    /// them.
    pub interval_by_start: bool,
}

/// The parts of ampload's JSON report amplab uses (unknown fields are ignored).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Report {
    pub requests: u64,
    pub ok: u64,
    pub sent: u64,
    pub body_bytes: u64,
    pub duration_s: f64,
    pub rps: f64,
    pub conn_per_s: f64,
    pub status: BTreeMap<String, u64>,
    pub errors_total: u64,
    pub errors: BTreeMap<String, u64>,
    pub first_errors: BTreeMap<String, String>,
    pub latency_us: LatencyUs,
    pub latency_spectrum: Vec<SpectrumPoint>,
    pub achieved_rate: Option<f64>,
    pub schedule_lag_warnings: u64,
    pub max_schedule_lag_us: u64,
    pub backlog_max: u64,
    /// `--interval` windows, in time order.
    pub intervals: Vec<Interval>,
    /// Time zero on the wall clock (seconds since the Unix epoch; 0 from older amploads).
    pub time_zero_unix_s: f64,
}

/// One window of `intervals`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Interval {
    /// From the run's time zero, and the window's length, seconds.
    pub start_s: f64,
    pub length_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub body_bytes: u64,
    pub errors: BTreeMap<String, u64>,
    pub errors_total: u64,
    pub latency_us: LatencyUs,
}

/// One line of `latency_spectrum`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct SpectrumPoint {
    pub percentile: f64,
    pub value_us: f64,
}

/// `latency_us` of the report.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LatencyUs {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p5: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
}

impl Ampload {
    /// A closed-loop run of `duration_s` over `connections` keep-alive connections.
    pub fn closed(url: String, connections: u32, duration_s: f64) -> Ampload {
        Ampload {
            url,
            connections,
            duration_s: Some(duration_s),
            requests: None,
            rate: None,
            requests_per_conn: None,
            urls_file: None,
            timeout_s: 10.0,
            interval_s: None,
            interval_by_start: false,
        }
    }

    /// The command line (without pinning).
    pub fn argv(&self, binary: &Path) -> Vec<String> {
        let mut v =
            vec![binary.display().to_string(), self.url.clone(), "--json".into(), "--quiet".into()];
        let mut push = |a: &str, b: String| {
            v.push(a.into());
            v.push(b);
        };
        push("-c", self.connections.to_string());
        if let Some(d) = self.duration_s {
            push("-d", format!("{}ms", (d * 1000.0).round().max(1.0)));
        }
        if let Some(n) = self.requests {
            push("-n", n.to_string());
        }
        if let Some(r) = self.rate {
            push("--rate", format!("{r}"));
        }
        match self.requests_per_conn {
            Some(1) => v.push("--close".into()),
            Some(k) => {
                v.push("-k".into());
                v.push(k.to_string());
            }
            None => {}
        }
        if let Some(f) = &self.urls_file {
            v.push("--urls".into());
            v.push(f.display().to_string());
        }
        v.push("--timeout".into());
        v.push(format!("{}ms", (self.timeout_s * 1000.0).round()));
        if let Some(i) = self.interval_s {
            v.push("--interval".into());
            v.push(format!("{}ms", (i * 1000.0).round().max(1.0)));
            if self.interval_by_start {
                v.push("--interval-by".into());
                v.push("start".into());
            }
        }
        v
    }

    /// Runs it (pinned to `cpus`) and returns the measurement and the raw JSON report.
    pub fn run(
        &self,
        binary: &Path,
        cpus: Option<&str>,
    ) -> Result<(Measurement, serde_json::Value), LoadError> {
        self.run_watched(binary, cpus, &mut || {})
    }

    /// [`run`](Self::run), calling `watch` every 20 ms or so while ampload runs.
    pub fn run_watched(
        &self,
        binary: &Path,
        cpus: Option<&str>,
        watch: &mut dyn FnMut(),
    ) -> Result<(Measurement, serde_json::Value), LoadError> {
        let argv = Pinning::wrap(cpus, self.argv(binary));
        let expected = self.duration_s.unwrap_or(60.0) + self.timeout_s + 60.0;
        let out = run_tool_watched(&argv, Duration::from_secs_f64(expected), watch)
            .map_err(|e| LoadError::Spawn(e.to_string()))?;
        if out.timed_out {
            return Err(LoadError::TimedOut);
        }
        let raw: serde_json::Value = match serde_json::from_str(out.stdout.trim()) {
            Ok(v) => v,
            Err(_) => {
                return Err(LoadError::Failed {
                    status: out.status.map_or("killed".into(), |s| s.to_string()),
                    stderr: out.stderr,
                });
            }
        };
        let report: Report = serde_json::from_value(raw.clone()).map_err(|e| {
            LoadError::Failed { status: "unreadable report".into(), stderr: e.to_string() }
        })?;
        Ok((measurement(&report), raw))
    }
}

/// The common measurement of a report.
pub fn measurement(r: &Report) -> Measurement {
    let non_ok = r.requests.saturating_sub(r.ok);
    let first_error = r
        .first_errors
        .iter()
        .next()
        .map(|(k, v)| format!("{k}: {v}"))
        .or_else(|| (non_ok > 0).then(|| format!("statuses {:?}", r.status)));
    Measurement {
        generator: "ampload".into(),
        requests: r.requests,
        ok: r.ok,
        errors: r.errors_total + non_ok,
        duration_s: r.duration_s,
        rps: r.rps,
        body_mbps: mbps(r.body_bytes, r.duration_s),
        latency: latency(&r.latency_us, r.requests),
        first_error,
        failed_by_kind: failed(&r.errors),
        non_2xx_by_status: r
            .status
            .iter()
            .filter(|(code, _)| !code.starts_with('2'))
            .map(|(code, n)| (code.clone(), *n))
            .collect(),
        latency_cdf: cdf(&r.latency_spectrum),
    }
}

/// The measurement of one `--interval` window: its answers, failures and latency
/// statistics (no statuses or spectrum: ampload keeps those for the whole run only).
pub fn interval_measurement(w: &Interval) -> Measurement {
    let per_second = |n: f64| if w.length_s > 0.0 { n / w.length_s } else { 0.0 };
    Measurement {
        generator: "ampload".into(),
        requests: w.requests,
        ok: w.ok,
        errors: w.errors_total + w.requests.saturating_sub(w.ok),
        duration_s: w.length_s,
        rps: per_second(w.requests as f64),
        body_mbps: mbps(w.body_bytes, w.length_s),
        latency: latency(&w.latency_us, w.requests),
        first_error: None,
        failed_by_kind: failed(&w.errors),
        non_2xx_by_status: BTreeMap::new(),
        latency_cdf: Vec::new(),
    }
}

/// Body bytes over `secs` as Mb/s.
fn mbps(body_bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 { body_bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 }
}

/// ampload's latency statistics in ms (all NaN when nothing was answered).
fn latency(l: &LatencyUs, requests: u64) -> Latency {
    if requests == 0 {
        return Latency::default();
    }
    let ms = |us: f64| us / 1000.0;
    Latency {
        min: ms(l.min),
        p5: ms(l.p5),
        p50: ms(l.p50),
        p90: ms(l.p90),
        p95: ms(l.p95),
        p99: ms(l.p99),
        p999: ms(l.p999),
        max: ms(l.max),
        mean: ms(l.mean),
        std_dev: f64::NAN,
    }
}

/// The failure kinds that occurred.
fn failed(errors: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    errors.iter().filter(|(_, n)| **n > 0).map(|(k, n)| (k.clone(), *n)).collect()
}

/// The spectrum as (fraction answered within, ms) points.
fn cdf(spectrum: &[SpectrumPoint]) -> Vec<(f64, f64)> {
    spectrum.iter().map(|p| (p.percentile / 100.0, p.value_us / 1000.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_command_lines() {
        let mut a = Ampload::closed("http://127.0.0.1:1/f".into(), 50, 2.5);
        a.requests_per_conn = Some(1);
        assert_eq!(
            a.argv(Path::new("ampload")).join(" "),
            "ampload http://127.0.0.1:1/f --json --quiet -c 50 -d 2500ms --close --timeout 10000ms"
        );
        a.requests_per_conn = Some(5);
        a.rate = Some(1000.0);
        a.urls_file = Some("/t/urls".into());
        let line = a.argv(Path::new("ampload")).join(" ");
        assert!(line.contains("--rate 1000 -k 5 --urls /t/urls"), "{line}");
        a.interval_s = Some(1.0);
        assert!(a.argv(Path::new("ampload")).join(" ").ends_with("--interval 1000ms"));
        a.interval_by_start = true;
        let line = a.argv(Path::new("ampload")).join(" ");
        assert!(line.ends_with("--interval 1000ms --interval-by start"), "{line}");
    }

    #[test]
    fn reads_the_readme_example() {
        let json = r#"{"url":"http://127.0.0.1:18090/index.html","mode":"closed","threads":1,"connections":4,"pipeline":1,
 "requests_per_conn":null,"requests":1000,"ok":1000,"sent":1000,"bytes":1239000,"body_bytes":1000000,
 "duration_s":0.050069159,"rps":19972.374610885716,"bytes_per_s":24745772.1428874,"connections_opened":4,
 "conn_per_s":79.88949844354286,"status":{"200":1000},
 "errors":{"connect":0,"timeout":0,"reset":0,"bad_response":0},"errors_total":0,"first_errors":{},
 "latency_us":{"mean":203.206037,"min":28.87,"max":18594.781,"p5":63,"p50":75,"p90":92,"p95":104,
 "p99":456,"p999":18607},"target_rate":null,"achieved_rate":19621.14033118128,"schedule_lag_warnings":0,
 "max_schedule_lag_us":0,"backlog_max":0,"workload_targets":1,"workload_skipped_lines":0,
 "unreachable":false,"interrupted":false}"#;
        let r: Report = serde_json::from_str(json).unwrap();
        let m = measurement(&r);
        assert_eq!((m.requests, m.ok, m.errors), (1000, 1000, 0));
        assert!((m.latency.p50 - 0.075).abs() < 1e-9);
        assert!((m.body_mbps - 1_000_000.0 * 8.0 / 0.050069159 / 1e6).abs() < 1e-6);
        assert!(m.first_error.is_none());
        assert!(m.problems().is_none() && m.latency_cdf.is_empty());
    }

    #[test]
    fn reads_an_interval_as_a_measurement_of_its_own() {
        let json = r#"{"time_zero_unix_s":1700000000.25,"intervals":[{"start_s":0.0,"length_s":0.5,
            "requests":40,"ok":39,"body_bytes":500000,"errors":{"connect":0,"timeout":2,"reset":0,"bad_response":0},
            "errors_total":2,"p50_us":900,"latency_us":{"mean":1500.5,"min":100,"max":9000,"p5":200,"p50":900,
            "p90":3000,"p95":4000,"p99":8000,"p999":9000},"histogram":"x"}]}"#;
        let r: Report = serde_json::from_str(json).unwrap();
        assert_eq!(r.time_zero_unix_s, 1_700_000_000.25);
        let m = interval_measurement(&r.intervals[0]);
        assert_eq!((m.requests, m.ok, m.errors, m.failed()), (40, 39, 3, 2));
        assert_eq!((m.rps, m.body_mbps), (80.0, 8.0));
        assert_eq!((m.latency.p95, m.latency.mean), (4.0, 1.5005));
        assert!(m.problems().unwrap().starts_with("2 of 42 requests got no answer (timeout 2"));
        let empty: Interval = serde_json::from_str(r#"{"length_s":0.5}"#).unwrap();
        assert!(interval_measurement(&empty).latency.p95.is_nan(), "nothing answered: no latency");
    }

    #[test]
    fn counts_failures_and_statuses_by_kind() {
        let json = r#"{"requests":6022,"ok":5838,"status":{"200":5804,"301":34,"404":184},
            "errors":{"connect":0,"timeout":25,"reset":0,"bad_response":0},"errors_total":25,
            "first_errors":{"timeout":"no response within 30s"},
            "latency_spectrum":[{"percentile":0.0,"value_us":100,"count":1},{"percentile":100.0,"value_us":2500,"count":6022}]}"#;
        let m = measurement(&serde_json::from_str(json).unwrap());
        assert_eq!(m.failed(), 25);
        assert_eq!(
            m.problems().unwrap(),
            "25 of 6047 requests got no answer (timeout 25; first timeout: no response within 30s); 218 of 6022 answers were not 2xx (301 × 34, 404 × 184)"
        );
        assert_eq!(m.latency_cdf, vec![(0.0, 0.1), (1.0, 2.5)]);
    }
}
