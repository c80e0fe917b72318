//! Running wrk (closed loop, one thread) and reading its text report.

use std::path::Path;
use std::time::Duration;

use super::{Latency, LoadError, Measurement};
use crate::proc::{Pinning, run_tool};

/// Runs `wrk -t1 -cC -dD --latency [-H 'Connection: close'] URL` pinned to `cpus`;
/// `body_bytes` is the size of the file requested (wrk counts header bytes too).
pub fn run(
    wrk: &Path,
    url: &str,
    connections: u32,
    duration_s: f64,
    close: bool,
    body_bytes: u64,
    cpus: Option<&str>,
) -> Result<(Measurement, serde_json::Value), LoadError> {
    let mut argv = vec![
        wrk.display().to_string(),
        "-t1".into(),
        format!("-c{connections}"),
        format!("-d{}s", duration_s.ceil().max(1.0)),
        "--latency".into(),
    ];
    if close {
        argv.push("-H".into());
        argv.push("Connection: close".into());
    }
    argv.push(url.into());
    let out = run_tool(&Pinning::wrap(cpus, argv), Duration::from_secs_f64(duration_s + 60.0))
        .map_err(|e| LoadError::Spawn(e.to_string()))?;
    if out.timed_out {
        return Err(LoadError::TimedOut);
    }
    match parse(&out.stdout, body_bytes) {
        Some(m) => Ok((m, serde_json::json!({"wrk_stdout": out.stdout}))),
        None => Err(LoadError::Failed {
            status: out.status.map_or("killed".into(), |s| s.to_string()),
            stderr: format!("{}{}", out.stderr, out.stdout),
        }),
    }
}

/// Reads wrk's report; `None` if it has no request count.
pub fn parse(text: &str, body_bytes: u64) -> Option<Measurement> {
    let mut m = Measurement { generator: "wrk".into(), ..Measurement::default() };
    let mut latency = Latency::default();
    let mut non_2xx = 0;
    let mut socket_errors = 0;
    let mut seen = false;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [n, "requests", "in", d, ..] => {
                m.requests = n.parse().ok()?;
                m.duration_s = secs(d.trim_end_matches(','))?;
                seen = true;
            }
            ["Latency", avg, sd, max, _] => {
                latency.mean = secs(avg).map_or(f64::NAN, |s| s * 1e3);
                latency.std_dev = secs(sd).map_or(f64::NAN, |s| s * 1e3);
                latency.max = secs(max).map_or(f64::NAN, |s| s * 1e3);
            }
            ["50%", v] => latency.p50 = secs(v).map_or(f64::NAN, |s| s * 1e3),
            ["90%", v] => latency.p90 = secs(v).map_or(f64::NAN, |s| s * 1e3),
            ["99%", v] => latency.p99 = secs(v).map_or(f64::NAN, |s| s * 1e3),
            ["Non-2xx", "or", "3xx", "responses:", n] => non_2xx = n.parse().unwrap_or(0),
            ["Socket", "errors:", rest @ ..] => {
                socket_errors =
                    rest.iter().filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok()).sum();
            }
            _ => {}
        }
    }
    if !seen {
        return None;
    }
    m.ok = m.requests.saturating_sub(non_2xx);
    m.errors = non_2xx + socket_errors;
    if m.duration_s > 0.0 {
        m.rps = m.requests as f64 / m.duration_s;
        m.body_mbps = (m.ok * body_bytes) as f64 * 8.0 / m.duration_s / 1e6;
    }
    m.latency = latency;
    if socket_errors > 0 {
        m.failed_by_kind.insert("socket".into(), socket_errors);
    }
    if non_2xx > 0 {
        m.non_2xx_by_status.insert("non-2xx/3xx".into(), non_2xx);
    }
    if m.errors > 0 {
        m.first_error = Some(format!("{non_2xx} non-2xx/3xx, {socket_errors} socket errors"));
    }
    Some(m)
}

/// `421.15us`, `1.00ms`, `2.00s`, `1.00m` → seconds.
fn secs(text: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_report() {
        let text = "Running 5s test @ http://127.0.0.1:8080/f
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   421.15us  200.00us   5.00ms   90.00%
    Req/Sec    50.00k     2.00k   55.00k    80.00%
  Latency Distribution
     50%  400.00us
     75%  450.00us
     90%  500.00us
     99%    1.00ms
  250000 requests in 5.00s, 200.00MB read
  Non-2xx or 3xx responses: 10
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  50000.00
Transfer/sec:     40.00MB
";
        let m = parse(text, 1024).unwrap();
        assert_eq!((m.requests, m.ok, m.errors), (250_000, 249_990, 13));
        assert!((m.rps - 50_000.0).abs() < 1e-6);
        assert!((m.latency.p50 - 0.4).abs() < 1e-9 && (m.latency.p99 - 1.0).abs() < 1e-9);
        assert!((m.body_mbps - 249_990.0 * 1024.0 * 8.0 / 5.0 / 1e6).abs() < 1e-6);
        assert!(parse("unable to connect", 1).is_none());
    }
}
