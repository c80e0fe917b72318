//! The DeBox profile (`--debox`): served at the stats path with `?debox` under every
//! architecture, attributed to the right thread role, written at exit, and — the paper's
//! headline — a file evicted from the page cache stalls SPED's event loop in the call that
//! reads it, while AMPED's loop hands that wait to a helper.

use crate::amped_helpers::evict;
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const STATS: &str = "/.amped/stats";
const PROFILE: &str = "/.amped/stats?debox";
const LEN: usize = 4 << 20;

/// The rows of `role` in a profile, by call name.
fn calls<'a>(profile: &'a Value, role: &str) -> Vec<&'a Value> {
    profile["roles"][role].as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

fn call<'a>(profile: &'a Value, role: &str, name: &str) -> Option<&'a Value> {
    calls(profile, role).into_iter().find(|c| c["call"] == name)
}

fn num(v: &Value, field: &str) -> u64 {
    v[field].as_u64().unwrap_or_else(|| panic!("no numeric {field} in {v}"))
}

arch_tests! {
    /// With --debox, the profile counts the calls that served a request, under the role of
    /// the threads that made them, with a call site in amped's source.
    fn profile_counts_the_calls_under_their_role(arch) {
        let s = Server::start(arch, &["--debox", "--stats-path", STATS], |root| {
            write(root, "a.txt", "AAAA");
        });
        for _ in 0..3 {
            s.get("/a.txt").assert_status(200);
        }
        let (role, call_name) = match arch[1] {
            "uring" => ("loop", "io_uring_enter"),
            "sped" | "amped" | "staged" => ("loop", "writev"),
            _ => ("worker", "writev"),
        };
        // A connection thread records its call just after the client has the response, so
        // the profile may be asked for first: ask again for a little while.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let p = loop {
            let p = stats(s.addr, PROFILE);
            if call(&p, role, call_name).is_some() || std::time::Instant::now() > deadline {
                break p;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(p["debox"], true, "{p}");
        assert_eq!(p["stall_threshold_ms"], 1.0, "{p}");
        let row = call(&p, role, call_name).unwrap_or_else(|| panic!("no {role} {call_name}: {p}"));
        assert!(num(row, "count") >= 1, "{row}");
        assert!(row["max_us"].as_f64().unwrap() >= row["mean_us"].as_f64().unwrap(), "{row}");
        let site = row["sites"][0]["site"].as_str().unwrap();
        assert!(site.starts_with("crates/"), "site is a source line: {site}");
    }

    /// Without --debox there is no profile, and the endpoint says how to get one.
    fn no_profile_without_the_option(arch) {
        let s = Server::start(arch, &["--stats-path", STATS], |root| write(root, "a.txt", "A"));
        s.get("/a.txt").assert_status(200);
        let p = stats(s.addr, PROFILE);
        assert_eq!(p["debox"], false, "{p}");
        assert!(p.get("roles").is_none(), "{p}");
    }
}

fn fill(root: &Path) {
    write(root, "big.bin", pseudo_random(LEN, 7));
}

fn fetch_cold(arch: &str) -> Value {
    let s = Server::start(
        &["--arch", arch],
        &["--debox", "--debox-stall-ms", "0.1", "--stats-path", STATS],
        fill,
    );
    evict(&s.path("big.bin"));
    let r = s.get("/big.bin");
    r.assert_status(200);
    assert!(r.body == pseudo_random(LEN, 7), "body differs");
    stats(s.addr, PROFILE)
}

/// Calls that read file data or metadata: where a cold file makes a thread wait for the disk.
const DISK_CALLS: [&str; 6] = ["sendfile", "splice_in", "file_read", "open", "stat", "fadvise"];

/// SPED runs the cold chunk's read on its loop: the loop blocks in a call that reads the file,
/// and that wait is a recorded stall naming the file and a page-cache miss.
#[test]
fn sped_loop_stalls_on_an_evicted_file() {
    let p = fetch_cold("sped");
    let blocked: u64 = ["sendfile", "splice_in"]
        .iter()
        .filter_map(|c| call(&p, "loop", c))
        .map(|row| num(row, "blocked"))
        .sum();
    assert!(blocked >= 1, "sped's loop never blocked reading the cold file: {p}");
    let recent = p["stalls"]["recent_disk"].as_array().unwrap();
    let miss = recent.iter().find(|s| {
        DISK_CALLS.contains(&s["call"].as_str().unwrap())
            && s["about"].as_str().unwrap().ends_with("big.bin")
            && s["reason"].as_str().unwrap().contains("page-cache miss")
    });
    assert!(miss.is_some(), "no page-cache-miss stall on big.bin: {p}");
    assert!(calls(&p, "helper").is_empty(), "sped has no helpers: {p}");
}

/// AMPED's default (residency test, pipe fills) reads the cold file on a helper: the helper
/// blocks, and the loop makes none of the calls that read a cold file into memory.
#[test]
fn amped_helper_blocks_instead_of_the_loop() {
    helper_blocks_instead_of_the_loop("amped");
}

/// Staged's job-stage threads do the same for its socket stage.
#[test]
fn staged_stage_thread_blocks_instead_of_the_loop() {
    helper_blocks_instead_of_the_loop("staged");
}

fn helper_blocks_instead_of_the_loop(arch: &str) {
    let p = fetch_cold(arch);
    let fill = call(&p, "helper", "splice_in").unwrap_or_else(|| panic!("no helper fill: {p}"));
    assert!(num(fill, "blocked") >= 1, "the helper's fill did not wait for the disk: {fill}");
    for c in ["splice_in", "file_read", "open", "stat"] {
        assert!(call(&p, "loop", c).is_none(), "amped's loop made a {c} call: {p}");
    }
    let stalls = p["stalls"]["recent_disk"].as_array().unwrap();
    assert!(
        !stalls
            .iter()
            .any(|s| ["splice_in", "file_read", "open", "stat"]
                .contains(&s["call"].as_str().unwrap())),
        "a loop stall in a helper's call: {p}"
    );
}

/// A directory listing's read of the directory is profiled, on a helper, not on the loop.
#[test]
fn a_listing_reads_its_directory_on_a_helper_in_the_profile() {
    let s = Server::start(
        &["--arch", "amped"],
        &["--debox", "--listing", "--stats-path", STATS],
        |root| {
            for i in 0..20 {
                write(root, &format!("d/f{i}.txt"), "x");
            }
        },
    );
    let r = s.get("/d/");
    r.assert_status(200);
    assert!(String::from_utf8_lossy(&r.body).contains("f19.txt"));
    let p = stats(s.addr, PROFILE);
    let row = call(&p, "helper", "read_dir").unwrap_or_else(|| panic!("no read_dir row: {p}"));
    assert_eq!(num(row, "count"), 1, "{row}");
    assert!(call(&p, "loop", "read_dir").is_none(), "the loop read a directory: {p}");
}

/// `--debox-out` writes the profile when the server stops.
#[test]
fn profile_is_written_at_exit() {
    let out = temp_dir();
    let file = out.path().join("profile.json");
    let mut s = Server::start(
        &["--arch", "amped"],
        &["--debox", "--debox-out", file.to_str().unwrap()],
        |root| write(root, "a.txt", "A"),
    );
    s.get("/a.txt").assert_status(200);
    s.signal("TERM");
    assert!(s.wait_exit(Duration::from_secs(10)).is_some_and(|st| st.success()));
    let p: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(num(call(&p, "loop", "writev").unwrap(), "count") >= 1, "{p}");
}

/// Under `--arch uring` the file and socket work are ring operations, not calls: each opcode
/// is counted with its time from being queued to its completion, and a cold file's reads
/// show there as slow ones (the loop itself never waits in them, so they are not stalls).
#[test]
fn uring_ring_operations_are_timed_per_opcode() {
    let p = fetch_cold("uring");
    let ops = p["ring_ops"]["ops"].as_array().unwrap_or_else(|| panic!("no ring_ops: {p}"));
    let op = |name: &str| {
        ops.iter().find(|o| o["op"] == name).unwrap_or_else(|| panic!("no {name} op: {p}"))
    };
    for name in ["accept", "recv", "sendmsg", "read"] {
        let o = op(name);
        assert!(num(o, "count") >= 1, "{o}");
        assert!(o["max_us"].as_f64().unwrap() >= o["mean_us"].as_f64().unwrap(), "{o}");
        assert!(num(o, "slow") <= num(o, "count") && num(o, "after_wait") <= num(o, "count"));
    }
    assert_eq!(op("recv")["waits_for_peer"], true);
    assert_eq!(op("read")["may_wait_for_disk"], true);
    // 4 MiB evicted: its chunks are read by the ring, and the disk makes some of them slow
    // (over the test's 0.1 ms threshold).
    let read = op("read");
    assert!(num(read, "count") >= 4, "{read}");
    let disk_slow: u64 =
        ops.iter().filter(|o| o["may_wait_for_disk"] == true).map(|o| num(o, "slow")).sum();
    assert!(disk_slow >= 1, "no ring operation waited for the evicted file: {p}");
    // The loop did not stall in any disk call: it only submits.
    assert_eq!(p["stalls"]["in_disk_calls"], 0, "{p}");
    assert_eq!(p["ring_ops"]["slow_threshold_ms"], 0.1, "{p}");
}
