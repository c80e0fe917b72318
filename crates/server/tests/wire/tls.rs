//! HTTPS (`--tls-cert`, `--tls-key`, `--redirect-http`) under every architecture that serves
//! it, with rustls as the client and certificates made by rcgen for each test: bodies small
//! and large (cold, read by a helper) byte-exact over keep-alive, Range, HEAD, ALPN, TLS 1.2,
//! a certificate reloaded on SIGHUP (and a bad one refused), the redirect listener, and what
//! must not hang: plain HTTP on the TLS port, a handshake that never ends. The architectures
//! without TLS refuse it in one line.

use crate::amped_helpers::evict;
use crate::common::*;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Expands each test once per architecture that serves TLS.
macro_rules! tls_tests {
    ($( $(#[$meta:meta])* fn $name:ident($arch:ident) $body:block )*) => {
        tls_tests!(@archs { $( $(#[$meta])* fn $name($arch) $body )* }
            sped => ["--arch", "sped"],
            amped => ["--arch", "amped"],
            amped_x2 => ["--arch", "amped", "--instances", "2"],
            staged => ["--arch", "staged"],
            uring => ["--arch", "uring"],
        );
    };
    (@archs $tests:tt $($mod:ident => $args:tt,)*) => {
        $( mod $mod { #[allow(unused_imports)] use super::*; tls_tests!(@tests $args $tests); } )*
    };
    (@tests $args:tt { $( $(#[$meta:meta])* fn $name:ident($arch:ident) $body:block )* }) => {
        $( $(#[$meta])* #[test] fn $name() { let $arch: &[&str] = &$args; $body } )*
    };
}

const BIG_LEN: usize = 6 << 20;

/// A self-signed certificate for `localhost` and its key, as PEM files in `dir`.
struct Pair {
    cert: PathBuf,
    key: PathBuf,
    der: CertificateDer<'static>,
}

impl Pair {
    fn new(dir: &Path, name: &str) -> Pair {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
        Pair { cert, key, der: ck.cert.der().clone() }
    }

    /// The command-line options serving this pair.
    fn args(&self) -> Vec<OsString> {
        ["--tls-cert".into(), self.cert.clone().into(), "--tls-key".into(), self.key.clone().into()]
            .into()
    }
}

/// A client trusting `trusted`, offering h2 and http/1.1 (the server must pick http/1.1),
/// with the given protocol versions.
fn client(
    trusted: &[&CertificateDer<'static>],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for der in trusted {
        roots.add((*der).clone()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // Every connection makes a full handshake: a resumed session would report the
    // certificate of the session it resumes, not the one the server holds now.
    cfg.resumption = rustls::client::Resumption::disabled();
    Arc::new(cfg)
}

/// One HTTPS connection, handshake done.
struct TlsConn {
    s: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsConn {
    fn open(addr: SocketAddr, cfg: Arc<ClientConfig>) -> std::io::Result<TlsConn> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        let name = ServerName::try_from("localhost").unwrap();
        let conn = ClientConnection::new(cfg, name).map_err(std::io::Error::other)?;
        let mut s = StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(TlsConn { s, buf: Vec::new() })
    }

    fn send(&mut self, req: &str) {
        self.s.write_all(req.as_bytes()).unwrap();
        self.s.flush().unwrap();
    }

    /// The next response (`head`: it answers a HEAD).
    fn response(&mut self, head: bool) -> Response {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            if let Some((r, used)) = parse_response(&self.buf, head).unwrap() {
                self.buf.drain(..used);
                return r;
            }
            let n = self.s.read(&mut chunk).expect("read a response");
            assert!(
                n > 0,
                "closed before a whole response: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn get(&mut self, path: &str) -> Response {
        self.send(&get_req_keepalive(path));
        self.response(false)
    }

    /// The certificate the server presented.
    fn peer_cert(&self) -> Vec<u8> {
        self.s.conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// Whether the server closed cleanly (close_notify) after its last response.
    fn closed_cleanly(&mut self) -> bool {
        let mut rest = Vec::new();
        self.s.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

fn get_req_keepalive(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")
}

fn fill(root: &Path) {
    write(root, "small.txt", "hello over tls\n");
    write(root, "mid.bin", pseudo_random(100 << 10, 7));
    write(root, "big.bin", pseudo_random(BIG_LEN, 11));
}

/// A server on `arch` with a fresh certificate pair (beside its root) and `extra` options.
fn start(arch: &[&str], extra: &[&str]) -> (Server, Pair) {
    let mut pair = None;
    let s = Server::start_with(fill, |root| {
        let p = Pair::new(root.parent().unwrap(), "server");
        let mut args: Vec<OsString> = vec!["--listen".into(), "127.0.0.1:0".into()];
        args.extend(arch.iter().map(OsString::from));
        args.extend(p.args());
        args.extend(extra.iter().map(OsString::from));
        args.push(root.into());
        pair = Some(p);
        args
    });
    (s, pair.unwrap())
}

fn tls13(pair: &Pair) -> Arc<ClientConfig> {
    client(&[&pair.der], &[&rustls::version::TLS13])
}

/// The https URL's address and the redirect listener's, from the listening line.
fn redirect_addr(s: &Server) -> SocketAddr {
    let line = s.stdout_lines().into_iter().next().unwrap();
    let second = line.split(' ').nth(4).unwrap_or_else(|| panic!("{line}"));
    parse_listen_line(&format!("amped listening on {second}"))
}

tls_tests! {
    /// Small, 100 KiB and 6 MiB (cold: evicted first, so a job reads it) bodies byte-exact,
    /// several requests on one kept-alive connection; ALPN picked http/1.1.
    fn gets_are_byte_exact_over_keep_alive(arch) {
        let (s, pair) = start(arch, &["--stats-path", "/.amped/stats"]);
        assert!(s.stdout_lines()[0].starts_with("amped listening on https://127.0.0.1:"));
        evict(&s.path("big.bin"));
        let mut c = TlsConn::open(s.addr, tls13(&pair)).unwrap();
        assert_eq!(c.s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        for _ in 0..2 {
            assert_eq!(c.get("/small.txt").assert_status(200).text(), "hello over tls\n");
            assert_eq!(c.get("/mid.bin").assert_status(200).body, pseudo_random(100 << 10, 7));
            let big = c.get("/big.bin");
            big.assert_status(200);
            assert!(big.body == pseudo_random(BIG_LEN, 11), "6 MiB body differs");
        }
        let stats = c.get("/.amped/stats");
        let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
        assert!(counter(&v, "residency_misses") >= 1, "the cold file met the residency test: {v}");
        if !arch.contains(&"uring") {
            // The bytes are copied for TLS anyway: a helper reads a cold chunk into the
            // response's buffer (uring reads through its ring).
            assert!(counter(&v, "copy_fills") >= 1, "cold chunks are copy fills: {v}");
            assert_eq!(counter(&v, "pipe_fills"), 0, "{v}");
        }
        c.send("GET /small.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        c.response(false).assert_status(200);
        assert!(c.closed_cleanly(), "close_notify after Connection: close");
    }

    /// A cached file cut in place to nothing, asked for again at once: the answer's head
    /// still arrives over TLS before the connection closes (as over plain HTTP), or the
    /// current, empty version whole; and the next request gets the empty version.
    fn truncated_after_caching_is_answered(arch) {
        let (s, pair) = start(arch, &[]);
        let mut c = TlsConn::open(s.addr, tls13(&pair)).unwrap();
        assert!(c.get("/big.bin").assert_status(200).body == pseudo_random(BIG_LEN, 11));
        let f = std::fs::OpenOptions::new().write(true).open(s.path("big.bin")).unwrap();
        f.set_len(0).unwrap();
        drop(f);
        c.send("GET /big.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            match c.s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                // A close without close_notify ends the stream as an error; a hang fails.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => panic!("after {} bytes: {e}", got.len()),
            }
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "no answer, got {text:?}");
        let promised = format!("Content-Length: {BIG_LEN}\r\n");
        assert!(text.contains(&promised) || text.contains("Content-Length: 0\r\n"), "{text:?}");
        // The short answer dropped the stale entry: the next request, within the same
        // second, gets the file as it now is.
        let mut next = TlsConn::open(s.addr, tls13(&pair)).unwrap();
        let r = next.get("/big.bin");
        r.assert_status(200);
        assert_eq!(r.content_length(), 0, "the next request's length");
        assert!(r.body.is_empty(), "the next request's body: {} bytes", r.body.len());
    }

    /// Range and HEAD behave as over plain HTTP; TLS 1.2 is served too.
    fn range_head_and_tls12(arch) {
        let (s, pair) = start(arch, &[]);
        let mut c = TlsConn::open(s.addr, client(&[&pair.der], &[&rustls::version::TLS12])).unwrap();
        assert_eq!(c.s.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
        c.send("GET /big.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=1000000-1000099\r\n\r\n");
        let r = c.response(false);
        r.assert_status(206);
        assert_eq!(r.must("content-range"), format!("bytes 1000000-1000099/{BIG_LEN}"));
        assert_eq!(r.body, pseudo_random(BIG_LEN, 11)[1_000_000..1_000_100]);
        c.send("HEAD /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let h = c.response(true);
        h.assert_status(200);
        assert_eq!(h.content_length(), BIG_LEN as u64);
        assert_eq!(c.get("/small.txt").assert_status(200).text(), "hello over tls\n");
    }

    /// SIGHUP re-reads the certificate: new connections get the new one. A bad new pair
    /// (key of another certificate) keeps the running one, with an error line.
    fn sighup_reloads_the_certificate(arch) {
        let dir = temp_dir();
        let a = Pair::new(dir.path(), "a");
        let b = Pair::new(dir.path(), "b");
        let live = Pair::new(dir.path(), "live");
        for (from, to) in [(&a.cert, &live.cert), (&a.key, &live.key)] {
            std::fs::copy(from, to).unwrap();
        }
        let mut args: Vec<OsString> = vec!["--listen".into(), "127.0.0.1:0".into()];
        args.extend(arch.iter().map(OsString::from));
        args.extend(live.args());
        let s = Server::start_with(fill, |root| { args.push(root.into()); args });
        let both = client(&[&a.der, &b.der], &[&rustls::version::TLS13]);
        let mut kept = TlsConn::open(s.addr, both.clone()).unwrap();
        assert_eq!(kept.peer_cert(), a.der.to_vec());
        std::fs::copy(&b.cert, &live.cert).unwrap();
        std::fs::copy(&b.key, &live.key).unwrap();
        s.signal("HUP");
        assert!(eventually(Duration::from_secs(5), || {
            TlsConn::open(s.addr, both.clone()).is_ok_and(|c| c.peer_cert() == b.der.to_vec())
        }), "the new certificate is served after SIGHUP");
        assert_eq!(kept.get("/small.txt").assert_status(200).text(), "hello over tls\n");
        std::fs::copy(&a.cert, &live.cert).unwrap(); // b's key stays: they do not match
        s.signal("HUP");
        let err = s.stderr_with("keeping the running TLS certificate");
        assert!(err.contains("does not match") && err.contains("keeping the running TLS certificate"), "{err}");
        assert_eq!(TlsConn::open(s.addr, both).unwrap().peer_cert(), b.der.to_vec());
    }

    /// --redirect-http: plain requests get a 301 to the same host, path and query on the
    /// https port.
    fn redirect_listener_points_to_https(arch) {
        let (s, _pair) = start(arch, &["--redirect-http", "127.0.0.1:0"]);
        let plain = redirect_addr(&s);
        assert_ne!(plain, s.addr);
        let mut c = Conn::open(plain);
        c.send(format!("GET /a/b.txt?x=1&y=%20 HTTP/1.1\r\nHost: example.com:{}\r\n\r\n", plain.port()));
        let r = c.response();
        r.assert_status(301);
        let want = format!("https://example.com:{}/a/b.txt?x=1&y=%20", s.addr.port());
        assert_eq!(r.must("location"), want);
        c.send("HEAD / HTTP/1.1\r\nHost: [::1]\r\n\r\n");
        let h = c.head_response();
        h.assert_status(301);
        assert_eq!(h.must("location"), format!("https://[::1]:{}/", s.addr.port()));
    }

    /// Pipelined requests arriving in one TLS record larger than one read of the loop (8 KiB,
    /// the head limit): 64-byte requests, so the first read ends at a request's end and the
    /// loop has nothing left in hand while the rest waits decrypted in rustls — every one is
    /// answered all the same.
    fn pipelined_requests_beyond_one_read(arch) {
        let (s, pair) = start(arch, &["--keepalive-timeout", "30"]);
        let mut c = TlsConn::open(s.addr, tls13(&pair)).unwrap();
        let one = |i: usize| get_req_keepalive(&format!("/small.txt?{i:019}"));
        assert_eq!(one(0).len(), 64);
        c.send(&(0..200).map(one).collect::<String>());
        for i in 0..200 {
            let r = c.response(false);
            assert_eq!((i, r.status, r.text().as_str()), (i, 200, "hello over tls\n"));
        }
    }

    /// A client speaking plain HTTP to the TLS port is closed at once; the server serves on.
    fn plain_http_on_the_tls_port_is_closed(arch) {
        let (mut s, pair) = start(arch, &[]);
        let mut c = Conn::open(s.addr);
        c.send(get_req("/small.txt"));
        let t0 = Instant::now();
        c.assert_closed(Duration::from_secs(3));
        assert!(t0.elapsed() < Duration::from_secs(2), "closed without waiting for a timeout");
        assert!(!contains(c.pending(), b"hello"), "no content over plain HTTP");
        s.assert_alive();
        let mut t = TlsConn::open(s.addr, tls13(&pair)).unwrap();
        t.get("/small.txt").assert_status(200);
    }

    /// A handshake that never completes (a client that connects and says nothing, one that
    /// stops mid-ClientHello) is closed after --header-timeout.
    fn a_stalled_handshake_times_out(arch) {
        let (s, pair) = start(arch, &["--header-timeout", "2"]);
        let mut silent = Conn::open(s.addr);
        let mut partial = Conn::open(s.addr);
        partial.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]); // a record header, then nothing
        let t0 = Instant::now();
        silent.assert_closed(Duration::from_secs(5));
        partial.assert_closed(Duration::from_secs(5));
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(1700), "closed too early: {took:?}");
        TlsConn::open(s.addr, tls13(&pair)).unwrap().get("/small.txt").assert_status(200);
    }
}

/// Bad certificate input: one line on stderr and exit 2 (missing file, not PEM, key of
/// another certificate, half of the pair, an architecture without TLS).
#[test]
fn bad_tls_input_exits_2_with_one_line() {
    let dir = temp_dir();
    let a = Pair::new(dir.path(), "a");
    let b = Pair::new(dir.path(), "b");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let root = dir.path().to_path_buf();
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();
    let missing = dir.path().join("missing.crt");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--tls-cert".into(), p(&missing), "--tls-key".into(), p(&a.key)], "missing.crt"),
        (vec!["--tls-cert".into(), p(&junk), "--tls-key".into(), p(&a.key)], "no PEM certificate"),
        (vec!["--tls-cert".into(), p(&a.cert), "--tls-key".into(), p(&junk)], "no PEM private key"),
        (vec!["--tls-cert".into(), p(&a.cert), "--tls-key".into(), p(&b.key)], "does not match"),
        (vec!["--tls-cert".into(), p(&a.cert)], "--tls-cert needs --tls-key"),
        (vec!["--redirect-http".into(), ":0".into()], "--redirect-http needs --tls-cert"),
        (
            vec![
                "--arch".into(),
                "mt".into(),
                "--tls-cert".into(),
                p(&a.cert),
                "--tls-key".into(),
                p(&a.key),
            ],
            "--arch mt does not serve TLS",
        ),
    ];
    for (extra, want) in cases {
        let mut args: Vec<OsString> = vec!["--listen".into(), "127.0.0.1:0".into()];
        args.extend(extra.iter().map(OsString::from));
        args.push(root.clone().into());
        let (status, out, err) = run_expecting_exit(&args);
        assert_eq!(status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: one line, got {err:?}");
        assert!(err.starts_with("amped: ") && err.contains(want), "{extra:?}: {err}");
        assert!(out.is_empty(), "{extra:?} printed {out:?}");
    }
}

/// The architectures that do not serve TLS say so at start, in one line, with exit 2.
#[test]
fn architectures_without_tls_refuse_it() {
    let dir = temp_dir();
    let a = Pair::new(dir.path(), "a");
    for arch in ["mt", "pool", "mp"] {
        let mut args: Vec<OsString> =
            ["--listen", "127.0.0.1:0", "--arch", arch].map(OsString::from).into();
        args.extend(a.args());
        args.push(dir.path().into());
        let (status, _, err) = run_expecting_exit(&args);
        assert_eq!(status.code(), Some(2), "{arch}: {err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "amped: --arch {arch} does not serve TLS (--tls-cert): use sped, amped, staged or uring"
            )
        );
    }
}
