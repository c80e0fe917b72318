//! The peer servers: their configuration templates (crates/lab/peers/*.conf.in, compiled in),
//! how each is rendered for one run, and the command that starts it in the foreground.
//!
//! Fairness (peers-and-methods §1.0): one worker each (all pinned to the server CPUs), access
//! log off, sendfile where the server has it, keep-alive request caps lifted, fd limits within
//! the hard limit. `nginx-aio` (thread-pool reads) and `nginx-direct` (the same, with large
//! files read around the page cache) are meant for disk-bound runs only.

use std::path::Path;

const NGINX: &str = include_str!("../../peers/nginx.conf.in");
const H2O: &str = include_str!("../../peers/h2o.conf.in");
const LIGHTTPD: &str = include_str!("../../peers/lighttpd.conf.in");
const APACHE: &str = include_str!("../../peers/apache.conf.in");

/// Debian's Apache module directory.
const APACHE_MODULES: &str = "/usr/lib/apache2/modules";

/// A peer server configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Nginx,
    /// nginx with `aio threads` (a thread pool for reads).
    NginxAio,
    /// [`Peer::NginxAio`] plus `directio` for files of 8 MiB and more, read in 1 MiB buffers:
    /// nginx's own way of keeping large files out of the page cache, at the threshold amped's
    /// `--direct-io-above` has at 128 MiB. (With 2 MiB buffers, amped's request size, nginx
    /// was killed by a 128 MiB memory cgroup at 64 clients: one buffer per response, unbounded.)
    NginxDirect,
    /// Apache, event MPM, one child process.
    ApacheEvent,
    /// Apache, prefork MPM with this many processes.
    ApachePrefork(u32),
    Lighttpd,
    H2o,
}

/// A rendered configuration and the command that runs it.
#[derive(Clone, Debug)]
pub struct PeerLaunch {
    /// File name of the configuration inside the server's work folder.
    pub config_name: String,
    pub config: String,
    pub argv: Vec<String>,
}

impl Peer {
    /// The names `--servers` accepts (apache-prefork-N takes any N).
    pub const NAMES: [&'static str; 8] = [
        "nginx",
        "nginx-aio",
        "nginx-direct",
        "apache-event",
        "apache-prefork-150",
        "apache-prefork-300",
        "lighttpd",
        "h2o",
    ];

    /// Parses a peer name.
    pub fn parse(name: &str) -> Option<Peer> {
        match name {
            "nginx" => Some(Peer::Nginx),
            "nginx-aio" => Some(Peer::NginxAio),
            "nginx-direct" => Some(Peer::NginxDirect),
            "apache-event" => Some(Peer::ApacheEvent),
            "lighttpd" => Some(Peer::Lighttpd),
            "h2o" => Some(Peer::H2o),
            _ => {
                let n: u32 = name.strip_prefix("apache-prefork-")?.parse().ok()?;
                (1..=5000).contains(&n).then_some(Peer::ApachePrefork(n))
            }
        }
    }

    /// The program that runs this peer.
    pub fn program(self) -> &'static str {
        match self {
            Peer::Nginx | Peer::NginxAio | Peer::NginxDirect => "nginx",
            Peer::ApacheEvent | Peer::ApachePrefork(_) => "apache2",
            Peer::Lighttpd => "lighttpd",
            Peer::H2o => "h2o",
        }
    }

    /// Why this peer cannot run here, if it cannot.
    pub fn missing(self) -> Option<String> {
        if crate::tools::which(self.program()).is_none() {
            return Some(format!(
                "{} is not installed (run `amplab install-peers` as root)",
                self.program()
            ));
        }
        if let Some(mpm) = self.apache_mpm() {
            let module = Path::new(APACHE_MODULES).join(format!("mod_{mpm}.so"));
            if !module.is_file() {
                return Some(format!("{} is missing (package apache2-bin)", module.display()));
            }
        }
        None
    }

    fn apache_mpm(self) -> Option<&'static str> {
        match self {
            Peer::ApacheEvent => Some("mpm_event"),
            Peer::ApachePrefork(_) => Some("mpm_prefork"),
            _ => None,
        }
    }

    /// Renders the configuration for a server on 127.0.0.1:`port` serving `root`, with its
    /// pid file, logs and temp files in `dir`.
    pub fn render(self, dir: &Path, root: &Path, port: u16, root_user: bool) -> PeerLaunch {
        let t = Template { dir, root: root.display().to_string(), port };
        let program = crate::tools::which(self.program())
            .map_or_else(|| self.program().to_string(), |p| p.display().to_string());
        match self {
            Peer::Nginx | Peer::NginxAio | Peer::NginxDirect => self.nginx(&t, program, root_user),
            Peer::H2o => PeerLaunch {
                config_name: "h2o.conf".into(),
                config: t.fill(
                    H2O,
                    &[("USER", if root_user { "user: root".into() } else { String::new() })],
                ),
                argv: vec![program, "-c".into(), t.conf("h2o.conf")],
            },
            Peer::Lighttpd => PeerLaunch {
                config_name: "lighttpd.conf".into(),
                config: t.fill(LIGHTTPD, &[]),
                argv: vec![program, "-D".into(), "-f".into(), t.conf("lighttpd.conf")],
            },
            Peer::ApacheEvent | Peer::ApachePrefork(_) => self.apache(&t, program),
        }
    }

    /// nginx, with a thread pool and `aio threads` for [`Peer::NginxAio`], and `directio` as
    /// well for [`Peer::NginxDirect`] (which turns `sendfile` off for those files: nginx reads
    /// them into its output buffer, one 1 MiB buffer per response, and writes from it).
    fn nginx(self, t: &Template, program: String, root_user: bool) -> PeerLaunch {
        let aio = self != Peer::Nginx;
        let extra = match self {
            Peer::NginxDirect => "aio threads;\n        directio 8m;\n        output_buffers 1 1m;",
            _ if aio => "aio threads;",
            _ => "",
        };
        let config = t.fill(
            NGINX,
            &[
                ("USER", if root_user { "user root;".into() } else { String::new() }),
                (
                    "MAIN",
                    if aio {
                        "thread_pool default threads=32 max_queue=65536;".into()
                    } else {
                        String::new()
                    },
                ),
                ("EXTRA", extra.into()),
            ],
        );
        PeerLaunch {
            config_name: "nginx.conf".into(),
            config,
            argv: vec![
                program,
                "-p".into(),
                t.dir.display().to_string(),
                "-e".into(),
                t.conf("nginx-startup.log"),
                "-c".into(),
                t.conf("nginx.conf"),
            ],
        }
    }

    /// Apache with the event MPM or prefork with a fixed number of processes.
    fn apache(self, t: &Template, program: String) -> PeerLaunch {
        let mpm = self.apache_mpm().unwrap_or("mpm_event");
        let (name, block) = match self {
            Peer::ApachePrefork(n) => (format!("apache-prefork-{n}.conf"), prefork_block(n)),
            _ => ("apache-event.conf".to_string(), EVENT_BLOCK.to_string()),
        };
        PeerLaunch {
            config: t.fill(APACHE, &[("MPM", mpm.into()), ("MPM_CONFIG", block)]),
            argv: vec![
                program,
                "-d".into(),
                t.dir.display().to_string(),
                "-f".into(),
                t.conf(&name),
                "-DFOREGROUND".into(),
            ],
            config_name: name,
        }
    }
}

/// What a configuration template's `@KEY@` placeholders are filled with.
struct Template<'a> {
    /// The server's own folder (pid file, logs, temp files, its configuration).
    dir: &'a Path,
    /// The document root.
    root: String,
    port: u16,
}

impl Template<'_> {
    /// `template` with `@DIR@`, `@ROOT@`, `@ADDR@`, `@HOST@`, `@PORT@` and each of `extra`'s
    /// keys replaced.
    fn fill(&self, template: &str, extra: &[(&str, String)]) -> String {
        let port = self.port;
        let mut text = template
            .replace("@DIR@", &self.dir.display().to_string())
            .replace("@ROOT@", &self.root)
            .replace("@ADDR@", &format!("127.0.0.1:{port}"))
            .replace("@HOST@", "127.0.0.1")
            .replace("@PORT@", &port.to_string());
        for (key, value) in extra {
            text = text.replace(&format!("@{key}@"), value);
        }
        text
    }

    /// The path of a file in the server's folder.
    fn conf(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// Event MPM: one child whose threads serve every connection; idle keep-alive connections are
/// parked in its listener thread, so 1020+ clients fit.
const EVENT_BLOCK: &str = "ServerLimit 1
StartServers 1
ThreadLimit 1100
ThreadsPerChild 1100
MinSpareThreads 1
MaxSpareThreads 1100
MaxRequestWorkers 1100
MaxConnectionsPerChild 0
AsyncRequestWorkerFactor 4";

/// Prefork MPM with exactly `n` processes, all started up front (each holds one connection).
fn prefork_block(n: u32) -> String {
    format!(
        "StartServers {n}\nMinSpareServers {n}\nMaxSpareServers {n}\nServerLimit {n}\n\
         MaxRequestWorkers {n}\nMaxConnectionsPerChild 0"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        for name in Peer::NAMES {
            assert!(Peer::parse(name).is_some(), "{name}");
        }
        assert_eq!(Peer::parse("apache-prefork-42"), Some(Peer::ApachePrefork(42)));
        assert_eq!(Peer::parse("apache-prefork-0"), None);
        assert_eq!(Peer::parse("apache"), None);
    }

    #[test]
    fn renders_every_placeholder() {
        let peers = [
            Peer::Nginx,
            Peer::NginxAio,
            Peer::NginxDirect,
            Peer::ApacheEvent,
            Peer::ApachePrefork(150),
            Peer::Lighttpd,
            Peer::H2o,
        ];
        for peer in peers {
            let l = peer.render(Path::new("/w"), Path::new("/data"), 18080, true);
            assert!(!l.config.contains('@'), "{peer:?} left a placeholder:\n{}", l.config);
            assert!(l.config.contains("/data"), "{peer:?}");
            assert!(l.config.contains("18080"), "{peer:?}");
            assert!(l.argv.iter().any(|a| a.ends_with(&l.config_name)), "{peer:?}");
        }
        let directives = |c: String| {
            c.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n")
        };
        let aio =
            directives(Peer::NginxAio.render(Path::new("/w"), Path::new("/d"), 1, false).config);
        assert!(aio.contains("aio threads;") && aio.contains("thread_pool default"));
        let plain =
            directives(Peer::Nginx.render(Path::new("/w"), Path::new("/d"), 1, false).config);
        assert!(!plain.contains("aio threads") && !plain.contains("user root"));
        assert!(!aio.contains("directio") && !plain.contains("directio"));
        let direct =
            directives(Peer::NginxDirect.render(Path::new("/w"), Path::new("/d"), 1, false).config);
        assert!(direct.contains("aio threads;") && direct.contains("thread_pool default"));
        assert!(direct.contains("directio 8m;") && direct.contains("output_buffers 1 1m;"));
        let prefork =
            Peer::ApachePrefork(300).render(Path::new("/w"), Path::new("/d"), 1, true).config;
        assert!(
            prefork.contains("MaxRequestWorkers 300") && prefork.contains("mod_mpm_prefork.so")
        );
    }
}
