//! amplab: the experiments of the Flash (1999) and New Flash / DeBox (2004) papers, and a
//! student thread-pool experiment, run against amped and real peers. See crates/lab/README.md.
//!
//! Exit status: 0 on success, 1 when an experiment could not run (one line on stderr says
//! why), 2 for bad arguments.

#![forbid(unsafe_code)]

mod cli;
mod clock;
mod datasets;
mod diskemu;
mod experiments;
mod install;
mod load;
mod machine;
mod proc;
mod progress;
mod report;
mod servers;
mod slowdisk;
mod stats;
mod svg;
mod tools;
mod verdict;

use clap::Parser;

use cli::{Cli, Command};

/// `amplab report`: rebuilds a run folder, then writes the index if asked.
fn report(a: &cli::ReportArgs) -> Result<Vec<std::path::PathBuf>, String> {
    let mut done = match &a.dir {
        Some(dir) => experiments::rebuild::run(dir)?,
        None => Vec::new(),
    };
    if a.index {
        let runs = a.runs.clone().unwrap_or_else(report::runs_root);
        done.push(report::index::write(&runs)?);
    }
    Ok(done)
}

fn main() {
    let cli = Cli::parse();
    proc::become_subreaper();
    let result = match &cli.command {
        Command::SingleFile(a) => experiments::single_file::run(a).map(|p| vec![p]),
        Command::Trace(a) => experiments::trace::run(a).map(|p| vec![p]),
        Command::Optimizations(a) => experiments::optimizations::run(a).map(|p| vec![p]),
        Command::DiskBound(a) => experiments::disk_bound::run(a).map(|p| vec![p]),
        Command::Capacity(a) => experiments::capacity::run(a).map(|p| vec![p]),
        Command::PoolVsNopool(a) => experiments::pool::run(a).map(|p| vec![p]),
        Command::LinuxComparison(a) => experiments::linux_comparison::run(a).map(|p| vec![p]),
        Command::All(a) => experiments::all::run(a),
        Command::Soak(a) => experiments::soak::run(a).map(|p| vec![p]),
        Command::InstallPeers(a) => install::run(a.dry_run).map(|()| Vec::new()),
        Command::Report(a) => report(a),
        Command::Slowdisk(a) => {
            a.options().and_then(|o| slowdisk::serve(&a.source, &a.mount, &o)).map(|()| Vec::new())
        }
    };
    match result {
        Ok(folders) => {
            for f in folders {
                println!("{}", f.display());
            }
        }
        Err(e) => {
            eprintln!("amplab: {e}");
            std::process::exit(1);
        }
    }
}
