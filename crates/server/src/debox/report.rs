//! The profile as JSON: per role, per call (with its call sites), the loop stalls, and what
//! the kernel lets this process see (delay accounting on or off). docs/DEBOX.md is the key.

use super::table::{Entry, merged};
use super::{Role, stall_threshold, stalls};
use amped_sys::debox::{Call, delay_accounting};
use serde_json::{Value, json};
use std::io;
use std::path::Path;

fn us(ns: u64) -> f64 {
    (ns as f64 / 1e3 * 10.0).round() / 10.0
}

fn fields(e: &Entry) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    let mean = e.total_ns.checked_div(e.count).unwrap_or(0);
    m.insert("count".into(), e.count.into());
    m.insert("errors".into(), e.errors.into());
    m.insert("total_us".into(), us(e.total_ns).into());
    m.insert("mean_us".into(), us(mean).into());
    m.insert("max_us".into(), us(e.max_ns).into());
    let p = &e.probe;
    if p.probed > 0 {
        m.insert("probed".into(), p.probed.into());
        m.insert("blocked".into(), p.blocked.into());
        m.insert("slept_us".into(), us(p.slept_ns).into());
        m.insert("max_slept_us".into(), us(p.max_slept_ns).into());
        m.insert("vol_switches".into(), p.vol_switches.into());
        m.insert("invol_switches".into(), p.invol_switches.into());
        m.insert("major_faults".into(), p.major_faults.into());
        m.insert("minor_faults".into(), p.minor_faults.into());
        m.insert("run_delay_us".into(), us(p.run_delay_ns).into());
        if delay_accounting() {
            m.insert("blkio_us".into(), us(p.blkio_ns).into());
        }
    }
    if e.role == Role::Loop {
        m.insert("stalls".into(), e.stalls.into());
    }
    m
}

/// The whole profile.
pub fn profile() -> Value {
    let table = merged();
    let mut roles = serde_json::Map::new();
    for role in Role::ALL {
        let mut calls = Vec::new();
        for call in Call::ALL {
            let rows: Vec<&Entry> =
                table.entries().iter().filter(|e| e.role == role && e.call == call).collect();
            let Some(first) = rows.first() else { continue };
            let mut total = (*first).clone();
            for r in &rows[1..] {
                total.merge(r);
            }
            let mut sites: Vec<&Entry> = rows.clone();
            sites.sort_by_key(|e| std::cmp::Reverse(e.total_ns));
            let mut m = fields(&total);
            m.insert("call".into(), call.name().into());
            let sites: Vec<Value> = sites
                .iter()
                .map(|e| {
                    let mut s = fields(e);
                    s.insert("site".into(), format!("{}:{}", e.site.file(), e.site.line()).into());
                    Value::Object(s)
                })
                .collect();
            m.insert("sites".into(), sites.into());
            calls.push(Value::Object(m));
        }
        if !calls.is_empty() {
            roles.insert(role.name().into(), calls.into());
        }
    }
    let delay_note = if delay_accounting() {
        "kernel.task_delayacct is on: blkio_us is each call's block-I/O delay (10 ms ticks)"
    } else {
        "kernel.task_delayacct is off: no per-call block-I/O delay (sysctl kernel.task_delayacct=1 to add it)"
    };
    let mut doc = json!({
        "debox": true,
        "stall_threshold_ms": stall_threshold().as_secs_f64() * 1e3,
        "delay_accounting": delay_accounting(),
        "note": delay_note,
        "roles": roles,
        "stalls": stalls::snapshot(),
    });
    if let Some(ops) = ring_ops() {
        doc["ring_ops"] = ops;
    }
    doc
}

/// Under `--arch uring`: each ring operation's time from being queued to its completion being
/// taken, per opcode (None when no ring operation completed).
fn ring_ops() -> Option<Value> {
    let totals = amped_sys::uring::op_totals();
    if totals.is_empty() {
        return None;
    }
    let ops: Vec<Value> = totals
        .iter()
        .map(|(kind, t)| {
            json!({
                "op": kind.name(),
                "count": t.count,
                "errors": t.errors,
                "total_us": us(t.total_ns),
                "mean_us": us(t.total_ns.checked_div(t.count).unwrap_or(0)),
                "max_us": us(t.max_ns),
                "slow": t.slow,
                "slow_us": us(t.slow_ns),
                "after_wait": t.after_wait,
                "waits_for_peer": kind.waits_for_peer(),
                "may_wait_for_disk": kind.may_wait_for_disk(),
            })
        })
        .collect();
    Some(json!({
        "slow_threshold_ms": stall_threshold().as_secs_f64() * 1e3,
        "note": "time from queueing an operation to the loop taking its completion (io_uring tells no per-operation sleep: this is latency, the loop itself never waits in it); slow: took the threshold or longer; after_wait: completed only after a later io_uring_enter than the one that submitted it (a read that went async to the disk, a receive waiting for its client); waits_for_peer: its time is the client's",
        "ops": ops,
    }))
}

/// The profile as the endpoint serves it.
pub fn to_json() -> String {
    let mut s = serde_json::to_string_pretty(&profile()).unwrap_or_default();
    s.push('\n');
    s
}

/// What `--stats-path?debox` answers: the profile, or a note that it is off.
pub fn endpoint() -> String {
    if super::enabled() {
        to_json()
    } else {
        "{\"debox\":false,\"note\":\"start amped with --debox to profile its system calls\"}\n"
            .to_string()
    }
}

/// Writes the profile to `path` at exit; an `mp` worker (`worker`) writes `path.PID`, as
/// each worker process has its own profile.
pub fn write_at_exit(path: &Path, worker: bool) -> io::Result<()> {
    let path = if worker {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{}", std::process::id()));
        std::path::PathBuf::from(p)
    } else {
        path.to_path_buf()
    };
    std::fs::write(&path, to_json()).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot write --debox-out {}: {e}", path.display()))
    })
}
