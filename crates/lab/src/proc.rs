//! Child processes: servers started in their own process group (pinned, optionally inside
//! cgroups) and stopped on drop, and load generators run to completion under a deadline.
//!
//! Invariant: every child amplab starts is waited on. A server's whole process group gets
//! SIGTERM, then SIGKILL after a grace period; amplab is a child subreaper, so workers orphaned
//! by a killed master come back to it and are reaped too (this sandbox's PID 1 reaps nothing).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// CPU pinning through `taskset -c`.
#[derive(Clone, Debug)]
pub struct Pinning {
    pub server_cpus: Option<String>,
    pub client_cpus: Option<String>,
}

impl Pinning {
    /// `taskset -c CPUS` in front of `argv`, or `argv` unchanged.
    pub fn wrap(cpus: Option<&str>, argv: Vec<String>) -> Vec<String> {
        match cpus {
            Some(c) => ["taskset", "-c", c].iter().map(|s| s.to_string()).chain(argv).collect(),
            None => argv,
        }
    }
}

/// Makes amplab the reaper of its descendants' orphans (best effort; see the module doc).
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// cgroup.procs files a server is moved into before it executes (memory, and blkio when the
/// disk is emulated with the blkio throttle).
#[derive(Clone, Debug)]
pub struct CgroupProcs {
    pub memory: std::path::PathBuf,
    pub blkio: Option<std::path::PathBuf>,
}

/// A running server process group; stopped (and waited on) when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    pgid: Pid,
}

impl ServerProcess {
    /// Starts `argv` in a new process group, inside `cgroup` if given (a shell moves itself
    /// into the cgroups and then executes the server, so every thread and forked worker is
    /// charged there from the start). Stdout is piped (for amped's "listening" line).
    pub fn spawn(argv: &[String], cgroup: Option<&CgroupProcs>, stderr: File) -> io::Result<Self> {
        let full: Vec<String> = match cgroup {
            Some(cg) => {
                // $1 = how many cgroup.procs files follow; the shell writes its pid into each.
                let script = r#"n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@""#;
                let files: Vec<String> = std::iter::once(&cg.memory)
                    .chain(cg.blkio.as_ref())
                    .map(|p| p.display().to_string())
                    .collect();
                ["sh", "-c", script, "amplab-cgroup"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([files.len().to_string()])
                    .chain(files)
                    .chain(argv.iter().cloned())
                    .collect()
            }
            None => argv.to_vec(),
        };
        let child = Command::new(&full[0])
            .args(&full[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .spawn()?;
        let pgid = Pid::from_child(&child);
        Ok(ServerProcess { child: Some(child), pgid })
    }

    /// The process group, whose id is the server's first process's pid: every process it
    /// forks is in it.
    pub fn pgid(&self) -> u32 {
        self.pgid.as_raw_nonzero().get() as u32
    }

    /// The piped stdout (taken once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    /// The exit status if the server has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGTERM to the group, SIGKILL after `grace`, then reaps everything. Returns the
    /// server's exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let _ = rustix::process::kill_process_group(self.pgid, Signal::TERM);
        let deadline = Instant::now() + grace;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = rustix::process::kill_process_group(self.pgid, Signal::KILL);
                    break child.wait().ok();
                }
                Err(_) => break None,
            }
        };
        // Stragglers of the group (workers of a killed master) and orphans adopted by us.
        let _ = rustix::process::kill_process_group(self.pgid, Signal::KILL);
        reap_orphans(Duration::from_millis(500));
        status
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// Reaps adopted orphans until none is left or `within` has passed. Only called when no other
/// child of amplab is running (servers are stopped between load-generator runs).
fn reap_orphans(within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => return,
        }
    }
}

/// What a finished tool run produced.
#[derive(Debug)]
pub struct ToolOutput {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// Runs `argv` to completion, killing it after `deadline` (so a hung tool cannot hang a run).
pub fn run_tool(argv: &[String], deadline: Duration) -> io::Result<ToolOutput> {
    run_tool_watched(argv, deadline, &mut || {})
}

/// [`run_tool`], calling `watch` every 20 ms or so while the tool runs (e.g. to sample
/// counters beside it).
pub fn run_tool_watched(
    argv: &[String],
    deadline: Duration,
    watch: &mut dyn FnMut(),
) -> io::Result<ToolOutput> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let end = Instant::now() + deadline;
    let mut timed_out = false;
    let status = loop {
        watch();
        match child.try_wait()? {
            Some(s) => break Some(s),
            None if Instant::now() < end => thread::sleep(Duration::from_millis(20)),
            None => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
        }
    };
    Ok(ToolOutput {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    })
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let mut bytes = Vec::new();
            let _ = p.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
