//! Server counters, shared by every thread of a server instance and served as JSON on the
//! `--stats-path` endpoint. Relaxed atomics: they are statistics, not synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// The counters of one server instance.
        #[derive(Default, Debug)]
        pub struct Stats { $($(#[$doc])* pub $name: AtomicU64,)* }

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
    /// Connections refused because the pool queue was full.
    queue_overflows,
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
    }
}
