//! amped's command line for a spec, and reading the port it reports.

use std::path::Path;

/// `amped --arch ARCH --listen 127.0.0.1:0 [options] ROOT`. Port 0: amped picks a free port
/// and says which on its first stdout line (see [`port_from_banner`]).
pub fn argv(
    binary: &Path,
    arch: &str,
    options: &[(String, Option<String>)],
    root: &Path,
) -> Vec<String> {
    let mut v = vec![
        binary.display().to_string(),
        "--arch".into(),
        arch.into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    for (name, value) in options {
        v.push(format!("--{name}"));
        if let Some(value) = value {
            v.push(value.clone());
        }
    }
    v.push(root.display().to_string());
    v
}

/// The port in `amped listening on http://127.0.0.1:PORT/`.
pub fn port_from_banner(line: &str) -> Option<u16> {
    let rest = line.trim().strip_prefix("amped listening on http://")?;
    let hostport = rest.trim_end_matches('/');
    hostport.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_command_line() {
        let v = argv(
            Path::new("/b/amped"),
            "pool",
            &[("threads".into(), Some("5".into())), ("no-file-cache".into(), None)],
            Path::new("/data"),
        );
        assert_eq!(
            v.join(" "),
            "/b/amped --arch pool --listen 127.0.0.1:0 --threads 5 --no-file-cache /data"
        );
    }

    #[test]
    fn reads_the_banner() {
        assert_eq!(port_from_banner("amped listening on http://127.0.0.1:36165/\n"), Some(36165));
        assert_eq!(port_from_banner("something else"), None);
    }
}
