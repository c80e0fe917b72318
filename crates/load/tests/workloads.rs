//! Workloads against in-test servers: URL lists, weighted traces, access logs, base paths, and
//! many concurrent connections.

mod common;

use common::{Reply, ampload, n, ok, serve, temp_file};

#[test]
fn url_list_mixes_paths_and_urls_in_order() {
    let server = serve(|_| Reply::Send(ok("list")));
    let list = format!("# pages\n/a\n{}\n\n/c?x=1\n", server.url("/b"));
    let urls = temp_file(&list);
    let run = ampload(&[
        "-n",
        "30",
        "-c",
        "1",
        "--urls",
        urls.path().to_str().unwrap(),
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(n(&run.json()["workload_targets"]), 3);
    let counts = [server.path_count("/a"), server.path_count("/b"), server.path_count("/c?x=1")];
    assert_eq!(counts, [10, 10, 10]);
}

#[test]
fn paths_are_joined_onto_the_base_url() {
    let server = serve(|_| Reply::Send(ok("base")));
    let urls = temp_file("/x.html\n");
    let run = ampload(&[
        "-n",
        "4",
        "-c",
        "1",
        "--urls",
        urls.path().to_str().unwrap(),
        "--json",
        &server.url("/site/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(server.path_count("/site/x.html"), 4);
}

#[test]
fn url_list_for_another_server_is_refused() {
    let urls = temp_file("/a\nhttp://elsewhere.invalid/b\n");
    let run = ampload(&["-n", "1", "--urls", urls.path().to_str().unwrap(), "http://127.0.0.1:9/"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains(":2: http://elsewhere.invalid/b is on another server"),
        "{}",
        run.stderr
    );
}

#[test]
fn trace_weights_set_the_mix() {
    let server = serve(|_| Reply::Send(ok("trace")));
    let trace = temp_file("/rare 1\n/common\t3\n");
    let run = ampload(&[
        "-n",
        "2000",
        "-c",
        "4",
        "--trace",
        trace.path().to_str().unwrap(),
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let common = server.path_count("/common");
    assert_eq!(common + server.path_count("/rare"), 2000);
    assert!((1400..1600).contains(&common), "{common} of 2000 for weight 3 of 4");
}

#[test]
fn access_log_replays_get_lines_and_reports_bad_ones() {
    let server = serve(|_| Reply::Send(ok("log")));
    let log = temp_file(concat!(
        "199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] \"GET /history/apollo/ HTTP/1.0\" 200 6245\n",
        "unicomp6.unicomp.net - - [01/Jul/1995:00:00:06 -0400] \"GET /shuttle/countdown/ HTTP/1.0\" 200 3985\n",
        "h - - [01/Jul/1995:00:00:09 -0400] \"POST /cgi-bin/form HTTP/1.0\" 200 12\n",
        "this line is not a log line\n",
        "h - - [01/Jul/1995:00:00:11 -0400] \"GET /images/NASA-logosmall.gif HTTP/1.0\" 304 0\n",
    ));
    let run = ampload(&[
        "-n",
        "6",
        "-c",
        "1",
        "--clf",
        log.path().to_str().unwrap(),
        "--json",
        &server.url("/"),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["workload_targets"]), n(&r["workload_skipped_lines"])), (3, 1));
    assert!(run.stderr.contains(":4: no [date]; line skipped"), "{}", run.stderr);
    let counts = ["/history/apollo/", "/shuttle/countdown/", "/images/NASA-logosmall.gif"]
        .map(|p| server.path_count(p));
    assert_eq!(counts, [2, 2, 2]);
}

/// Raises this test process's open-file limit (it holds the server side of every connection).
fn enough_files(needed: u64) -> bool {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some_and(|hard| hard < needed) {
        return false;
    }
    setrlimit(
        Resource::Nofile,
        Rlimit { current: limit.maximum.or(Some(needed)), maximum: limit.maximum },
    )
    .is_ok()
}

#[test]
fn holds_two_thousand_connections() {
    if !enough_files(2100) {
        eprintln!("skipped: the hard RLIMIT_NOFILE is below 2100");
        return;
    }
    let server = serve(|_| Reply::Send(ok("many")));
    // A duration, not a request count: with a count, a fast server could answer them all
    // before the last connections were opened (seen on a loaded machine: 1 878 of 2 000).
    let run = ampload(&["-d", "2s", "-c", "2000", "-t", "2", "--json", &server.url("/")]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let r = run.json();
    assert_eq!((n(&r["connections_opened"]), n(&r["errors_total"])), (2000, 0), "{r}");
    assert!(n(&r["requests"]) >= 2000, "at least as many requests as connections: {r}");
    assert_eq!(server.connections(), 2000);
}
