//! AMPED's metadata lane over the wire: under `--metadata-helpers auto` many concurrent
//! requests, each for a file the server has not resolved yet (a path-cache miss: a resolve
//! job in the lane), are all answered byte-exact; the stats show the lane's threads, as the
//! options set them, for every loop of `--instances` and for `uring` (whose full path
//! translations use the lane), and none for architectures without it.
//! (Growth itself is shown deterministically by the lane's unit tests with slow fake jobs.)

use crate::common::*;
use std::path::Path;
use std::thread;

const STATS: &str = "/.amped/stats";
const FILES: usize = 384;
const CLIENTS: usize = 16;

/// File `i`'s contents: small ones (read into memory by the resolve) and larger ones.
fn body(i: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(3) { 40_000 + i * 7 } else { 200 + i * 31 };
    pseudo_random(len, 9_000 + i as u64)
}

fn fill(root: &Path) {
    for i in 0..FILES {
        write(root, &format!("d{}/f{i}.bin", i % 8), body(i));
    }
}

#[test]
fn an_adaptive_lane_answers_many_concurrent_cold_requests_exactly() {
    let s = Server::start(
        &["--arch", "amped", "--helpers", "1"],
        &["--metadata-helpers", "auto", "--metadata-helpers-max", "6", "--stats-path", STATS],
        fill,
    );
    let st = stats(s.addr, STATS);
    assert_eq!(counter(&st, "metadata_helpers"), 1, "starts at --helpers: {st}");
    thread::scope(|scope| {
        for c in 0..CLIENTS {
            let s = &s;
            scope.spawn(move || {
                let mut conn = s.conn();
                for i in (c..FILES).step_by(CLIENTS) {
                    conn.send(req("GET", &format!("/d{}/f{i}.bin", i % 8), ""));
                    let r = conn.response();
                    r.assert_status(200);
                    assert!(r.body == body(i), "body of f{i}.bin differs");
                }
            });
        }
    });
    let st = stats(s.addr, STATS);
    assert!(counter(&st, "path_cache_misses") >= FILES as u64, "every request was cold: {st}");
    assert!(counter(&st, "jobs_helper") >= FILES as u64, "{st}");
    let (now, peak) = (counter(&st, "metadata_helpers"), counter(&st, "metadata_helpers_peak"));
    assert!((1..=6).contains(&now) && (now..=6).contains(&peak), "{st}");
}

#[test]
fn the_stats_count_every_loops_metadata_helpers_and_none_without_a_lane() {
    let fixed = Server::start(
        &["--arch", "amped", "--instances", "2"],
        &["--metadata-helpers", "3", "--stats-path", STATS],
        fill,
    );
    fixed.get("/d1/f1.bin").assert_status(200);
    // The second loop may still be starting its helpers when the first answers: wait for it
    // (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut st = stats(fixed.addr, STATS);
    while counter(&st, "metadata_helpers") < 6 && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(20));
        st = stats(fixed.addr, STATS);
    }
    assert_eq!(counter(&st, "metadata_helpers"), 6, "three per loop, two loops: {st}");
    assert_eq!(counter(&st, "metadata_helpers_peak"), 6, "{st}");
    // uring's full path translations run on the same lane.
    let uring = Server::start(
        &["--arch", "uring"],
        &["--metadata-helpers", "3", "--stats-path", STATS],
        fill,
    );
    assert!(uring.get("/d3/f3.bin").body == body(3));
    let st = stats(uring.addr, STATS);
    assert_eq!(counter(&st, "metadata_helpers"), 3, "uring's lane: {st}");
    for arch in ["sped", "staged"] {
        let s = Server::start(
            &["--arch", arch],
            &["--metadata-helpers", "auto", "--stats-path", STATS],
            fill,
        );
        assert!(s.get("/d2/f2.bin").body == body(2));
        let st = stats(s.addr, STATS);
        assert_eq!(counter(&st, "metadata_helpers"), 0, "{arch} has no metadata lane: {st}");
    }
}

/// Many clients ask for the same few cold files at once: however many of their resolves the
/// lane coalesced (a request whose path is already being resolved follows that resolve), each
/// gets its own byte-exact answer; with `--no-resolve-coalescing` none is coalesced.
#[test]
fn requests_for_a_path_being_resolved_are_each_answered_exactly() {
    for (extra, may_coalesce) in [(None, true), (Some("--no-resolve-coalescing"), false)] {
        let mut opts = vec!["--stats-path", STATS];
        opts.extend(extra);
        let s = Server::start(&["--arch", "amped", "--helpers", "1"], &opts, fill);
        let hot = [0, 1, 2, 3, 4, 5];
        thread::scope(|scope| {
            for c in 0..CLIENTS {
                let s = &s;
                scope.spawn(move || {
                    let mut conn = s.conn();
                    for round in 0..6 {
                        let i = hot[(c + round) % hot.len()];
                        conn.send(req("GET", &format!("/d{}/f{i}.bin", i % 8), ""));
                        let r = conn.response();
                        r.assert_status(200);
                        assert!(r.body == body(i), "body of f{i}.bin differs");
                    }
                });
            }
        });
        let st = stats(s.addr, STATS);
        let coalesced = counter(&st, "resolves_coalesced");
        assert!(counter(&st, "requests") >= (CLIENTS * 6) as u64, "{st}");
        if may_coalesce {
            assert!(coalesced < (CLIENTS * 6) as u64, "a leader per path ran: {st}");
        } else {
            assert_eq!(coalesced, 0, "{extra:?}: {st}");
        }
    }
}
