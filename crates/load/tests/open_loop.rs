//! Open loop against in-test servers: the fixed rate is kept, request counts are exact, and a
//! stalling server shows up in the open-loop tail but not in the closed loop's (the
//! coordinated-omission property).

mod common;

use std::time::Duration;

use common::{Reply, Stall, ampload, f, n, ok, serve, serve_with};

#[test]
fn keeps_a_modest_fixed_rate() {
    let server = serve(|_| Reply::Send(ok("rate")));
    let run = ampload(&["--rate", "1000", "-d", "2s", "-c", "8", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(r["mode"], "open");
    assert_eq!(f(&r["target_rate"]), 1000.0);
    assert_eq!((n(&r["requests"]), n(&r["errors_total"])), (2000, 0));
    let achieved = f(&r["achieved_rate"]);
    assert!((970.0..1030.0).contains(&achieved), "achieved {achieved} req/s");
    let rps = f(&r["rps"]);
    eprintln!("achieved {achieved} req/s, rps {rps}, lag warnings {}", r["schedule_lag_warnings"]);
    assert!((950.0..1030.0).contains(&rps), "rps {rps}");
    assert_eq!(server.connections(), 8, "the kept-alive pool is opened once");
}

#[test]
fn issues_exactly_n_requests_over_threads() {
    let server = serve(|_| Reply::Send(ok("n")));
    let run =
        ampload(&["--rate", "4000", "-n", "777", "-c", "6", "-t", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["requests"]), n(&r["sent"]), n(&r["errors_total"])), (777, 777, 0));
    assert_eq!(server.requests(), 777);
}

#[test]
fn sessions_at_a_fixed_rate() {
    let server = serve(|_| Reply::Send(ok("session")));
    let run = ampload(&[
        "--rate",
        "1000",
        "-n",
        "200",
        "-k",
        "5",
        "-c",
        "10",
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["requests"]), n(&r["errors_total"])), (200, 0));
    let opened = n(&r["connections_opened"]);
    assert!((40..=50).contains(&opened), "{opened} connections for 200 requests in sessions of 5");
    assert_eq!(server.connections(), opened);
}

#[test]
fn stalls_show_in_the_open_loop_tail_not_the_closed_loop() {
    // No response leaves the server during the first 200 ms of every 500 ms.
    let stall = Stall { period: Duration::from_millis(500), length: Duration::from_millis(200) };
    let server = serve_with(Some(stall), |_| Reply::Send(ok("slow sometimes")));
    let closed = ampload(&["-d", "1500ms", "-c", "1", "--json", &server.url("/")]);
    let open = ampload(&["--rate", "500", "-d", "1500ms", "-c", "50", "--json", &server.url("/")]);
    assert_eq!((closed.code, open.code), (Some(0), Some(0)), "{} / {}", closed.stderr, open.stderr);
    let (closed, open) = (closed.json(), open.json());
    let closed_p99 = n(&closed["latency_us"]["p99"]);
    let open_p99 = n(&open["latency_us"]["p99"]);
    let open_p90 = n(&open["latency_us"]["p90"]);
    eprintln!("p99 closed {closed_p99} us, open {open_p99} us; open p90 {open_p90} us");
    // Requests due during a stall wait for its end: ~40% of the schedule, up to 200 ms each.
    assert!(open_p99 >= 150_000, "open-loop p99 {open_p99} us hides the 200 ms stalls");
    assert!(open_p90 >= 50_000, "open-loop p90 {open_p90} us hides the 200 ms stalls");
    // The closed loop sends one request per stall and thousands between stalls.
    assert!(closed_p99 * 5 < open_p99, "closed p99 {closed_p99} us vs open p99 {open_p99} us");
    assert!(n(&closed["requests"]) > 1000);
    // The closed loop's maximum still sees a stall: the information is there, just omitted.
    assert!(f(&closed["latency_us"]["max"]) >= 50_000.0);
    assert_eq!(n(&open["errors_total"]), 0);
}

#[test]
fn pipelines_only_when_no_connection_is_idle() {
    let server = serve(|_| Reply::Send(ok("piped")));
    let run = ampload(&[
        "--rate",
        "3000",
        "-n",
        "600",
        "--pipeline",
        "4",
        "-c",
        "2",
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!(
        (n(&r["requests"]), n(&r["errors_total"]), n(&r["connections_opened"])),
        (600, 0, 2)
    );
    assert_eq!(server.requests(), 600);
}
