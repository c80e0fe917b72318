//! Starting a server for one measurement and knowing when it is ready: amped reports its port
//! on stdout; a peer gets a free port in its rendered configuration and is polled until it
//! accepts. A started server is probed with one GET before it is measured, so a
//! misconfigured peer (403, 404) is reported instead of measured.

use std::cell::RefCell;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{ServerKind, ServerSpec, amped};
use crate::proc::{CgroupProcs, Pinning, ServerProcess, tail};
use crate::tools::Binaries;

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts servers for one run and remembers the command lines and configurations used.
#[derive(Debug)]
pub struct Launcher {
    bins: Binaries,
    server_cpus: Option<String>,
    work: PathBuf,
    logs: PathBuf,
    configs: PathBuf,
    root_user: bool,
    launches: RefCell<u32>,
    commands: RefCell<Vec<(String, Vec<String>)>>,
}

/// A started, ready server. Dropping it stops it.
#[derive(Debug)]
pub struct RunningServer {
    pub label: String,
    pub port: u16,
    pub log: PathBuf,
    process: ServerProcess,
}

impl Launcher {
    /// `work` holds per-launch scratch folders, `logs` the servers' stderr, `configs` a copy
    /// of every rendered peer configuration.
    pub fn new(
        bins: Binaries,
        pin: &Pinning,
        work: PathBuf,
        logs: PathBuf,
        configs: PathBuf,
    ) -> Launcher {
        Launcher {
            bins,
            server_cpus: pin.server_cpus.clone(),
            work,
            logs,
            configs,
            root_user: crate::machine::is_root(),
            launches: RefCell::new(0),
            commands: RefCell::new(Vec::new()),
        }
    }

    /// Every distinct (label, command line) started so far, for setup.json.
    pub fn commands(&self) -> Vec<(String, Vec<String>)> {
        self.commands.borrow().clone()
    }

    /// Starts `spec` serving `root`, inside `cgroup` if given, and waits until it is ready.
    pub fn launch(
        &self,
        spec: &ServerSpec,
        root: &Path,
        cgroup: Option<&CgroupProcs>,
    ) -> Result<RunningServer, String> {
        let n = {
            let mut c = self.launches.borrow_mut();
            *c += 1;
            *c
        };
        let slug = slug(&spec.label);
        let log = self.logs.join(format!("{slug}.stderr"));
        let stderr = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let (argv, peer_port) = match &spec.kind {
            ServerKind::Amped { arch, options } => {
                (amped::argv(&self.bins.amped, arch, options, root), None)
            }
            ServerKind::Peer(peer) => {
                let dir = self.work.join(format!("{slug}-{n}"));
                fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                let port = free_port().map_err(|e| format!("no free port: {e}"))?;
                let l = peer.render(&dir, root, port, self.root_user);
                fs::write(dir.join(&l.config_name), &l.config)
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
                // The copy kept with the run shows the last port used; the rest is identical.
                let _ = fs::write(self.configs.join(format!("{slug}.conf")), &l.config);
                (l.argv, Some(port))
            }
        };
        self.remember(&spec.label, &argv);
        let argv = Pinning::wrap(self.server_cpus.as_deref(), argv);
        let mut process = ServerProcess::spawn(&argv, cgroup, stderr)
            .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
        let stdout = process.take_stdout();
        let port = match peer_port {
            Some(port) => {
                drain_in_background(stdout);
                wait_accepting(port, &mut process)
            }
            None => wait_banner(stdout, &mut process),
        };
        match port {
            Ok(port) => Ok(RunningServer { label: spec.label.clone(), port, log, process }),
            Err(why) => {
                process.stop(Duration::from_secs(2));
                Err(format!("{} did not start: {why}\n{}", spec.label, tail(&log, 8)))
            }
        }
    }

    fn remember(&self, label: &str, argv: &[String]) {
        let mut cmds = self.commands.borrow_mut();
        if !cmds.iter().any(|(l, _)| l == label) {
            cmds.push((label.to_string(), argv.to_vec()));
        }
    }
}

impl RunningServer {
    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// One `GET path` over a fresh connection; the status code, or why there is none.
    pub fn probe(&self, path: &str) -> Result<u16, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut head = [0u8; 64];
        let mut got = 0;
        while got < 12 {
            match s.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(
                        "no answer within 30 s (overloaded, or out of memory in its cgroup?)"
                            .into(),
                    );
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        let line = String::from_utf8_lossy(&head[..got]).to_string();
        let _ = std::io::copy(&mut s, &mut std::io::sink());
        line.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or(format!("no status line in {line:?}"))
    }

    /// Probes `path` and explains a non-200 answer.
    pub fn check(&self, path: &str) -> Result<(), String> {
        match self.probe(path) {
            Ok(200) => Ok(()),
            Ok(code) => Err(format!(
                "{} answered {code} for {path}: check its configuration and that the data \
                 folder is readable by its worker user (log: {})",
                self.label,
                self.log.display()
            )),
            Err(e) => Err(format!("{}: probe of {path} failed: {e}", self.label)),
        }
    }

    /// The server's process group, whose id is also its first process's pid (its processes:
    /// [`crate::experiments::outside_profile::group_pids`]).
    pub fn pgid(&self) -> u32 {
        self.process.pgid()
    }

    /// Whether the server is still running (a crash or an OOM kill ends it early).
    pub fn alive(&mut self) -> bool {
        self.process.exited().is_none()
    }

    /// Stops the server now (dropping it does the same).
    pub fn stop(mut self) {
        self.process.stop(Duration::from_secs(10));
    }
}

/// A file-name-safe version of a label.
pub fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
        .collect()
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

fn drain_in_background(stdout: Option<std::process::ChildStdout>) {
    if let Some(mut out) = stdout {
        thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    }
}

fn wait_accepting(port: u16, process: &mut ServerProcess) -> Result<u16, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if let Some(status) = process.exited() {
            return Err(format!("exited with {status}"));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(port);
        }
        thread::sleep(Duration::from_millis(30));
    }
    Err(format!("not accepting on port {port} after {}s", START_TIMEOUT.as_secs()))
}

fn wait_banner(
    stdout: Option<std::process::ChildStdout>,
    process: &mut ServerProcess,
) -> Result<u16, String> {
    let out = stdout.ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(out);
        let mut first = String::new();
        let _ = reader.read_line(&mut first);
        let _ = tx.send(first);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                return amped::port_from_banner(&line).ok_or_else(|| match process.exited() {
                    Some(status) => format!("exited with {status}"),
                    None => format!("unexpected first line {line:?}"),
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => return Err("no 'listening' line".into()),
        }
    }
}
