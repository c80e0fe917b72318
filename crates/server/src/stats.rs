//! Server counters, shared by every thread of a server instance and served as JSON on the
//! `--stats-path` endpoint. Relaxed atomics: they are statistics, not synchronisation.
//! Architectures with stages (`staged`) register each stage's gauges here too; they appear
//! as a `stages` object only when there are any.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// The counters of one server instance.
        #[derive(Default, Debug)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            /// The gauges of each stage, in pipeline order (`staged` only).
            pub stages: Mutex<Vec<Arc<StageGauges>>>,
        }

        impl Stats {
            /// The counters as a JSON object.
            pub fn to_json(&self) -> String {
                let mut out = String::from("{");
                $(
                    out.push_str(concat!("\"", stringify!($name), "\":"));
                    out.push_str(&self.$name.load(Ordering::Relaxed).to_string());
                    out.push(',');
                )*
                out.pop();
                self.stages_json(&mut out);
                out.push_str("}\n");
                out
            }
        }
    };
}

counters! {
    /// Responses started.
    requests,
    /// Connections accepted.
    connections_accepted,
    /// Connections currently open.
    connections_open,
    /// Pathname-translation cache hits.
    path_cache_hits,
    /// Pathname-translation cache misses (including stale entries).
    path_cache_misses,
    /// File-cache hits.
    file_cache_hits,
    /// File-cache misses (including stale entries).
    file_cache_misses,
    /// Response-header cache hits.
    header_cache_hits,
    /// Blocking jobs run on the serving thread itself.
    jobs_inline,
    /// Blocking jobs run by helper threads.
    jobs_helper,
    /// Body ranges found not resident in the page cache.
    residency_misses,
    /// Jobs for cold body chunks (pipe fills and read-aheads).
    readahead_jobs,
    /// Of those, chunks a helper moved into a pipe (`--read-path pipe`).
    pipe_fills,
    /// Large files whose pages were dropped after sending, under memory pressure.
    page_yields,
    /// Times accepting was paused (connection cap or descriptor exhaustion).
    accept_pauses,
    /// Connections closed by a timeout.
    timeouts,
    /// Requests refused with 503 because a queue was full (`pool`'s connection queue,
    /// a `staged` stage queue).
    queue_overflows,
}

macro_rules! gauges {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// What one stage of a staged server looks like now (threads, queue, batch) and has
        /// done (jobs, refusals), updated by the stage itself.
        #[derive(Debug)]
        pub struct StageGauges {
            /// The stage's name (the key in the JSON).
            pub name: &'static str,
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        impl StageGauges {
            /// Zeroed gauges for the stage `name`.
            pub fn new(name: &'static str) -> StageGauges {
                StageGauges { name, $($name: AtomicU64::new(0),)* }
            }

            fn push_json(&self, out: &mut String) {
                out.push('"');
                out.push_str(self.name);
                out.push_str("\":{");
                $(
                    out.push_str(concat!("\"", stringify!($name), "\":"));
                    out.push_str(&self.$name.load(Ordering::Relaxed).to_string());
                    out.push(',');
                )*
                out.pop();
                out.push('}');
            }
        }
    };
}

gauges! {
    /// Threads serving the stage now.
    threads,
    /// Most threads the stage has had at once.
    peak_threads,
    /// Jobs waiting in the stage's queue.
    queue,
    /// Jobs a thread takes per turn, as the batching controller last set it.
    batch,
    /// Jobs the stage has run.
    jobs,
    /// Jobs refused because the queue was full.
    refused,
}

impl Stats {
    /// Adds a stage's gauges to what the endpoint reports.
    pub fn register_stage(&self, gauges: Arc<StageGauges>) {
        self.stages.lock().unwrap_or_else(|p| p.into_inner()).push(gauges);
    }

    fn stages_json(&self, out: &mut String) {
        let stages = self.stages.lock().unwrap_or_else(|p| p.into_inner());
        if stages.is_empty() {
            return;
        }
        out.push_str(",\"stages\":{");
        for g in stages.iter() {
            g.push_json(out);
            out.push(',');
        }
        out.pop();
        out.push('}');
    }
}

/// Adds one to a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Subtracts one from a gauge.
pub fn drop_one(c: &AtomicU64) {
    c.fetch_sub(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lists_every_counter() {
        let s = Stats::default();
        bump(&s.requests);
        bump(&s.requests);
        let j = s.to_json();
        assert!(j.starts_with("{\"requests\":2,"), "{j}");
        assert!(j.contains("\"readahead_jobs\":0"));
        assert!(j.ends_with("}\n"));
        assert!(!j.contains("stages"), "no stages object without stages: {j}");
    }

    #[test]
    fn stages_appear_as_one_object_each() {
        let s = Stats::default();
        let g = Arc::new(StageGauges::new("resolve"));
        g.threads.store(3, Ordering::Relaxed);
        s.register_stage(g);
        s.register_stage(Arc::new(StageGauges::new("read")));
        let j: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(j["stages"]["resolve"]["threads"], 3);
        assert_eq!(j["stages"]["read"]["queue"], 0);
        assert_eq!(j["requests"], 0);
    }
}
