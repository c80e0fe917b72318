//! systemd readiness notifications (`sd_notify(3)`'s protocol, without libsystemd): when
//! `$NOTIFY_SOCKET` names a Unix datagram socket (a path, or `@name` in the abstract
//! namespace), amped sends it `READY=1` once it listens, `RELOADING=1` (with
//! `MONOTONIC_USEC`) and `READY=1` around a SIGHUP reload, and `STOPPING=1` when a graceful
//! shutdown begins. Without the variable (not started by systemd) nothing is sent. Failures
//! are ignored: readiness is a courtesy to the service manager, never a reason to stop.
//!
//! The variable is left in the environment, so `mp` workers (which re-execute the binary)
//! see it too; they never notify (the parent speaks for the server).

use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (newline-separated `KEY=value` assignments) to `$NOTIFY_SOCKET`, if set.
/// Returns whether it was sent.
pub fn notify(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return false };
    !is_worker() && send_to(&path, state)
}

/// Sends `state` to the notification socket `path` (`@name`: abstract namespace).
fn send_to(path: &std::ffi::OsStr, state: &str) -> bool {
    let bytes = path.as_encoded_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)
        }
        None => SocketAddr::from_pathname(path),
    };
    let Ok(addr) = addr else { return false };
    let Ok(sock) = UnixDatagram::unbound() else { return false };
    sock.send_to_addr(state.as_bytes(), &addr).is_ok()
}

/// The server listens and serves.
pub fn ready() -> bool {
    notify("READY=1\nSTATUS=serving")
}

/// A reload begins (the service manager waits for the next `READY=1`).
pub fn reloading() -> bool {
    let usec = amped_sys::process::monotonic_usec();
    notify(&format!("RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC={usec}"))
}

/// A graceful shutdown begins.
pub fn stopping() -> bool {
    notify("STOPPING=1\nSTATUS=stopping")
}

/// An `mp` worker was started with `--worker-fd` (its parent notifies for the server).
fn is_worker() -> bool {
    std::env::args_os().any(|a| a == "--worker-fd")
}

#[cfg(test)]
mod tests {
    #[test]
    fn notifications_reach_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        assert!(super::send_to(path.as_os_str(), "READY=1"));
        let mut buf = [0u8; 256];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert!(!super::send_to(dir.path().join("absent").as_os_str(), "READY=1"));
    }
}
