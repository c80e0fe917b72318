//! setup.json: everything needed to know what a run measured — the command line, the machine,
//! the versions of every server and tool, the servers' command lines and configurations,
//! pinning, the disk emulation (requested and applied) and the experiment's parameters.

use serde_json::{Value, json};

use crate::clock::Utc;
use crate::machine::Machine;
use crate::proc::Pinning;
use crate::servers::Launcher;
use crate::tools::{self, Binaries};

/// What every setup.json holds; experiments add their own `parameters` and `disk`.
pub struct Setup<'a> {
    pub experiment: &'a str,
    pub quick: bool,
    pub started: Utc,
    pub bins: &'a Binaries,
    pub pin: &'a Pinning,
    pub launcher: &'a Launcher,
    pub skipped: &'a [(String, String)],
    pub parameters: Value,
    pub disk: Option<Value>,
    pub notes: Vec<String>,
}

impl Setup<'_> {
    /// The JSON document.
    pub fn to_json(&self) -> Value {
        let servers: Vec<Value> = self
            .launcher
            .commands()
            .into_iter()
            .map(|(label, argv)| {
                let slug = crate::servers::launch::slug(&label);
                let config = if argv.first().is_some_and(|p| p.ends_with("/amped") || p == "amped") {
                    Value::Null
                } else {
                    json!(format!("configs/{slug}.conf"))
                };
                json!({"label": label, "argv": argv, "config": config, "stderr_log": format!("logs/{slug}.stderr")})
            })
            .collect();
        let skipped: Vec<Value> =
            self.skipped.iter().map(|(l, why)| json!({"label": l, "reason": why})).collect();
        json!({
            "experiment": self.experiment,
            "quick": self.quick,
            "started_utc": self.started.iso(),
            "finished_utc": Utc::now().iso(),
            "command_line": std::env::args().collect::<Vec<_>>(),
            "machine": Machine::probe(),
            "versions": tools::versions(self.bins),
            "binaries": {"amped": self.bins.amped, "ampload": self.bins.ampload},
            "pinning": {"server_cpus": self.pin.server_cpus, "client_cpus": self.pin.client_cpus},
            "servers": servers,
            "skipped_servers": skipped,
            "disk_emulation": self.disk.clone().unwrap_or(Value::Null),
            "parameters": self.parameters,
            "notes": self.notes,
        })
    }
}
