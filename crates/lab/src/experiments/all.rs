//! `amplab all`: every experiment in turn with its defaults (and the shared options), each
//! into its own folder. A failing experiment is reported and the rest still run.

use std::path::PathBuf;

use crate::cli::{
    AbGeneratorArg, AllArgs, CapacityArgs, CommonArgs, DiskArgs, DiskBoundArgs, GeneratorArg,
    LinuxComparisonArgs, OptimizationsArgs, PoolArgs, SingleFileArgs, TraceArgs,
};

/// The experiments `all` runs, in order (each also names its sub-folder of `--out`).
const EXPERIMENTS: [&str; 7] = [
    "single-file",
    "optimizations",
    "trace",
    "disk-bound",
    "capacity",
    "pool-vs-nopool",
    "linux-comparison",
];

/// Runs all experiments; the folders written, or the failures.
pub fn run(a: &AllArgs) -> Result<Vec<PathBuf>, String> {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for name in EXPERIMENTS {
        eprintln!("[amplab all] === {name} ===");
        match run_experiment(name, a) {
            Ok(path) => done.push(path),
            Err(e) => {
                eprintln!("[amplab all] {name} failed: {e}");
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    if failed.is_empty() { Ok(done) } else { Err(failed.join("\n")) }
}

/// Runs experiment `name` with its defaults and `all`'s shared options.
fn run_experiment(name: &str, a: &AllArgs) -> Result<PathBuf, String> {
    // With --out, each experiment writes a sub-folder of it.
    let common =
        CommonArgs { out: a.common.out.as_ref().map(|o| o.join(name)), ..a.common.clone() };
    match name {
        "single-file" => super::single_file::run(&SingleFileArgs {
            common,
            sizes: None,
            modes: None,
            connections: None,
            generator: GeneratorArg::Ampload,
        }),
        "optimizations" => super::optimizations::run(&OptimizationsArgs {
            common: CommonArgs { servers: None, ..common },
            arch: "amped".into(),
            sizes: None,
            modes: None,
            connections: None,
            generator: GeneratorArg::Ampload,
        }),
        "trace" => super::trace::run(&TraceArgs {
            common,
            disk: first_model(a),
            clf: None,
            connections: None,
            requests_per_conn: 5,
            rate: None,
        }),
        "disk-bound" => super::disk_bound::run(&DiskBoundArgs {
            common,
            disk: a.disk.clone(),
            dataset: None,
            shape: a.shape.clone(),
            rate: None,
            rates: None,
            window: None,
            connections: None,
            requests_per_conn: 5,
        }),
        "capacity" => super::capacity::run(&capacity_args(a, common, a.disk.clone())),
        "pool-vs-nopool" => super::pool::run(&PoolArgs {
            common,
            concurrency: None,
            small_requests: None,
            large_requests: None,
            generator: AbGeneratorArg::Auto,
        }),
        "linux-comparison" => super::linux_comparison::run(&LinuxComparisonArgs {
            capacity: capacity_args(a, common, first_model(a)),
            sample_ms: 250,
        }),
        other => Err(format!("no experiment {other}")),
    }
}

/// The disk options with only the first model asked for: the trace experiment and the linux
/// comparison run on one model.
fn first_model(a: &AllArgs) -> DiskArgs {
    let mut disk = a.disk.clone();
    disk.disk_emulation = disk.models().map(|m| m.into_iter().take(1).collect());
    disk
}

/// The capacity experiment's options with its defaults.
fn capacity_args(a: &AllArgs, common: CommonArgs, disk: DiskArgs) -> CapacityArgs {
    CapacityArgs {
        common,
        disk,
        shape: a.shape.clone(),
        scales: None,
        connections: None,
        requests_per_conn: 5,
    }
}
