//! The experiments, and what they share: [`Lab`] opens a run (binaries, pinning, servers
//! available here, the output folder) and closes it (setup.json, summary.md).

pub mod all;
pub mod capacity;
pub mod counters_probe;
pub mod debox_probe;
pub mod delay_acct;
pub mod disk_bound;
pub mod diskrun;
pub mod linux_comparison;
pub mod optimizations;
pub mod outside_profile;
pub mod pool;
pub mod rebuild;
pub mod single_file;
pub mod soak;
pub mod stage_sampler;
pub mod stats_get;
pub mod trace;
pub mod who_blocked;

use std::path::PathBuf;

use serde_json::Value;

use crate::cli::CommonArgs;
use crate::clock::Utc;
use crate::diskemu::Cgroup;
use crate::proc::Pinning;
use crate::report::RunDir;
use crate::report::setup::Setup;
use crate::servers::{self, Launcher, RunningServer, ServerSpec};
use crate::tools::Binaries;
use delay_acct::{DelayAcct, Holder};

/// One experiment run in progress.
pub struct Lab {
    pub experiment: &'static str,
    pub quick: bool,
    pub bins: Binaries,
    pub pin: Pinning,
    pub run: RunDir,
    pub launcher: Launcher,
    pub started: Utc,
    pub data_dir: PathBuf,
    pub seed: u64,
    /// Servers to measure (installed ones only).
    pub servers: Vec<ServerSpec>,
    /// Servers skipped, with the reason.
    pub skipped: Vec<(String, String)>,
    /// The command line that ran the experiment (this process's, or setup.json's when a run
    /// is rebuilt by `amplab report`).
    pub command: String,
    /// amped cells run with `--debox` and their profile is read, peers are profiled from
    /// outside (off with `--no-profile`).
    pub profile: bool,
    /// The `perf trace` slice's length, s.
    pub profile_slice_s: f64,
    /// Block-I/O delay accounting: `Some(true)` if this run holds `kernel.task_delayacct` on
    /// (released at the end: off again when the last amplab run holding it ends, unless it was
    /// on before the first), `Some(false)` if it is on but not held, `None` if it is off.
    pub delay_accounting: Option<bool>,
}

/// The experiments' names, as setup.json records them.
pub const EXPERIMENTS: [&str; 8] = [
    "single-file",
    "trace",
    "optimizations",
    "disk-bound",
    "capacity",
    "pool-vs-nopool",
    "linux-comparison",
    "soak",
];

impl Lab {
    /// Opens a run of `experiment` with `default_servers` unless `--servers` was given.
    pub fn open(
        experiment: &'static str,
        common: &CommonArgs,
        default_servers: &[&str],
    ) -> Result<Lab, String> {
        let bins = Binaries::locate(common.amped.as_deref(), common.ampload.as_deref())?;
        let wanted: Vec<String> = match &common.servers {
            Some(list) => list.clone(),
            None => default_servers.iter().map(|s| s.to_string()).collect(),
        };
        let specs = ServerSpec::parse_list(&wanted)?;
        let (servers, skipped) = servers::available(specs);
        if servers.is_empty() {
            return Err("none of the requested servers is installed here".into());
        }
        let pin = if common.no_pin {
            Pinning { server_cpus: None, client_cpus: None }
        } else {
            if crate::tools::which("taskset").is_none() {
                return Err(
                    "taskset (util-linux) is not installed: install it or pass --no-pin".into()
                );
            }
            Pinning {
                server_cpus: Some(common.server_cpus.clone()),
                client_cpus: Some(common.client_cpus.clone()),
            }
        };
        let run = RunDir::create(common.out.as_deref(), experiment, common.quick)
            .map_err(|e| format!("cannot create the run folder: {e}"))?;
        crate::datasets::make_dir(&common.data_dir)
            .map_err(|e| format!("{}: {e}", common.data_dir.display()))?;
        let launcher = launcher(&bins, &pin, &run);
        eprintln!("[amplab {experiment}] writing to {}", run.path.display());
        Ok(Lab {
            experiment,
            quick: common.quick,
            bins,
            pin,
            run,
            launcher,
            started: Utc::now(),
            data_dir: common.data_dir.clone(),
            seed: common.seed,
            servers,
            skipped,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            profile: !common.no_profile,
            profile_slice_s: common.profile_slice.unwrap_or(if common.quick { 0.5 } else { 2.0 }),
            delay_accounting: delay_accounting_for(!common.no_profile),
        })
    }

    /// The run recorded in `dir`'s setup.json, reopened to rewrite its figures and summary
    /// from its raw results (`amplab report`); nothing is started and setup.json is kept.
    pub fn reopen(dir: &std::path::Path, setup: &Value) -> Result<Lab, String> {
        let name = setup["experiment"].as_str().unwrap_or_default();
        let experiment = EXPERIMENTS
            .into_iter()
            .find(|e| *e == name)
            .ok_or_else(|| format!("{}: setup.json names no known experiment", dir.display()))?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        let pin = Pinning {
            server_cpus: text(&setup["pinning"]["server_cpus"]),
            client_cpus: text(&setup["pinning"]["client_cpus"]),
        };
        let path = |v: &Value| std::path::PathBuf::from(v.as_str().unwrap_or_default());
        let bins = Binaries {
            amped: path(&setup["binaries"]["amped"]),
            ampload: path(&setup["binaries"]["ampload"]),
        };
        let run = RunDir::reopen(dir);
        let launcher = launcher(&bins, &pin, &run);
        let skipped = setup["skipped_servers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        (
                            text(&s["label"]).unwrap_or_default(),
                            text(&s["reason"]).unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let argv: Vec<String> = setup["command_line"]
            .as_array()
            .map(|a| a.iter().filter_map(text).collect())
            .unwrap_or_default();
        let seed = argv
            .iter()
            .position(|a| a == "--seed")
            .and_then(|i| argv.get(i + 1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        Ok(Lab {
            experiment,
            quick: setup["quick"].as_bool().unwrap_or(false),
            bins,
            pin,
            run,
            launcher,
            started: Utc::now(),
            data_dir: PathBuf::new(),
            seed,
            servers: Vec::new(),
            skipped,
            profile: !argv.iter().any(|a| a == "--no-profile"),
            profile_slice_s: 0.0,
            delay_accounting: None,
            command: argv.join(" "),
        })
    }

    /// Ends a rebuilt run: rewrites summary.md (setup.json stays as measured).
    pub fn finish_rebuilt(mut self, summary: &str) -> Result<PathBuf, String> {
        let mut summary = summary.to_string();
        if let Some(why) = &self.run.png_missing {
            summary.push_str(&format!("\n> **No PNG figures**: {why}.\n"));
        }
        self.run
            .write("summary.md", &summary)
            .map_err(|e| format!("cannot write summary.md: {e}"))?;
        Ok(self.run.path.clone())
    }

    /// CPUs for the load generator.
    pub fn client_cpus(&self) -> Option<&str> {
        self.pin.client_cpus.as_deref()
    }

    /// Starts `spec` on `root` (in `cgroup` if given) and checks that `probe_path` answers 200.
    pub fn start(
        &self,
        spec: &ServerSpec,
        root: &std::path::Path,
        cgroup: Option<&Cgroup>,
        probe_path: &str,
    ) -> Result<RunningServer, String> {
        let procs = cgroup.map(Cgroup::procs);
        let server = self.launcher.launch(spec, root, procs.as_ref())?;
        server.check(probe_path)?;
        Ok(server)
    }

    /// The servers in round `round`'s order (rotated so none is always first or last).
    pub fn order(&self, round: u32) -> Vec<ServerSpec> {
        let n = self.servers.len();
        (0..n).map(|i| self.servers[(i + round as usize) % n].clone()).collect()
    }

    /// Writes setup.json and summary.md, removes scratch files, and returns the folder.
    pub fn finish(
        mut self,
        parameters: Value,
        disk: Option<Value>,
        mut notes: Vec<String>,
        summary: &str,
    ) -> Result<PathBuf, String> {
        let mut summary = summary.to_string();
        if self.delay_accounting == Some(true) {
            notes.push(release_delay_accounting());
        }
        if let Some(why) = &self.run.png_missing {
            notes.push(format!("figures: {why}"));
            summary.push_str(&format!("\n> **No PNG figures**: {why}.\n"));
        }
        let setup = Setup {
            experiment: self.experiment,
            quick: self.quick,
            started: self.started,
            bins: &self.bins,
            pin: &self.pin,
            launcher: &self.launcher,
            skipped: &self.skipped,
            parameters,
            disk,
            notes,
        };
        let json = setup.to_json();
        let io = |e: std::io::Error| format!("cannot write results: {e}");
        self.run.write_json("setup.json", &json).map_err(io)?;
        self.run.write("summary.md", &summary).map_err(io)?;
        self.run.finish();
        eprintln!("[amplab {}] done: {}", self.experiment, self.run.path.display());
        Ok(self.run.path.clone())
    }

    /// The summary's opening: title, command, pinning, skipped servers, quick-run warning.
    pub fn summary_head(&self, title: &str, workload: &str) -> String {
        let mut s = format!("# {title}\n\n");
        if self.quick {
            s.push_str("> **Quick run**: tiny data sets and seconds-long cells, to exercise the code path. The numbers below are not results.\n\n");
        }
        s.push_str(&format!("Command: `{}`\n\n", self.command));
        s.push_str(&format!("Workload: {workload}\n\n"));
        match (&self.pin.server_cpus, &self.pin.client_cpus) {
            (Some(s_cpus), Some(c_cpus)) => s.push_str(&format!(
                "Servers pinned to CPU {s_cpus} (every process and thread of a server shares it), the load generator to CPU {c_cpus}; loopback (127.0.0.1).\n\n"
            )),
            _ => s.push_str("Nothing pinned (--no-pin); loopback (127.0.0.1).\n\n"),
        }
        if !self.skipped.is_empty() {
            s.push_str("Skipped (not installed here):\n\n");
            for (label, why) in &self.skipped {
                s.push_str(&format!("- {label}: {why}\n"));
            }
            s.push('\n');
        }
        s
    }
}

/// Holds block-I/O delay accounting on for a profiled run, turning it on where it is off and
/// amplab may (root): `Some(true)` if this run holds it (shared with other amplab runs through
/// [`delay_acct`]), `Some(false)` if it is on but could not be held, `None` if it is off.
fn delay_accounting_for(profile: bool) -> Option<bool> {
    if !profile {
        return None;
    }
    let held = Holder::this_process().map(|me| DelayAcct::system().acquire(me));
    match held {
        Some(Ok(turned_on)) => {
            if turned_on {
                eprintln!(
                    "[amplab] kernel.task_delayacct turned on for this run (off again when the last amplab run holding it ends)"
                );
            }
            Some(true)
        }
        _ => outside_profile::delay_accounting().then_some(false),
    }
}

/// How [`Lab::finish`]'s note on delay accounting begins.
const DELAY_NOTE: &str = "kernel.task_delayacct was on for this run";

/// Whether a note of setup.json is one [`Lab::finish`] adds (figures, delay accounting), not the
/// experiment's own: `amplab report` leaves those out of a rebuilt summary, as the run did.
pub fn is_finish_note(note: &str) -> bool {
    note.starts_with("figures:") || note.starts_with(DELAY_NOTE)
}

/// Lets go of delay accounting at a run's end; says what became of it, for setup.json.
fn release_delay_accounting() -> String {
    let released = Holder::this_process().map(|me| DelayAcct::system().release(me));
    let what = match released {
        Some(Ok(true)) => "turned off at its end",
        Some(Ok(false)) => {
            "left on at its end (another amplab run still holds it, or it was on before)"
        }
        _ => "could not be released at its end",
    };
    format!("{DELAY_NOTE} (block-I/O delay per thread), held through /run/amplab-delayacct; {what}")
}

/// The server launcher of a run: scratch in `tmp/`, logs in `logs/`, configs in `configs/`.
fn launcher(bins: &Binaries, pin: &Pinning, run: &RunDir) -> Launcher {
    Launcher::new(bins.clone(), pin, run.tmp(), run.path.join("logs"), run.path.join("configs"))
}

/// Failures of single cells, listed at the end of a summary.
pub fn failures_section(failures: &[String]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n## Failed or suspect cells\n\n");
    for f in failures.iter().take(30) {
        s.push_str(&format!("- {f}\n"));
    }
    if failures.len() > 30 {
        s.push_str(&format!("- … and {} more (see results.csv)\n", failures.len() - 30));
    }
    s
}
