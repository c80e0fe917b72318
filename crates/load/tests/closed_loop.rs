//! Closed loop against in-test servers: exact counts, statuses, `--close`, sessions,
//! pipelining, threads and duration bounds.

mod common;

use common::{Reply, ampload, f, n, ok, response, serve, temp_file};

const BODY: &str = "hello, ampload";

#[test]
fn counts_requests_and_bytes_exactly() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let wire = ok(BODY).len() as u64;
    let run = ampload(&["-n", "1000", "-c", "4", "--json", &server.url("/x")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(r["mode"], "closed");
    assert_eq!((n(&r["requests"]), n(&r["ok"]), n(&r["sent"])), (1000, 1000, 1000));
    assert_eq!(n(&r["bytes"]), 1000 * wire);
    assert_eq!(n(&r["body_bytes"]), 1000 * BODY.len() as u64);
    assert_eq!(n(&r["status"]["200"]), 1000);
    assert_eq!(n(&r["errors_total"]), 0);
    assert_eq!(n(&r["connections_opened"]), 4);
    assert_eq!((server.requests(), server.connections(), server.path_count("/x")), (1000, 4, 1000));
    let latency = &r["latency_us"];
    assert!(f(&latency["min"]) > 0.0 && f(&latency["min"]) <= f(&latency["mean"]));
    assert!(
        n(&latency["p50"]) <= n(&latency["p99"])
            && f(&latency["max"]) >= n(&latency["p999"]) as f64 * 0.99
    );
    assert!(f(&r["rps"]) > 0.0 && f(&r["duration_s"]) > 0.0);
}

#[test]
fn threads_and_pipelining_keep_counts_exact() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&[
        "-n",
        "1001",
        "-c",
        "6",
        "-t",
        "3",
        "--pipeline",
        "8",
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["requests"]), n(&r["errors_total"]), n(&r["threads"])), (1001, 0, 3));
    assert_eq!((server.requests(), server.connections()), (1001, 6));
}

#[test]
fn close_opens_one_connection_per_request() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["--close", "-n", "200", "-c", "4", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(
        (n(&r["requests"]), n(&r["connections_opened"]), n(&r["errors_total"])),
        (200, 200, 0)
    );
    assert_eq!((server.requests(), server.connections()), (200, 200));
    assert!(f(&r["conn_per_s"]) > 0.0);
}

#[test]
fn sessions_open_ceil_n_over_k_connections() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["-k", "5", "-n", "103", "-c", "7", "-t", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(
        (n(&r["requests"]), n(&r["connections_opened"]), n(&r["requests_per_conn"])),
        (103, 21, 5)
    );
    assert_eq!((server.requests(), server.connections()), (103, 21));
}

#[test]
fn counts_each_status() {
    let server = serve(|path| match path {
        "/ok" => Reply::Send(ok(BODY)),
        "/moved" => Reply::Send(response(301, "Moved Permanently", "")),
        _ => Reply::Send(response(404, "Not Found", "no such file")),
    });
    let urls = temp_file("/ok\n/moved\n/missing\n");
    let path = urls.path().to_str().unwrap();
    let run = ampload(&["-n", "300", "-c", "1", "--urls", path, "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(r["status"], serde_json::json!({"200": 100, "301": 100, "404": 100}));
    assert_eq!((n(&r["requests"]), n(&r["ok"])), (300, 200));
}

#[test]
fn duration_bounds_the_run() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["-d", "700ms", "-c", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    let secs = f(&r["duration_s"]);
    assert!((0.69..1.2).contains(&secs), "{secs}");
    assert!(n(&r["requests"]) > 100 && n(&r["errors_total"]) == 0);
    assert_eq!(n(&r["requests"]), server.requests());
}

#[test]
fn warmup_is_not_measured() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["--warmup", "300ms", "-n", "50", "-c", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(n(&run.json()["requests"]), 50);
    assert!(server.requests() > 50);
}

#[test]
fn human_summary_by_default() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["-n", "10", "-c", "1", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("requests     10 (10 2xx/3xx)"), "{}", run.stdout);
    assert!(run.stdout.contains("p99"), "{}", run.stdout);
    assert!(run.stderr.is_empty(), "progress must not go to a pipe: {:?}", run.stderr);
}

#[test]
fn json_report_has_every_documented_field() {
    let server = serve(|_| Reply::Send(ok(BODY)));
    let run = ampload(&["-n", "5", "-c", "1", "--json", &server.url("/")]);
    let r = run.json();
    let fields = [
        "url",
        "mode",
        "threads",
        "connections",
        "pipeline",
        "requests_per_conn",
        "requests",
        "ok",
        "sent",
        "bytes",
        "body_bytes",
        "duration_s",
        "rps",
        "bytes_per_s",
        "connections_opened",
        "conn_per_s",
        "status",
        "errors",
        "errors_total",
        "first_errors",
        "latency_us",
        "latency_spectrum",
        "latency_histogram",
        "intervals",
        "interval_by",
        "time_zero_unix_s",
        "target_rate",
        "achieved_rate",
        "schedule_lag_warnings",
        "max_schedule_lag_us",
        "backlog_max",
        "workload_targets",
        "workload_skipped_lines",
        "unreachable",
        "interrupted",
    ];
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), fields.len(), "{keys:?}");
    for field in fields {
        assert!(r.get(field).is_some(), "missing {field}");
    }
    for kind in ["connect", "timeout", "reset", "bad_response"] {
        assert_eq!(n(&r["errors"][kind]), 0);
    }
    for p in ["mean", "min", "max", "p5", "p50", "p90", "p95", "p99", "p999"] {
        assert!(r["latency_us"][p].is_number(), "latency_us.{p}");
    }
    assert!(r["target_rate"].is_null() && r["requests_per_conn"].is_null());
}
