//! The DeBox profile of amped cells (docs/DEBOX.md): amped servers run with `--debox` and a
//! stats path; the profile is read when the measured phase begins and when it ends, and the
//! difference — per thread role and call: calls, how many blocked, time asleep, major faults,
//! and the loop's stalls in disk calls — says who blocked where while measured. Peers are
//! profiled from outside instead ([`super::outside_profile`]); both go into one table
//! ([`super::who_blocked`]).

use crate::servers::{ServerKind, ServerSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where amplab asks amped for its profile.
const PROFILE_PATH: &str = "/.amplab/stats?debox";

/// One (role, call)'s totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CallTotals {
    /// Calls made.
    pub count: u64,
    /// Calls that slept or took a major fault.
    pub blocked: u64,
    /// Time asleep, µs.
    pub slept_us: f64,
    /// Major page faults.
    pub major_faults: u64,
}

/// What a profile says, reduced to who blocked where.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Blocking {
    /// (role, call) → totals.
    pub calls: BTreeMap<String, CallTotals>,
    /// Loop stalls in calls that can wait for the disk.
    pub loop_disk_stalls: u64,
}

impl Blocking {
    /// Reads an amped `?debox` document.
    pub fn from_profile(p: &serde_json::Value) -> Blocking {
        let mut calls = BTreeMap::new();
        for (role, rows) in p["roles"].as_object().into_iter().flatten() {
            for row in rows.as_array().into_iter().flatten() {
                let call = row["call"].as_str().unwrap_or("?");
                calls.insert(
                    format!("{role} {call}"),
                    CallTotals {
                        count: row["count"].as_u64().unwrap_or(0),
                        blocked: row["blocked"].as_u64().unwrap_or(0),
                        slept_us: row["slept_us"].as_f64().unwrap_or(0.0),
                        major_faults: row["major_faults"].as_u64().unwrap_or(0),
                    },
                );
            }
        }
        // uring: ring operations that may wait for the disk and were slow, as a "ring" role
        // (the loop never waits in them; the request that asked does).
        for op in p["ring_ops"]["ops"].as_array().into_iter().flatten() {
            if op["may_wait_for_disk"].as_bool() != Some(true) {
                continue;
            }
            calls.insert(
                format!("ring {}", op["op"].as_str().unwrap_or("?")),
                CallTotals {
                    count: op["count"].as_u64().unwrap_or(0),
                    blocked: op["slow"].as_u64().unwrap_or(0),
                    slept_us: op["slow_us"].as_f64().unwrap_or(0.0),
                    major_faults: 0,
                },
            );
        }
        Blocking { calls, loop_disk_stalls: p["stalls"]["in_disk_calls"].as_u64().unwrap_or(0) }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Blocking) -> Blocking {
        let calls = self
            .calls
            .iter()
            .map(|(k, now)| {
                let was = earlier.calls.get(k).cloned().unwrap_or_default();
                let d = CallTotals {
                    count: now.count.saturating_sub(was.count),
                    blocked: now.blocked.saturating_sub(was.blocked),
                    slept_us: (now.slept_us - was.slept_us).max(0.0),
                    major_faults: now.major_faults.saturating_sub(was.major_faults),
                };
                (k.clone(), d)
            })
            .filter(|(_, d)| d.count > 0)
            .collect();
        Blocking {
            calls,
            loop_disk_stalls: self.loop_disk_stalls.saturating_sub(earlier.loop_disk_stalls),
        }
    }

    /// Seconds asleep per second of `measured_s`, summed over the threads of `role`.
    pub fn asleep_share(&self, role: &str, measured_s: f64) -> f64 {
        let us: f64 = self
            .calls
            .iter()
            .filter(|(k, _)| k.split(' ').next() == Some(role))
            .fold(0.0, |sum, (_, c)| sum + c.slept_us);
        us / 1e6 / measured_s.max(1e-9)
    }

    /// The `n` (role, call)s that slept longest, as `role call: blocked× ms`.
    pub fn top(&self, n: usize) -> String {
        self.top_where(n, |_| true)
    }

    /// [`Blocking::top`] of one role's calls.
    pub fn top_of(&self, role: &str, n: usize) -> String {
        self.top_where(n, |k| k.split(' ').next() == Some(role))
    }

    fn top_where(&self, n: usize, keep: impl Fn(&str) -> bool) -> String {
        let mut v: Vec<(&String, &CallTotals)> =
            self.calls.iter().filter(|(k, c)| c.blocked > 0 && keep(k)).collect();
        v.sort_by(|a, b| b.1.slept_us.total_cmp(&a.1.slept_us));
        let parts: Vec<String> = v
            .iter()
            .take(n)
            .map(|(k, c)| format!("{k}: {}× {:.0} ms", c.blocked, c.slept_us / 1e3))
            .collect();
        if parts.is_empty() { "none".into() } else { parts.join("; ") }
    }

    /// Major faults in all.
    pub fn major_faults(&self) -> u64 {
        self.calls.values().map(|c| c.major_faults).sum()
    }
}

/// `spec` as amplab runs it to profile it: amped gets `--debox` and amplab's stats path
/// (peers are returned as they are).
pub fn profiled(spec: &ServerSpec) -> ServerSpec {
    let mut spec = super::counters_probe::with_stats_path(spec);
    if let ServerKind::Amped { options, .. } = &mut spec.kind {
        options.retain(|(name, _)| name != "debox");
        options.push(("debox".into(), None));
    }
    spec
}

/// Whether `spec` is profiled by [`profiled`].
pub fn is_profiled(spec: &ServerSpec) -> bool {
    matches!(spec.kind, ServerKind::Amped { .. })
}

/// The server's profile now; `None` if it did not answer in time.
pub fn fetch(port: u16) -> Option<Blocking> {
    let raw = super::stats_get::get(port, PROFILE_PATH, Duration::from_secs(10))?;
    let json = super::stats_get::json_body(&raw)?;
    json["debox"].as_bool().filter(|on| *on).map(|_| Blocking::from_profile(&json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(loop_sf: (u64, u64, f64), helper_splice: (u64, u64, f64), stalls: u64) -> Blocking {
        Blocking::from_profile(&json!({
            "debox": true,
            "roles": {
                "loop": [{"call": "sendfile", "count": loop_sf.0, "blocked": loop_sf.1, "slept_us": loop_sf.2, "major_faults": 0},
                         {"call": "writev", "count": 10}],
                "helper": [{"call": "splice_in", "count": helper_splice.0, "blocked": helper_splice.1, "slept_us": helper_splice.2, "major_faults": 2}]
            },
            "stalls": {"in_disk_calls": stalls}
        }))
    }

    #[test]
    fn the_measured_phase_is_the_difference_and_the_table_names_the_sleepers() {
        let before = profile((5, 1, 1000.0), (3, 3, 30_000.0), 1);
        let after = profile((25, 4, 51_000.0), (13, 13, 2_030_000.0), 4);
        let d = after.since(&before);
        assert_eq!(
            d.calls["loop sendfile"],
            CallTotals { count: 20, blocked: 3, slept_us: 50_000.0, major_faults: 0 }
        );
        assert!(!d.calls.contains_key("loop writev"), "no calls while measured");
        assert_eq!(d.loop_disk_stalls, 3);
        assert!((d.asleep_share("loop", 2.0) - 0.025).abs() < 1e-9);
        assert!((d.asleep_share("helper", 2.0) - 1.0).abs() < 1e-9);
        assert_eq!(format!("{:.2}", d.asleep_share("worker", 2.0)), "0.00", "not -0.00");
        assert_eq!(d.top(1), "helper splice_in: 10× 2000 ms");
        let row = crate::experiments::who_blocked::amped_row("amped", &d, 2.0, 100, None);
        let t = crate::experiments::who_blocked::table(&[row]);
        assert!(t.contains("| amped | 2.5 | 1.00 | 3 | 0.000 | helper splice_in: 10× 2000 ms; loop sendfile: 3× 50 ms |"), "{t}");
    }

    #[test]
    fn only_amped_is_profiled_and_keeps_one_stats_path() {
        let spec = ServerSpec::parse("sped:stats-path=/x").unwrap();
        let p = profiled(&spec);
        let ServerKind::Amped { options, .. } = &p.kind else { panic!() };
        assert_eq!(options.iter().filter(|(n, _)| n == "stats-path").count(), 1);
        assert!(options.iter().any(|(n, v)| n == "debox" && v.is_none()));
        assert!(is_profiled(&spec));
    }
}
