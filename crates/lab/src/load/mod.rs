//! Load generators amplab drives: ampload (every experiment), wrk (optional for single-file
//! runs) and ab (the student experiment). Each run ends as one [`Measurement`].

pub mod ab;
pub mod ampload;
pub mod wrk;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One measured cell, whatever produced it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Measurement {
    /// "ampload", "wrk" or "ab".
    pub generator: String,
    /// Requests answered with a valid response.
    pub requests: u64,
    /// Of those, 2xx/3xx.
    pub ok: u64,
    /// Requests that failed (connect, timeout, reset, bad response) plus non-2xx/3xx answers.
    pub errors: u64,
    #[serde(deserialize_with = "nan_if_null")]
    pub duration_s: f64,
    /// Responses per second.
    #[serde(deserialize_with = "nan_if_null")]
    pub rps: f64,
    /// Body bytes per second as Mb/s (10^6 bits), the papers' "output bandwidth".
    #[serde(deserialize_with = "nan_if_null")]
    pub body_mbps: f64,
    /// Latency, milliseconds (NaN where the generator does not report it).
    pub latency: Latency,
    /// What went wrong first, if anything.
    pub first_error: Option<String>,
    /// Requests that got no valid answer, by kind (`timeout`, `connect`, `reset`,
    /// `bad_response`; `failed` / `socket` for ab and wrk, which do not tell the kinds apart).
    pub failed_by_kind: BTreeMap<String, u64>,
    /// Answers with a status other than 2xx, by status (a replayed log's own 404s and 301s
    /// land here, not among the failures).
    pub non_2xx_by_status: BTreeMap<String, u64>,
    /// The measured latency distribution as (fraction answered within, ms) points, from the
    /// generator's histogram (ampload's percentile spectrum); empty when it has none.
    pub latency_cdf: Vec<(f64, f64)>,
}

impl Measurement {
    /// The latency CDF as (latency ms, fraction answered within) points, for figures, and
    /// whether it is the measured histogram (`false`: only the reported percentiles).
    pub fn cdf(&self) -> (Vec<(f64, f64)>, bool) {
        let measured = !self.latency_cdf.is_empty();
        let points = if measured { self.latency_cdf.clone() } else { self.latency.cdf_points() };
        (points.into_iter().map(|(f, v)| (v, f)).collect(), measured)
    }

    /// Requests that got no valid answer at all.
    pub fn failed(&self) -> u64 {
        self.failed_by_kind.values().sum()
    }

    /// What went wrong, by kind, or `None` if nothing did: `25 of 6031 requests got no answer
    /// (timeout 25: no response within 30s); 184 answers were not 2xx (404 × 150, 301 × 34)`.
    pub fn problems(&self) -> Option<String> {
        let mut parts = Vec::new();
        let failed = self.failed();
        if failed > 0 {
            let kinds: Vec<String> = self
                .failed_by_kind
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let first =
                self.first_error.as_deref().map_or(String::new(), |e| format!("; first {e}"));
            parts.push(format!(
                "{failed} of {} requests got no answer ({}{first})",
                self.requests + failed,
                kinds.join(", ")
            ));
        }
        let non_2xx: u64 = self.non_2xx_by_status.values().sum();
        if non_2xx > 0 {
            let statuses: Vec<String> =
                self.non_2xx_by_status.iter().map(|(s, n)| format!("{s} × {n}")).collect();
            parts.push(format!(
                "{non_2xx} of {} answers were not 2xx ({})",
                self.requests,
                statuses.join(", ")
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Latency statistics in milliseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    #[serde(deserialize_with = "nan_if_null")]
    pub min: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p5: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p50: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p90: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p95: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p99: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p999: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub max: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub mean: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub std_dev: f64,
}

impl Default for Latency {
    fn default() -> Latency {
        let n = f64::NAN;
        Latency {
            min: n,
            p5: n,
            p50: n,
            p90: n,
            p95: n,
            p99: n,
            p999: n,
            max: n,
            mean: n,
            std_dev: n,
        }
    }
}

impl Latency {
    /// (fraction, latency ms) points through the percentiles the generator reported: the CDF
    /// of a measurement that has no histogram (wrk, ab, runs before ampload exported one).
    pub fn cdf_points(&self) -> Vec<(f64, f64)> {
        [
            (0.0, self.min),
            (0.05, self.p5),
            (0.5, self.p50),
            (0.9, self.p90),
            (0.95, self.p95),
            (0.99, self.p99),
            (0.999, self.p999),
            (1.0, self.max),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_finite() && *v > 0.0)
        .collect()
    }
}

/// Reads a number written by serde_json, which writes NaN as `null`.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Why a load-generator run produced no measurement.
#[derive(Clone, Debug)]
pub enum LoadError {
    /// The program could not be started.
    Spawn(String),
    /// It ran past its deadline and was killed.
    TimedOut,
    /// It exited without a usable report.
    Failed { status: String, stderr: String },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Spawn(e) => write!(f, "cannot start the load generator: {e}"),
            LoadError::TimedOut => {
                write!(f, "the load generator ran past its deadline and was killed")
            }
            LoadError::Failed { status, stderr } => {
                write!(f, "the load generator failed ({status}): {}", stderr.trim())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measurement_reads_back_with_its_nans() {
        let m = Measurement {
            latency: Latency { p50: 1.5, ..Latency::default() },
            ..Default::default()
        };
        let back: Measurement = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.latency.p50, 1.5);
        assert!(back.latency.p99.is_nan() && back.latency.std_dev.is_nan());
        let old: Measurement =
            serde_json::from_str(r#"{"generator":"ab","latency":{"p5":null}}"#).unwrap();
        assert!(old.latency.p5.is_nan() && old.latency_cdf.is_empty());
    }
}
