//! Running ApacheBench (`ab -n N -c C -H 'Connection: close' URL`) as the student experiment
//! did, and reading its text report: requests per second, the `Total` row of "Connection
//! Times" (mean, standard deviation, median) and the percentile table.

use std::path::Path;
use std::time::Duration;

use super::{Latency, LoadError, Measurement};
use crate::proc::{Pinning, run_tool};

/// Runs ab pinned to `cpus`; `body_bytes` is the document size (for bandwidth).
pub fn run(
    ab: &Path,
    url: &str,
    requests: u64,
    concurrency: u32,
    body_bytes: u64,
    cpus: Option<&str>,
) -> Result<(Measurement, serde_json::Value), LoadError> {
    let argv = vec![
        ab.display().to_string(),
        "-n".into(),
        requests.to_string(),
        "-c".into(),
        concurrency.to_string(),
        "-s".into(),
        "30".into(),
        "-H".into(),
        "Connection: close".into(),
        url.into(),
    ];
    let out = run_tool(&Pinning::wrap(cpus, argv), Duration::from_secs(600))
        .map_err(|e| LoadError::Spawn(e.to_string()))?;
    if out.timed_out {
        return Err(LoadError::TimedOut);
    }
    match parse(&out.stdout, body_bytes) {
        Some(m) => Ok((m, serde_json::json!({"ab_stdout": out.stdout}))),
        None => Err(LoadError::Failed {
            status: out.status.map_or("killed".into(), |s| s.to_string()),
            stderr: format!("{}{}", out.stderr, out.stdout),
        }),
    }
}

/// Reads ab's report; `None` if it has no "Complete requests" line.
pub fn parse(text: &str, body_bytes: u64) -> Option<Measurement> {
    let mut m = Measurement { generator: "ab".into(), ..Measurement::default() };
    let mut latency = Latency::default();
    let (mut failed, mut non_2xx, mut complete) = (0u64, 0u64, None);
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Complete", "requests:", n] => complete = n.parse().ok(),
            ["Failed", "requests:", n] => failed = n.parse().unwrap_or(0),
            ["Non-2xx", "responses:", n] => non_2xx = n.parse().unwrap_or(0),
            ["Time", "taken", "for", "tests:", s, ..] => m.duration_s = s.parse().unwrap_or(0.0),
            ["Requests", "per", "second:", r, ..] => m.rps = r.parse().unwrap_or(0.0),
            ["Total:", min, mean, sd, median, max] => {
                latency.min = min.parse().unwrap_or(f64::NAN);
                latency.mean = mean.parse().unwrap_or(f64::NAN);
                latency.std_dev = sd.parse().unwrap_or(f64::NAN);
                latency.p50 = median.parse().unwrap_or(f64::NAN);
                latency.max = max.parse().unwrap_or(f64::NAN);
            }
            [pct, v, ..] if pct.ends_with('%') => {
                let v: f64 = v.parse().unwrap_or(f64::NAN);
                match *pct {
                    "50%" => latency.p50 = v,
                    "90%" => latency.p90 = v,
                    "95%" => latency.p95 = v,
                    "99%" => latency.p99 = v,
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let complete = complete?;
    m.requests = complete;
    m.ok = complete.saturating_sub(non_2xx);
    m.errors = failed + non_2xx;
    if m.duration_s > 0.0 {
        m.body_mbps = (m.ok * body_bytes) as f64 * 8.0 / m.duration_s / 1e6;
    }
    m.latency = latency;
    if failed > 0 {
        m.failed_by_kind.insert("failed".into(), failed);
    }
    if non_2xx > 0 {
        m.non_2xx_by_status.insert("non-2xx".into(), non_2xx);
    }
    if m.errors > 0 {
        m.first_error = Some(format!("{failed} failed, {non_2xx} non-2xx"));
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Benchmarking 127.0.0.1 (be patient).....done

Server Software:        amped
Server Hostname:        127.0.0.1
Server Port:            6060

Document Path:          /foo.html
Document Length:        37 bytes

Concurrency Level:      5
Time taken for tests:   1.077 seconds
Complete requests:      1000
Failed requests:        0
Total transferred:      229000 bytes
HTML transferred:       37000 bytes
Requests per second:    928.31 [#/sec] (mean)
Time per request:       5.386 [ms] (mean)
Time per request:       1.077 [ms] (mean, across all concurrent requests)
Transfer rate:          207.60 [Kbytes/sec] received

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.1      0       1
Processing:     1    5   2.3      5      13
Waiting:        1    5   2.3      5      13
Total:          1    5   2.4      5      13

Percentage of the requests served within a certain time (ms)
  50%      5
  66%      6
  75%      7
  80%      7
  90%      8
  95%     10
  98%     12
  99%     13
 100%     13 (longest request)
";

    #[test]
    fn reads_a_report() {
        let m = parse(SAMPLE, 37).unwrap();
        assert_eq!((m.requests, m.ok, m.errors), (1000, 1000, 0));
        assert!((m.rps - 928.31).abs() < 1e-9);
        let l = &m.latency;
        assert_eq!(
            (l.min, l.mean, l.std_dev, l.p50, l.p90, l.p95, l.p99, l.max),
            (1.0, 5.0, 2.4, 5.0, 8.0, 10.0, 13.0, 13.0)
        );
        assert!((m.duration_s - 1.077).abs() < 1e-9);
    }

    #[test]
    fn counts_failures_and_rejects_garbage() {
        let text = SAMPLE.replace(
            "Failed requests:        0",
            "Failed requests:        3\nNon-2xx responses:      2",
        );
        let m = parse(&text, 37).unwrap();
        assert_eq!((m.ok, m.errors), (998, 5));
        assert!(parse("apr_socket_recv: Connection refused (111)", 37).is_none());
    }
}
