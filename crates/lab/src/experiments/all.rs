//! `amplab all`: every experiment in turn with its defaults (and the shared options), each
//! into its own folder. A failing experiment is reported and the rest still run.

use std::path::PathBuf;

use crate::cli::{
    AbGeneratorArg, AllArgs, CapacityArgs, CommonArgs, DiskBoundArgs, GeneratorArg,
    LinuxComparisonArgs, OptimizationsArgs, PoolArgs, SingleFileArgs, TraceArgs,
};

/// Runs all experiments; the folders written, or the failures.
pub fn run(a: &AllArgs) -> Result<Vec<PathBuf>, String> {
    // With --out, each experiment writes a sub-folder of it.
    let common = |name: &str| CommonArgs {
        out: a.common.out.as_ref().map(|o| o.join(name)),
        ..a.common.clone()
    };
    type Step<'a> = (&'static str, Box<dyn Fn() -> Result<PathBuf, String> + 'a>);
    let steps: Vec<Step> = vec![
        (
            "single-file",
            Box::new(move || {
                super::single_file::run(&SingleFileArgs {
                    common: common("single-file"),
                    sizes: None,
                    modes: None,
                    connections: None,
                    generator: GeneratorArg::Ampload,
                })
            }),
        ),
        (
            "optimizations",
            Box::new(move || {
                super::optimizations::run(&OptimizationsArgs {
                    common: CommonArgs { servers: None, ..common("optimizations") },
                    arch: "amped".into(),
                    sizes: None,
                    modes: None,
                    connections: None,
                    generator: GeneratorArg::Ampload,
                })
            }),
        ),
        (
            "trace",
            Box::new(move || {
                // The trace experiment runs on one model: the first one asked for.
                let mut disk = a.disk.clone();
                disk.disk_emulation = disk.models().map(|m| m.into_iter().take(1).collect());
                super::trace::run(&TraceArgs {
                    common: common("trace"),
                    disk,
                    clf: None,
                    connections: None,
                    requests_per_conn: 5,
                })
            }),
        ),
        (
            "disk-bound",
            Box::new(move || {
                super::disk_bound::run(&DiskBoundArgs {
                    common: common("disk-bound"),
                    disk: a.disk.clone(),
                    dataset: None,
                    shape: a.shape.clone(),
                    rate: None,
                    rates: None,
                    window: None,
                    connections: None,
                    requests_per_conn: 5,
                })
            }),
        ),
        (
            "capacity",
            Box::new(move || {
                super::capacity::run(&CapacityArgs {
                    common: common("capacity"),
                    disk: a.disk.clone(),
                    shape: a.shape.clone(),
                    scales: None,
                    connections: None,
                    requests_per_conn: 5,
                })
            }),
        ),
        (
            "pool-vs-nopool",
            Box::new(move || {
                super::pool::run(&PoolArgs {
                    common: common("pool-vs-nopool"),
                    concurrency: None,
                    small_requests: None,
                    large_requests: None,
                    generator: AbGeneratorArg::Auto,
                })
            }),
        ),
        (
            "linux-comparison",
            Box::new(move || {
                // The linux comparison runs on one model: the first one asked for.
                let mut disk = a.disk.clone();
                disk.disk_emulation = disk.models().map(|m| m.into_iter().take(1).collect());
                super::linux_comparison::run(&LinuxComparisonArgs {
                    capacity: CapacityArgs {
                        common: common("linux-comparison"),
                        disk,
                        shape: a.shape.clone(),
                        scales: None,
                        connections: None,
                        requests_per_conn: 5,
                    },
                    sample_ms: 250,
                })
            }),
        ),
    ];
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for (name, step) in &steps {
        eprintln!("[amplab all] === {name} ===");
        match step() {
            Ok(path) => done.push(path),
            Err(e) => {
                eprintln!("[amplab all] {name} failed: {e}");
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    if failed.is_empty() { Ok(done) } else { Err(failed.join("\n")) }
}
