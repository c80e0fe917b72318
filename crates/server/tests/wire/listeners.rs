//! Listeners: several `--listen` addresses (IPv4, IPv6, Unix socket), the short forms,
//! systemd socket activation and readiness notifications, and `--server-header`.

use crate::common::*;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
}

/// `GET /a.txt` over a Unix socket at `path`.
fn get_unix(path: &Path) -> Response {
    let mut s =
        UnixStream::connect(path).unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(get_req("/a.txt").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse_response(&buf, false)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{:?}", String::from_utf8_lossy(&buf)))
        .0
}

/// Whether this machine has an IPv6 loopback (some containers have none).
fn has_ipv6_loopback() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

/// The addresses on the listening line after the prefix.
fn announced(s: &Server) -> Vec<String> {
    let line = s.stdout_lines().into_iter().next().unwrap();
    line.strip_prefix("amped listening on ").unwrap().split(' ').map(String::from).collect()
}

arch_tests! {
    /// Several --listen: IPv4, IPv6 and a Unix socket, all served, all named on the first
    /// line; the socket file is removed at exit. (Under mp every worker serves each one.)
    fn several_listeners(arch) {
        let dir = temp_dir();
        let sock = dir.path().join("amped.sock");
        let unix = format!("unix:{}", sock.display());
        let v6 = has_ipv6_loopback();
        let mut extra = vec![];
        if v6 {
            extra.extend(["--listen", "[::1]:0"]);
        }
        extra.extend(["--listen", unix.as_str()]);
        let mut s = Server::start(arch, &extra, fill);
        let names = announced(&s);
        assert_eq!(names.len(), if v6 { 3 } else { 2 }, "{names:?}");
        assert_eq!(names.last().unwrap(), &unix);
        s.get("/a.txt").assert_status(200);
        assert_eq!(get_unix(&sock).assert_status(200).body, b"AAAA");
        if v6 {
            let port: u16 = names[1].trim_start_matches("http://[::1]:").trim_end_matches('/').parse().unwrap();
            let r = get(std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)), "/a.txt");
            assert_eq!(r.assert_status(200).body, b"AAAA");
        }
        s.signal("TERM");
        assert!(s.wait_exit(Duration::from_secs(15)).is_some_and(|st| st.success()));
        assert!(!sock.exists(), "the socket file is removed at exit");
    }

    /// systemd socket activation: the listener comes as descriptor 3 with LISTEN_FDS and
    /// LISTEN_PID (and --listen is not used); readiness, reload and stop reach NOTIFY_SOCKET.
    fn systemd_activation_and_notify(arch) {
        let dir = temp_dir();
        let notify_path = dir.path().join("notify");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let arch_args: Vec<String> = arch.iter().map(|s| s.to_string()).collect();
        // python3 plays systemd: binds, puts the socket at fd 3, sets LISTEN_PID to the pid
        // that execs amped.
        let script = "import os,socket,sys\n\
            s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(64)\n\
            os.dup2(s.fileno(),3); os.set_inheritable(3,True)\n\
            os.environ['LISTEN_FDS']='1'; os.environ['LISTEN_PID']=str(os.getpid())\n\
            os.execv(sys.argv[1], sys.argv[1:])\n";
        let mut s = Server::start_prepared(
            fill,
            |root| {
                let mut a: Vec<OsString> = vec!["-c".into(), script.into(), binary()];
                a.extend(arch_args.iter().map(OsString::from));
                a.extend(["--listen".into(), "127.0.0.1:1".into(), root.into()]);
                a
            },
            |cmd, _| {
                let args: Vec<OsString> = cmd.get_args().map(OsString::from).collect();
                *cmd = Command::new("python3");
                cmd.args(args)
                    .env("NOTIFY_SOCKET", &notify_path)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
            },
        );
        assert_ne!(s.addr.port(), 1, "the systemd socket is used, not --listen");
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        let mut buf = [0u8; 512];
        let mut next = || {
            let n = notify.recv(&mut buf).expect("a notification within 10 s");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        };
        assert!(next().starts_with("READY=1"));
        s.signal("HUP");
        let reloading = next();
        assert!(reloading.starts_with("RELOADING=1") && reloading.contains("MONOTONIC_USEC="), "{reloading}");
        assert!(next().starts_with("READY=1"));
        s.get("/a.txt").assert_status(200);
        s.signal("TERM");
        assert!(next().starts_with("STOPPING=1"));
        assert!(s.wait_exit(Duration::from_secs(15)).is_some_and(|st| st.success()));
    }

    /// --server-header: a name of the operator's choice, or no Server header at all, on
    /// files and generated pages alike.
    fn server_header(arch) {
        let s = Server::start(arch, &["--server-header", "Example/1.0"], fill);
        assert_eq!(s.get("/a.txt").must("server"), "Example/1.0");
        assert_eq!(s.get("/missing").must("server"), "Example/1.0");
        let s = Server::start(arch, &["--server-header", "off"], fill);
        assert_eq!(s.get("/a.txt").header_count("server"), 0);
        assert_eq!(s.get("/missing").header_count("server"), 0);
    }
}

/// `--listen :0` (and a bare port) bind every IPv4 interface on a port the kernel picks; the
/// first stdout line says which.
#[test]
fn short_form_port_zero() {
    let s = Server::start_with(fill, |root| vec!["--listen".into(), ":0".into(), root.into()]);
    let names = announced(&s);
    assert!(names[0].starts_with("http://0.0.0.0:"), "{names:?}");
    assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
}

/// `--arch mp` with several --listen: each worker serves every listener. With one worker
/// process, requests alternating between a TCP address and a Unix socket are all answered,
/// and a connection kept open (idle) on one does not delay the other: the worker parks it and
/// serves both.
#[test]
fn mp_workers_serve_every_listener() {
    let dir = temp_dir();
    let sock = dir.path().join("mp.sock");
    let unix = format!("unix:{}", sock.display());
    let s =
        Server::start(&["--arch", "mp", "--processes", "1"], &["--listen", unix.as_str()], fill);
    for _ in 0..5 {
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        assert_eq!(get_unix(&sock).assert_status(200).body, b"AAAA");
    }
    let mut held = s.conn();
    held.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    held.response().assert_status(200);
    let asked = std::time::Instant::now();
    assert_eq!(get_unix(&sock).assert_status(200).body, b"AAAA");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "the idle kept-alive connection held the only worker for {:?}",
        asked.elapsed()
    );
    held.send("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    held.response().assert_status(200);
}
