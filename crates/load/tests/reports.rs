//! What the reports show: the interval log (`--hlog`) read back with HdrHistogram's own reader
//! matches the JSON report, `--interval` windows cover the run, the text report picks units, lists
//! the spectrum and says when Ctrl-C cut the run short, and `--method` / `-H` shape the requests.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use common::{Reply, ampload, f, n, ok, serve};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

fn decode(base64_text: &str) -> Histogram<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(base64_text).unwrap();
    Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap()
}

#[test]
fn the_interval_log_reads_back_as_the_report_says() {
    let server = serve(|_| Reply::Send(ok("x")));
    let dir = tempfile::tempdir().unwrap();
    let hlog = dir.path().join("run.hlog");
    let hlog_arg = hlog.display().to_string();
    let args = ["-d", "700ms", "-c", "2", "--interval", "200ms", "--hlog", &hlog_arg, "--json"];
    let run = ampload(&[&args[..], &[server.url("/").as_str()]].concat());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let report = run.json();
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(text.contains("#[BaseTime: ") && text.contains("microseconds"), "{text}");
    let windows: Vec<_> = IntervalLogIterator::new(text.as_bytes())
        .filter_map(|e| match e.unwrap() {
            LogEntry::Interval(h) => Some(h),
            _ => None,
        })
        .collect();
    let intervals = report["intervals"].as_array().unwrap();
    assert_eq!(windows.len(), intervals.len());
    assert!((3..=5).contains(&windows.len()), "{} windows", windows.len());
    let mut whole = Histogram::<u64>::new(3).unwrap();
    for (w, json) in windows.iter().zip(intervals) {
        let h = decode(w.encoded_histogram());
        assert_eq!(h.len(), n(&json["requests"]));
        assert_eq!(h.value_at_quantile(0.99), n(&json["p99_us"]));
        assert_eq!(decode(json["histogram"].as_str().unwrap()).len(), h.len());
        assert!(
            (w.start_timestamp().as_secs_f64() - json["start_s"].as_f64().unwrap()).abs() < 1e-3
        );
        whole.add(&h).unwrap();
    }
    let reported = decode(report["latency_histogram"].as_str().unwrap());
    assert_eq!(whole.len(), n(&report["requests"]));
    assert_eq!(reported.len(), whole.len());
    for (q, field) in [(0.5, "p50"), (0.99, "p99")] {
        assert_eq!(reported.value_at_quantile(q), n(&report["latency_us"][field]));
        assert_eq!(whole.value_at_quantile(q), reported.value_at_quantile(q));
    }
    let spectrum = report["latency_spectrum"].as_array().unwrap();
    let last = spectrum.last().unwrap();
    assert_eq!((last["percentile"].as_f64(), n(&last["count"])), (Some(100.0), whole.len()));
}

/// An open-loop run of 20 requests at 20/s over 40 connections against a server that answers
/// each after 300 ms, in 250 ms windows by `by`.
fn slow_windows(by: &str, timeout: &str) -> serde_json::Value {
    let server = serve(|_| {
        std::thread::sleep(Duration::from_millis(300));
        Reply::Send(ok("x"))
    });
    let args = ["-R", "20", "-d", "1s", "-c", "40", "--timeout", timeout, "--json"];
    let windows = ["--interval", "250ms", "--interval-by", by, &server.url("/")];
    let run = ampload(&[&args[..], &windows[..]].concat());
    assert_eq!(run.code, Some(if timeout == "10s" { 0 } else { 1 }), "{}", run.stderr);
    run.json()
}

#[test]
fn windows_by_start_hold_the_requests_due_in_them() {
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let report = slow_windows("start", "10s");
    assert_eq!(report["interval_by"], "start");
    let zero = report["time_zero_unix_s"].as_f64().unwrap();
    assert!((zero - before.as_secs_f64()).abs() < 5.0, "time zero {zero}");
    let intervals = report["intervals"].as_array().unwrap();
    // Due at 0, 50, … 950 ms: five per window, however late the 300 ms answers came.
    let counts: Vec<u64> = intervals.iter().map(|w| n(&w["requests"])).collect();
    assert_eq!(counts, [5, 5, 5, 5], "{intervals:?}");
    for w in intervals {
        assert_eq!((n(&w["ok"]), n(&w["body_bytes"]), n(&w["errors_total"])), (5, 5, 0));
        let mean = w["latency_us"]["mean"].as_f64().unwrap();
        assert!(mean >= 300_000.0 && n(&w["latency_us"]["p95"]) >= 300_000, "{w}");
        assert!(f(&w["latency_us"]["min"]) <= n(&w["p50_us"]) as f64);
        assert!((w["length_s"].as_f64().unwrap() - 0.25).abs() < 1e-9, "{w}");
    }
    // By end, the same answers fall 300 ms later: the first window holds none.
    let end = slow_windows("end", "10s");
    let counts: Vec<u64> =
        end["intervals"].as_array().unwrap().iter().map(|w| n(&w["requests"])).collect();
    assert_eq!((counts[0], counts.iter().sum::<u64>()), (0, 20), "{counts:?}");
}

#[test]
fn windows_by_start_count_each_failure_where_its_request_was_due() {
    let report = slow_windows("start", "200ms");
    let intervals = report["intervals"].as_array().unwrap();
    let timeouts: Vec<u64> = intervals.iter().map(|w| n(&w["errors"]["timeout"])).collect();
    assert_eq!(timeouts, [5, 5, 5, 5], "{intervals:?}");
    assert!(intervals.iter().all(|w| n(&w["requests"]) == 0 && n(&w["errors_total"]) == 5));
    assert_eq!(n(&report["errors"]["timeout"]), 20);
    let bad = ampload(&["--interval-by", "start", "-n", "1", "http://127.0.0.1:1/"]);
    assert_eq!(bad.code, Some(2), "--interval-by needs --interval: {}", bad.stderr);
}

#[test]
fn an_answer_after_the_timeout_is_a_timeout_between_checks_too() {
    // 120 ms answers against a 110 ms timeout: the 100 ms check rarely lands in between.
    let server = serve(|_| {
        std::thread::sleep(Duration::from_millis(120));
        Reply::Send(ok("x"))
    });
    let run = ampload(&["-n", "5", "-c", "1", "--timeout", "110ms", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(1), "no request got a valid response: {}", run.stderr);
    let report = run.json();
    assert_eq!((n(&report["requests"]), n(&report["errors"]["timeout"])), (0, 5), "{report}");
}

#[test]
fn one_histogram_for_the_whole_run_without_interval() {
    let server = serve(|_| Reply::Send(ok("x")));
    let dir = tempfile::tempdir().unwrap();
    let hlog = dir.path().join("run.hlog");
    let run =
        ampload(&["-n", "40", "-c", "2", "--hlog", &hlog.display().to_string(), &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&hlog).unwrap();
    let counts: Vec<u64> = IntervalLogIterator::new(text.as_bytes())
        .filter_map(|e| match e.unwrap() {
            LogEntry::Interval(h) => Some(decode(h.encoded_histogram()).len()),
            _ => None,
        })
        .collect();
    assert_eq!(counts, [40]);
    let bad = ampload(&["-n", "1", "--hlog", "/nonexistent-dir/x.hlog", &server.url("/")]);
    assert_eq!(bad.code, Some(1));
    assert!(bad.stderr.contains("cannot write /nonexistent-dir/x.hlog"), "{}", bad.stderr);
}

#[test]
fn the_text_report_picks_units_and_lists_the_spectrum() {
    let server = serve(|_| {
        std::thread::sleep(Duration::from_millis(3));
        Reply::Send(ok("x"))
    });
    let run = ampload(&["-n", "20", "-c", "1", "--latency", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let out = &run.stdout;
    let p50 = out.split("p50 ").nth(1).unwrap().split(',').next().unwrap();
    assert!(p50.ends_with(" ms"), "p50 {p50:?} in {out}");
    assert!(out.contains("latency spectrum"), "{out}");
    assert!(out.contains("100.000000%"), "{out}");
    assert!(!out.contains("INTERRUPTED"));
}

#[test]
fn method_and_headers_shape_the_request() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        // A HEAD answer announces a body it does not send.
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n").unwrap();
        String::from_utf8(head).unwrap()
    });
    let args = [
        "-n",
        "1",
        "-c",
        "1",
        "--close",
        "--method",
        "HEAD",
        "-H",
        "X-Test: 1",
        "-H",
        "Host: example.org",
        "--timeout",
        "5s",
        "--json",
        &url,
    ];
    let run = ampload(&args);
    let head = server.join().unwrap();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!((n(&run.json()["ok"]), n(&run.json()["errors_total"])), (1, 0));
    assert!(head.starts_with("HEAD /x HTTP/1.1\r\nHost: example.org\r\nX-Test: 1\r\n"), "{head}");
}

#[test]
fn bad_urls_headers_and_methods_get_one_line() {
    for (args, want) in [
        (vec!["localhost:8080/x"], "no scheme: write http://localhost:8080/x"),
        (vec!["-H", "Content-Length: 3", "http://127.0.0.1:1/"], "sets Content-Length itself"),
        (vec!["-H", "nocolon", "http://127.0.0.1:1/"], "expected 'Name: value'"),
        (vec!["--method", "G T", "http://127.0.0.1:1/"], "not an HTTP method"),
    ] {
        let run = ampload(&args);
        assert_eq!(run.code, Some(2), "{args:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn ctrl_c_is_shown_in_the_text_and_json_reports() {
    use std::process::{Command, Stdio};
    let server = serve(|_| Reply::Send(ok("x")));
    for json in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ampload"));
        cmd.args(["-d", "20s", "-c", "1", &server.url("/")]);
        if json {
            cmd.arg("--json");
        }
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("interrupted by Ctrl-C"), "{stderr}");
        if json {
            let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(r["interrupted"], true);
        } else {
            assert!(stdout.contains("INTERRUPTED"), "{stdout}");
        }
    }
}
