//! The send plan tested in process: an [`Outgoing`] drives a real socket pair and real files
//! (in a folder on disk, so their pages can be evicted), and every [`Job`] it asks for is run
//! inline and fed back through [`Outgoing::resume`], as SPED does. What a client would check is
//! asserted — the bytes it receives, in order — together with what the plan decided on the
//! way: which chunks were cold, what each job was asked to move, and when it gave up.
//!
//! The wire suite (`tests/wire/read_path.rs` and others) checks the same over TCP under every
//! architecture; these cases pin down the decisions themselves.

use super::{Outgoing, SendOptions, SendOutcome};
use crate::access_log::AccessLogger;
use crate::cache::FileEntry;
use crate::config::{Args, Config, ReadPath};
use crate::pipeline::{Body, Job, Pipeline, Response};
use crate::stats::Stats;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;

/// A pipeline rooted in a fresh folder on disk, and its counters.
struct Bench {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
    stats: Arc<Stats>,
}

impl Bench {
    /// With the default configuration.
    fn new() -> Bench {
        Bench::with(Args::default())
    }

    /// With `args` (its root replaced by the bench's folder).
    fn with(args: Args) -> Bench {
        // Under /var/tmp, not a tmpfs /tmp: the pages of its files can be evicted.
        let dir = tempfile::Builder::new().prefix("amped-transmit").tempdir_in("/var/tmp").unwrap();
        let args = Args { root: Some(dir.path().into()), ..args };
        let cfg = Config::resolve(args).unwrap();
        let stats = Arc::new(Stats::default());
        let pipeline = Pipeline::new(Arc::new(cfg), stats.clone(), AccessLogger::off());
        Bench { dir, pipeline, stats }
    }

    /// The counter called `name`.
    fn counter(&self, name: &str) -> u64 {
        self.stats.total_named(name)
    }

    /// A file of `len` patterned bytes, open as the file cache would hold it.
    fn file(&self, name: &str, len: usize) -> (Arc<FileEntry>, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let path: PathBuf = self.dir.path().join(name);
        let mut w = std::fs::File::create(&path).unwrap();
        w.write_all(&bytes).unwrap();
        w.sync_all().unwrap(); // written back, so its pages can be evicted
        let file = std::fs::File::open(&path).unwrap();
        let meta = file.metadata().unwrap();
        (Arc::new(FileEntry::new(path, file, &meta, None)), bytes)
    }
}

fn response(head: &str, body: Body) -> Response {
    Response {
        head: head.as_bytes().to_vec(),
        body,
        close: false,
        status: 200,
        log: None,
        timeline: None,
    }
}

fn opts(read_path: ReadPath) -> SendOptions {
    SendOptions { zero_copy: true, residency_test: true, read_path, yield_each_step: false }
}

/// What one job asked for: its kind, offset and length.
#[derive(Debug, PartialEq)]
enum Asked {
    Fill(u64, u64),
    ReadAhead(u64, u64),
    Copy(u64, u64),
    Direct(u64, u64),
}

/// Sends `out` to the end over a socket pair, reading as it goes; every job is recorded, run
/// inline and resumed. Returns the bytes received and the jobs, or the error that ended it.
fn drive(
    out: &mut Outgoing,
    opts: SendOptions,
    p: &Pipeline,
) -> (Vec<u8>, Vec<Asked>, Option<std::io::Error>) {
    let (server, mut client) = socket_pair();
    drive_over(out, opts, p, &server, &mut client, Vec::new())
}

/// A connected pair of non-blocking sockets: the server's end and the client's.
fn socket_pair() -> (UnixStream, UnixStream) {
    let (server, client) = UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_nonblocking(true).unwrap();
    (server, client)
}

/// [`drive`] over a given socket pair, the client having received `got` so far.
fn drive_over(
    out: &mut Outgoing,
    opts: SendOptions,
    p: &Pipeline,
    server: &UnixStream,
    client: &mut UnixStream,
    mut got: Vec<u8>,
) -> (Vec<u8>, Vec<Asked>, Option<std::io::Error>) {
    let mut asked = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut drain = |got: &mut Vec<u8>| loop {
        match client.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("reading: {e}"),
        }
    };
    for _ in 0..10_000 {
        match out.send(server, opts, p) {
            SendOutcome::Done => {
                drain(&mut got);
                return (got, asked, None);
            }
            SendOutcome::WouldBlock | SendOutcome::Progress => drain(&mut got),
            SendOutcome::NotResident(job) => {
                asked.push(match &job {
                    Job::Fill { offset, len, .. } => Asked::Fill(*offset, *len),
                    Job::ReadAhead { offset, len, .. } => Asked::ReadAhead(*offset, *len),
                    Job::Copy { offset, len, direct: false, .. } => Asked::Copy(*offset, *len),
                    Job::Copy { offset, len, direct: true, .. } => Asked::Direct(*offset, *len),
                    Job::Resolve { .. } => panic!("a send asked for a resolve job"),
                });
                out.resume(p.run_job(job));
            }
            SendOutcome::Failed(e) => {
                drain(&mut got);
                return (got, asked, Some(e));
            }
        }
    }
    panic!("the send never ended");
}

fn with_head(head: &str, body: &[u8]) -> Vec<u8> {
    let mut all = head.as_bytes().to_vec();
    all.extend_from_slice(body);
    all
}

const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n";

#[test]
fn a_memory_body_leaves_with_its_head_and_needs_no_job() {
    let b = Bench::new();
    let body: Arc<[u8]> = Arc::from(&b"hello, world"[..]);
    let mut out = Outgoing::new(response(HEAD, Body::Memory(body, 7..12)));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none());
    assert!(asked.is_empty());
    assert_eq!(got, with_head(HEAD, b"world"));
    assert_eq!(out.body_sent(), 5);
}

#[test]
fn a_resident_file_is_sent_without_a_job() {
    let b = Bench::new();
    let (file, bytes) = b.file("warm.bin", 300_000);
    let _ = std::fs::read(&file.path).unwrap(); // its pages are in memory now
    let mut out = Outgoing::new(response(HEAD, Body::File { file, offset: 0, len: 300_000 }));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none());
    assert_eq!(asked, vec![], "every chunk was resident");
    assert_eq!(got, with_head(HEAD, &bytes));
}

#[test]
fn a_cold_small_body_goes_in_one_fill_and_arrives_whole() {
    let b = Bench::new();
    let (file, bytes) = b.file("cold-small.bin", 200_000);
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(HEAD, Body::File { file, offset: 0, len: 200_000 }));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none());
    assert_eq!(asked, vec![Asked::Fill(0, 200_000)], "at most twice the first fill: one trip");
    assert_eq!(got, with_head(HEAD, &bytes));
}

#[test]
fn a_cold_large_body_fills_grow_and_every_later_chunk_takes_a_job() {
    let b = Bench::new();
    let len = 3 << 20;
    let (file, bytes) = b.file("cold-large.bin", len);
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(HEAD, Body::File { file, offset: 0, len: len as u64 }));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none());
    assert_eq!(got, with_head(HEAD, &bytes));
    // 128 KiB, then doubling to the pipe's 1 MiB; the kernel's read-ahead makes later chunks
    // look resident, yet each still goes through a job (the loop never waits for them).
    let lens: Vec<u64> = asked
        .iter()
        .map(|a| match a {
            Asked::Fill(_, len) => *len,
            other => panic!("expected fills, got {other:?}"),
        })
        .collect();
    assert_eq!(&lens[..4], &[128 << 10, 256 << 10, 512 << 10, 1 << 20]);
    assert_eq!(lens.iter().sum::<u64>(), len as u64, "the fills cover the body once");
    let mut at = 0;
    for a in &asked {
        let Asked::Fill(offset, len) = a else { unreachable!() };
        assert_eq!(*offset, at, "fills follow each other");
        at += len;
    }
}

/// After its first cold chunk a body's later chunks go to jobs whatever the residency test says
/// (pages under read look resident) — but the test still runs for the page policy: each chunk
/// found cold is a residency miss, counted and evidence of memory pressure, as each of
/// io_uring's cold reads is. Here the file's pages are dropped after every job, so every
/// chunk is cold; the body still arrives whole (the pipe holds what the job read).
#[test]
fn chunks_sent_untested_still_report_their_misses() {
    let b = Bench::new();
    let len = 3 << 20;
    let (file, bytes) = b.file("untested-misses.bin", len);
    assert!(b.pipeline.miss_is_evidence(&file), "3 MiB is below the direct-read threshold");
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(
        HEAD,
        Body::File { file: file.clone(), offset: 0, len: len as u64 },
    ));
    let (server, mut client) = socket_pair();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut jobs = 0;
    for _ in 0..10_000 {
        match out.send(&server, opts(ReadPath::Pipe), &b.pipeline) {
            SendOutcome::Done => break,
            SendOutcome::NotResident(job) => {
                jobs += 1;
                out.resume(b.pipeline.run_job(job));
                amped_sys::residency::evict(&file.file).unwrap();
            }
            SendOutcome::WouldBlock | SendOutcome::Progress => {}
            SendOutcome::Failed(e) => panic!("{e}"),
        }
        while let Ok(n) = client.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    while let Ok(n) = client.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got == with_head(HEAD, &bytes), "the body differs");
    assert!(jobs >= 4, "128 KiB growing to 1 MiB over 3 MiB: {jobs} jobs");
    assert_eq!(b.counter("residency_misses"), jobs, "every cold chunk is a miss: {:?}", b.stats);
}

#[test]
fn a_range_of_a_cold_file_is_read_from_its_offset() {
    let b = Bench::new();
    let (file, bytes) = b.file("range.bin", 1 << 20);
    amped_sys::residency::evict(&file.file).unwrap();
    let body = Body::File { file, offset: 700_000, len: 1000 };
    let mut out = Outgoing::new(response(HEAD, body));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none());
    assert_eq!(asked, vec![Asked::Fill(700_000, 1000)]);
    assert_eq!(got, with_head(HEAD, &bytes[700_000..701_000]));
}

#[test]
fn the_read_ahead_path_asks_for_chunks_and_sends_them_with_sendfile() {
    let b = Bench::new();
    let len = 1_200_000;
    let (file, bytes) = b.file("readahead.bin", len);
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(HEAD, Body::File { file, offset: 0, len: len as u64 }));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::ReadAhead), &b.pipeline);
    assert!(err.is_none());
    assert_eq!(got, with_head(HEAD, &bytes));
    let chunk = 512 << 10;
    assert_eq!(
        asked,
        vec![
            Asked::ReadAhead(0, chunk),
            Asked::ReadAhead(chunk, chunk),
            Asked::ReadAhead(2 * chunk, len as u64 - 2 * chunk),
        ]
    );
}

/// `--read-path copy`: a cold body is read into the response's buffer in trips that grow as
/// the pipe's fills do, follow each other, and arrive whole — over a socket with zero copy,
/// and over a wire without it (as TLS sends).
#[test]
fn the_copy_path_reads_growing_trips_into_a_buffer_and_sends_them() {
    let _budget = crate::copy_budget::exclusive();
    for zero_copy in [true, false] {
        let b = Bench::new();
        let len = 3 << 20;
        let (file, bytes) = b.file("copied.bin", len);
        amped_sys::residency::evict(&file.file).unwrap();
        let body = Body::File { file, offset: 0, len: len as u64 };
        let mut out = Outgoing::new(response(HEAD, body));
        let opts = SendOptions { zero_copy, ..opts(ReadPath::Copy) };
        let (got, asked, err) = drive(&mut out, opts, &b.pipeline);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, with_head(HEAD, &bytes), "zero copy {zero_copy}");
        let mut at = 0;
        let lens: Vec<u64> = asked
            .iter()
            .map(|a| match a {
                Asked::Copy(offset, len) => {
                    assert_eq!(*offset, at, "trips follow each other: {asked:?}");
                    at += len;
                    *len
                }
                other => panic!("expected copies, got {other:?}"),
            })
            .collect();
        assert_eq!(&lens[..4], &[128 << 10, 256 << 10, 512 << 10, 1 << 20]);
        assert_eq!(at, len as u64, "the trips cover the body once");
    }
}

/// `--direct-io-above`: while a smaller file was just found cold (memory pressure), cold chunks
/// of a file that large are read around the page cache a huge page per trip from the first (no
/// growing trips: each is one disk request), and arrive whole, also from an offset that is not
/// aligned; without that evidence, for a smaller file,
/// or off a block device (the bench's folder may be on overlayfs or tmpfs), the pipe.
#[test]
fn direct_reads_take_large_cold_files_a_huge_page_per_trip_under_pressure() {
    let _budget = crate::copy_budget::exclusive();
    let b = Bench::with(Args { direct_io_above: Some(1 << 20), ..Default::default() });
    let len = 9 << 20;
    let (file, bytes) = b.file("direct.bin", len);
    let block = amped_sys::direct::on_block_device(file.dev);
    let (small, small_bytes) = b.file("below.bin", 500_000);
    let send = |body: Body| {
        let mut out = Outgoing::new(response(HEAD, body));
        drive(&mut out, opts(ReadPath::Pipe), &b.pipeline)
    };
    // Sent whole once: from then on a miss of it is a refault, evidence of pressure.
    send(Body::File { file: small.clone(), offset: 0, len: 500_000 });
    amped_sys::residency::evict(&file.file).unwrap();
    let (got, asked, _) = send(Body::File { file: file.clone(), offset: 0, len: len as u64 });
    assert!(got == with_head(HEAD, &bytes));
    assert!(matches!(asked[..], [Asked::Fill(0, _), ..]), "no pressure: pipes, {asked:?}");
    for from in [0, 4097 * 3] {
        // The smaller file's miss is the evidence of pressure; it goes through a pipe itself.
        amped_sys::residency::evict(&small.file).unwrap();
        let (got, asked, _) = send(Body::File { file: small.clone(), offset: 0, len: 500_000 });
        assert_eq!(got, with_head(HEAD, &small_bytes));
        assert!(matches!(asked[..], [Asked::Fill(0, _), ..]), "below the size: {asked:?}");
        amped_sys::residency::evict(&file.file).unwrap();
        let body = Body::File { file: file.clone(), offset: from as u64, len: (len - from) as u64 };
        let (got, asked, err) = send(body);
        assert!(err.is_none(), "{err:?}");
        assert!(got == with_head(HEAD, &bytes[from..]), "from {from}: the body differs");
        if !block {
            assert!(matches!(asked[..], [Asked::Fill(..), ..]), "not a block device: {asked:?}");
            continue;
        }
        let lens: Vec<u64> = asked
            .iter()
            .map(|a| match a {
                Asked::Direct(_, len) => *len,
                other => panic!("expected direct reads, got {other:?}"),
            })
            .collect();
        // From an unaligned offset, the first trip ends where the next is aligned: each trip's
        // aligned span is one huge page, the first one's too.
        let full = (2 << 20) - (from as u64 % 4096);
        assert_eq!(&lens[..3], &[full, 2 << 20, 2 << 20]);
        assert_eq!(lens.iter().sum::<u64>(), (len - from) as u64, "the trips cover the body");
    }
}

/// `--refault-test` (on): a smaller file read for the first time is no evidence of pressure —
/// the large file after it goes through the page cache, where a data set that fits in memory
/// keeps it; once that smaller file, sent whole, is found cold again, large files are read
/// around the page cache. With the test off, a first reading is evidence too.
#[test]
fn only_a_smaller_file_cold_again_sends_large_files_around_the_page_cache() {
    let _budget = crate::copy_budget::exclusive();
    for refault_test in ["on", "off"] {
        let b = Bench::with(Args {
            direct_io_above: Some(1 << 20),
            refault_test: Some(refault_test.into()),
            ..Default::default()
        });
        let (large, bytes) = b.file("large.bin", 3 << 20);
        if !amped_sys::direct::on_block_device(large.dev) {
            return; // no direct reads here
        }
        let (small, _) = b.file("small.bin", 500_000);
        let send_cold = |file: &Arc<FileEntry>, len: usize| {
            amped_sys::residency::evict(&file.file).unwrap();
            let body = Body::File { file: file.clone(), offset: 0, len: len as u64 };
            drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), &b.pipeline)
        };
        send_cold(&small, 500_000);
        let (got, asked, _) = send_cold(&large, bytes.len());
        assert!(got == with_head(HEAD, &bytes), "the body differs");
        if refault_test == "on" {
            assert!(matches!(asked[..], [Asked::Fill(..), ..]), "a first reading: {asked:?}");
        } else {
            assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "off: {asked:?}");
        }
        send_cold(&small, 500_000);
        let (got, asked, _) = send_cold(&large, bytes.len());
        assert!(got == with_head(HEAD, &bytes), "the body differs");
        assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "a refault: {asked:?}");
    }
}

/// `--keep-cached-large` (on): under pressure, a large file the page cache holds at least half
/// of has its cold chunks read through the cache, so that it stays whole; evicted, around it.
#[test]
fn a_large_file_half_in_the_page_cache_is_read_through_it() {
    let _budget = crate::copy_budget::exclusive();
    let Some(t) = LargeAndSmall::new("kept.bin", 4 << 20) else {
        return; // no direct reads here
    };
    let (got, asked, _) = t.send_after_a_small_miss();
    assert!(got == with_head(HEAD, &t.bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "evicted: {asked:?}");
    let p = &t.bench.pipeline;
    amped_sys::residency::evict(&t.small.file).unwrap();
    let body = Body::File { file: t.small.clone(), offset: 0, len: 500_000 };
    drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), p);
    amped_sys::residency::evict(&t.large.file).unwrap();
    amped_sys::files::no_read_ahead(&t.large.file).unwrap(); // the first half only
    let mut half = vec![0u8; 2 << 20];
    std::os::unix::fs::FileExt::read_exact_at(&t.large.file, &mut half, 0).unwrap();
    let body = Body::File { file: t.large.clone(), offset: 0, len: t.bytes.len() as u64 };
    let (got, asked, _) = drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), p);
    assert!(got == with_head(HEAD, &t.bytes), "the body differs");
    assert!(!asked.is_empty(), "the second half was cold");
    assert!(asked.iter().all(|a| matches!(a, Asked::Fill(..))), "half kept: pipes, {asked:?}");
}

/// A bench reading files of at least 1 MiB around the page cache under pressure, with a large
/// file and a smaller one (whose miss is the evidence of pressure) in it.
struct LargeAndSmall {
    bench: Bench,
    large: Arc<FileEntry>,
    bytes: Vec<u8>,
    small: Arc<FileEntry>,
}

impl LargeAndSmall {
    /// `None` off a block device, where nothing is read around the page cache.
    fn new(name: &str, len: usize) -> Option<LargeAndSmall> {
        LargeAndSmall::with(name, len, Args::default())
    }

    /// The same with the other options of `args`.
    fn with(name: &str, len: usize, args: Args) -> Option<LargeAndSmall> {
        let bench = Bench::with(Args { direct_io_above: Some(1 << 20), ..args });
        let (large, bytes) = bench.file(name, len);
        let (small, _) = bench.file("small.bin", 500_000);
        // Sent whole once: from then on a miss of it is a refault, evidence of pressure.
        let body = Body::File { file: small.clone(), offset: 0, len: 500_000 };
        drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), &bench.pipeline);
        amped_sys::direct::on_block_device(large.dev).then_some(LargeAndSmall {
            bench,
            large,
            bytes,
            small,
        })
    }

    /// Sends the smaller file cold (pressure), then the large one, cold too.
    fn send_after_a_small_miss(&self) -> (Vec<u8>, Vec<Asked>, Option<std::io::Error>) {
        let p = &self.bench.pipeline;
        amped_sys::residency::evict(&self.small.file).unwrap();
        let body = Body::File { file: self.small.clone(), offset: 0, len: 500_000 };
        drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), p);
        amped_sys::residency::evict(&self.large.file).unwrap();
        let body = Body::File { file: self.large.clone(), offset: 0, len: self.bytes.len() as u64 };
        drive(&mut Outgoing::new(response(HEAD, body)), opts(ReadPath::Pipe), p)
    }
}

/// `--disk-charge-test`: while the disk's bytes bind, a large cold file under pressure goes
/// through a pipe like a small one (its pages stay for the next request); once requests bind
/// again, around the page cache.
#[test]
fn while_the_disks_bytes_bind_large_cold_files_take_pipes() {
    let _budget = crate::copy_budget::exclusive();
    let Some(t) = LargeAndSmall::new("charged.bin", 5 << 20) else {
        return; // no direct reads here (see the test above)
    };
    let (b, bytes) = (&t.bench, &t.bytes);
    let send = || t.send_after_a_small_miss();
    let flag = b.pipeline.page_policy().bytes_bind_flag();
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    let (got, asked, err) = send();
    assert!(err.is_none(), "{err:?}");
    assert!(got == with_head(HEAD, bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Fill(..))), "bytes bind: pipes, {asked:?}");
    flag.store(false, std::sync::atomic::Ordering::Relaxed);
    let (got, asked, _) = send();
    assert!(got == with_head(HEAD, bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "requests bind: {asked:?}");
}

/// `--share-large-reads 2`: while another response of the same large file is reading it
/// from the disk, this one's cold chunks go through the page cache (the two share its pages);
/// alone, it reads around the cache as before.
#[test]
fn a_large_file_another_response_reads_from_the_disk_goes_through_the_cache() {
    let _budget = crate::copy_budget::exclusive();
    let on = Args { share_large_reads: Some(2), ..Default::default() };
    let Some(t) = LargeAndSmall::with("shared.bin", 3 << 20, on) else {
        return; // no direct reads here (see the test above)
    };
    let other = crate::cache::file::ColdTransfer::start(t.large.clone());
    let (got, asked, err) = t.send_after_a_small_miss();
    assert!(err.is_none(), "{err:?}");
    assert!(got == with_head(HEAD, &t.bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Fill(..))), "shared: pipes, {asked:?}");
    drop(other);
    assert_eq!(t.large.cold_transfers(), 0, "a finished response stops counting");
    let (got, asked, _) = t.send_after_a_small_miss();
    assert!(got == with_head(HEAD, &t.bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "alone: direct, {asked:?}");
}

/// A direct trip takes its huge page and its share of the copy budget when its read starts,
/// not when it is queued (trips waiting in the lane hold no memory). With the budget held by
/// other trips at that moment it becomes a pipe fill — counted in `direct_budget_full` — and
/// the bytes arrive all the same; with the budget free again, direct reads.
#[test]
fn a_direct_trip_that_finds_the_budget_full_takes_a_pipe() {
    let _budget = crate::copy_budget::exclusive();
    // Trips that become pipe fills put the file in the page cache; past half of it the rest
    // would go through the cache by `--keep-cached-large`, which is not what is tested here.
    let off = Args { keep_cached_large: Some("off".into()), ..Default::default() };
    let Some(t) = LargeAndSmall::with("budget.bin", 3 << 20, off) else {
        return; // no direct reads here (see the test above)
    };
    let (b, bytes) = (&t.bench, &t.bytes);
    let send = || t.send_after_a_small_miss();
    let mut others = Vec::new();
    while let Some(share) = crate::copy_budget::reserve(amped_sys::direct::HUGE as u64) {
        others.push(share);
    }
    let (got, asked, err) = send();
    assert!(err.is_none(), "{err:?}");
    assert!(got == with_head(HEAD, bytes), "the body differs");
    assert!(asked.iter().all(|a| matches!(a, Asked::Direct(..))), "queued as direct: {asked:?}");
    let trips = asked.len() as u64;
    assert_eq!(b.counter("direct_budget_full"), trips, "{:?}", b.stats);
    assert_eq!(b.counter("direct_reads"), 0, "{:?}", b.stats);
    drop(others);
    let (got, asked, _) = send();
    assert!(got == with_head(HEAD, bytes), "the body differs");
    assert_eq!(b.counter("direct_reads"), asked.len() as u64, "{:?}", b.stats);
    assert_eq!(b.counter("direct_budget_full"), trips, "no pipe once the budget is free");
}

#[test]
fn without_the_residency_test_no_job_is_asked_for() {
    let b = Bench::new();
    let (file, bytes) = b.file("untested.bin", 400_000);
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(HEAD, Body::File { file, offset: 0, len: 400_000 }));
    let opts = SendOptions { residency_test: false, ..opts(ReadPath::Pipe) };
    let (got, asked, err) = drive(&mut out, opts, &b.pipeline);
    assert!(err.is_none());
    assert!(asked.is_empty(), "the loop sends (and may wait for the disk) itself");
    assert_eq!(got, with_head(HEAD, &bytes));
}

#[test]
fn a_file_that_shrank_ends_the_response_with_an_error_after_what_there_was() {
    let cases = [
        (false, "shrank-warm.bin", ReadPath::Pipe),
        (true, "shrank-cold.bin", ReadPath::Pipe),
        (true, "shrank-copied.bin", ReadPath::Copy),
    ];
    for (cold, name, read_path) in cases {
        let b = Bench::new();
        let (file, bytes) = b.file(name, 100_000);
        std::fs::OpenOptions::new().write(true).open(&file.path).unwrap().set_len(40_000).unwrap();
        if cold {
            amped_sys::residency::evict(&file.file).unwrap();
        }
        let body = Body::File { file, offset: 0, len: 100_000 };
        let mut out = Outgoing::new(response(HEAD, body));
        let (got, _, err) = drive(&mut out, opts(read_path), &b.pipeline);
        let err = err.unwrap_or_else(|| panic!("{name}: a shrunken file cannot be sent whole"));
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{name}");
        assert_eq!(got, with_head(HEAD, &bytes[..40_000]), "{name}: what the file still had");
    }
}

/// New Flash's race, closed for a slow client: a chunk found resident is sent until the socket
/// is full; while the loop waits for the client, its pages are reclaimed; the rest of that
/// chunk is then tested again and read by a job (not by a `sendfile` that would wait for the
/// disk on the loop), and the client still gets every byte.
#[test]
fn pages_reclaimed_while_the_socket_was_full_are_read_by_a_job() {
    let b = Bench::new();
    let len = 1_200_000;
    let (file, bytes) = b.file("reclaimed.bin", len);
    let body = Body::File { file: file.clone(), offset: 0, len: len as u64 };
    let mut out = Outgoing::new(response(HEAD, body));
    let (server, mut client) = socket_pair();
    let opts = opts(ReadPath::Pipe);
    match out.send(&server, opts, &b.pipeline) {
        SendOutcome::WouldBlock => {}
        other => panic!("a warm 1.2 MB body should fill the socket first: {other:?}"),
    }
    let stopped_at = out.plan.body_sent();
    assert!(stopped_at > 0 && stopped_at < 512 << 10, "inside the first chunk: {stopped_at}");
    // The client takes what was sent (so the socket holds no page of the file: a page it
    // still referenced could not be reclaimed, nor the rest of a large folio around it).
    let mut got = vec![0u8; HEAD.len() + stopped_at as usize];
    client.read_exact(&mut got).unwrap();
    amped_sys::residency::evict(&file.file).unwrap();
    let (got, asked, err) = drive_over(&mut out, opts, &b.pipeline, &server, &mut client, got);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, with_head(HEAD, &bytes));
    match asked.first() {
        Some(Asked::Fill(offset, _)) => assert_eq!(*offset, stopped_at, "{asked:?}"),
        other => panic!("the reclaimed rest of the chunk was sent without a job: {other:?}"),
    }
}

/// While a helper reads pages of a file for one response, another response of the same file
/// does not trust the residency test (the kernel counts pages from the moment their read
/// starts): it asks for a job, whose helper waits for them, instead of a `sendfile` that would
/// wait on the loop. Once no read is under way, the pages are sent from the loop again.
/// That wait is counted as such, not as a residency miss, and is no evidence of memory
/// pressure for the page policy (the pages may be in memory); a real miss is both.
#[test]
fn a_file_being_read_for_another_response_takes_a_job() {
    // The page policy on, with the file small enough that a miss of it means pressure.
    let b = Bench::with(Args { page_yield_above: Some(1 << 20), ..Default::default() });
    let (file, bytes) = b.file("shared.bin", 50_000);
    let body = || Body::File { file: file.clone(), offset: 0, len: 50_000 };
    let other = crate::cache::file::ReadInFlight::start(file.clone());
    let mut out = Outgoing::new(response(HEAD, body()));
    let (got, asked, err) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, with_head(HEAD, &bytes));
    assert_eq!(asked, vec![Asked::Fill(0, 50_000)], "resident pages, but a read is under way");
    assert_eq!(b.counter("being_read_waits"), 1, "{:?}", b.stats);
    assert_eq!(b.counter("residency_misses"), 0, "not a miss: {:?}", b.stats);
    assert!(!b.pipeline.under_memory_pressure(), "a read under way is no sign of pressure");
    drop(other);
    let mut out = Outgoing::new(response(HEAD, body()));
    let (got, asked, _) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert_eq!(got, with_head(HEAD, &bytes));
    assert!(asked.is_empty(), "no read under way: sent from the loop, {asked:?}");
    assert_eq!(b.counter("being_read_waits"), 1, "{:?}", b.stats);
    // The same file evicted: a real miss, counted and reported to the page policy.
    amped_sys::residency::evict(&file.file).unwrap();
    let mut out = Outgoing::new(response(HEAD, body()));
    let (got, asked, _) = drive(&mut out, opts(ReadPath::Pipe), &b.pipeline);
    assert_eq!(got, with_head(HEAD, &bytes));
    assert_eq!(asked, vec![Asked::Fill(0, 50_000)], "the evicted file is read by a job");
    assert_eq!(b.counter("residency_misses"), 1, "{:?}", b.stats);
    assert_eq!(b.counter("being_read_waits"), 1, "{:?}", b.stats);
    assert!(b.pipeline.under_memory_pressure(), "a cold small file is pressure");
}
