//! Finding the programs a run needs (amped and ampload beside amplab, peers and tools on the
//! PATH) and asking each for its version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where amped and ampload are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub amped: PathBuf,
    pub ampload: PathBuf,
}

impl Binaries {
    /// `--amped`/`--ampload` if given, else beside amplab's own executable (`target/<profile>/`).
    pub fn locate(amped: Option<&Path>, ampload: Option<&Path>) -> Result<Binaries, String> {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        let pick = |given: Option<&Path>, name: &str| -> Result<PathBuf, String> {
            let path = given.map_or_else(|| beside.join(name), Path::to_path_buf);
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "{} not found: build it with `cargo build --release -p {name}` or pass --{name} PATH",
                    path.display()
                ))
            }
        };
        Ok(Binaries { amped: pick(amped, "amped")?, ampload: pick(ampload, "ampload")? })
    }
}

/// The full path of `name` on the PATH (plus the sbin directories, where Debian puts servers).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The first line a program prints for its version flag (stdout or stderr), or why not.
pub fn version_of(program: &Path, args: &[&str]) -> String {
    match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(out) => {
            let text = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(no output)").to_string()
        }
        Err(e) => format!("(cannot run {}: {e})", program.display()),
    }
}

/// Versions of amped, ampload and whichever peers and tools are installed.
pub fn versions(bins: &Binaries) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    map.insert("amped".into(), version_of(&bins.amped, &["--version"]).into());
    map.insert("ampload".into(), version_of(&bins.ampload, &["--version"]).into());
    let others: [(&str, &[&str]); 7] = [
        ("nginx", &["-v"]),
        ("apache2", &["-v"]),
        ("lighttpd", &["-v"]),
        ("h2o", &["--version"]),
        ("wrk", &["--version"]),
        ("ab", &["-V"]),
        ("taskset", &["--version"]),
    ];
    for (name, args) in others {
        let v = which(name).map_or_else(|| "not installed".to_string(), |p| version_of(&p, args));
        map.insert(name.into(), v.into());
    }
    map.insert("amped_source".into(), git_revision().into());
    serde_json::Value::Object(map)
}

/// The git commit of the working tree amplab runs in (with `-dirty`), if any.
fn git_revision() -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{head}-dirty") } else { head }
        }
        None => "(not in a git checkout)".to_string(),
    }
}
