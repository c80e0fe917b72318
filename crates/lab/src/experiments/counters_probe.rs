//! amped's own counters over a measured phase: every amped cell of a disk-bound run gets
//! amplab's stats path, the counters (`--stats-path`, the server's JSON document) are read
//! when the measured phase begins and when it ends, and the difference goes into the cell —
//! how many cold chunks took a pipe, a buffer or a direct read, how many residency tests
//! missed, how many large files yielded their pages. Peers have no such counters.

use crate::servers::{ServerKind, ServerSpec};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where amplab asks amped for its counters (the staged sampler's path too).
pub use super::stage_sampler::STATS_PATH;

/// Counters that are gauges (a level now, not a count since the start): their value at the
/// end is kept, not a difference.
const GAUGES: [&str; 3] = ["connections_open", "metadata_helpers", "metadata_helpers_peak"];

/// `spec` with amplab's stats path, if it is amped (peers are returned as they are); a path
/// the caller gave is replaced, so there is one.
pub fn with_stats_path(spec: &ServerSpec) -> ServerSpec {
    let mut spec = spec.clone();
    if let ServerKind::Amped { options, .. } = &mut spec.kind {
        options.retain(|(name, _)| name != "stats-path");
        options.push(("stats-path".into(), Some(STATS_PATH.into())));
    }
    spec
}

/// The server's counters now; `None` for a peer, or if it did not answer in time.
pub fn fetch(spec: &ServerSpec, port: u16) -> Option<BTreeMap<String, u64>> {
    if !matches!(spec.kind, ServerKind::Amped { .. }) {
        return None;
    }
    parse(&super::stats_get::get(port, STATS_PATH, Duration::from_secs(10))?)
}

/// The counters of a raw HTTP response carrying the stats JSON (its numeric top-level keys).
pub fn parse(raw: &[u8]) -> Option<BTreeMap<String, u64>> {
    let json = super::stats_get::json_body(raw)?;
    let counters: BTreeMap<String, u64> =
        json.as_object()?.iter().filter_map(|(k, v)| v.as_u64().map(|n| (k.clone(), n))).collect();
    (!counters.is_empty()).then_some(counters)
}

/// What the counters moved from `before` to `after` (gauges: their level at the end).
pub fn since(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, &now)| {
            let moved = if GAUGES.contains(&k.as_str()) {
                now
            } else {
                now.saturating_sub(before.get(k).copied().unwrap_or(0))
            };
            (k.clone(), moved)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phase_is_the_difference_and_gauges_keep_their_level() {
        let before = parse(b"HTTP/1.1 200 OK\r\n\r\n{\"requests\":10,\"pipe_fills\":4,\"connections_open\":64,\"stages\":{}}").unwrap();
        let after = parse(b"HTTP/1.1 200 OK\r\n\r\n{\"requests\":110,\"pipe_fills\":9,\"direct_reads\":3,\"connections_open\":60}").unwrap();
        let d = since(&after, &before);
        assert_eq!(d["requests"], 100);
        assert_eq!(d["pipe_fills"], 5);
        assert_eq!(d["direct_reads"], 3, "a counter first seen at the end counts from 0");
        assert_eq!(d["connections_open"], 60, "a gauge is its level, not a difference");
        assert!(!d.contains_key("stages"), "only numbers are counters");
        assert!(parse(b"HTTP/1.1 404 Not Found\r\n\r\nno").is_none());
    }

    #[test]
    fn only_amped_gets_the_stats_path_and_keeps_one() {
        let spec = ServerSpec::parse("sped:stats-path=/x").unwrap();
        let ServerKind::Amped { options, .. } = &with_stats_path(&spec).kind else { panic!() };
        let paths: Vec<_> = options.iter().filter(|(n, _)| n == "stats-path").collect();
        assert_eq!(paths.len(), 1);
        assert_eq!(paths[0].1.as_deref(), Some(STATS_PATH));
        let nginx = ServerSpec::parse("nginx").unwrap();
        assert_eq!(format!("{:?}", with_stats_path(&nginx)), format!("{nginx:?}"));
        assert!(fetch(&nginx, 1).is_none(), "peers have no counters");
    }
}
