//! Samples a running `amped --arch staged --stats-path PATH` while the load runs: each stage's
//! threads and queue length from the stats endpoint's `stages` object, a sample every period,
//! on a thread of its own, so an experiment can draw the thread counts over time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The stats path amplab gives staged servers it samples.
pub const STATS_PATH: &str = "/.amplab/stats";

/// One look at the stages.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since sampling began (the server had just answered its probe).
    pub t_s: f64,
    /// Threads per stage.
    pub threads: BTreeMap<String, u64>,
    /// Jobs waiting per stage.
    pub queue: BTreeMap<String, u64>,
    /// Requests refused with 503 so far (`queue_overflows`).
    pub refused: u64,
}

/// A sampler thread; [`StageSampler::finish`] stops it and returns what it saw.
pub struct StageSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Sample>>,
}

impl StageSampler {
    /// Starts sampling the server on `port` every `every`.
    pub fn start(port: u16, every: Duration) -> StageSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                if let Some(s) = sample(port, t0.elapsed().as_secs_f64()) {
                    samples.push(s);
                }
                std::thread::sleep(every);
            }
            samples
        });
        StageSampler { stop, thread }
    }

    /// Stops sampling; the samples in time order.
    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One GET of the stats endpoint, parsed; `None` if the server did not answer in time.
fn sample(port: u16, t_s: f64) -> Option<Sample> {
    parse(&super::stats_get::get(port, STATS_PATH, Duration::from_secs(5))?, t_s)
}

/// A sample from a raw HTTP response carrying the stats JSON.
pub fn parse(raw: &[u8], t_s: f64) -> Option<Sample> {
    let json = super::stats_get::json_body(raw)?;
    let stages = json.get("stages")?.as_object()?;
    let gauge = |name: &str| -> BTreeMap<String, u64> {
        stages.iter().map(|(k, v)| (k.clone(), v[name].as_u64().unwrap_or(0))).collect()
    };
    Some(Sample {
        t_s,
        threads: gauge("threads"),
        queue: gauge("queue"),
        refused: json["queue_overflows"].as_u64().unwrap_or(0),
    })
}

/// Mean and peak of the total stage threads over the samples taken from `from_s` on.
pub fn threads_mean_peak(samples: &[Sample], from_s: f64) -> Option<(f64, u64)> {
    let totals: Vec<u64> =
        samples.iter().filter(|s| s.t_s >= from_s).map(|s| s.threads.values().sum()).collect();
    let peak = *totals.iter().max()?;
    Some((totals.iter().sum::<u64>() as f64 / totals.len() as f64, peak))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_stages_of_a_stats_response() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"requests\":9,\"queue_overflows\":2,\"stages\":{\"resolve\":{\"threads\":3,\"queue\":7},\"read\":{\"threads\":1,\"queue\":0}}}\n";
        let s = parse(raw, 1.5).unwrap();
        assert_eq!(s.threads["resolve"], 3);
        assert_eq!(s.queue["resolve"], 7);
        assert_eq!(s.refused, 2);
        assert!(parse(b"HTTP/1.1 200 OK\r\n\r\n{\"requests\":1}", 0.0).is_none(), "no stages");
        let later = Sample { t_s: 3.0, ..s.clone() };
        assert_eq!(threads_mean_peak(&[s, later], 2.0), Some((4.0, 4)));
        assert_eq!(threads_mean_peak(&[], 0.0), None);
    }
}
