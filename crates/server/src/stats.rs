//! Server counters, shared by every thread of a server and served as JSON on the
//! `--stats-path` endpoint (and `--stats-listen`). Relaxed atomics: they are statistics, not
//! synchronisation.
//!
//! **Per server, not per worker.** Under `mp` the workers are separate processes, so the
//! parent creates the counters in shared memory (`amped_sys::shared`): one slot of counters
//! per worker, every worker adding to its own slot, and the JSON document summing all slots —
//! whichever worker answers, the numbers are the whole server's. A replaced worker takes its
//! predecessor's slot (its `connections_open` reset to 0; the other counters keep counting).
//!
//! Architectures with stages (`staged`) register each stage's gauges here too; they appear
//! as a `stages` object only when there are any.

use crate::config::{Arch, Config};
use std::io;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Index { $($name,)* COUNT }

        /// How many counters a server has (the size of one slot).
        pub const COUNTERS: usize = Index::COUNT as usize;

        /// The counters' names, in slot order (the JSON keys).
        pub const NAMES: [&str; COUNTERS] = [$(stringify!($name)),*];

        impl Stats {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> &AtomicU64 {
                    &self.mine[Index::$name as usize]
                }
            )*
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
    /// Body ranges sent through a job, untested, because a job was reading the same file for
    /// another response (the residency test would count pages still being read); not
    /// residency misses: the pages may well be in memory by then.
    being_read_waits,
    /// Resolves that waited for a resolve of the same URL path already in AMPED's metadata
    /// lane and ran right after it, instead of queueing again (`super::arch::coalesce`).
    resolves_coalesced,
    /// Jobs for cold body chunks (pipe fills and read-aheads).
    readahead_jobs,
    /// Of those, chunks a helper moved into a pipe (`--read-path pipe`).
    pipe_fills,
    /// Of those, chunks a helper read into a buffer (`--read-path copy`).
    copy_fills,
    /// Cold chunks read around the page cache into a huge page (`--direct-io-above`): copy
    /// fills of helpers, and io_uring's own direct reads.
    direct_reads,
    /// Cold chunks to be read around the page cache that took a pipe instead: when the read
    /// was to start, the copy budget or the huge pages were held by other trips (read and
    /// not yet sent).
    direct_budget_full,
    /// Large files whose pages were dropped after sending, under memory pressure.
    page_yields,
    /// Times accepting was paused (connection cap or descriptor exhaustion).
    accept_pauses,
    /// Connections closed by a timeout.
    timeouts,
    /// Requests refused with 503 because a queue was full (`pool`'s connection queue,
    /// a `staged` stage queue).
    queue_overflows,
    /// Requests answered 429 by `--max-connections-per-ip` or `--rate-limit-per-ip`.
    client_limit_refusals,
    /// Threads serving AMPED's metadata lanes now (every loop's; `uring`'s path
    /// translations too): `--helpers` per loop, more while `--metadata-helpers auto` grows.
    metadata_helpers,
    /// Most `metadata_helpers` seen at once.
    metadata_helpers_peak,
}

/// Where counters live: in this process, or in memory shared between processes.
enum Cells {
    Own(Box<[AtomicU64]>),
    Shared(&'static [AtomicU64]),
}

impl Deref for Cells {
    type Target = [AtomicU64];
    fn deref(&self) -> &[AtomicU64] {
        match self {
            Cells::Own(b) => b,
            Cells::Shared(s) => s,
        }
    }
}

/// The counters of one server: this process's slot, and (under `mp`) every slot to sum.
pub struct Stats {
    mine: Cells,
    all: Option<&'static [AtomicU64]>,
    /// Under `mp`: the words after the counters, where the per-client limits are kept
    /// (`crate::client_limits::Shared`), if they are on.
    limits: Option<&'static [AtomicU64]>,
    /// The gauges of each stage, in pipeline order (`staged` only; per process).
    pub stages: Mutex<Vec<Arc<StageGauges>>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            mine: Cells::Own((0..COUNTERS).map(|_| AtomicU64::new(0)).collect()),
            all: None,
            limits: None,
            stages: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.to_json().trim_end())
    }
}

impl Stats {
    /// The counters of a server configured by `cfg`: its own under every architecture but
    /// `mp`; there, the parent creates shared memory with a slot per worker plus one for
    /// itself (returning the descriptor to hand to the workers), and a worker (`--stats-fd`,
    /// `--worker-index`) maps it and counts in its slot.
    pub fn for_server(cfg: &Config) -> io::Result<(Stats, Option<OwnedFd>)> {
        if cfg.arch != Arch::Mp {
            return Ok((Stats::default(), None));
        }
        let counters = (cfg.processes + 1) * COUNTERS;
        let limits = crate::client_limits::Shared::words(
            cfg.max_connections_per_ip,
            cfg.rate_limit_per_ip,
            cfg.processes,
        );
        let len = counters + limits;
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "--worker-index out of range");
        match cfg.stats_fd {
            Some(fd) => {
                let all = amped_sys::shared::adopt_counters(fd, len)?;
                let stats = Stats::shared_slot(all, counters, cfg.worker_index);
                Ok((stats.ok_or_else(bad)?, None))
            }
            None => {
                let (fd, all) = amped_sys::shared::create_counters(len)?;
                let stats = Stats::shared_slot(all, counters, cfg.processes);
                Ok((stats.ok_or_else(bad)?, Some(fd)))
            }
        }
    }

    /// Under `mp`, the shared words of the per-client limits (when they are on).
    pub fn limit_words(&self) -> Option<&'static [AtomicU64]> {
        self.limits
    }

    /// The whole shared array (under `mp`), for the parent to reset a dead worker's gauge.
    pub fn shared_cells(&self) -> Option<&'static [AtomicU64]> {
        self.all
    }

    /// The counters of worker `slot` in `all`, a shared array whose first `counters` words
    /// are whole slots (`COUNTERS` each; the JSON document sums every slot) and the rest the
    /// per-client limits' words.
    pub fn shared_slot(all: &'static [AtomicU64], counters: usize, slot: usize) -> Option<Stats> {
        let (all, limits) = all.split_at(counters.min(all.len()));
        let mine = all.get(slot * COUNTERS..(slot + 1) * COUNTERS)?;
        Some(Stats {
            mine: Cells::Shared(mine),
            all: Some(all),
            limits: (!limits.is_empty()).then_some(limits),
            stages: Mutex::default(),
        })
    }

    /// Resets the `connections_open` gauge of `slot` (its worker died with connections
    /// open, which its replacement does not have).
    pub fn reset_open_gauge(all: &[AtomicU64], slot: usize) {
        if let Some(c) = all.get(slot * COUNTERS + Index::connections_open as usize) {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The value of counter `i`, summed over every slot when shared.
    fn total(&self, i: usize) -> u64 {
        match self.all {
            Some(all) => all.chunks_exact(COUNTERS).map(|s| s[i].load(Ordering::Relaxed)).sum(),
            None => self.mine[i].load(Ordering::Relaxed),
        }
    }

    /// The counter called `name` (one of [`NAMES`]), summed over every slot when shared; 0
    /// for a name that is not a counter.
    pub fn total_named(&self, name: &str) -> u64 {
        NAMES.iter().position(|n| *n == name).map_or(0, |i| self.total(i))
    }

    /// The server's counters as a JSON object.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, name) in NAMES.iter().enumerate() {
            out.push_str(&format!("\"{name}\":{},", self.total(i)));
        }
        out.pop();
        self.stages_json(&mut out);
        out.push_str("}\n");
        out
    }
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
        bump(s.requests());
        bump(s.requests());
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

    #[test]
    fn shared_slots_sum() {
        // Three slots of counters, then 5 words of the per-client limits.
        let all: &'static [AtomicU64] =
            Box::leak((0..3 * COUNTERS + 5).map(|_| AtomicU64::new(0)).collect());
        let n = 3 * COUNTERS;
        let (a, b) =
            (Stats::shared_slot(all, n, 0).unwrap(), Stats::shared_slot(all, n, 2).unwrap());
        assert!(Stats::shared_slot(all, n, 3).is_none());
        assert_eq!(a.limit_words().map(<[AtomicU64]>::len), Some(5));
        bump(a.requests());
        bump(b.requests());
        bump(b.connections_open());
        assert!(a.to_json().starts_with("{\"requests\":2,"), "{}", a.to_json());
        Stats::reset_open_gauge(all, 2);
        assert!(b.to_json().contains("\"connections_open\":0"));
    }
}
