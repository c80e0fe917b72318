//! What an operator looks at: the access log (Combined Log Format, to a file or stdout) and the
//! stats endpoint's JSON counters, including that the cache switches really switch.

use crate::common::*;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

const STATS: &str = "/.amped/stats";
const KEYS: [&str; 13] = [
    "requests",
    "connections_accepted",
    "connections_open",
    "path_cache_hits",
    "path_cache_misses",
    "file_cache_hits",
    "file_cache_misses",
    "header_cache_hits",
    "jobs_inline",
    "jobs_helper",
    "residency_misses",
    "being_read_waits",
    "readahead_jobs",
];

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
}

/// Check `line` is `127.0.0.1 - - [dd/Mon/yyyy:HH:MM:SS +0000] REST` — a Common Log Format
/// line by the lab's own parser (which replays such logs), in UTC — and return REST.
fn clf_rest(line: &str) -> &str {
    let entry = amped_workload::clf::parse_line(line)
        .unwrap_or_else(|e| panic!("not a Common Log Format line ({e}): {line:?}"))
        .unwrap_or_else(|| panic!("blank log line: {line:?}"));
    assert_eq!(entry.host, "127.0.0.1", "{line:?}");
    assert!(entry.date.ends_with(" +0000"), "timestamp not in UTC: {line:?}");
    let rest = line.strip_prefix("127.0.0.1 - - [").unwrap_or_else(|| panic!("{line:?}"));
    rest.split_once("] ").unwrap_or_else(|| panic!("bad log line: {line:?}")).1
}

/// Poll `lines()` for up to 3 s until it yields at least `n` lines.
fn wait_lines(n: usize, mut lines: impl FnMut() -> Vec<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let got = lines();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The access-log lines among stdout lines (other lines are start-up messages).
fn log_lines(stdout: &[String]) -> Vec<String> {
    stdout.iter().filter(|l| l.starts_with("127.0.0.1 ")).cloned().collect()
}

/// Send the two logged requests; returns the expected log line tails.
fn logged_requests(s: &Server) -> Vec<String> {
    let r = request_once(
        s.addr,
        req(
            "GET",
            "/a.txt?v=1",
            "User-Agent: wiretest/1.0\r\nReferer: http://ref.example/\r\nConnection: close\r\n",
        )
        .as_bytes(),
    );
    r.assert_status(200);
    let missing = s.get("/missing.txt");
    missing.assert_status(404);
    vec![
        "\"GET /a.txt?v=1 HTTP/1.1\" 200 4 \"http://ref.example/\" \"wiretest/1.0\"".to_string(),
        format!("\"GET /missing.txt HTTP/1.1\" 404 {} \"-\" \"-\"", missing.body.len()),
    ]
}

/// Check log `lines` against the expected tails. The two requests come one after the other on
/// two connections, but the thread and process architectures serve those on different threads
/// (or processes) that each log once their response has left, so the second line may be written
/// first: order is not checked.
fn assert_logged(lines: &[String], expect: &[String]) {
    let mut got: Vec<&str> = lines.iter().map(|l| clf_rest(l)).collect();
    let mut want: Vec<&str> = expect.iter().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}

arch_tests! {
    /// --access-log PATH: one Combined Log Format line per request, flushed within ~1 s.
    fn access_log_file(arch) {
        let logdir = temp_dir();
        let log = logdir.path().join("access.log");
        let s = Server::start(arch, &["--access-log", log.to_str().unwrap()], fill);
        let expect = logged_requests(&s);
        let lines = wait_lines(2, || std::fs::read_to_string(&log).unwrap_or_default().lines().map(String::from).collect());
        assert_eq!(lines.len(), 2, "log lines: {lines:?}");
        assert_logged(&lines, &expect);
    }

    /// --access-log -: the lines go to stdout, after the listening line.
    fn access_log_stdout(arch) {
        let s = Server::start(arch, &["--access-log", "-"], fill);
        let expect = logged_requests(&s);
        let lines = wait_lines(2, || log_lines(&s.stdout_lines()));
        assert_eq!(lines.len(), 2, "stdout: {:?}", s.stdout_lines());
        assert_logged(&lines, &expect);
    }

    /// No access log by default: no log line on stdout.
    fn access_log_off_by_default(arch) {
        let s = Server::start(arch, &[], fill);
        s.get("/a.txt").assert_status(200);
        thread::sleep(Duration::from_millis(1200));
        assert!(log_lines(&s.stdout_lines()).is_empty(), "{:?}", s.stdout_lines());
    }

    /// The stats endpoint: off (404) by default; with --stats-path, JSON with every counter,
    /// counting requests and connections, and cache hits for a repeated file.
    fn stats_endpoint(arch) {
        let s = Server::start(arch, &[], fill);
        s.get(STATS).assert_status(404);

        let s = Server::start(arch, &["--stats-path", STATS], fill);
        let r = s.get(STATS);
        r.assert_status(200);
        assert!(r.must("content-type").starts_with("application/json"), "{r:?}");
        let before: serde_json::Value = serde_json::from_slice(&r.body).expect("stats JSON");
        for key in KEYS {
            counter(&before, key);
        }
        for _ in 0..3 {
            assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        }
        let after = stats(s.addr, STATS);
        let delta = |k: &str| counter(&after, k) - counter(&before, k);
        assert!((3..=5).contains(&delta("requests")), "requests +{}: {after}", delta("requests"));
        assert!(delta("connections_accepted") >= 4, "{after}");
        assert!(counter(&after, "connections_open") >= 1, "{after}");
        for key in ["path_cache_hits", "header_cache_hits", "file_cache_hits"] {
            assert!(counter(&after, key) >= 1, "{key} after 3 GETs of one file: {after}");
        }
        // closed connections are no longer counted as open (only the stats request's own)
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let now = stats(s.addr, STATS);
            if counter(&now, "connections_open") == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "connections_open stays above 1: {now}");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The counters are the whole server's, under mp too (summed over its workers): N
    /// requests on N connections, then successive scrapes count exactly N, N+1, N+2.
    fn stats_count_the_whole_server(arch) {
        let s = Server::start(arch, &["--stats-path", STATS], fill);
        for _ in 0..20 {
            assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        }
        for n in 20..23 {
            let st = stats(s.addr, STATS);
            assert_eq!(counter(&st, "requests"), n, "{st}");
        }
        assert!(counter(&stats(s.addr, STATS), "connections_accepted") >= 23);
    }

    /// --stats-listen: the counters on an address of their own (any GET path), the whole
    /// server's; the site's port does not serve them.
    fn stats_on_a_separate_address(arch) {
        let s = Server::start(arch, &["--stats-listen", "127.0.0.1:0"], fill);
        let stats_line = || s.stdout_lines().into_iter().find(|l| l.starts_with("amped: stats on http://"));
        let deadline = Instant::now() + Duration::from_secs(3);
        while stats_line().is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let line = stats_line().unwrap_or_else(|| panic!("no stats line: {:?}", s.stdout_lines()));
        let addr: std::net::SocketAddr =
            line.trim_start_matches("amped: stats on http://").trim_end_matches('/').parse().unwrap();
        for _ in 0..5 {
            s.get("/a.txt").assert_status(200);
        }
        s.get(STATS).assert_status(404);
        let st = stats(addr, "/metrics");
        assert_eq!(counter(&st, "requests"), 6, "{st}");
        let r = request_once(addr, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        r.assert_status(405);
        assert_eq!(r.must("allow"), "GET, HEAD");
    }

    /// With the caches switched off, the stats show no cache hits.
    fn stats_caches_off(arch) {
        let s = Server::start(arch, &["--stats-path", STATS, "--no-path-cache", "--no-header-cache", "--no-file-cache"], fill);
        for _ in 0..3 {
            assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        }
        let st = stats(s.addr, STATS);
        for key in ["path_cache_hits", "header_cache_hits", "file_cache_hits"] {
            assert_eq!(counter(&st, key), 0, "{key} with caches off: {st}");
        }
        assert!(counter(&st, "requests") >= 3, "{st}");
    }

    /// Quotes in logged fields are escaped: each line keeps exactly six field-delimiting quotes.
    fn access_log_escapes_quotes(arch) {
        let logdir = temp_dir();
        let log = logdir.path().join("access.log");
        let s = Server::start(arch, &["--access-log", log.to_str().unwrap()], fill);
        let ua = "User-Agent: evil\" \"forged\r\nReferer: a\"b\r\nConnection: close\r\n";
        request_once(s.addr, req("GET", "/a.txt", ua).as_bytes()).assert_status(200);
        let lines = wait_lines(1, || std::fs::read_to_string(&log).unwrap_or_default().lines().map(String::from).collect());
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        let b = line.as_bytes();
        let bare = (0..b.len()).filter(|&i| b[i] == b'"' && (i == 0 || b[i - 1] != b'\\')).count();
        assert_eq!(bare, 6, "unescaped quotes in {line:?}");
        assert!(line.contains("evil"), "{line:?}");
    }
}
