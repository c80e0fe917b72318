//! What an operator does to a running server: signals (reload, log re-opening, stray signals)
//! while requests are in flight, logrotate, the error log, and the access log of refused
//! requests.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

const BIG: usize = 1 << 20;

fn fill(root: &Path) {
    write(root, "a.txt", "AAAA");
    write(root, "big.bin", pseudo_random(BIG, 7));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Two keep-alive clients fetching the 1 MiB file `rounds` times each; returns how many
/// responses came back whole.
fn fetch_while(s: &Server, rounds: usize) -> Vec<thread::JoinHandle<usize>> {
    (0..2)
        .map(|_| {
            let addr = s.addr;
            thread::spawn(move || {
                let want = pseudo_random(BIG, 7);
                let mut c = Conn::open(addr);
                let mut ok = 0;
                for _ in 0..rounds {
                    c.send(req("GET", "/big.bin", ""));
                    let r = c.response();
                    if r.status == 200 && r.body == want {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect()
}

struct Logs {
    _dir: tempfile::TempDir,
    access: PathBuf,
    error: PathBuf,
    config: PathBuf,
}

impl Logs {
    fn new(config: &str) -> Logs {
        let dir = temp_dir();
        let p = |n: &str| dir.path().join(n);
        let logs = Logs {
            access: p("access.log"),
            error: p("error.log"),
            config: p("amped.toml"),
            _dir: dir,
        };
        std::fs::write(&logs.config, config).unwrap();
        logs
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--access-log".into(),
            self.access.display().to_string(),
            "--error-log".into(),
            self.error.display().to_string(),
            "--config".into(),
            self.config.display().to_string(),
        ]
    }
}

fn start(arch: &[&str], logs: &Logs, extra: &[&str]) -> Server {
    let mut args: Vec<String> = logs.args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(arch, &args, fill)
}

arch_tests! {
    /// Every operator signal, and stray ones, sent while two clients download: nothing is
    /// lost, the server keeps serving, and only SIGTERM ends it (exit 0).
    fn signals_while_requests_are_in_flight(arch) {
        let logs = Logs::new("");
        let mut s = start(arch, &logs, &[]);
        let clients = fetch_while(&s, 12);
        for sig in ["HUP", "USR1", "USR2", "PIPE", "WINCH", "ALRM", "HUP", "USR1"] {
            s.signal(sig);
            thread::sleep(Duration::from_millis(60));
            s.assert_alive();
        }
        for c in clients {
            assert_eq!(c.join().unwrap(), 12, "a response was lost or damaged");
        }
        s.assert_alive();
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
        assert!(
            eventually(Duration::from_secs(3), || read(&logs.error).contains("re-opened (SIGUSR1)")),
            "error log: {}", read(&logs.error)
        );
        s.signal("TERM");
        let status = s.wait_exit(Duration::from_secs(15)).expect("exits after SIGTERM");
        assert!(status.success(), "{status}");
    }

    /// logrotate: rename both logs away, SIGUSR1, and the next lines go to new files at the
    /// old paths; nothing is lost (every request is in one of the two access logs).
    fn logrotate_rename_then_usr1(arch) {
        let logs = Logs::new("");
        let s = start(arch, &logs, &[]);
        s.get("/a.txt").assert_status(200);
        assert!(eventually(Duration::from_secs(3), || read(&logs.access).lines().count() == 1));
        let (old_access, old_error) = (logs.access.with_extension("log.1"), logs.error.with_extension("log.1"));
        std::fs::rename(&logs.access, &old_access).unwrap();
        std::fs::rename(&logs.error, &old_error).unwrap();
        s.signal("USR1");
        let mut sent = 1;
        let reopened = eventually(Duration::from_secs(5), || {
            s.get("/a.txt").assert_status(200);
            sent += 1;
            read(&logs.access).lines().count() >= 1
        });
        assert!(reopened, "no new access log at {}", logs.access.display());
        assert!(read(&old_error).contains("serving"), "start-up summary in the old error log");
        assert!(
            eventually(Duration::from_secs(3), || read(&logs.error).contains("logs re-opened")),
            "new error log: {:?}", read(&logs.error)
        );
        let total = || read(&old_access).lines().count() + read(&logs.access).lines().count();
        assert!(eventually(Duration::from_secs(3), || total() == sent), "{} lines for {sent} requests", total());
    }

    /// SIGHUP re-reads --config: a shorter header timeout applies to new connections, an
    /// option that cannot change live is named in the error log, a broken file changes
    /// nothing; the server serves throughout.
    fn sighup_reloads_the_config_file(arch) {
        let logs = Logs::new("header_timeout = 60\n");
        let s = start(arch, &logs, &[]);
        let clients = fetch_while(&s, 4);
        std::fs::write(&logs.config, "header_timeout = 1\nlisting = true\n").unwrap();
        s.signal("HUP");
        assert!(
            eventually(Duration::from_secs(3), || read(&logs.error).contains("configuration re-read")),
            "error log: {}", read(&logs.error)
        );
        assert!(read(&logs.error).contains("--listing cannot change while serving"), "{}", read(&logs.error));
        thread::sleep(Duration::from_millis(300)); // mp: the parent forwards SIGHUP within 100 ms
        for c in clients {
            assert_eq!(c.join().unwrap(), 4);
        }
        let mut c = s.conn();
        c.send("GET /a.txt HTTP/1.1\r\n");
        match c.wait_closed(Duration::from_secs(8)) {
            Ended::Closed(after) => assert!(after < Duration::from_secs(5), "{after:?}"),
            Ended::StillOpen => panic!("the reloaded 1 s header timeout did not apply"),
        }
        assert!(String::from_utf8_lossy(c.pending()).starts_with("HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(c.pending()));
        std::fs::write(&logs.config, "header_timeout = \"soon\"\n").unwrap();
        s.signal("HUP");
        assert!(
            eventually(Duration::from_secs(3), || read(&logs.error).contains("keeping the running configuration")),
            "error log: {}", read(&logs.error)
        );
        assert_eq!(s.get("/a.txt").assert_status(200).body, b"AAAA");
    }

    /// Refused requests keep their raw request line in the access log (escaped), are noted at
    /// info level in the error log, and `combined+time` adds the request time.
    fn refused_requests_are_logged_with_their_line(arch) {
        let logs = Logs::new("access_log_format = \"combined+time\"\nlog_level = \"info\"\n");
        let s = start(arch, &logs, &[]);
        raw(s.addr, b"GET / HTTP/2.0\r\nHost: x\r\n\r\n");
        raw(s.addr, b"GET /nohost HTTP/1.1\r\n\r\n");
        raw(s.addr, b"GET /\"q\x01 HTTP/1.1\r\nHost: x\r\n\r\n");
        s.get("/a.txt").assert_status(200);
        assert!(eventually(Duration::from_secs(3), || read(&logs.access).lines().count() == 4), "{}", read(&logs.access));
        let log = read(&logs.access);
        assert!(log.contains("\"GET / HTTP/2.0\" 505 "), "{log}");
        assert!(log.contains("\"GET /nohost HTTP/1.1\" 400 "), "{log}");
        assert!(log.contains("\"GET /\\\"q\\x01 HTTP/1.1\" 400 "), "{log}");
        for line in log.lines() {
            let time = line.rsplit(' ').next().unwrap();
            let secs: f64 = time.parse().unwrap_or_else(|_| panic!("no request time at the end of {line:?}"));
            assert!((0.0..60.0).contains(&secs), "{line}");
        }
        assert!(
            eventually(Duration::from_secs(3), || read(&logs.error).contains("refused with 505")),
            "error log: {}", read(&logs.error)
        );
    }
}

/// A root the server's user cannot read (mode 000, served as `nobody`): one start-up line
/// says so with the path and the uid, and each 403 names the path it could not open.
#[test]
fn unreadable_root_is_reported() {
    if amped_sys_uid() != 0 {
        eprintln!("skipped: needs root to start the server as nobody");
        return;
    }
    let bin = std::path::PathBuf::from(binary());
    if !others_can_execute(&bin) {
        eprintln!(
            "skipped: nobody cannot reach {} (a directory above it is private)",
            bin.display()
        );
        return;
    }
    let logs = Logs::new("");
    std::fs::set_permissions(
        logs.error.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mut s = Server::start_prepared(
        fill,
        |root| {
            vec![
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--error-log".into(),
                logs.error.clone().into(),
                root.into(),
            ]
        },
        |cmd, tmp| {
            use std::os::unix::fs::PermissionsExt;
            use std::os::unix::process::CommandExt;
            std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(tmp.join("root"), std::fs::Permissions::from_mode(0o000))
                .unwrap();
            cmd.uid(65534).gid(65534);
        },
    );
    s.get("/a.txt").assert_status(403);
    let root = s.root.display().to_string();
    assert!(
        eventually(Duration::from_secs(3), || read(&logs.error)
            .contains("a.txt: permission denied")),
        "error log: {}",
        read(&logs.error)
    );
    let log = read(&logs.error);
    let line =
        log.lines().find(|l| l.contains("is not readable")).unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains(&root) && line.contains("uid 65534") && line.contains(" warn: "),
        "{line}"
    );
    s.assert_alive();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&s.root, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The real uid of the test process.
fn amped_sys_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| st.lines().find(|l| l.starts_with("Uid:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|u| u.parse().ok()))
        .unwrap_or(u32::MAX)
}

/// A log that cannot be written (a full disk: `/dev/full`) is reported once in the error
/// log with its path, and serving goes on.
#[test]
fn a_full_disk_under_the_access_log_is_reported_once() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let logs = Logs::new("");
    let args = ["--access-log", "/dev/full", "--error-log", logs.error.to_str().unwrap()];
    let mut s = Server::start(&["--arch", "amped"], &args, fill);
    for _ in 0..5 {
        s.get("/a.txt").assert_status(200);
        thread::sleep(Duration::from_millis(100));
    }
    let wanted = "access log /dev/full: no space left on device; lines are being lost";
    assert!(
        eventually(Duration::from_secs(3), || read(&logs.error).contains(wanted)),
        "{}",
        read(&logs.error)
    );
    thread::sleep(Duration::from_millis(500));
    assert_eq!(read(&logs.error).matches(wanted).count(), 1, "{}", read(&logs.error));
    s.assert_alive();
}
