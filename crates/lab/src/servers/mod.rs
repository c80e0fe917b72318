//! The servers under test: parsing `--servers` specs, checking that each is installed, and
//! (in [`launch`]) starting and stopping them.
//!
//! A spec is either an amped architecture with options after colons (`amped`,
//! `amped:instances=2`, `pool:threads=5`, `amped:no-path-cache:no-file-cache`), passed to
//! amped as `--instances 2` etc., or a peer name (see [`Peer`]).

pub mod amped;
pub mod launch;
pub mod peers;

pub use launch::{Launcher, RunningServer};
pub use peers::Peer;

/// The amped architectures (`--arch` values).
pub const AMPED_ARCHS: [&str; 7] = ["sped", "amped", "mt", "pool", "mp", "uring", "staged"];

/// One server to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// The spec as written; used as the series name everywhere.
    pub label: String,
    pub kind: ServerKind,
}

/// What kind of server a spec names.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerKind {
    /// amped with `--arch` and extra options (`--name value` or `--flag`).
    Amped { arch: String, options: Vec<(String, Option<String>)> },
    /// A peer server.
    Peer(Peer),
}

impl ServerSpec {
    /// Parses one spec.
    pub fn parse(text: &str) -> Result<ServerSpec, String> {
        let text = text.trim();
        let mut parts = text.split(':');
        let head = parts.next().unwrap_or_default();
        if AMPED_ARCHS.contains(&head) {
            let mut options = Vec::new();
            for part in parts {
                let (name, value) = match part.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (part, None),
                };
                let valid = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && name != "arch"
                    && name != "listen";
                if !valid {
                    return Err(format!("{text:?}: bad amped option {part:?}"));
                }
                options.push((name.to_string(), value));
            }
            return Ok(ServerSpec {
                label: text.to_string(),
                kind: ServerKind::Amped { arch: head.to_string(), options },
            });
        }
        match Peer::parse(text) {
            Some(peer) => Ok(ServerSpec { label: text.to_string(), kind: ServerKind::Peer(peer) }),
            None => Err(format!(
                "unknown server {text:?}: expected an amped architecture ({}) with optional \
                 :option=value parts, or one of {}",
                AMPED_ARCHS.join(", "),
                Peer::NAMES.join(", ")
            )),
        }
    }

    /// Parses a list; duplicates are an error.
    pub fn parse_list(items: &[String]) -> Result<Vec<ServerSpec>, String> {
        let mut out: Vec<ServerSpec> = Vec::new();
        for item in items.iter().filter(|s| !s.trim().is_empty()) {
            let spec = ServerSpec::parse(item)?;
            if out.iter().any(|s| s.label == spec.label) {
                return Err(format!("server {:?} listed twice", spec.label));
            }
            out.push(spec);
        }
        if out.is_empty() {
            return Err("no servers given".into());
        }
        Ok(out)
    }

    /// Whether this is amped (any architecture).
    pub fn is_amped(&self) -> bool {
        matches!(self.kind, ServerKind::Amped { .. })
    }

    /// Why this server cannot run here, if it cannot.
    pub fn missing(&self) -> Option<String> {
        match &self.kind {
            ServerKind::Amped { .. } => None,
            ServerKind::Peer(p) => p.missing(),
        }
    }
}

/// Splits a server list into the runnable ones and the skipped ones (with their reasons),
/// printing a line for each skipped server.
pub fn available(specs: Vec<ServerSpec>) -> (Vec<ServerSpec>, Vec<(String, String)>) {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for spec in specs {
        match spec.missing() {
            None => run.push(spec),
            Some(why) => {
                eprintln!("amplab: skipping {}: {why}", spec.label);
                skipped.push((spec.label.clone(), why));
            }
        }
    }
    (run, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_amped_specs() {
        let s = ServerSpec::parse("amped:instances=2:no-path-cache").unwrap();
        assert_eq!(s.label, "amped:instances=2:no-path-cache");
        assert_eq!(
            s.kind,
            ServerKind::Amped {
                arch: "amped".into(),
                options: vec![
                    ("instances".into(), Some("2".into())),
                    ("no-path-cache".into(), None)
                ]
            }
        );
        assert!(ServerSpec::parse("pool:threads=5").unwrap().is_amped());
        assert_eq!(
            ServerSpec::parse("staged:stage-threads-max=4").unwrap().kind,
            ServerKind::Amped {
                arch: "staged".into(),
                options: vec![("stage-threads-max".into(), Some("4".into()))]
            }
        );
        assert!(ServerSpec::parse("amped:listen=1").is_err());
        assert!(ServerSpec::parse("amped:bad option").is_err());
    }

    #[test]
    fn parses_peers_and_rejects_unknown() {
        assert_eq!(
            ServerSpec::parse("apache-prefork-150").unwrap().kind,
            ServerKind::Peer(Peer::ApachePrefork(150))
        );
        assert_eq!(ServerSpec::parse("nginx-aio").unwrap().kind, ServerKind::Peer(Peer::NginxAio));
        assert!(ServerSpec::parse("zeus").is_err());
        assert!(ServerSpec::parse_list(&["nginx".into(), "nginx".into()]).is_err());
        assert!(ServerSpec::parse_list(&[]).is_err());
    }
}
