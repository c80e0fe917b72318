//! `amplab soak --quick` against amped (and one peer when one is installed): the report's
//! fields are there and hold what a soak must show; Ctrl-C ends a soak with nothing left
//! running and what was measured written.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The first peer installed here, or `None` (with the reason printed).
fn a_peer() -> Option<&'static str> {
    let found = ["nginx", "lighttpd", "h2o"].into_iter().find(|p| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        eprintln!("soak test: no peer (nginx, lighttpd, h2o) is installed here: amped alone");
    }
    found
}

fn count(server: &Value, outcome: &str) -> u64 {
    server["tally"]["outcomes"][outcome].as_u64().unwrap_or(0)
}

#[test]
fn soak_quick_reports_every_field() {
    let mut servers = vec!["amped"];
    servers.extend(a_peer());
    let run = common::amplab(&["soak", "--servers", &servers.join(",")]);
    run.assert_ok();
    let setup = run.json("setup.json");
    assert_eq!(setup["experiment"], "soak");
    assert_eq!(setup["parameters"]["duration_s"], 3.0);
    let results = run.json("results.json");
    let results = results.as_array().expect("a list of servers");
    assert_eq!(results.len(), servers.len());
    for (r, label) in results.iter().zip(&servers) {
        assert_eq!(r["label"], *label);
        assert!(r["error"].is_null(), "{label}: {}", r["error"]);
        assert!(count(r, "ok") > 50, "{label}: {}", r["tally"]["outcomes"]);
        for kind in ["keep-alive", "close", "large", "slow-reader", "slowloris", "malformed"] {
            assert!(r["tally"]["by_client"][kind].is_object(), "{label}: no {kind} requests");
        }
        let t = &r["tally"];
        assert!(t["bodies_checked"].as_u64().unwrap() > 20, "{label}");
        assert!(t["body_bytes_checked"].as_u64().unwrap() > 1 << 20, "{label}");
        assert!(t["mismatched_answers"].is_u64() && t["stale_answers"].is_u64());
        assert!(t["malformed"].as_object().unwrap().len() >= 10, "{label}: malformed cases");
        let m = &r["mutations"];
        let changes: u64 =
            ["renamed", "truncated", "recreated"].iter().map(|k| m[k].as_u64().unwrap()).sum();
        assert!(changes >= 10, "{label}: {m}");
        assert!(r["samples"].as_array().unwrap().len() >= 10, "{label}: samples");
        for span in ["rss_kb", "fds"] {
            for k in ["start", "end", "max"] {
                assert!(r[span][k].as_u64().unwrap() > 0, "{label}: {span}.{k}");
            }
        }
        assert_eq!(r["alive_at_end"], true, "{label}");
        let line = r["verdict"]["line"].as_str().unwrap();
        assert!(line.starts_with("PASS — ") || line.starts_with("FAIL — "), "{line}");
        if *label == "amped" {
            assert_eq!(r["signals"]["signal"], "SIGHUP");
            assert!(r["signals"]["sent"].as_u64().unwrap() >= 1);
            assert_eq!(count(r, "mismatch"), 0, "amped: {}", r["tally"]["examples"]);
            assert_eq!(count(r, "stale"), 0, "amped: {}", r["tally"]["examples"]);
        }
    }
    let csv = run.csv("results.csv");
    assert_eq!(csv.len(), servers.len());
    for row in &csv {
        for col in ["requests", "ok", "mismatch", "zeroed", "rss_max_kb", "fds_end"] {
            common::f(row, col);
        }
    }
    assert!(run.read("samples.csv").lines().count() > 20);
    for fig in ["rss-over-time.svg", "fds-over-time.svg"] {
        assert_eq!(run.svg_series(fig), servers);
    }
    let summary = run.read("summary.md");
    for part in ["Quick run", "## Verdicts", "## Requests by outcome", "## Malformed", "RSS MB"] {
        assert!(summary.contains(part), "{part} missing:\n{summary}");
    }
    let (before, after) = run.report();
    assert_eq!(before, after, "amplab report rebuilds the same summary");
}

/// Every process whose command line mentions `needle`, other than this test's.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) && !cmd.contains("soak_interrupted") {
            found.push(cmd);
        }
    }
    found
}

#[test]
fn ctrl_c_stops_the_soak_and_leaves_nothing_running() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, data) = (tmp.path().join("out"), tmp.path().join("data"));
    let soak = ["soak", "--quick", "--duration", "60", "--servers", "amped,sped"];
    let mut child = common::amplab_command(&soak, &out, &data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let root = data.display().to_string();
    let started = Instant::now();
    while processes_with(&root).is_empty() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!processes_with(&root).is_empty(), "the server never started");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let interrupted = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(interrupted.elapsed() < Duration::from_secs(30), "amplab still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert!(processes_with(&root).is_empty(), "left running: {:?}", processes_with(&root));
    let setup: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("setup.json")).unwrap()).unwrap();
    let notes = setup["notes"].to_string();
    assert!(notes.contains("interrupted") && notes.contains("sped not run"), "{notes}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results.as_array().unwrap().len(), 1, "amped's part is kept");
    assert!(results[0]["load_s"].as_f64().unwrap() < 30.0);
    let leftovers: Vec<_> = std::fs::read_dir(&data).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "the served files are removed: {leftovers:?}");
}
