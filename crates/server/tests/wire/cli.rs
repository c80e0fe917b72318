//! Command line and config file: bad input fails fast with one line on stderr; `--config`
//! options apply and the command line wins. Not per architecture (they select it themselves).

use crate::common::*;
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

const STATS: &str = "/.amped/stats";

/// Run amped with `args`, expect a non-zero exit with one stderr line containing `mention`.
fn expect_cli_error(args: &[&str], mention: &str) {
    expect_error(args, mention, true);
}

/// Run amped with `args`, expect a non-zero exit and stderr containing `mention` (on one
/// line if `one_line`).
fn expect_error(args: &[&str], mention: &str, one_line: bool) {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let (status, stdout, stderr) = run_expecting_exit(&args);
    assert!(!status.success(), "amped {args:?} exited 0");
    assert!(!stdout.contains("listening"), "amped {args:?} started listening: {stdout}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "amped {args:?}: nothing on stderr");
    assert!(
        stderr.contains(mention),
        "amped {args:?}: stderr does not mention {mention:?}: {stderr}"
    );
    if one_line {
        assert_eq!(lines.len(), 1, "amped {args:?}: expected one line on stderr, got {stderr:?}");
    }
}

#[test]
fn bad_response_options_fail_with_one_line() {
    for (args, mention) in [
        (&["--add-header", "X-A: 1\r\nSet-Cookie: s=1"][..], "--add-header"),
        (&["--add-header", "X-A: 1\nX-B: 2"][..], "--add-header"),
        (&["--add-header", "Content-Length: 1"][..], "Content-Length"),
        (&["--cache-control", "/a/*=max-age=1\r\nX-B: 2"][..], "--cache-control"),
        (&["--cache-control", "no-equals-sign"][..], "--cache-control"),
        (&["--cors-origin", "https://a.example\r\nX-B: 2"][..], "--cors-origin"),
        (&["--precompressed", "br,lzma"][..], "lzma"),
        (&["--error-page", "418=/teapot.html"][..], "--error-page"),
        (&["--error-page", "404=errors/404.html"][..], "--error-page"),
        (&["--spa-fallback", "index.html"][..], "--spa-fallback"),
    ] {
        let mut argv = vec!["--listen", "127.0.0.1:0"];
        argv.extend_from_slice(args);
        argv.push(".");
        let os: Vec<OsString> = argv.iter().map(OsString::from).collect();
        let (status, _, stderr) = run_expecting_exit(&os);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        expect_cli_error(&argv, mention);
    }
}

#[test]
fn unknown_option_fails() {
    expect_cli_error(&["--bogus-option", "."], "--bogus-option");
}

#[test]
fn bad_listen_fails() {
    for listen in ["nonsense", "127.0.0.1:99999", "256.1.1.1:80", "127.0.0.1"] {
        expect_cli_error(&["--listen", listen, "."], listen);
    }
}

#[test]
fn nonexistent_root_fails() {
    let tmp = temp_dir();
    let missing = tmp.path().join("no-such-root");
    expect_cli_error(&["--listen", "127.0.0.1:0", missing.to_str().unwrap()], "no-such-root");
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    expect_cli_error(&["--listen", "127.0.0.1:0", file.to_str().unwrap()], "plain-file");
}

#[test]
fn port_in_use_fails() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    expect_cli_error(&["--listen", &addr, "."], &addr);
}

#[test]
fn unwritable_access_log_fails() {
    let tmp = temp_dir();
    let log = tmp.path().join("no-such-dir/access.log");
    expect_cli_error(
        &["--listen", "127.0.0.1:0", "--access-log", log.to_str().unwrap(), "."],
        "access.log",
    );
}

#[test]
fn bad_values_fail() {
    expect_cli_error(&["--listen", "127.0.0.1:0", "--arch", "nope", "."], "nope");
    expect_cli_error(&["--listen", "127.0.0.1:0", "--header-timeout", "soon", "."], "soon");
    expect_cli_error(&["--listen", "127.0.0.1:0", "--max-connections", "-3", "."], "-3");
    for (value, mention) in [
        (&["--metadata-helpers", "auto:8"][..], "--metadata-helpers 'auto:8'"),
        (&["--metadata-helpers", "0"][..], "--metadata-helpers '0'"),
        (
            &["--metadata-helpers", "auto", "--metadata-helpers-max", "2"][..],
            "--metadata-helpers-max 2",
        ),
    ] {
        let mut argv = vec!["--listen", "127.0.0.1:0"];
        argv.extend_from_slice(value);
        argv.push(".");
        expect_cli_error(&argv, mention);
    }
}

#[test]
fn bad_config_fails() {
    let tmp = temp_dir();
    let missing = tmp.path().join("missing.toml");
    expect_error(&["--config", missing.to_str().unwrap(), "."], "missing.toml", false);
    let broken = tmp.path().join("broken.toml");
    std::fs::write(&broken, "listen = \n").unwrap();
    expect_error(&["--config", broken.to_str().unwrap(), "."], "broken.toml", false);
}

/// Start amped with only `--config FILE [CLI...] ROOT`, the file holding `toml`.
fn start_with_config(toml: &'static str, cli: &'static [&'static str]) -> Server {
    Server::start_with(
        |root: &Path| write(root, "a.txt", "AAAA"),
        move |root: &Path| {
            let config = root.parent().unwrap().join("amped.toml");
            std::fs::write(&config, toml).unwrap();
            let mut args: Vec<OsString> = vec!["--config".into(), config.into()];
            args.extend(cli.iter().map(OsString::from));
            args.push(root.into());
            args
        },
    )
}

/// Time until the server closes an idle connection (at most 5 s).
fn idle_close_after(s: &Server) -> Option<Duration> {
    let start = Instant::now();
    match s.conn().wait_closed(Duration::from_secs(5)) {
        Ended::Closed(_) => Some(start.elapsed()),
        Ended::StillOpen => None,
    }
}

#[test]
fn config_file_applies() {
    let s = start_with_config(
        "listen = \"127.0.0.1:0\"\narch = \"sped\"\nheader_timeout = 1.5\nstats_path = \"/.amped/stats\"\n",
        &[],
    );
    assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
    let st = stats(s.addr, STATS);
    assert!(counter(&st, "jobs_inline") >= 1, "arch = \"sped\" not applied: {st}");
    assert_eq!(counter(&st, "jobs_helper"), 0, "arch = \"sped\" not applied: {st}");
    let t = idle_close_after(&s).expect("header_timeout = 1.5 not applied");
    assert!(t >= Duration::from_millis(1300), "closed after {t:?}, before 1.5 s");
}

#[test]
fn command_line_wins_over_config() {
    let s = start_with_config(
        "listen = \"127.0.0.1:0\"\narch = \"amped\"\nheader_timeout = 30.0\nstats_path = \"/.amped/stats\"\n",
        &["--arch", "sped", "--header-timeout", "1"],
    );
    assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
    let st = stats(s.addr, STATS);
    assert_eq!(counter(&st, "jobs_helper"), 0, "--arch sped lost to the config: {st}");
    let t = idle_close_after(&s).expect("--header-timeout 1 lost to the config");
    assert!(t < Duration::from_secs(4), "{t:?}");
}
