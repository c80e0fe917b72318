//! Right answers under exhaustion and change: the error table (disk/fs_error.rs) seen from
//! the wire, under every architecture.

use crate::common::*;
use std::time::Duration;

/// True when the tests run as root (here and in CI): the server is then started with
/// `--user nobody`, so that permissions bind it (root reads any file).
fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Polls `path` until it answers `status` or `limit` passes; returns how long it took.
fn answers_within(s: &Server, path: &str, status: u16, limit: Duration) -> Option<Duration> {
    let start = std::time::Instant::now();
    loop {
        if s.get(path).status == status {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replaces the symlink `link` with one to `target` atomically (`ln -sfn` done right:
/// a new link renamed over the old).
fn switch_link(link: &std::path::Path, target: &str) {
    let tmp = link.with_extension("new");
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// Polls `path` until its body is `text` (within [`SEEN_WITHIN`]).
fn eventually_text(s: &Server, path: &str, text: &str) -> bool {
    let start = std::time::Instant::now();
    while s.get(path).text() != text {
        if start.elapsed() > SEEN_WITHIN {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// The staleness bound is one second; the polls allow for a slow machine.
const SEEN_WITHIN: Duration = Duration::from_millis(2500);

arch_tests! {
    /// The reported scenario: under `RLIMIT_NOFILE` 64 with 100 connections open, a GET
    /// for an existing file not yet cached is answered 200 or 503 with Retry-After — never 404
    /// — and the server serves normally once the connections close.
    fn low_descriptor_limit_with_many_connections_never_404(arch) {
        let s = Server::start(arch, &[], |root| {
            for i in 0..20 {
                write(root, &format!("f{i}.txt"), format!("file {i}"));
            }
        });
        limit_descriptors(&s, 64);
        let mut first = s.conn();
        first.send(req("GET", "/f0.txt", ""));
        first.response().assert_status(200);
        let crowd: Vec<std::net::TcpStream> = (0..100)
            .filter_map(|_| std::net::TcpStream::connect_timeout(&s.addr, Duration::from_secs(1)).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(300)); // let the server accept what it can
        for i in 1..20 {
            first.send(req("GET", &format!("/f{i}.txt"), ""));
            let r = first.response();
            assert!(r.status == 200 || r.status == 503, "/f{i}.txt under exhaustion: {r:?}");
            if r.status == 503 {
                assert_eq!(r.header("retry-after"), Some("1"));
                break; // the connection closes after a 503
            }
            assert_eq!(r.text(), format!("file {i}"));
        }
        drop(crowd);
        let start = std::time::Instant::now();
        let mut r = None;
        while start.elapsed() < Duration::from_secs(10) {
            let got = get(s.addr, "/f19.txt");
            if got.status == 200 {
                r = Some(got);
                break;
            }
            assert_eq!(got.status, 503, "{got:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(r.expect("served again once the crowd left").text(), "file 19");
    }

    /// `--max-connections-per-ip 2`: a third connection from the same address is answered 429
    /// with Retry-After and closed; once one of the two closes, a new one is served. (Under mp
    /// the idle connections are parked by their workers, which go on accepting; the limit
    /// across several workers: `archs_specific::mp_client_limits_hold_for_the_whole_server`.)
    fn connections_per_ip_are_limited(arch) {
        let s = Server::start(arch, &["--max-connections-per-ip", "2", "--stats-path", "/st"], |root| write(root, "a.txt", "A"));
        let mut open: Vec<Conn> = (0..2).map(|_| s.conn()).collect();
        for c in &mut open {
            c.send(req("GET", "/a.txt", ""));
            c.response().assert_status(200);
        }
        assert_refused_over_connection_limit(&s, "/a.txt");
        drop(open.pop());
        std::thread::sleep(Duration::from_millis(300)); // the server notices the close
        let mut again = s.conn();
        again.send(req("GET", "/a.txt", ""));
        again.response().assert_status(200);
        drop((again, open));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(counter(&stats(s.addr, "/st"), "client_limit_refusals"), 1);
    }

    /// `--rate-limit-per-ip 1/m --rate-limit-burst 3`: three requests are served, the fourth
    /// (on the same or a new connection) is answered 429 with `Retry-After: 60` and closed.
    /// Under mp the requests are served by both workers and counted in one bucket.
    fn requests_per_ip_are_rate_limited(arch) {
        let s = Server::start(arch, &["--rate-limit-per-ip", "1/m", "--rate-limit-burst", "3"], |root| write(root, "a.txt", "A"));
        let mut c = s.conn();
        for _ in 0..2 {
            c.send(req("GET", "/a.txt", ""));
            c.response().assert_status(200);
        }
        s.get("/a.txt").assert_status(200);
        c.send(req("GET", "/a.txt", ""));
        let r = c.response();
        assert_eq!(r.status, 429, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("60"));
        c.assert_closed(Duration::from_secs(3));
        assert_eq!(s.get("/a.txt").status, 429);
    }

    /// Out of descriptors, an existing file or directory is answered 503 with Retry-After and
    /// the connection closed (never 404: a cache in front would remember the file as missing),
    /// with a line on stderr; and nothing negative is remembered: once descriptors are back
    /// the same URLs answer 200. Covers a first translation, a listing, and the re-open of a
    /// changed cached file (io_uring's ring `openat`).
    fn descriptor_exhaustion_is_503_and_not_cached(arch) {
        let s = Server::start(arch, &["--listing"], |root| {
            write(root, "warm.txt", "warm");
            write(root, "cold.txt", "cold");
            write(root, "changed.txt", "old");
            write(root, "dir/a.txt", "a");
        });
        s.get("/changed.txt").assert_status(200);
        write(&s.root, "changed.txt", "new content");
        std::thread::sleep(Duration::from_millis(1100)); // past the staleness bound
        for path in ["/cold.txt", "/dir/", "/changed.txt"] {
            // A connection already accepted (and its worker started), then no descriptor left.
            let mut c = s.conn();
            c.send(req("GET", "/warm.txt", ""));
            c.response().assert_status(200);
            let squeeze = DescriptorSqueeze::apply(&s);
            c.send(req("GET", path, ""));
            let r = c.response();
            assert_eq!(r.status, 503, "{path} out of descriptors: {r:?}");
            assert_eq!(r.header("retry-after"), Some("1"), "{path}");
            assert!(r.connection_has("close"), "{path}");
            c.assert_closed(Duration::from_secs(3));
            drop(squeeze);
        }
        assert_eq!(s.get("/cold.txt").assert_status(200).text(), "cold");
        assert!(s.get("/dir/").assert_status(200).text().contains("a.txt"));
        assert_eq!(s.get("/changed.txt").assert_status(200).text(), "new content");
        let log = s.stderr();
        assert!(log.contains("cold.txt") && log.contains("503"), "no error-log line: {log}");
    }
    /// A cached file made unreadable to the server's user (`chmod 000`, or `chmod 640` of a
    /// root-owned file under `--user nobody`) answers 403 within the staleness bound, and 200
    /// again once readable; `--user nobody` is used when the tests run as root.
    fn permission_changes_are_seen_within_a_second(arch) {
        if running_as_root() && mp_workers_cannot_start_as_nobody(arch) {
            return;
        }
        let user: &[&str] = if running_as_root() { &["--user", "nobody"] } else { &[] };
        let s = Server::start(arch, user, |root| {
            set_mode(root.parent().unwrap(), 0o755); // the temporary directory is 0700
            write(root, "a.txt", "A");
            write(root, "b.txt", "B");
            write(root, "big.bin", pseudo_random(100_000, 3)); // not kept in memory
        });
        for path in ["/a.txt", "/b.txt", "/big.bin", "/a.txt", "/b.txt", "/big.bin"] {
            s.get(path).assert_status(200);
        }
        set_mode(&s.path("a.txt"), 0o000);
        set_mode(&s.path("big.bin"), 0o000);
        if running_as_root() {
            set_mode(&s.path("b.txt"), 0o640); // root's group only: not nobody
        } else {
            set_mode(&s.path("b.txt"), 0o000);
        }
        for path in ["/a.txt", "/b.txt", "/big.bin"] {
            assert!(answers_within(&s, path, 403, SEEN_WITHIN).is_some(), "{path} still served");
        }
        for name in ["a.txt", "b.txt", "big.bin"] {
            set_mode(&s.path(name), 0o644);
        }
        for path in ["/a.txt", "/b.txt", "/big.bin"] {
            assert!(answers_within(&s, path, 200, SEEN_WITHIN).is_some(), "{path} still 403");
        }
        assert_eq!(s.get("/a.txt").text(), "A");
    }

    /// A root given as a symlink (`current -> releases/v1`) switched to a new release
    /// (`ln -sfn releases/v2 current`) is served from the new release within the staleness
    /// bound, with every cache on and with every cache off; so is a symlinked directory inside
    /// the root.
    fn symlinked_root_and_directories_follow_a_switch(arch) {
        for caches in [&[][..], &["--no-path-cache", "--no-file-cache", "--no-header-cache"][..]] {
            let s = Server::start_with(
                |root| {
                    let releases = root.parent().unwrap().join("releases");
                    write(&releases, "v1/a.txt", "one");
                    write(&releases, "v2/a.txt", "two");
                    write(&releases, "v1/data-1/d.txt", "d1");
                    write(&releases, "v1/data-2/d.txt", "d2");
                    std::os::unix::fs::symlink("data-1", releases.join("v1/data")).unwrap();
                    std::os::unix::fs::symlink("releases/v1", releases.with_file_name("current")).unwrap();
                },
                |root| {
                    let mut args: Vec<std::ffi::OsString> = vec!["--listen".into(), "127.0.0.1:0".into()];
                    args.extend(arch.iter().chain(caches).map(Into::into));
                    args.push(root.parent().unwrap().join("current").into());
                    args
                },
            );
            let tmp = s.root.parent().unwrap().to_path_buf();
            // A directory link inside the root, switched.
            for _ in 0..2 {
                assert_eq!(s.get("/data/d.txt").assert_status(200).text(), "d1");
            }
            switch_link(&tmp.join("releases/v1/data"), "data-2");
            let seen = answers_within(&s, "/data/d.txt", 200, SEEN_WITHIN);
            assert!(seen.is_some() && eventually_text(&s, "/data/d.txt", "d2"), "{caches:?}: the directory switch was not seen");
            // The root link, switched.
            for _ in 0..2 {
                assert_eq!(s.get("/a.txt").assert_status(200).text(), "one");
            }
            switch_link(&tmp.join("current"), "releases/v2");
            assert!(eventually_text(&s, "/a.txt", "two"), "{caches:?}: the root switch was not seen");
            assert!(answers_within(&s, "/data/d.txt", 404, SEEN_WITHIN).is_some(), "v2 has no data/");
        }
    }
}

/// The real and effective uids of a process.
fn uids(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().skip(1).take(2).collect::<Vec<_>>().join(" ")
}

/// mp workers re-execute the server binary after the switch to nobody, which fails when a
/// directory above the binary is private (a checkout under a 0700 directory): such a run
/// skips mp, saying why.
fn mp_workers_cannot_start_as_nobody(arch: &[&str]) -> bool {
    let bin = std::path::PathBuf::from(binary());
    let skip = arch.contains(&"mp") && !others_can_execute(&bin);
    if skip {
        eprintln!(
            "skipped under mp: nobody cannot execute {} (a private directory above it)",
            bin.display()
        );
    }
    skip
}

/// `--user nobody`: bound as root, the server (and every mp worker) then runs as nobody, real
/// and effective, and serves; `--chroot` confines it to a directory; started as root without `--user` it says so on stderr unless
/// `--allow-root`; an unknown user is a one-line error with status 2.
#[test]
fn user_switch_after_binding() {
    if !running_as_root() {
        eprintln!("skipped: switching user needs the tests to run as root");
        return;
    }
    let nobody = std::process::Command::new("id").args(["-u", "nobody"]).output().unwrap();
    let nobody = String::from_utf8_lossy(&nobody.stdout).trim().to_string();
    for arch in [&["--arch", "amped"][..], &["--arch", "mp", "--processes", "2"][..]] {
        if mp_workers_cannot_start_as_nobody(arch) {
            continue;
        }
        let s = Server::start(arch, &["--user", "nobody"], |root| {
            set_mode(root.parent().unwrap(), 0o755);
            write(root, "a.txt", "A");
        });
        assert_eq!(s.get("/a.txt").assert_status(200).text(), "A");
        let mut pids = vec![s.pid()];
        pids.extend(child_pids(s.pid()));
        for pid in pids {
            assert_eq!(uids(pid), format!("{nobody} {nobody}"), "{arch:?} pid {pid}");
        }
        assert!(!s.stderr().contains("serving as root"), "{}", s.stderr());
    }
    // --chroot: the temporary directory becomes `/`; ROOT is found inside it.
    let s = Server::start_with(
        |root| {
            set_mode(root.parent().unwrap(), 0o755);
            write(root, "a.txt", "A");
            std::os::unix::fs::symlink("/etc/hostname", root.join("host")).unwrap();
        },
        |root| {
            let tmp = root.parent().unwrap();
            let args = ["--listen", "127.0.0.1:0", "--user", "nobody", "--follow-outside-symlinks"];
            let mut args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            args.extend(["--chroot".into(), tmp.into(), root.into()]);
            args
        },
    );
    assert_eq!(s.get("/a.txt").assert_status(200).text(), "A");
    assert_eq!(s.get("/host").status, 404, "/etc/hostname does not exist inside the chroot");
    let stdout = s.stdout_lines().join("\n");
    assert!(stdout.contains("serving /root with arch"), "{stdout}");
    let s = Server::start(&[], &[], |root| write(root, "a.txt", "A"));
    s.get("/a.txt").assert_status(200);
    let warn = "warn: serving as root; --user USER";
    assert!(s.stderr_with(warn).contains(warn), "{}", s.stderr());
    let s = Server::start(&[], &["--allow-root"], |root| write(root, "a.txt", "A"));
    s.get("/a.txt").assert_status(200);
    assert!(!s.stderr().contains("serving as root"), "{}", s.stderr());
    let (status, _, err) =
        run_expecting_exit(&["--user".into(), "no-such-user-amped".into(), ".".into()]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(err.trim(), "amped: --user no-such-user-amped: no such user");
}
