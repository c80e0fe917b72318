//! `ampload`: a load generator that measures web servers honestly — closed loop (like wrk and
//! ab), fixed-rate open loop with latency from the intended send time (like wrk2), sessions of
//! K requests per connection (like httperf), URL lists, weighted traces and access logs.
//!
//! The pieces, in the order a run uses them: [`cli`] and [`config`] turn the command line into
//! a checked [`config::Config`]; [`workload`] builds the request list; [`run`] starts one
//! [`worker`] event loop per thread, which drive [`conn`]ections paced by the closed loop or
//! the open loop's [`schedule`], checking each [`response`]; [`stats`] are merged and
//! [`report`]ed.

#![forbid(unsafe_code)]

mod budget;
mod chunked;
mod cli;
mod config;
mod conn;
mod latency;
mod progress;
mod report;
mod request;
mod response;
mod rlimit;
mod run;
mod schedule;
mod start;
mod stats;
mod target;
mod worker;
mod workload;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser as _;

use crate::stats::ErrorKind;

/// Exit status for unusable arguments or files (clap uses it too).
const EXIT_USAGE: u8 = 2;
/// Exit status after a second Ctrl-C or one during the warm-up (128 + SIGINT).
const EXIT_INTERRUPTED: i32 = 130;

fn main() -> ExitCode {
    let args = match cli::Args::try_parse() {
        Ok(args) => args,
        Err(e) => return usage_error(e),
    };
    let config = match config::Config::from_args(args, std::io::stderr().is_terminal()) {
        Ok(config) => config,
        Err(e) => return fail(&e, EXIT_USAGE),
    };
    let workload = match workload::Workload::load(&config.source, &config.url, &config.request) {
        Ok(workload) => workload,
        Err(e) => return fail(&e.to_string(), EXIT_USAGE),
    };
    if let Err(e) = rlimit::raise_nofile(config.fds_needed()) {
        return fail(&e, 1);
    }
    let interrupted = match stop_on_ctrl_c() {
        Ok(flag) => flag,
        Err(e) => return fail(&e, 1),
    };
    if let Some(warmup) = config.warmup_run() {
        if let Err(e) = run::run(&warmup, &workload, &interrupted) {
            return fail(&e, 1);
        }
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            return fail("interrupted during the warm-up", EXIT_INTERRUPTED as u8);
        }
    }
    let outcome = match run::run(&config, &workload, &interrupted) {
        Ok(outcome) => outcome,
        Err(e) => return fail(&e, 1),
    };
    let was_interrupted = interrupted.load(std::sync::atomic::Ordering::Relaxed);
    report_run(&config, &workload, &outcome, was_interrupted)
}

/// First Ctrl-C: stop and report what was measured; second: exit at once. Returns the flag
/// the first one sets.
fn stop_on_ctrl_c() -> Result<Arc<AtomicBool>, String> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let sigint = signal_hook::consts::SIGINT;
    signal_hook::flag::register_conditional_shutdown(
        sigint,
        EXIT_INTERRUPTED,
        Arc::clone(&interrupted),
    )
    .and_then(|_| signal_hook::flag::register(sigint, Arc::clone(&interrupted)))
    .map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    Ok(interrupted)
}

/// Prints the report (text or JSON) and its warnings, and writes the `--hlog` file; fails
/// (status 1) if that file cannot be written or no request got a valid response.
fn report_run(
    config: &config::Config,
    workload: &workload::Workload,
    outcome: &run::Outcome,
    was_interrupted: bool,
) -> ExitCode {
    let report = report::Report::new(
        config,
        workload,
        &outcome.stats,
        outcome.started,
        outcome.duration,
        was_interrupted,
    );
    let hlog_error = config.hlog.as_ref().and_then(|path| {
        let windows = report::windows(config, &outcome.stats, outcome.duration);
        let written = latency::write_hlog(path, outcome.started, &windows);
        written.err().map(|e| format!("cannot write {}: {e}", path.display()))
    });
    if config.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if report.schedule_lag_warnings > 0 {
        eprintln!(
            "ampload: warning: the generator released {} requests more than 5 ms late (max {} us); \
             use more --threads or a lower --rate",
            report.schedule_lag_warnings, report.max_schedule_lag_us
        );
    }
    if was_interrupted {
        eprintln!("ampload: interrupted by Ctrl-C: the report covers the run until then");
    }
    if let Some(e) = hlog_error {
        return fail(&e, 1);
    }
    if outcome.stats.requests == 0 {
        let why = ErrorKind::ALL
            .into_iter()
            .find_map(|k| {
                outcome.stats.first_error(k).map(|d| format!(": {} error: {d}", k.name()))
            })
            .unwrap_or_default();
        return fail(&format!("no request got a valid response{why}"), 1);
    }
    ExitCode::SUCCESS
}

/// Reports a command-line error in one line (clap's own message, without the usage block);
/// `--help` and `--version` print as usual.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as Kind;
    if matches!(
        error.kind(),
        Kind::DisplayHelp | Kind::DisplayVersion | Kind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    let text = error.render().to_string();
    let message = text.split("\n\n").next().unwrap_or_default();
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    fail(&format!("{message} (see ampload --help)"), EXIT_USAGE)
}

/// Prints one line on stderr and returns the exit status.
fn fail(message: &str, status: u8) -> ExitCode {
    eprintln!("ampload: {message}");
    ExitCode::from(status)
}
