//! The command line as typed (clap), with per-value checks. [`crate::config`] turns it into
//! the resolved run description; nothing else reads these raw arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Which time of a request places it in an `--interval` window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IntervalBy {
    /// Its start: the intended send time in the open loop, the queueing time in the closed.
    Start,
    /// Its end: when its answer completed or it failed.
    End,
}

impl IntervalBy {
    /// The name the JSON report uses.
    pub fn name(self) -> &'static str {
        match self {
            IntervalBy::Start => "start",
            IntervalBy::End => "end",
        }
    }
}

/// Load generator for HTTP/1.1 servers: closed loop, fixed-rate open loop, sessions, traces.
///
/// Latency in open-loop mode (--rate) is measured from each request's intended send time, so a
/// stalling server shows up in the tail instead of being hidden (coordinated omission).
#[derive(Debug, Parser)]
#[command(name = "ampload", version)]
pub struct Args {
    /// Server URL, http://host[:port]/path (no TLS). With --urls, --trace or --clf it is the
    /// base that paths are appended to.
    pub url: String,

    /// Connections: kept busy in closed loop, the pool's size in open loop.
    #[arg(short = 'c', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,

    /// Event-loop threads (each with its own epoll and its share of connections and rate).
    #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,

    /// Run length (e.g. 10, 10s, 500ms, 2m); default 10s unless --requests is given.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Total requests to issue (the run also stops at --duration if both are given).
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,

    /// Open loop: send this many requests per second on a fixed schedule.
    #[arg(short = 'R', long, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,

    /// Sessions: send K requests on a connection, then close it and open another.
    #[arg(short = 'k', long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub requests_per_conn: Option<u32>,

    /// One request per connection, sent with `Connection: close` (same as --requests-per-conn 1).
    #[arg(long, conflicts_with = "requests_per_conn")]
    pub close: bool,

    /// Give up on a request (or a connect) after this long.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Run the same load, unmeasured, for this long first (warms the server's caches).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Requests from a file of URLs or paths, one per line.
    #[arg(long, value_name = "FILE", group = "workload")]
    pub urls: Option<PathBuf>,

    /// Requests from a trace: `PATH [WEIGHT]` per line (weighted random draw if weights given).
    #[arg(long, value_name = "FILE", group = "workload")]
    pub trace: Option<PathBuf>,

    /// Requests from a Common Log Format access log (GET lines replayed in order).
    #[arg(long, value_name = "FILE", group = "workload")]
    pub clf: Option<PathBuf>,

    /// Seed for weighted trace sampling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Request method (no request carries a body); `HEAD` responses are read without one.
    #[arg(long, default_value = "GET")]
    pub method: String,

    /// Add a request header field, `-H 'Name: value'` (repeatable; a Host here replaces the
    /// URL's).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Print the latency percentile spectrum in the text report (like wrk2's --latency).
    #[arg(long)]
    pub latency: bool,

    /// Also record one latency histogram per window of this length (e.g. 1s, 5s), reported in
    /// --json's `intervals` and written to --hlog.
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,

    /// Which time puts a request into an --interval window: `end` (when it was answered or
    /// failed, as HdrHistogram's interval logs do) or `start` (when it started: its intended
    /// send time in the open loop, so a window holds the requests due in it, however late
    /// their answers came).
    #[arg(long, value_enum, default_value = "end", requires = "interval")]
    pub interval_by: IntervalBy,

    /// Write the latency histograms as a standard HdrHistogram interval log (one per
    /// --interval window, else one for the whole run; values in microseconds).
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,

    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,

    /// Never print the live progress line (it is only printed when stderr is a terminal).
    #[arg(long)]
    pub quiet: bool,
}

/// Parses `10`, `10s`, `1.5s`, `250ms`, `2m` into a positive duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale < 1e9 => {
            Ok(Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!("{text:?} is not a positive duration (like 10, 10s, 500ms, 2m)")),
    }
}

/// Parses a positive, finite request rate.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a positive number of requests per second")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        let ok =
            [("10", 10_000), ("10s", 10_000), ("1.5s", 1_500), ("250ms", 250), ("2m", 120_000)];
        for (text, ms) in ok {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for text in ["", "0", "-1s", "x", "10h", "nan", "1e300"] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
    }

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("2300"), Ok(2300.0));
        assert_eq!(parse_rate("0.5"), Ok(0.5));
        for text in ["0", "-5", "inf", "fast"] {
            assert!(parse_rate(text).is_err(), "{text}");
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
