//! The send plan's decisions as tables: a response, then what the engine reports in turn, and
//! the piece the plan names after each report. Both engines execute these decisions;
//! `transmit_tests.rs` and `arch/uring/send.rs` test the engines over them.

use super::*;
use crate::cache::FileEntry;
use std::sync::Arc;

/// What an engine reports to the plan.
#[derive(Clone, Copy, Debug)]
enum Report {
    Sent(usize),
    MovedIn(usize),
    Resident(u64, u64),
    Waited,
    EndedEarly,
}

/// A response with a 10-byte head and `body`.
fn response(body: Body) -> Response {
    Response { head: vec![b'h'; 10], body, close: false, status: 200, log: None, timeline: None }
}

fn memory(len: usize) -> Body {
    Body::Memory(Arc::from(vec![b'm'; len]), 0..len)
}

/// `len` bytes of a file from `offset` (any open file: the plan never reads it).
fn file(offset: u64, len: u64) -> Body {
    let path = std::env::current_exe().unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let meta = f.metadata().unwrap();
    Body::File { file: Arc::new(FileEntry::new(path, f, &meta, None)), offset, len }
}

/// Plays `reports` against a plan for `body` (chunks of 100 bytes): the piece named at the
/// start, then after each report.
fn play(body: Body, head_goes: HeadGoes, reports: &[Report]) -> Vec<Piece> {
    let resp = response(body);
    let mut plan = SendPlan::new(&resp, head_goes);
    let mut pieces = vec![plan.next(&resp.body, 100)];
    for r in reports {
        match *r {
            Report::Sent(n) => {
                plan.sent(n);
            }
            Report::MovedIn(n) => plan.moved_in(n),
            Report::Resident(pos, len) => plan.resident(&resp.body, pos, len),
            Report::Waited => plan.waited(),
            Report::EndedEarly => plan.end_early(),
        }
        pieces.push(plan.next(&resp.body, 100));
    }
    pieces
}

/// One case: its name, the body, how heads go, the reports and the pieces named.
type Case = (&'static str, Body, HeadGoes, Vec<Report>, Vec<Piece>);

#[test]
fn each_report_leads_to_one_next_piece() {
    use HeadGoes::*;
    use Piece::*;
    use Report::*;
    let f = |pos, len, known: bool| File {
        pos,
        len,
        in_memory: if known { InMemory::Known } else { InMemory::Untested },
    };
    let stale = |pos, len| File { pos, len, in_memory: InMemory::Stale };
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("no body: the head, resumed after a partial write",
            Body::None, Alone, vec![Sent(4), Sent(6)], vec![Gather, Gather, Done]),
        ("memory body: one gather write, resumed inside the body",
            memory(50), Alone, vec![Sent(30), Sent(30)], vec![Gather, Gather, Done]),
        ("file, head alone: head, then a chunk to test",
            file(0, 250), Alone, vec![Sent(10)], vec![Head { more: true }, f(0, 100, false)]),
        ("tested resident: sent without a new test; a partial send continues the range",
            file(0, 250), Alone,
            vec![Sent(10), Resident(0, 100), Sent(60), Sent(40)],
            vec![Head { more: true }, f(0, 100, false), f(0, 100, true), f(60, 40, true), f(100, 100, false)]),
        ("a wait for the socket makes the rest of a known range stale (tested again, only it); \
          found in memory again, it is known again",
            file(0, 250), Alone,
            vec![Sent(10), Resident(0, 100), Sent(60), Waited, Resident(60, 40), Sent(40)],
            vec![Head { more: true }, f(0, 100, false), f(0, 100, true), f(60, 40, true),
              stale(60, 40), f(60, 40, true), f(100, 100, false)]),
        ("a wait with nothing known changes nothing",
            file(0, 250), Alone, vec![Sent(10), Waited], vec![Head { more: true }, f(0, 100, false), f(0, 100, false)]),
        ("a range read in reaching past one chunk is sent a chunk at a time",
            file(0, 250), Alone, vec![Sent(10), Resident(0, 250), Sent(100), Sent(100), Sent(50)],
            vec![Head { more: true }, f(0, 100, false), f(0, 100, true), f(100, 100, true),
              f(200, 50, true), Done]),
        ("a range of the file: positions from its offset, residency clipped to its end",
            file(1000, 150), Alone, vec![Sent(10), Resident(1000, 400), Sent(100)],
            vec![Head { more: true }, f(1000, 100, false), f(1000, 100, true), f(1100, 50, true)]),
        ("bytes in a pipe go before anything else is read, in as many sends as it takes",
            file(0, 250), Alone, vec![Sent(10), MovedIn(120), Sent(70), Sent(50)],
            vec![Head { more: true }, f(0, 100, false), InHand { more: true }, InHand { more: true },
              f(120, 100, false)]),
        ("the last bytes in hand: nothing more follows",
            file(0, 100), Alone, vec![Sent(10), MovedIn(100), Sent(100)],
            vec![Head { more: true }, f(0, 100, false), InHand { more: false }, Done]),
        ("head with the first chunk: read first, then both in one send",
            file(0, 150), WithFirstChunk, vec![MovedIn(100), Sent(50), Sent(60), MovedIn(50), Sent(50)],
            vec![f(0, 100, false), InHand { more: true }, InHand { more: true }, f(100, 50, false),
              InHand { more: false }, Done]),
        ("empty file range: the head alone, nothing follows",
            file(0, 0), WithFirstChunk, vec![Sent(10)], vec![Head { more: false }, Done]),
        ("a file that ended before the first byte: its head still goes, then done",
            file(0, 150), WithFirstChunk, vec![EndedEarly, Sent(10)], vec![f(0, 100, false), Head { more: false }, Done]),
        ("ended early with bytes in hand: they go, nothing more is read",
            file(0, 250), WithFirstChunk, vec![MovedIn(100), EndedEarly, Sent(110)],
            vec![f(0, 100, false), InHand { more: true }, InHand { more: false }, Done]),
    ];
    for (name, body, head_goes, reports, pieces) in cases {
        assert_eq!(play(body, head_goes, &reports), pieces, "{name}");
    }
}

#[test]
fn sends_count_head_bytes_first_then_body_bytes() {
    let resp = response(file(500, 300));
    let mut plan = SendPlan::new(&resp, HeadGoes::WithFirstChunk);
    plan.moved_in(100);
    assert_eq!(plan.sent(4), 0, "head bytes only");
    assert_eq!(plan.sent(26), 20, "the rest of the head, then body bytes");
    assert_eq!((plan.head_sent(), plan.body_sent(), plan.position(&resp.body)), (10, 20, 520));
    assert!(!plan.ended_early());
    plan.end_early();
    assert!(plan.ended_early(), "the connection must close after");
}

#[test]
fn a_file_counts_as_sent_whole_only_once_its_last_byte_left() {
    let resp = response(file(5, 250));
    let mut plan = SendPlan::new(&resp, HeadGoes::Alone);
    plan.sent(10); // the head
    assert!(plan.whole_file_sent(&resp.body).is_none(), "nothing of the body yet");
    plan.sent(249);
    assert!(plan.whole_file_sent(&resp.body).is_none(), "one byte short");
    plan.sent(1);
    assert!(plan.whole_file_sent(&resp.body).is_some(), "all 250 bytes left");
    let memory = response(memory(20));
    let mut plan = SendPlan::new(&memory, HeadGoes::Alone);
    plan.sent(30);
    assert!(plan.whole_file_sent(&memory.body).is_none(), "a memory body is no file");
}
