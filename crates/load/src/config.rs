//! The resolved description of a run, built from the command line in one step so the rest of
//! the program never sees half-checked options: the URL is parsed and its host resolved, the
//! bounds and modes are settled, and impossible combinations are refused with one clear line.

use std::net::SocketAddr;
use std::time::Duration;

use std::path::PathBuf;

use crate::cli::{Args, IntervalBy};
use crate::request::RequestShape;
use crate::target::Url;
use crate::workload::Source;

/// Run length when neither `--duration` nor `--requests` is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Each connection sends its next request when a response completes.
    Closed,
    /// Requests follow a fixed schedule of this many per second, whatever the server does.
    Open { rate: f64 },
}

/// Latency windows: their length, and which time of a request places it in one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub length: Duration,
    pub by: IntervalBy,
}

/// Everything a run needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// The URL as given.
    pub url_text: String,
    /// The parsed URL (host header, base path).
    pub url: Url,
    /// The server's resolved address.
    pub addr: SocketAddr,
    /// Where the request targets come from.
    pub source: Source,
    /// Pacing.
    pub mode: Mode,
    /// Connection count (closed loop) or pool size (open loop), over all threads.
    pub connections: usize,
    /// Event-loop threads (never more than connections).
    pub threads: usize,
    /// Stop issuing requests after this long.
    pub duration: Option<Duration>,
    /// Issue exactly this many requests.
    pub requests: Option<u64>,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Requests per connection before closing it; `None` keeps connections open.
    pub per_conn: Option<u32>,
    /// Per-request (and per-connect) timeout.
    pub timeout: Duration,
    /// Unmeasured run before the measured one.
    pub warmup: Option<Duration>,
    /// Seed for weighted sampling.
    pub seed: u64,
    /// Method and extra header fields of every request.
    pub request: RequestShape,
    /// Latency windows (`--interval`, `--interval-by`).
    pub interval: Option<Interval>,
    /// Where to write the interval log (`--hlog`).
    pub hlog: Option<PathBuf>,
    /// The text report lists the percentile spectrum (`--latency`).
    pub spectrum: bool,
    /// JSON report instead of the human one.
    pub json: bool,
    /// Live progress line on stderr.
    pub progress: bool,
}

impl Config {
    /// Checks and resolves the command line. The error is one line, without the program name.
    pub fn from_args(args: Args, stderr_is_tty: bool) -> Result<Config, String> {
        let url = Url::parse(&args.url).map_err(|e| format!("{}: {e}", args.url))?;
        let request = RequestShape::new(&args.method, &args.headers)?;
        let addr = url.resolve().map_err(|e| format!("cannot resolve {}: {e}", url.host))?;
        let source = match (args.urls, args.trace, args.clf) {
            (Some(p), _, _) => Source::UrlList(p),
            (_, Some(p), _) => Source::Trace(p),
            (_, _, Some(p)) => Source::AccessLog(p),
            _ => Source::Single,
        };
        let duration = match (args.duration, args.requests) {
            (None, None) => Some(DEFAULT_DURATION),
            (d, _) => d,
        };
        let connections = args.connections as usize;
        Ok(Config {
            url_text: args.url,
            url,
            addr,
            source,
            mode: args.rate.map_or(Mode::Closed, |rate| Mode::Open { rate }),
            connections,
            threads: (args.threads as usize).min(connections),
            duration,
            requests: args.requests,
            pipeline: args.pipeline as usize,
            per_conn: if args.close { Some(1) } else { args.requests_per_conn },
            timeout: args.timeout,
            warmup: args.warmup,
            seed: args.seed,
            request,
            interval: args.interval.map(|length| Interval { length, by: args.interval_by }),
            hlog: args.hlog,
            spectrum: args.latency,
            json: args.json,
            progress: stderr_is_tty && !args.quiet,
        })
    }

    /// Thread `thread`'s share of the connections (the remainder goes to the first threads).
    pub fn connections_of(&self, thread: usize) -> usize {
        self.connections / self.threads + usize::from(thread < self.connections % self.threads)
    }

    /// File descriptors a run holds at once: every connection, each thread's epoll and timer,
    /// and slack for stdio and for connections waiting for the server's FIN after a
    /// `Connection: close` (brief; running out later shows up as connect errors).
    pub fn fds_needed(&self) -> u64 {
        (self.connections + 2 * self.threads + 64) as u64
    }

    /// The same run, shortened to the warm-up: unmeasured, time-bounded, no request count.
    pub fn warmup_run(&self) -> Option<Config> {
        let warmup = self.warmup?;
        Some(Config {
            duration: Some(warmup),
            requests: None,
            warmup: None,
            interval: None,
            hlog: None,
            progress: false,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["ampload"];
        argv.extend_from_slice(args);
        Config::from_args(Args::try_parse_from(argv).map_err(|e| e.to_string())?, false)
    }

    #[test]
    fn resolves_defaults_and_modes() {
        let c = config(&["http://127.0.0.1:8080/"]).unwrap();
        assert_eq!((c.mode, c.duration, c.requests), (Mode::Closed, Some(DEFAULT_DURATION), None));
        let c = config(&["-n", "100", "--rate", "50", "--close", "http://127.0.0.1:1/"]).unwrap();
        assert_eq!((c.mode, c.duration, c.per_conn), (Mode::Open { rate: 50.0 }, None, Some(1)));
        let c = config(&["-c", "3", "-t", "8", "http://127.0.0.1:1/"]).unwrap();
        assert_eq!(c.threads, 3);
    }

    #[test]
    fn splits_connections_over_threads() {
        let c = config(&["-c", "10", "-t", "3", "http://127.0.0.1:1/"]).unwrap();
        assert_eq!((0..3).map(|t| c.connections_of(t)).collect::<Vec<_>>(), [4, 3, 3]);
    }

    #[test]
    fn refuses_bad_arguments() {
        for args in [
            &["https://127.0.0.1/"][..],
            &["-c", "0", "http://127.0.0.1/"],
            &["--rate", "0", "http://127.0.0.1/"],
            &["--close", "-k", "5", "http://127.0.0.1/"],
            &["--urls", "a", "--trace", "b", "http://127.0.0.1/"],
            &["--duration", "soon", "http://127.0.0.1/"],
            &["http://nonexistent.invalid/"],
        ] {
            assert!(config(args).is_err(), "{args:?}");
        }
    }
}
