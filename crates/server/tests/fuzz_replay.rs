//! The fuzz targets on stable: every committed input in `fuzz/corpus/<target>/` is replayed
//! through the target's property (`fuzz/checks.rs`), then each target gets a short mutation
//! run from those seeds (bit flips, byte edits, HTTP tokens, splices), so `cargo test` keeps
//! the properties from regressing without nightly or cargo-fuzz.
//!
//! Budget: `AMPED_FUZZ_SECS` seconds of mutation per target (default 0.5). An input that breaks
//! a property is written to `target/tmp/fuzz-failure-<target>` and the test fails.

#[path = "../../../fuzz/checks.rs"]
mod checks;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

type Check = fn(&[u8]);

const TARGETS: [(&str, Check); 4] = [
    ("request_parser", checks::request_parser),
    ("target_path", checks::target_path),
    ("range_conditional", checks::range_conditional),
    ("config_file", checks::config_file),
];

/// Byte strings the mutator splices in: the grammar's delimiters and the words that matter.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b":",
    b" ",
    b"\t",
    b"/",
    b"\\",
    b"..",
    b".",
    b"%",
    b"%2e",
    b"%2f",
    b"%00",
    b"%25",
    b"?",
    b"#",
    b"chunked",
    b"Transfer-Encoding: ",
    b"Content-Length: ",
    b"Host: ",
    b"HTTP/1.",
    b"bytes=",
    b"-",
    b",",
    b"=",
    b"\"",
    b"W/",
    b"[",
    b"]",
    b";",
    b"0",
    b"ffffffff",
    b"\x00",
    b"\xff",
    b"\xc3\xa9",
    b"true",
    b"\"amped\"",
];

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    inputs.sort();
    inputs.into_iter().map(|(_, b)| b).collect()
}

/// Runs `check` on `input`; on a broken property saves the input and fails with it.
fn run(target: &str, check: Check, input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| check(input))).is_err() {
        let saved =
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-failure-{target}"));
        let _ = std::fs::write(&saved, input);
        panic!(
            "{target}: property broken by {:?} (saved to {})",
            String::from_utf8_lossy(input),
            saved.display()
        );
    }
}

#[test]
fn committed_corpora_replay() {
    for (target, check) in TARGETS {
        let inputs = corpus(target);
        assert!(inputs.len() >= 10, "{target}: corpus too small ({})", inputs.len());
        for input in &inputs {
            run(target, check, input);
        }
    }
}

#[test]
fn short_mutation_run() {
    let secs: f64 =
        std::env::var("AMPED_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(0.5);
    for (i, (target, check)) in TARGETS.into_iter().enumerate() {
        let seeds = corpus(target);
        let mut m = Mutator { state: 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1) };
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        let mut runs = 0u64;
        while runs < 200 || Instant::now() < deadline {
            let input = m.mutate(&seeds);
            run(target, check, &input);
            runs += 1;
        }
        eprintln!("{target}: {runs} mutated inputs in {secs} s, no property broken");
    }
}

/// A small deterministic mutator (xorshift64*).
struct Mutator {
    state: u64,
}

impl Mutator {
    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A seed with one to four edits.
    fn mutate(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut out = seeds[self.below(seeds.len())].clone();
        for _ in 0..1 + self.below(4) {
            let at = self.below(out.len() + 1);
            match self.below(7) {
                0 if !out.is_empty() => {
                    let i = at.min(out.len() - 1);
                    out[i] ^= 1 << self.below(8);
                }
                1 if !out.is_empty() => {
                    let i = at.min(out.len() - 1);
                    out[i] = self.next() as u8;
                }
                2 => out.insert(at, self.next() as u8),
                3 if !out.is_empty() => {
                    let end = (at + 1 + self.below(8)).min(out.len());
                    out.drain(at.min(end)..end);
                }
                4 => {
                    let token = TOKENS[self.below(TOKENS.len())];
                    out.splice(at..at, token.iter().copied());
                }
                5 => {
                    let other = &seeds[self.below(seeds.len())];
                    let from = self.below(other.len() + 1);
                    let piece = &other[from..(from + self.below(32)).min(other.len())];
                    out.splice(at..at, piece.iter().copied());
                }
                _ if !out.is_empty() => {
                    let from = self.below(out.len());
                    let piece = out[from..(from + self.below(16)).min(out.len())].to_vec();
                    out.splice(at..at, piece);
                }
                _ => out.push(self.next() as u8),
            }
        }
        out
    }
}
