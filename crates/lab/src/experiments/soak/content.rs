//! What the soak's files contain and which answers are right.
//!
//! Every file's bytes are a function of a seed and the offset ([`byte_words`]: word `k` of a
//! version is SplitMix64's output for `seed + (k + 1)·γ`), so a version is kept as its seed and
//! length, never as its bytes, and any slice of it — a body, a range, a prefix — is checked
//! where it lies. [`History`] records every version a path had, with when it appeared and when
//! it was replaced or removed; [`BodyCheck`] follows a body as it arrives, keeping the seeds
//! whose bytes it still matches; [`judge`] then says whether the answer is one the file could
//! have given during the request (`Ok`), one it could only have given earlier (`Stale`: a cache
//! serving a replaced version or a cached 404), or none at all (`Mismatch`: torn, mixed, padded
//! or foreign bytes).
//!
//! Times are seconds since the soak of one server began. The window of a request is
//! `[start − grace, end]`: `grace` is the staleness a server documents (amped: one second), so
//! an answer from a version replaced just before the request is not called stale.

use amped_workload::rng::SplitMix64;

/// The SplitMix64 increment.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The 8-byte word `k` of the version with `seed`: the (k+1)-th output of SplitMix64 from
/// `seed`, reached directly (its state after k steps is `seed + k·γ`).
fn word(seed: u64, k: u64) -> [u8; 8] {
    SplitMix64::new(seed.wrapping_add(k.wrapping_mul(GAMMA))).next_u64().to_le_bytes()
}

/// The bytes `[offset, offset + out.len())` of the version with `seed`.
pub fn byte_words(seed: u64, offset: u64, out: &mut [u8]) {
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let w = word(seed, pos / 8);
        let from = (pos % 8) as usize;
        let n = (8 - from).min(out.len() - i);
        out[i..i + n].copy_from_slice(&w[from..from + n]);
        i += n;
        pos += n as u64;
    }
}

/// Whether `bytes` are the version's bytes at `offset`.
pub fn matches(seed: u64, offset: u64, bytes: &[u8]) -> bool {
    let mut buf = [0u8; 4096];
    bytes.chunks(buf.len()).enumerate().all(|(i, chunk)| {
        let want = &mut buf[..chunk.len()];
        byte_words(seed, offset + (i * 4096) as u64, want);
        want == chunk
    })
}

/// One state a path was in.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    pub seed: u64,
    pub len: u64,
    /// The file was being written: a server may have seen (and served) any prefix of it.
    pub prefix_ok: bool,
    /// When it appeared (before the call that made it).
    pub born: f64,
    /// When it was replaced, truncated or removed (after the call), if it was.
    pub died: Option<f64>,
}

impl Version {
    /// Whether it existed at some time in `[a, b]`.
    fn during(&self, a: f64, b: f64) -> bool {
        self.born <= b && self.died.is_none_or(|d| d > a)
    }

    /// Whether a complete body of `n` bytes with its seed is this version.
    fn fits(&self, n: u64) -> bool {
        n == self.len || (self.prefix_ok && n <= self.len)
    }
}

/// Every version a path has had, oldest first; gaps between them are times it was absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub versions: Vec<Version>,
    /// The path has never been removed (a static file).
    pub fixed: bool,
}

impl History {
    /// A path that holds one version for ever.
    pub fn fixed(seed: u64, len: u64) -> History {
        History {
            versions: vec![Version { seed, len, prefix_ok: false, born: 0.0, died: None }],
            fixed: true,
        }
    }

    /// The version now there, if any.
    pub fn current(&self) -> Option<&Version> {
        self.versions.last().filter(|v| v.died.is_none())
    }

    /// Ends the current version at `t` (replaced, truncated or removed).
    pub fn end(&mut self, t: f64) {
        if let Some(v) = self.versions.last_mut().filter(|v| v.died.is_none()) {
            v.died = Some(t);
        }
    }

    /// A new current version (ending the one before, if any, at `t`).
    pub fn push(&mut self, seed: u64, len: u64, prefix_ok: bool, t: f64) {
        self.end(t);
        self.versions.push(Version { seed, len, prefix_ok, born: t, died: None });
    }

    /// The distinct seeds of versions that had appeared by `t` (those a body whose head
    /// arrived at `t` may come from: a server opens the file before it sends the head).
    pub fn seeds_by(&self, t: f64) -> Vec<u64> {
        let mut seeds: Vec<u64> = Vec::new();
        for v in self.versions.iter().filter(|v| v.born <= t) {
            if !seeds.contains(&v.seed) {
                seeds.push(v.seed);
            }
        }
        seeds
    }

    /// Whether the file was truncated in place (a version followed by a shorter one of the
    /// same bytes) at some time in `[a, b]`.
    pub fn truncated_during(&self, a: f64, b: f64) -> bool {
        self.versions
            .windows(2)
            .any(|w| w[1].seed == w[0].seed && w[1].len < w[0].len && (a..=b).contains(&w[1].born))
    }

    /// The latest time at or before `b` the path was absent (no version), if ever.
    fn last_absent(&self, b: f64) -> Option<f64> {
        if self.fixed {
            return None;
        }
        // Gaps: before the first version, and from each removal to the next version.
        let first = self.versions.first().map_or(f64::INFINITY, |v| v.born);
        let before = (first > 0.0).then_some((0.0, first));
        let removals = self.versions.iter().enumerate().filter_map(|(i, v)| {
            let next = self.versions.get(i + 1).map_or(f64::INFINITY, |n| n.born);
            v.died.filter(|d| *d < next).map(|d| (d, next))
        });
        before
            .into_iter()
            .chain(removals)
            .filter(|(from, _)| *from <= b)
            .map(|(_, to)| to.min(b))
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
    }

    /// The latest time a version satisfying `ok` existed at or before `b`: `b` itself when it
    /// existed within `[a, b]`.
    fn latest_with(&self, a: f64, b: f64, ok: impl Fn(&Version) -> bool) -> Option<f64> {
        self.versions
            .iter()
            .filter(|v| ok(v) && v.born <= b)
            .map(|v| if v.during(a, b) { b } else { v.died.unwrap_or(b) })
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
    }
}

/// A seed a body still matches, and the first offset (in the file) where the body had a zero
/// byte instead of the seed's, if any: bytes a truncation zeroed after a zero-copy send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    pub seed: u64,
    pub zeros_from: Option<u64>,
}

/// A body followed as it arrives: the seeds it still matches.
#[derive(Clone, Debug)]
pub struct BodyCheck {
    matches: Vec<Match>,
    /// Offset in the file of the next byte.
    offset: u64,
    /// Bytes seen.
    pub received: u64,
    /// The longest run any eliminated seed matched: (seed, body bytes it matched).
    pub longest_lost: Option<(u64, u64)>,
}

impl BodyCheck {
    /// A body whose first byte is the file's byte at `offset`, from one of `seeds`.
    pub fn new(seeds: Vec<u64>, offset: u64) -> BodyCheck {
        let matches = seeds.into_iter().map(|seed| Match { seed, zeros_from: None }).collect();
        BodyCheck { matches, offset, received: 0, longest_lost: None }
    }

    /// The next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        let at = self.offset;
        let (received, mut lost) = (self.received, self.longest_lost);
        let mut want = Vec::new();
        self.matches.retain_mut(|m| {
            if matches(m.seed, at, bytes) {
                return true;
            }
            want.resize(bytes.len(), 0);
            byte_words(m.seed, at, &mut want);
            for (i, (&w, &b)) in want.iter().zip(bytes).enumerate() {
                if w == b {
                    continue;
                }
                if b != 0 {
                    let same = received + i as u64;
                    if lost.is_none_or(|(_, n)| same > n) {
                        lost = Some((m.seed, same));
                    }
                    return false;
                }
                m.zeros_from.get_or_insert(at + i as u64);
            }
            true
        });
        self.longest_lost = lost;
        self.offset += bytes.len() as u64;
        self.received += bytes.len() as u64;
    }

    /// The seeds every byte so far matched (or matched but for zeros).
    pub fn matches(&self) -> &[Match] {
        &self.matches
    }
}

/// The request as sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Asked {
    pub head: bool,
    /// `Range: bytes=first-last` (inclusive), if asked.
    pub range: Option<(u64, u64)>,
}

/// What came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// Content-Length (or, for a body delimited otherwise, the bytes received).
    pub declared: u64,
    /// A 206's `Content-Range: bytes first-last/total`.
    pub content_range: Option<(u64, u64, u64)>,
    /// The body arrived whole (all `declared` bytes; HEAD: no body expected).
    pub complete: bool,
    /// Seeds every body byte matched, or matched but for zeros (ignored for HEAD and errors).
    pub seeds: Vec<Match>,
    pub received: u64,
}

/// How one request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Right answer, every byte from a version there during the request.
    Ok,
    /// An answer the file could only have given earlier (a replaced version, a cached 404).
    Stale,
    /// An error status, or a close, where one is right (404 of a removed file, 400 for a
    /// malformed request, a body cut short by a truncation).
    ExpectedError,
    /// A status that is wrong here (5xx, a 404 for a file that was there, 200 for a malformed
    /// request).
    UnexpectedStatus,
    /// No progress for the I/O timeout.
    Timeout,
    /// The connection was reset or closed before a complete answer, unexpectedly.
    Reset,
    /// Body bytes (or a length) that no version of the file ever had.
    Mismatch,
    /// The bytes of a version but for zeros from where a truncation during the request cut
    /// the file: the kernel zeroed pages a zero-copy send (sendfile) had queued but not yet
    /// delivered. No server using sendfile can prevent it; reported, not counted against it.
    Zeroed,
}

impl Outcome {
    /// Every outcome, in report order.
    pub const ALL: [Outcome; 8] = [
        Outcome::Ok,
        Outcome::Stale,
        Outcome::ExpectedError,
        Outcome::UnexpectedStatus,
        Outcome::Timeout,
        Outcome::Reset,
        Outcome::Mismatch,
        Outcome::Zeroed,
    ];

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Stale => "stale",
            Outcome::ExpectedError => "expected_error",
            Outcome::UnexpectedStatus => "unexpected_status",
            Outcome::Timeout => "timeout",
            Outcome::Reset => "reset",
            Outcome::Mismatch => "mismatch",
            Outcome::Zeroed => "zeroed",
        }
    }

    /// Whether this outcome counts against a server.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::UnexpectedStatus | Outcome::Timeout | Outcome::Reset | Outcome::Mismatch
        )
    }
}

/// A judged answer: the outcome, why, and for a stale one how old the state it showed was
/// (seconds before the request's window).
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub reason: &'static str,
    pub stale_s: Option<f64>,
}

fn verdict(outcome: Outcome, reason: &'static str) -> Judgement {
    Judgement { outcome, reason, stale_s: None }
}

/// When a state that would explain an answer last held, relative to the window `[a, b]`.
enum When {
    /// Within the window.
    During,
    /// Only before it, this many seconds before `a`.
    Before(f64),
    Never,
}

fn when(latest: Option<f64>, a: f64) -> When {
    match latest {
        Some(t) if t >= a => When::During,
        Some(t) => When::Before(a - t),
        None => When::Never,
    }
}

/// `right` during the window, stale before it, `wrong` never.
fn timed(latest: Option<f64>, a: f64, right: Judgement, wrong: Judgement) -> Judgement {
    match when(latest, a) {
        When::During => right,
        When::Before(age) => Judgement {
            outcome: Outcome::Stale,
            reason: "a state the file had before the request",
            stale_s: Some(age),
        },
        When::Never => wrong,
    }
}

/// Judges an answer for a file with history `h`, asked at `start` and finished at `end`.
pub fn judge(
    h: &History,
    asked: Asked,
    answer: &Answer,
    start: f64,
    end: f64,
    grace: f64,
) -> Judgement {
    use Outcome::*;
    let a = start - grace;
    match answer.status {
        200 if asked.head => {
            let n = answer.declared;
            timed(
                h.latest_with(a, end, |v| v.fits(n)),
                a,
                verdict(Ok, "HEAD length of a version"),
                verdict(Mismatch, "HEAD length of no version"),
            )
        }
        200 | 206 => judge_body(h, asked, answer, a, end),
        404 => timed(
            h.last_absent(end),
            a,
            verdict(ExpectedError, "404 while the file was removed"),
            verdict(UnexpectedStatus, "404 for a file that was there"),
        ),
        416 => {
            let first = asked.range.map_or(u64::MAX, |r| r.0);
            timed(
                h.latest_with(a, end, |v| v.len <= first),
                a,
                verdict(ExpectedError, "416 for a range past a truncated file"),
                verdict(UnexpectedStatus, "416 for a satisfiable range"),
            )
        }
        s if s >= 500 => verdict(UnexpectedStatus, "server error"),
        _ => verdict(UnexpectedStatus, "status not expected for a file"),
    }
}

/// A 200 or 206 with a body.
fn judge_body(h: &History, asked: Asked, answer: &Answer, a: f64, end: f64) -> Judgement {
    use Outcome::*;
    // The file's length the answer claims (206: its total), and where its body ends.
    let (total, body_end) = match (answer.status, answer.content_range) {
        (206, Some((first, last, total))) => {
            if asked.range.is_none_or(|(f, _)| f != first) || last < first {
                return verdict(Mismatch, "206 for a range not asked");
            }
            (Some(total), last + 1)
        }
        (206, None) => return verdict(Mismatch, "206 without a Content-Range"),
        _ => (None, answer.declared),
    };
    if answer.received > 0 && answer.seeds.is_empty() {
        return verdict(Mismatch, "bytes of no version");
    }
    let matched = |v: &Version, clean: bool| {
        answer.received == 0
            || answer.seeds.iter().any(|m| m.seed == v.seed && (!clean || m.zeros_from.is_none()))
    };
    if !answer.complete {
        // Cut short: right only if the file was shorter than promised at some point.
        return timed(
            h.latest_with(a, end, |v| matched(v, false) && v.len < body_end),
            a,
            verdict(ExpectedError, "body cut short by a truncation"),
            verdict(Reset, "closed before the end of the body"),
        );
    }
    let fits = |v: &Version| v.fits(total.unwrap_or(answer.received));
    let clean = h.latest_with(a, end, |v| matched(v, true) && fits(v));
    if clean.is_some() {
        return timed(clean, a, verdict(Ok, "bytes of a version"), verdict(Mismatch, ""));
    }
    // Zeros where a truncation during the request cut a version that fits.
    let zeroed = answer.seeds.iter().any(|m| {
        m.zeros_from.is_some_and(|z| {
            let of_seed = |v: &Version| v.seed == m.seed;
            h.versions.iter().any(|v| of_seed(v) && fits(v))
                && h.versions
                    .iter()
                    .any(|v| of_seed(v) && v.len <= z && (a..=end).contains(&v.born))
        })
    });
    if zeroed {
        return verdict(Zeroed, "zeros from where a truncation during the request cut the file");
    }
    verdict(
        Mismatch,
        if answer.seeds.iter().any(|m| m.zeros_from.is_some()) {
            "zeros no truncation explains"
        } else {
            "length of no version"
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(seed: u64, offset: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        byte_words(seed, offset, &mut v);
        v
    }

    fn answer(status: u16, h: &History, t: f64, body: &[u8], offset: u64) -> Answer {
        let mut c = BodyCheck::new(h.seeds_by(t), offset);
        for piece in body.chunks(1000) {
            c.feed(piece);
        }
        let seeds = c.matches().to_vec();
        Answer {
            status,
            declared: body.len() as u64,
            content_range: None,
            complete: true,
            seeds,
            received: c.received,
        }
    }

    const GET: Asked = Asked { head: false, range: None };

    #[test]
    fn content_is_addressable_by_offset() {
        let whole = bytes(7, 0, 100);
        assert_eq!(bytes(7, 13, 50), whole[13..63]);
        assert!(matches(7, 5, &whole[5..99]));
        assert!(!matches(8, 0, &whole));
        let big = bytes(7, 0, 10_000);
        assert!(matches(7, 3, &big[3..]));
    }

    #[test]
    fn a_torn_or_mixed_answer_is_flagged() {
        // Version 1 (seed 1, 6000 bytes) replaced at t=10 by version 2 (seed 2, 6000 bytes).
        let mut h = History::default();
        h.push(1, 6000, false, 0.0);
        h.push(2, 6000, false, 10.0);
        let old = bytes(1, 0, 6000);
        let new = bytes(2, 0, 6000);
        // Whole versions during the change: both fine.
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 10.0, &old, 0), 9.5, 10.5, 1.0).outcome,
            Outcome::Ok
        );
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 10.0, &new, 0), 9.5, 10.5, 1.0).outcome,
            Outcome::Ok
        );
        // Mixed: the first half of one, the second of the other.
        let mut mixed = old[..3000].to_vec();
        mixed.extend_from_slice(&new[3000..]);
        let j = judge(&h, GET, &answer(200, &h, 10.0, &mixed, 0), 9.5, 10.5, 1.0);
        assert_eq!((j.outcome, j.reason), (Outcome::Mismatch, "bytes of no version"));
        // Torn: one byte flipped, or zero padding at the end.
        let mut torn = new.clone();
        torn[4321] ^= 1;
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 11.0, &torn, 0), 11.0, 11.0, 1.0).outcome,
            Outcome::Mismatch
        );
        let mut padded = new[..5000].to_vec();
        padded.extend_from_slice(&[0; 1000]);
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 11.0, &padded, 0), 11.0, 11.0, 1.0).outcome,
            Outcome::Mismatch
        );
        // A prefix presented as a whole body (wrong length) matches bytes but no version.
        let j = judge(&h, GET, &answer(200, &h, 11.0, &new[..100], 0), 11.0, 11.0, 1.0);
        assert_eq!((j.outcome, j.reason), (Outcome::Mismatch, "length of no version"));
        // A version that did not exist yet when the head arrived cannot be the body.
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 5.0, &new, 0), 5.0, 5.0, 1.0).outcome,
            Outcome::Mismatch
        );
    }

    #[test]
    fn old_versions_and_old_404s_are_stale_past_the_grace() {
        let mut h = History::default();
        h.push(1, 100, false, 0.0);
        h.push(2, 200, false, 10.0);
        h.end(20.0); // removed
        h.push(3, 300, true, 25.0); // re-created, being written
        h.push(3, 300, false, 25.5);
        let old = bytes(1, 0, 100);
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 10.5, &old, 0), 10.5, 10.6, 1.0).outcome,
            Outcome::Ok
        );
        let j = judge(&h, GET, &answer(200, &h, 14.0, &old, 0), 14.0, 14.1, 1.0);
        assert_eq!(j.outcome, Outcome::Stale);
        assert!((j.stale_s.unwrap() - 3.0).abs() < 1e-9, "{j:?}");
        // 404 while removed, just after (grace), long after (stale), and never removed.
        let e = Answer {
            status: 404,
            declared: 0,
            content_range: None,
            complete: true,
            seeds: vec![],
            received: 0,
        };
        assert_eq!(judge(&h, GET, &e, 22.0, 22.1, 1.0).outcome, Outcome::ExpectedError);
        assert_eq!(judge(&h, GET, &e, 25.8, 25.9, 1.0).outcome, Outcome::ExpectedError);
        assert_eq!(judge(&h, GET, &e, 40.0, 40.1, 1.0).outcome, Outcome::Stale);
        assert_eq!(judge(&h, GET, &e, 15.0, 15.1, 1.0).outcome, Outcome::UnexpectedStatus);
        assert_eq!(
            judge(&History::fixed(1, 5), GET, &e, 1.0, 2.0, 1.0).outcome,
            Outcome::UnexpectedStatus
        );
        // A prefix of a file being written is fine while it was written, not later.
        let part = bytes(3, 0, 120);
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 25.2, &part, 0), 25.2, 25.3, 0.0).outcome,
            Outcome::Ok
        );
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 30.0, &part, 0), 30.0, 30.1, 1.0).outcome,
            Outcome::Stale
        );
    }

    #[test]
    fn ranges_heads_and_truncations() {
        let mut h = History::default();
        h.push(5, 10_000, false, 0.0);
        let ranged = Asked { head: false, range: Some((4000, 4999)) };
        let mut a = answer(206, &h, 1.0, &bytes(5, 4000, 1000), 4000);
        a.content_range = Some((4000, 4999, 10_000));
        assert_eq!(judge(&h, ranged, &a, 1.0, 1.1, 1.0).outcome, Outcome::Ok);
        let mut wrong = answer(206, &h, 1.0, &bytes(5, 4001, 1000), 4000);
        wrong.content_range = Some((4000, 4999, 10_000));
        assert_eq!(judge(&h, ranged, &wrong, 1.0, 1.1, 1.0).outcome, Outcome::Mismatch);
        a.content_range = Some((4000, 4999, 9_999));
        assert_eq!(
            judge(&h, ranged, &a, 1.0, 1.1, 1.0).outcome,
            Outcome::Mismatch,
            "total of no version"
        );
        let head = Asked { head: true, range: None };
        let hd = Answer {
            status: 200,
            declared: 10_000,
            content_range: None,
            complete: true,
            seeds: vec![],
            received: 0,
        };
        assert_eq!(judge(&h, head, &hd, 1.0, 1.1, 1.0).outcome, Outcome::Ok);
        assert_eq!(
            judge(&h, head, &Answer { declared: 3, ..hd.clone() }, 1.0, 1.1, 1.0).outcome,
            Outcome::Mismatch
        );
        // Truncated to 3000 at t=5: a body promised 10 000 and cut short is expected then,
        // a reset before it; a 416 for bytes past 3000 is expected after it.
        h.push(5, 3000, false, 5.0);
        let mut cut = answer(200, &h, 4.9, &bytes(5, 0, 3000), 0);
        cut.declared = 10_000;
        cut.complete = false;
        assert_eq!(judge(&h, GET, &cut, 4.9, 5.1, 1.0).outcome, Outcome::ExpectedError);
        let mut early = History::default();
        early.push(5, 10_000, false, 0.0);
        assert_eq!(judge(&early, GET, &cut, 1.0, 1.1, 1.0).outcome, Outcome::Reset);
        let r416 = Answer {
            status: 416,
            declared: 0,
            content_range: None,
            complete: true,
            seeds: vec![],
            received: 0,
        };
        assert_eq!(judge(&h, ranged, &r416, 6.0, 6.1, 1.0).outcome, Outcome::ExpectedError);
        assert_eq!(judge(&early, ranged, &r416, 6.0, 6.1, 1.0).outcome, Outcome::UnexpectedStatus);
        let e500 = Answer { status: 500, ..r416 };
        assert_eq!(judge(&h, GET, &e500, 6.0, 6.1, 1.0).outcome, Outcome::UnexpectedStatus);
    }

    #[test]
    fn truncations_are_found_in_a_window() {
        let mut h = History::default();
        h.push(1, 100, false, 0.0);
        h.push(1, 40, false, 5.0); // truncated
        h.push(2, 400, false, 8.0); // renamed over: not a truncation
        h.push(2, 400, true, 9.0);
        assert!(h.truncated_during(4.0, 6.0));
        assert!(!h.truncated_during(6.0, 20.0));
        assert!(!h.truncated_during(0.0, 4.9));
    }

    #[test]
    fn a_range_of_a_file_seen_while_it_was_written_is_right() {
        // Re-created at t=10, written by t=10.1: a server that stat'ed it mid-write may give
        // a total that is any length up to the final one, within the window.
        let mut h = History::default();
        h.push(4, 100_000, true, 10.0);
        h.push(4, 100_000, false, 10.1);
        let ranged = Asked { head: false, range: Some((1000, 1999)) };
        let mut a = answer(206, &h, 10.5, &bytes(4, 1000, 1000), 1000);
        a.content_range = Some((1000, 1999, 65_536));
        assert_eq!(judge(&h, ranged, &a, 10.5, 10.6, 1.0).outcome, Outcome::Ok);
        assert_eq!(judge(&h, ranged, &a, 20.0, 20.1, 1.0).outcome, Outcome::Stale);
    }

    #[test]
    fn zeros_from_a_truncation_during_the_request_are_told_apart() {
        // 10 000 bytes, truncated in place to 3000 at t=5.
        let mut h = History::default();
        h.push(5, 10_000, false, 0.0);
        h.push(5, 3000, false, 5.0);
        let mut body = bytes(5, 0, 10_000);
        body[3000..].iter_mut().step_by(3).for_each(|b| *b = 0);
        let a = answer(200, &h, 4.9, &body, 0);
        assert_eq!(a.seeds[0].zeros_from, Some(3000));
        let j = judge(&h, GET, &a, 4.9, 5.2, 1.0);
        assert_eq!(j.outcome, Outcome::Zeroed, "{j:?}");
        assert!(!j.outcome.is_failure());
        // The same zeros with no truncation in the window, or before the truncation point.
        assert_eq!(judge(&h, GET, &a, 8.0, 8.2, 1.0).outcome, Outcome::Mismatch);
        let mut early = bytes(5, 0, 10_000);
        early[2000] = 0;
        let a = answer(200, &h, 4.9, &early, 0);
        let j = judge(&h, GET, &a, 4.9, 5.2, 1.0);
        assert_eq!((j.outcome, j.reason), (Outcome::Mismatch, "zeros no truncation explains"));
        // A non-zero foreign byte is a mismatch whatever happened.
        let mut foreign = body.clone();
        foreign[9000] = 1;
        assert_eq!(
            judge(&h, GET, &answer(200, &h, 4.9, &foreign, 0), 4.9, 5.2, 1.0).outcome,
            Outcome::Mismatch
        );
    }
}
