//! What the soak's clients saw, counted: outcomes overall and per kind of client, the reasons
//! behind them, the bytes checked, stale answers and their age, and the first failures in
//! detail.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::content::{Judgement, Outcome};

/// Failures kept in detail.
const EXAMPLES: usize = 25;
/// Latency samples kept.
const LATENCIES: usize = 200_000;

/// The counts of one server's soak.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Tally {
    /// Outcome name → requests.
    pub outcomes: BTreeMap<String, u64>,
    /// Client kind → outcome name → requests.
    pub by_client: BTreeMap<String, BTreeMap<String, u64>>,
    /// `outcome: client: reason` → requests.
    pub reasons: BTreeMap<String, u64>,
    /// 200/206 answers whose bytes were checked, and their body bytes.
    pub bodies_checked: u64,
    pub body_bytes_checked: u64,
    /// Answers whose bytes (or length) matched no version, and their body bytes.
    pub mismatched_answers: u64,
    pub mismatched_bytes: u64,
    /// Answers showing a state older than the request's window, and the oldest (seconds).
    pub stale_answers: u64,
    pub stale_max_s: f64,
    /// Requests sent again on a new connection because a kept-alive one was closed before
    /// any byte of the answer (the idempotent retry of RFC 9112 §9.3.1; not failures).
    pub keepalive_retries: u64,
    /// Connections still open when the soak ended (endless slowloris heads), not counted.
    pub open_at_end: u64,
    /// Malformed case → what the server answered (a status, `close` or `timeout`) → times.
    pub malformed: BTreeMap<String, BTreeMap<String, u64>>,
    /// Latency (ms) of successful small-file answers, for the percentiles.
    #[serde(skip)]
    pub latencies_ms: Vec<f64>,
    /// The first failures, described.
    pub examples: Vec<String>,
}

impl Tally {
    /// Counts one request of `client` judged `j` at `t_s`, `bytes` of body received.
    pub fn record(&mut self, client: &str, j: &Judgement, bytes: u64, what: &str, t_s: f64) {
        let name = j.outcome.name();
        *self.outcomes.entry(name.into()).or_default() += 1;
        *self.by_client.entry(client.into()).or_default().entry(name.into()).or_default() += 1;
        *self.reasons.entry(format!("{name}: {client}: {}", j.reason)).or_default() += 1;
        match j.outcome {
            Outcome::Mismatch => {
                self.mismatched_answers += 1;
                self.mismatched_bytes += bytes;
            }
            Outcome::Stale => {
                self.stale_answers += 1;
                self.stale_max_s = self.stale_max_s.max(j.stale_s.unwrap_or(0.0));
            }
            _ => {}
        }
        if j.outcome.is_failure() && self.examples.len() < EXAMPLES {
            self.examples.push(format!("t={t_s:.2}s {client} {what}: {name} ({})", j.reason));
        }
    }

    /// Counts a body whose bytes were checked.
    pub fn checked(&mut self, bytes: u64) {
        self.bodies_checked += 1;
        self.body_bytes_checked += bytes;
    }

    /// Keeps a latency sample.
    pub fn latency(&mut self, ms: f64) {
        if self.latencies_ms.len() < LATENCIES {
            self.latencies_ms.push(ms);
        }
    }

    /// Requests counted.
    pub fn total(&self) -> u64 {
        self.outcomes.values().sum()
    }

    /// Requests with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(outcome.name()).copied().unwrap_or(0)
    }
}
