//! The slow-request log (`--slow-log`): one JSON line per slow or sampled request, with the
//! steps its time went to, written as the request completes (an operator tails it).

use crate::amped_helpers::evict;
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The log's lines once at least `n` are there (bounded wait: the writer is a thread).
fn lines(path: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let got: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn steps(line: &Value) -> Vec<&str> {
    line["steps"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect()
}

arch_tests! {
    /// With a 1-in-1 sample every request is a line: what was asked, status, bytes, its
    /// request time and its steps (parse, and the first request's path-cache miss).
    fn sampled_requests_are_lines_with_their_steps(arch) {
        let dir = temp_dir();
        let log = dir.path().join("slow.log");
        let s = Server::start(
            arch,
            &["--slow-log", log.to_str().unwrap(), "--slow-sample", "1"],
            |root| write(root, "a.txt", "AAAA"),
        );
        s.get("/a.txt").assert_status(200);
        s.get("/a.txt").assert_status(200);
        let got = lines(&log, 2);
        assert_eq!(got.len(), 2, "{got:?}");
        for l in &got {
            assert_eq!(l["request"], "GET /a.txt", "{l}");
            assert_eq!((l["status"].as_u64(), l["bytes"].as_u64()), (Some(200), Some(4)), "{l}");
            assert_eq!(l["why"], "sample", "{l}");
            let t = l["request_time"].as_f64().unwrap();
            assert!((0.0..5.0).contains(&t), "{l}");
            assert!(steps(l).contains(&"parse"), "{l}");
        }
        let caches: Vec<&Value> = got
            .iter()
            .flat_map(|l| l["steps"].as_array().unwrap())
            .filter(|s| s["step"] == "path_cache")
            .collect();
        // The first request misses the path cache (lines may come in either order: under
        // the thread architectures each connection's thread writes its own line).
        if arch[1] != "uring" {
            assert!(caches.iter().any(|s| s["note"] == "miss"), "{got:?}");
        }
    }

    /// Without a sample, a fast request is not logged.
    fn fast_requests_are_not_logged(arch) {
        let dir = temp_dir();
        let log = dir.path().join("slow.log");
        let s = Server::start(
            arch,
            &["--slow-log", log.to_str().unwrap(), "--slow-request-ms", "60000"],
            |root| write(root, "a.txt", "AAAA"),
        );
        s.get("/a.txt").assert_status(200);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "", "a fast request was logged");
    }
}

/// AMPED on a cold file: the line names the helper's queue and run, the open, the residency
/// miss, the cold chunk's wait and the sends; the steps account for the request time.
#[test]
fn a_cold_file_shows_the_helper_and_the_disk() {
    let dir = temp_dir();
    let log = dir.path().join("slow.log");
    let s = Server::start(
        &["--arch", "amped"],
        &["--slow-log", log.to_str().unwrap(), "--slow-request-ms", "0"],
        |root| write(root, "big.bin", pseudo_random(2 << 20, 3)),
    );
    evict(&s.path("big.bin"));
    s.get("/big.bin").assert_status(200);
    let got = lines(&log, 1);
    let l = &got[0];
    assert_eq!(l["why"], "slow", "{l}");
    let names = steps(l);
    for want in ["read", "parse", "job_queue", "job_run", "open", "residency", "cold_chunk", "send"]
    {
        assert!(names.contains(&want), "no {want} step: {l}");
    }
    let sum: f64 = l["steps"].as_array().unwrap().iter().map(|s| s["ms"].as_f64().unwrap()).sum();
    let total = l["request_time"].as_f64().unwrap() * 1e3;
    assert!(sum <= total + 0.5, "steps ({sum} ms) exceed the request time ({total} ms): {l}");
}
