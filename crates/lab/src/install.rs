//! `amplab install-peers`: installs the peer servers and load tools from Debian's packages.
//!
//! apache2-bin (not apache2) brings the server and its modules without Debian's service
//! scripts, so nothing is started on port 80; nginx-light, lighttpd and h2o may be started as
//! services by their packages' scripts where an init system runs (amplab never uses those).

use std::process::Command;

/// The packages: servers, then ab (apache2-utils), wrk, taskset (util-linux) and a font for the
/// PNG figures (fonts-dejavu-core).
pub const PACKAGES: [&str; 8] = [
    "nginx-light",
    "apache2-bin",
    "lighttpd",
    "h2o",
    "apache2-utils",
    "wrk",
    "util-linux",
    "fonts-dejavu-core",
];

/// Runs `apt-get update` and `apt-get install` (or prints them with `dry_run`).
pub fn run(dry_run: bool) -> Result<(), String> {
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(PACKAGES);
    if dry_run {
        println!("apt-get update\napt-get {}", install.join(" "));
        return Ok(());
    }
    if !crate::machine::is_root() {
        return Err(format!(
            "install-peers needs root: run it with sudo, or run `apt-get {}` yourself",
            install.join(" ")
        ));
    }
    for args in [vec!["update"], install] {
        eprintln!("[amplab install-peers] apt-get {}", args.join(" "));
        let status = Command::new("apt-get")
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if !status.success() {
            return Err(format!("apt-get {} failed ({status})", args.join(" ")));
        }
    }
    for peer in crate::servers::Peer::NAMES {
        let state = crate::servers::Peer::parse(peer)
            .and_then(|p| p.missing())
            .unwrap_or_else(|| "ready".into());
        eprintln!("[amplab install-peers] {peer}: {state}");
    }
    Ok(())
}
