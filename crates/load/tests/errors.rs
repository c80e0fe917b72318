//! Failures are counted, by kind, and never hang the run: malformed and truncated responses,
//! resets, silent servers, unreachable servers, bad arguments.

mod common;

use std::net::TcpListener;
use std::time::Duration;

use common::{Reply, ampload, n, ok, serve, temp_file};

#[test]
fn malformed_responses_are_errors_not_successes() {
    let server = serve(|path| match path {
        "/good" => Reply::Send(ok("fine")),
        "/garbage" => Reply::Send(b"this is not HTTP\r\n\r\n".to_vec()),
        "/status" => Reply::Send(b"HTTP/1.1 999 Nope\r\nContent-Length: 0\r\n\r\n".to_vec()),
        "/length" => Reply::Send(b"HTTP/1.1 200 OK\r\nContent-Length: twelve\r\n\r\n".to_vec()),
        _ => Reply::SendAndClose(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".to_vec()),
    });
    let urls = temp_file("/good\n/garbage\n/status\n/length\n/truncated\n");
    let list = urls.path().to_str().unwrap();
    let run = ampload(&["-n", "50", "-c", "1", "--urls", list, "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["requests"]), n(&r["ok"])), (10, 10));
    assert_eq!(n(&r["errors"]["bad_response"]), 40);
    assert_eq!(n(&r["errors_total"]), 40);
    assert_eq!(r["status"], serde_json::json!({"200": 10}));
    assert!(r["first_errors"]["bad_response"].as_str().unwrap().contains("malformed"), "{r}");
}

#[test]
fn nothing_valid_means_failure() {
    let server = serve(|_| Reply::Send(b"garbage\r\n\r\n".to_vec()));
    let run = ampload(&["-n", "10", "-c", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(1));
    assert_eq!(n(&run.json()["errors"]["bad_response"]), 10);
    assert!(run.stderr.contains("no request got a valid response"), "{}", run.stderr);
}

#[test]
fn a_server_closing_without_answering_is_a_reset() {
    let server = serve(|_| Reply::Close);
    let run = ampload(&["-n", "5", "-c", "1", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["errors"]["reset"]), n(&r["requests"])), (5, 0));
}

#[test]
fn a_silent_server_times_out() {
    let server = serve(|_| Reply::Silence);
    let run = ampload(&["-n", "2", "-c", "1", "--timeout", "300ms", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(n(&run.json()["errors"]["timeout"]), 2);
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn a_silent_server_cannot_stall_an_open_loop_run() {
    let server = serve(|_| Reply::Silence);
    let run = ampload(&[
        "--rate",
        "100",
        "-d",
        "500ms",
        "-c",
        "5",
        "--timeout",
        "300ms",
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["errors"]["timeout"]), n(&r["requests"])), (50, 0));
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn an_unreachable_server_is_an_error_report_not_a_hang() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    for mode in
        [&["-c", "20"][..], &["--rate", "100", "-c", "20"], &["--close", "-c", "3", "-t", "2"]]
    {
        let mut args = vec!["-d", "10s", "--json", &url];
        args.extend_from_slice(mode);
        let run = ampload(&args);
        assert_eq!(run.code, Some(1), "{mode:?}: {}", run.stderr);
        assert!(run.elapsed < Duration::from_secs(2), "{mode:?} took {:?}", run.elapsed);
        let r = run.json();
        assert!(n(&r["errors"]["connect"]) >= 1 && r["unreachable"] == true, "{mode:?}: {r}");
        assert!(
            run.stderr.contains("connect error") && run.stderr.contains("refused"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn bad_arguments_get_one_clear_line_and_a_nonzero_exit() {
    let missing = "/nonexistent/ampload-trace";
    let cases: &[(&[&str], &str)] = &[
        (&["https://127.0.0.1/"], "only http:// is supported"),
        (&["-c", "0", "http://127.0.0.1/"], "--connections"),
        (&["--rate", "fast", "http://127.0.0.1/"], "--rate"),
        (&["--duration", "soon", "http://127.0.0.1/"], "--duration"),
        (&["--close", "-k", "3", "http://127.0.0.1/"], "--close"),
        (&["--trace", missing, "http://127.0.0.1/"], "cannot read"),
        (&[], "URL"),
        (&["-c", "100000", "http://127.0.0.1/"], "RLIMIT_NOFILE"),
    ];
    for &(args, needle) in cases {
        let run = ampload(args);
        assert!(matches!(run.code, Some(1 | 2)), "{args:?} exited {:?}", run.code);
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(needle), "{args:?}: first line {first:?} lacks {needle:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {:?}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
}

/// A server that dies mid-run: ampload keeps the run bounded and retries connecting about ten
/// times a second, not in a tight loop (which counted ~90,000 refused connects in 2 s).
#[test]
fn a_server_dying_mid_run_is_retried_with_back_off() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_millis(500);
        listener.set_nonblocking(true).unwrap();
        while std::time::Instant::now() < until {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        // The listener is dropped here: the port now refuses connections.
    });
    let run = ampload(&["--close", "-c", "4", "-d", "2s", "--json", &url]);
    let r = run.json();
    assert!(n(&r["ok"]) >= 1, "served before dying: {r}");
    let refused = n(&r["errors"]["connect"]);
    assert!(refused >= 1, "{r}");
    assert!(refused < 200, "{refused} connect errors in 2 s: no back-off");
    assert!(run.elapsed < Duration::from_secs(5), "took {:?}", run.elapsed);
}
