//! The soak's clients, each a thread looping until the soak's deadline: keep-alive and
//! `Connection: close` clients (GET, HEAD and Range over small, large and churn files), large
//! file clients, slow readers, slowloris connections (heads that complete, and heads that never
//! do), and malformed or oversize requests. Every answer is judged against the file's history
//! ([`super::content::judge`]) and counted in the shared [`Tally`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use amped_workload::rng::SplitMix64;

use super::Knobs;
use super::client::{Conn, Cut, Head, Pace, connect};
use super::content::{Answer, Asked, BodyCheck, History, Judgement, Outcome, judge};
use super::files::{FileSet, Kind};
use super::malformed::{CASES, Rule};
use super::tally::Tally;

/// What every client shares.
pub struct Shared<'a> {
    pub port: u16,
    pub t0: Instant,
    /// The deadline has passed: start nothing new (slow readers read the rest at full speed).
    pub stop: AtomicBool,
    /// Ctrl-C, or the drain took too long: abandon everything now, count nothing more.
    pub quit: &'a AtomicBool,
    pub files: &'a FileSet,
    pub tally: Mutex<Tally>,
    pub knobs: &'a Knobs,
}

impl Shared<'_> {
    /// Seconds since the soak began.
    pub fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.quit.load(Ordering::Relaxed)
    }

    fn io_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.knobs.io_timeout_s)
    }

    fn conn(&self, rcvbuf: Option<usize>) -> Option<Conn<'_>> {
        match connect(self.port, rcvbuf) {
            Ok(s) => Some(Conn::new(s, self.quit, self.io_timeout())),
            Err(e) => {
                let j =
                    Judgement { outcome: Outcome::Reset, reason: "connect failed", stale_s: None };
                self.record("connect", &j, 0, &e.to_string());
                // Do not spin against a server that refuses connections.
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        }
    }

    fn record(&self, client: &str, j: &Judgement, bytes: u64, what: &str) {
        let t = self.t();
        if let Ok(mut tally) = self.tally.lock() {
            tally.record(client, j, bytes, what, t);
        }
    }
}

/// One request for a file.
#[derive(Clone, Copy, Debug)]
struct Req {
    file: usize,
    head: bool,
    range: Option<(u64, u64)>,
    close: bool,
}

impl Req {
    fn bytes(&self, files: &FileSet) -> Vec<u8> {
        let mut r = format!(
            "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: amplab-soak\r\n",
            if self.head { "HEAD" } else { "GET" },
            files.paths[self.file]
        );
        if let Some((first, last)) = self.range {
            r.push_str(&format!("Range: bytes={first}-{last}\r\n"));
        }
        if self.close {
            r.push_str("Connection: close\r\n");
        }
        r.push_str("\r\n");
        r.into_bytes()
    }
}

/// How a request ended, for the caller: go on with the connection, drop it, or resend.
enum Next {
    KeepGoing,
    Drop,
    /// A kept-alive connection was closed before any byte of the answer: resend on a new one.
    Retry,
}

/// Reads the answer to `req` (already sent at `start`), judges and counts it.
fn receive(
    sh: &Shared<'_>,
    conn: &mut Conn<'_>,
    client: &str,
    req: Req,
    start: f64,
    pace: Option<Pace<'_>>,
) -> Next {
    let what = format!("{}{}", sh.files.paths[req.file], if req.head { " HEAD" } else { "" });
    let head = match conn.read_head() {
        Ok(h) => h,
        Err(Cut::Quit) => return Next::Drop,
        Err(Cut::Closed | Cut::Reset(_)) if conn.answers > 0 => return Next::Retry,
        Err(cut) => {
            no_answer(sh, client, req, start, &cut, &what);
            return Next::Drop;
        }
    };
    conn.answers += 1;
    let head_at = sh.t();
    let offset = match head.content_range {
        Some((first, _, _)) if head.status == 206 => first,
        _ => 0,
    };
    let mut check = BodyCheck::new(sh.files.history(req.file).seeds_by(head_at), offset);
    let body = conn.read_body(&head, req.head, pace, &mut |b| check.feed(b));
    let complete = match body {
        Ok(()) => true,
        Err(Cut::Quit) => return Next::Drop,
        Err(Cut::Timeout) => {
            sh.record(client, &cut_judgement(&Cut::Timeout, ""), check.received, &what);
            return Next::Drop;
        }
        Err(_) => false,
    };
    let got = Got { head: &head, check: &check, complete, head_at, end: sh.t() };
    count_answer(sh, client, req, start, &got, &what);
    if complete && !head.close && !req.close { Next::KeepGoing } else { Next::Drop }
}

/// An answer as received: its head (at `head_at`), its body's check, whether the body came
/// whole, and when it ended.
struct Got<'a> {
    head: &'a Head,
    check: &'a BodyCheck,
    complete: bool,
    head_at: f64,
    end: f64,
}

/// Judges an answer to `req` (sent at `start`) against the file's history and counts it: its
/// checked bytes, its latency (small files of normal clients), and the judgement.
fn count_answer(sh: &Shared<'_>, client: &str, req: Req, start: f64, got: &Got, what: &str) {
    let Got { head, check, complete, head_at, end } = *got;
    let answer = Answer {
        status: head.status,
        declared: if req.head || head.content_length.is_some() {
            head.content_length.unwrap_or(0)
        } else {
            check.received
        },
        content_range: head.content_range,
        complete,
        seeds: check.matches().to_vec(),
        received: check.received,
    };
    let history = sh.files.history(req.file);
    let asked = Asked { head: req.head, range: req.range };
    let j = judge(&history, asked, &answer, start, end, sh.knobs.grace_s);
    if let Ok(mut t) = sh.tally.lock() {
        if matches!(head.status, 200 | 206) && !req.head {
            t.checked(check.received);
        }
        // Latency of normal clients only (a slowloris head takes seconds by design).
        let normal = matches!(client, "keep-alive" | "close");
        if normal && j.outcome == Outcome::Ok && sh.files.kinds[req.file] == Kind::Small {
            t.latency((end - start) * 1000.0);
        }
        let mut said = format!("{what} → {}", head.status);
        if j.outcome == Outcome::Mismatch {
            said.push_str(&mismatch_detail(head, check, &history, complete, start, head_at));
        }
        t.record(client, &j, check.received, &said, end);
    }
}

/// Records a request that got no head: closed before answering is right if the file shrank
/// under the request (a server that finds it short before sending anything may close).
fn no_answer(sh: &Shared<'_>, client: &str, req: Req, start: f64, cut: &Cut, what: &str) {
    let j = match cut {
        Cut::Closed | Cut::Reset(_)
            if sh.files.history(req.file).truncated_during(start - sh.knobs.grace_s, sh.t()) =>
        {
            Judgement {
                outcome: Outcome::ExpectedError,
                reason: "closed before answering: the file was truncated under it",
                stale_s: None,
            }
        }
        _ => cut_judgement(cut, "no answer"),
    };
    sh.record(client, &j, 0, what);
}

/// What a mismatched answer looked like, for its example line: its framing, the bytes
/// received, the longest run that matched a version, and the file's history.
fn mismatch_detail(
    head: &Head,
    check: &BodyCheck,
    history: &History,
    complete: bool,
    start: f64,
    head_at: f64,
) -> String {
    let lost = check.longest_lost.map_or(String::new(), |(seed, n)| {
        let v = history
            .versions
            .iter()
            .filter(|v| v.seed == seed)
            .map(|v| {
                format!(
                    "{}@{:.3}-{}",
                    v.len,
                    v.born,
                    v.died.map_or("now".into(), |d| format!("{d:.3}"))
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        format!("; longest match {n} bytes with a version of length(s) {v}")
    });
    format!(
        " [Content-Length {:?}, Content-Range {:?}, {} bytes received{}, asked at {start:.3}, head at {head_at:.3}{lost}; history {}]",
        head.content_length,
        head.content_range,
        check.received,
        if complete { "" } else { ", cut short" },
        history
            .versions
            .iter()
            .map(|v| format!("{:x}:{}@{:.3}", v.seed & 0xffff, v.len, v.born))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The judgement of an answer that never came whole.
fn cut_judgement(cut: &Cut, what: &'static str) -> Judgement {
    let (outcome, reason) = match cut {
        Cut::Timeout => (Outcome::Timeout, "no progress for the I/O timeout"),
        Cut::Garbage => (Outcome::UnexpectedStatus, "not an HTTP answer"),
        Cut::Closed | Cut::Reset(_) | Cut::Quit => (Outcome::Reset, what),
    };
    Judgement { outcome, reason, stale_s: None }
}

/// The mix a file client draws from.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Weights of small, large and churn files.
    pub weights: [u64; 3],
    /// Percent of HEAD requests and of Range requests (on large and churn files).
    pub head_pct: u64,
    pub range_pct: u64,
    /// `Connection: close` on every request.
    pub close: bool,
}

/// Keep-alive clients (many requests per connection).
pub const KEEPALIVE: Mix = Mix { weights: [60, 10, 30], head_pct: 10, range_pct: 15, close: false };
/// One request per connection.
pub const CLOSE: Mix = Mix { close: true, ..KEEPALIVE };
/// Large and churn files only, at full speed.
pub const LARGE: Mix = Mix { weights: [0, 50, 50], head_pct: 0, range_pct: 10, close: false };

fn pick(sh: &Shared<'_>, rng: &mut SplitMix64, mix: &Mix) -> Req {
    let total: u64 = mix.weights.iter().sum();
    let mut r = rng.below(total.max(1));
    let mut kind = Kind::Churn;
    for (w, k) in mix.weights.iter().zip([Kind::Small, Kind::Large, Kind::Churn]) {
        if r < *w {
            kind = k;
            break;
        }
        r -= w;
    }
    let pool = sh.files.of_kind(kind);
    let file = pool[rng.below(pool.len() as u64) as usize];
    let head = rng.below(100) < mix.head_pct;
    let len = sh.files.current_len(file);
    let range =
        (!head && kind != Kind::Small && rng.below(100) < mix.range_pct && len > 0).then(|| {
            let first = rng.below(len);
            (first, first + rng.below(256 << 10))
        });
    Req { file, head, range, close: mix.close }
}

/// A client drawing from `mix`, with up to `knobs.requests_per_conn` requests per
/// connection, until the deadline.
pub fn file_client(sh: &Shared<'_>, name: &str, mix: Mix, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    while !sh.stopping() {
        let Some(mut conn) = sh.conn(None) else { continue };
        let n = 1 + rng.below(u64::from(sh.knobs.requests_per_conn));
        for _ in 0..n {
            if sh.stopping() {
                break;
            }
            let req = pick(sh, &mut rng, &mix);
            match one(sh, &mut conn, name, req, None) {
                Next::KeepGoing => {}
                Next::Drop => break,
                Next::Retry => {
                    if let Ok(mut t) = sh.tally.lock() {
                        t.keepalive_retries += 1;
                    }
                    let Some(mut fresh) = sh.conn(None) else { break };
                    if !matches!(one(sh, &mut fresh, name, req, None), Next::KeepGoing) {
                        break;
                    }
                    conn = fresh;
                }
            }
        }
    }
}

/// Sends `req` on `conn` and reads its answer.
fn one(
    sh: &Shared<'_>,
    conn: &mut Conn<'_>,
    client: &str,
    req: Req,
    pace: Option<Pace<'_>>,
) -> Next {
    let start = sh.t();
    if let Err(cut) = conn.send(&req.bytes(sh.files)) {
        if conn.answers > 0 {
            return Next::Retry;
        }
        sh.record(
            client,
            &cut_judgement(&cut, "closed while sending"),
            0,
            &sh.files.paths[req.file],
        );
        return Next::Drop;
    }
    receive(sh, conn, client, req, start, pace)
}

/// Reads a large or churn file at a few KB/s for a while, then the rest at full speed; its
/// receive buffer is small, so the server holds the unsent bytes.
pub fn slow_reader(sh: &Shared<'_>, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let k = sh.knobs;
    while !sh.stopping() {
        let Some(mut conn) = sh.conn(Some(4096)) else { continue };
        let mix = Mix { weights: [0, 1, 1], head_pct: 0, range_pct: 0, close: true };
        let req = pick(sh, &mut rng, &mix);
        let rate = k.slow_rate.0 + (k.slow_rate.1 - k.slow_rate.0) * rng.next_f64();
        let phase = k.slow_phase_s.0 + (k.slow_phase_s.1 - k.slow_phase_s.0) * rng.next_f64();
        let pace = Pace {
            bytes_per_s: rate,
            until: Instant::now() + Duration::from_secs_f64(phase),
            hurry: &sh.stop,
        };
        one(sh, &mut conn, "slow-reader", req, Some(pace));
    }
}

/// Sends `bytes` one at a time, `every` apart, until done; `Err` when the server answered
/// or closed first (or the soak is being abandoned).
fn trickle(sh: &Shared<'_>, conn: &mut Conn<'_>, bytes: &[u8], every: Duration) -> Result<(), Cut> {
    for (i, b) in bytes.iter().enumerate() {
        if sh.quit.load(Ordering::Relaxed) {
            return Err(Cut::Quit);
        }
        if sh.stop.load(Ordering::Relaxed) {
            return conn.send(&bytes[i..]);
        }
        conn.send(std::slice::from_ref(b))?;
        if i + 1 == bytes.len() {
            break; // a whole head: its answer is read by the caller
        }
        std::thread::sleep(every);
        if conn.peek_closed_or_answered() {
            return Err(Cut::Closed);
        }
    }
    Ok(())
}

/// What became of a head the server cut off: the status it answered, or a close.
fn cut_off(
    sh: &Shared<'_>,
    conn: &mut Conn<'_>,
    client: &str,
    reason_status: &'static str,
    reason_close: &'static str,
) {
    let (outcome, reason) = match conn.read_head() {
        Ok(h) if h.status >= 400 => (Outcome::ExpectedError, reason_status),
        Ok(_) => (Outcome::UnexpectedStatus, "answered a head that was not whole"),
        Err(Cut::Quit) => return,
        Err(Cut::Timeout) => (Outcome::Timeout, "no answer and no close"),
        Err(_) => (Outcome::ExpectedError, reason_close),
    };
    sh.record(client, &Judgement { outcome, reason, stale_s: None }, 0, "slowloris");
}

/// A head sent byte by byte (it completes well within a 10 s header timeout), then its
/// answer read and checked.
pub fn slowloris(sh: &Shared<'_>, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let every = Duration::from_millis(sh.knobs.slowloris_byte_ms);
    while !sh.stopping() {
        let Some(mut conn) = sh.conn(None) else { continue };
        let pool = sh.files.of_kind(Kind::Small);
        let req = Req {
            file: pool[rng.below(pool.len() as u64) as usize],
            head: false,
            range: None,
            close: true,
        };
        let start = sh.t();
        match trickle(sh, &mut conn, &req.bytes(sh.files), every) {
            Ok(()) => {
                receive(sh, &mut conn, "slowloris", req, start, None);
            }
            Err(Cut::Quit) => return,
            Err(_) => cut_off(
                sh,
                &mut conn,
                "slowloris",
                "slow head refused with an error status",
                "slow head closed",
            ),
        }
    }
}

/// A head that never ends (a header line at a time, byte by byte): the server should cut it
/// off (an error status or a close); still open at `knobs.endless_cap_s` is a timeout.
pub fn endless_slowloris(sh: &Shared<'_>) {
    let every = Duration::from_millis(sh.knobs.slowloris_byte_ms);
    let cap = Duration::from_secs_f64(sh.knobs.endless_cap_s);
    while !sh.stopping() {
        let Some(mut conn) = sh.conn(None) else { continue };
        let opened = Instant::now();
        let mut result =
            trickle(sh, &mut conn, b"GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n", every);
        let mut line = 0u64;
        while result.is_ok() {
            if sh.stopping() {
                if let Ok(mut t) = sh.tally.lock() {
                    t.open_at_end += 1;
                }
                return;
            }
            if opened.elapsed() >= cap {
                let j = Judgement {
                    outcome: Outcome::Timeout,
                    reason: "endless head still open at the cap",
                    stale_s: None,
                };
                sh.record("slowloris-endless", &j, 0, "slowloris");
                break;
            }
            line += 1;
            result = trickle(sh, &mut conn, format!("X-Slow-{line}: y\r\n").as_bytes(), every);
        }
        match result {
            Ok(()) => {}
            Err(Cut::Quit) => return,
            Err(_) if sh.stop.load(Ordering::Relaxed) && conn.pending() == 0 => {
                if let Ok(mut t) = sh.tally.lock() {
                    t.open_at_end += 1;
                }
                return;
            }
            Err(_) => cut_off(
                sh,
                &mut conn,
                "slowloris-endless",
                "endless head refused with an error status",
                "endless head closed",
            ),
        }
    }
}

/// Malformed and oversize requests, one per connection, in turn.
pub fn malformed(sh: &Shared<'_>, seed: u64) {
    let mut i = seed as usize;
    while !sh.stopping() {
        let case = &CASES[i % CASES.len()];
        i += 1;
        let Some(mut conn) = sh.conn(None) else { continue };
        let sent = conn.send(&(case.bytes)());
        if case.half_close {
            conn.finish_sending();
        }
        let answer = conn.read_head();
        let label = match &answer {
            Ok(h) => h.status.to_string(),
            Err(Cut::Timeout) => "timeout".into(),
            Err(_) => "close".into(),
        };
        let (outcome, reason) = match (answer, case.rule) {
            (Err(Cut::Quit), _) => return,
            (Err(Cut::Timeout), _) => (Outcome::Timeout, "no answer and no close"),
            (Err(_), _) if sent.is_err() => {
                (Outcome::ExpectedError, "closed while the request was sent")
            }
            (Err(_), _) => (Outcome::ExpectedError, "closed without an answer"),
            (Ok(h), _) if h.status >= 400 => {
                (Outcome::ExpectedError, "refused with an error status")
            }
            (Ok(_), Rule::AnyAnswer) => (Outcome::Ok, "served (allowed for this case)"),
            (Ok(h), Rule::Refuse) => (Outcome::UnexpectedStatus, status_class(&h)),
        };
        let what = format!("malformed {}", case.name);
        sh.record("malformed", &Judgement { outcome, reason, stale_s: None }, 0, &what);
        if let Ok(mut t) = sh.tally.lock() {
            *t.malformed.entry(case.name.into()).or_default().entry(label).or_default() += 1;
        }
        std::thread::sleep(Duration::from_millis(sh.knobs.malformed_pause_ms));
    }
}

fn status_class(h: &Head) -> &'static str {
    match h.status {
        200..=299 => "accepted a malformed request (2xx)",
        300..=399 => "redirected a malformed request (3xx)",
        _ => "answered a malformed request with an informational status",
    }
}
