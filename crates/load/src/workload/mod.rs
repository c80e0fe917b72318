//! What to request: the list of request targets a run cycles through, built once before the run
//! from one URL, a URL list, a weighted trace or an access log, with each request's bytes
//! prebuilt so the event loops only copy them.
//!
//! Invariant: a [`Workload`] holds at least one target, and every target is printable ASCII
//! starting with `/` (checked by [`Url::join`]).

mod clf;
mod trace;
mod urls;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::request::RequestShape;
use crate::target::Url;
use amped_workload::SplitMix64;

/// Where the targets come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The URL given on the command line, alone.
    Single,
    /// `--urls FILE`.
    UrlList(PathBuf),
    /// `--trace FILE`.
    Trace(PathBuf),
    /// `--clf FILE`.
    AccessLog(PathBuf),
}

/// One parsed line of a workload file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Request target (already joined onto the base URL's path).
    pub path: String,
    /// Relative weight from a trace's second column.
    pub weight: Option<f64>,
}

/// What a line parser says about a line it could not use.
#[derive(Debug, Clone, PartialEq)]
pub enum LineError {
    /// Refuse the whole file.
    Fatal(String),
    /// Report the line and go on (access logs hold junk).
    Skip(String),
    /// A well-formed access-log line for another method than GET.
    NotGet,
}

/// Parses one line of a workload file against the base URL.
type LineParser = fn(&str, &Url) -> Result<Option<Entry>, LineError>;

/// A workload file that could not be used.
#[derive(Debug)]
pub struct WorkloadError(String);

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the next target is chosen.
#[derive(Debug)]
enum Order {
    /// Targets in file order, cycling; each thread takes every T-th one.
    Sequential,
    /// Random draw proportional to weight; `cumulative[i]` is the sum of weights 0..=i.
    Weighted { cumulative: Vec<f64> },
}

/// The request targets of a run, with each request's head prebuilt.
#[derive(Debug)]
pub struct Workload {
    /// `GET <path> HTTP/1.1\r\nHost: <host>\r\n` (with `--method` and `-H` applied) for every
    /// target, back to back.
    heads: Vec<u8>,
    /// End offset of each target's head in `heads`.
    ends: Vec<usize>,
    order: Order,
    /// Method and extra header fields.
    shape: RequestShape,
    /// Access-log lines skipped as malformed.
    pub skipped_lines: u64,
    /// Access-log lines skipped because their method was not GET.
    pub skipped_non_get: u64,
}

/// Ends a request that keeps the connection open.
pub const KEEP_ALIVE_END: &[u8] = b"\r\n";
/// Ends the last request of a connection: the server closes first, so the TIME_WAIT state
/// lands on its side and the generator does not run out of ephemeral ports.
pub const CLOSE_END: &[u8] = b"Connection: close\r\n\r\n";

/// How many skipped access-log lines are reported one by one before only counting.
const REPORTED_SKIPS: u64 = 5;

impl Workload {
    /// Builds the workload for `source`, reporting skipped access-log lines on stderr.
    pub fn load(
        source: &Source,
        base: &Url,
        shape: &RequestShape,
    ) -> Result<Workload, WorkloadError> {
        let mut workload = Workload {
            shape: shape.clone(),
            heads: Vec::new(),
            ends: Vec::new(),
            order: Order::Sequential,
            skipped_lines: 0,
            skipped_non_get: 0,
        };
        let (path, parse): (&Path, LineParser) = match source {
            Source::Single => {
                workload.push(&base.path, &base.host_header());
                return Ok(workload);
            }
            Source::UrlList(p) => (p, urls::parse_line),
            Source::Trace(p) => (p, trace::parse_line),
            Source::AccessLog(p) => (p, clf::parse_line),
        };
        let bytes = std::fs::read(path)
            .map_err(|e| WorkloadError(format!("cannot read {}: {e}", path.display())))?;
        let weights = workload.read_lines(&bytes, path, base, parse)?;
        if workload.ends.is_empty() {
            return Err(WorkloadError(format!(
                "{}: no usable request in the file",
                path.display()
            )));
        }
        if weights.iter().any(Option::is_some) {
            let cumulative = weights
                .iter()
                .scan(0.0, |sum, w| {
                    *sum += w.unwrap_or(1.0);
                    Some(*sum)
                })
                .collect();
            workload.order = Order::Weighted { cumulative };
        }
        Ok(workload)
    }

    /// Adds the requests of a file's lines; returns each request's weight, if any.
    fn read_lines(
        &mut self,
        bytes: &[u8],
        path: &Path,
        base: &Url,
        parse: LineParser,
    ) -> Result<Vec<Option<f64>>, WorkloadError> {
        let host = base.host_header();
        let mut weights = Vec::new();
        for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = String::from_utf8_lossy(raw.strip_suffix(b"\r").unwrap_or(raw));
            let at = || format!("{}:{}", path.display(), index + 1);
            match parse(&line, base) {
                Ok(None) => {}
                Ok(Some(entry)) => {
                    self.push(&entry.path, &host);
                    weights.push(entry.weight);
                }
                Err(LineError::Fatal(why)) => {
                    return Err(WorkloadError(format!("{}: {why}", at())));
                }
                Err(LineError::Skip(why)) => {
                    self.skipped_lines += 1;
                    if self.skipped_lines <= REPORTED_SKIPS {
                        eprintln!("ampload: {}: {why}; line skipped", at());
                    }
                }
                Err(LineError::NotGet) => self.skipped_non_get += 1,
            }
        }
        if self.skipped_lines > REPORTED_SKIPS {
            eprintln!(
                "ampload: {}: {} malformed lines skipped in all",
                path.display(),
                self.skipped_lines
            );
        }
        Ok(weights)
    }

    fn push(&mut self, path: &str, host: &str) {
        let head = self.shape.head(path, host);
        self.heads.extend_from_slice(head.as_bytes());
        self.ends.push(self.heads.len());
    }

    /// Number of distinct targets.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The request head of target `index`, without the final header and blank line (add
    /// [`KEEP_ALIVE_END`] or [`CLOSE_END`]).
    pub fn head(&self, index: u32) -> &[u8] {
        let index = index as usize;
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.heads[start..self.ends[index]]
    }

    /// A chooser of targets for thread `thread` of `threads`.
    pub fn picker(&self, thread: usize, threads: usize, seed: u64) -> Picker<'_> {
        Picker {
            workload: self,
            next: thread % self.len(),
            stride: threads,
            rng: SplitMix64::new(seed ^ (thread as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }
}

/// One thread's cursor over a workload.
pub struct Picker<'a> {
    workload: &'a Workload,
    /// Next index in sequential order.
    next: usize,
    /// Threads interleave: thread i takes i, i+T, i+2T, ... so together they keep file order.
    stride: usize,
    rng: SplitMix64,
}

impl Picker<'_> {
    /// The next target index.
    pub fn next_target(&mut self) -> u32 {
        match &self.workload.order {
            Order::Sequential => {
                let index = self.next;
                self.next = (self.next + self.stride) % self.workload.len();
                index as u32
            }
            Order::Weighted { cumulative } => {
                let total = cumulative.last().copied().unwrap_or(1.0);
                let x = self.rng.next_f64() * total;
                cumulative.partition_point(|&c| c <= x).min(cumulative.len() - 1) as u32
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn shape() -> RequestShape {
        RequestShape::default()
    }

    fn base() -> Url {
        Url::parse("http://h:81/").unwrap()
    }

    #[test]
    fn single_url_builds_one_request() {
        let w = Workload::load(&Source::Single, &Url::parse("http://h:81/x?y").unwrap(), &shape())
            .unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w.head(0), b"GET /x?y HTTP/1.1\r\nHost: h:81\r\n");
    }

    #[test]
    fn sequential_pickers_interleave_across_threads() {
        let f = file("/a\n/b\r\n\n/c\n");
        let w = Workload::load(&Source::UrlList(f.path().into()), &base(), &shape()).unwrap();
        assert_eq!(w.len(), 3);
        assert_eq!(w.head(1), b"GET /b HTTP/1.1\r\nHost: h:81\r\n");
        let mut p0 = w.picker(0, 2, 1);
        let mut p1 = w.picker(1, 2, 1);
        let got: Vec<u32> = (0..3).flat_map(|_| [p0.next_target(), p1.next_target()]).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn weighted_trace_draws_in_proportion() {
        let f = file("/rare 1\n/common 9\n");
        let w = Workload::load(&Source::Trace(f.path().into()), &base(), &shape()).unwrap();
        let mut p = w.picker(0, 1, 7);
        let common = (0..10_000).filter(|_| p.next_target() == 1).count();
        assert!((8_700..9_300).contains(&common), "{common}");
    }

    #[test]
    fn access_log_skips_and_counts_bad_lines() {
        let f = file(concat!(
            "h - - [01/Jul/1995:00:00:01 -0400] \"GET /a HTTP/1.0\" 200 1\n",
            "junk\n",
            "h - - [01/Jul/1995:00:00:01 -0400] \"HEAD /b HTTP/1.0\" 200 1\n",
            "h - - [01/Jul/1995:00:00:02 -0400] \"GET /c HTTP/1.0\" 404 -\n",
        ));
        let w = Workload::load(&Source::AccessLog(f.path().into()), &base(), &shape()).unwrap();
        assert_eq!((w.len(), w.skipped_lines, w.skipped_non_get), (2, 1, 1));
        assert_eq!(w.head(1), b"GET /c HTTP/1.1\r\nHost: h:81\r\n");
    }

    #[test]
    fn fatal_lines_and_empty_files_are_refused_with_line_numbers() {
        let f = file("/a\n/b x\n");
        let err = Workload::load(&Source::Trace(f.path().into()), &base(), &shape()).unwrap_err();
        assert!(err.to_string().ends_with(":2: weight \"x\" is not a positive number"), "{err}");
        let empty = file("# nothing\n");
        assert!(Workload::load(&Source::UrlList(empty.path().into()), &base(), &shape()).is_err());
        let missing = Source::UrlList("/nonexistent/ampload".into());
        assert!(
            Workload::load(&missing, &base(), &shape())
                .unwrap_err()
                .to_string()
                .starts_with("cannot read")
        );
    }
}
