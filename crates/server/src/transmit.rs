//! Sending one response: the head, then the body from memory or from a file, picking up where
//! the last attempt stopped — the pieces [`crate::send_plan`] names, moved with socket calls.
//! One outcome convention for every architecture ([`SendOutcome`], lighttpd's done / try
//! again / error), so event loops and blocking threads share the code.
//!
//! Small bodies leave with the head in one `writev` (Flash §5.4 gather write). File bodies go
//! head first with `MSG_MORE`, then zero-copy `sendfile` in chunks; before each chunk the
//! residency test (Flash §5.7, `cachestat`) asks whether the pages are in memory. If not, the
//! architecture gets a read-ahead [`Job`] to run wherever it runs blocking work, so an AMPED
//! event loop never waits on the disk inside `sendfile`. Misses and completed sends are reported
//! to the page policy ([`crate::cache::pages`]), which may have a large file give its pages back.
//!
//! Bytes go out through a [`Wire`] (the transport layer, [`crate::transport`]): the socket
//! itself, or a TLS session. A TLS connection sends with zero-copy off, so its file bodies take
//! the read + write path below — the same residency test; a cold chunk is read by a job into
//! the response's buffer (`Job::Copy`), which the loop then writes.

use crate::cache::file::{ColdTransfer, ReadInFlight};
use crate::config::ReadPath;
use crate::disk::Copied;
use crate::fill_size::FillSize;
use crate::pipeline::{Body, Job, JobDone, Pipeline, Response};
use crate::send_plan::{HeadGoes, InMemory, Piece, SendPlan};
use crate::transport::Wire;
use amped_sys::pipe::PagePipe;
use amped_sys::{residency, transmit};
use std::cell::RefCell;
use std::io::{self, ErrorKind, IoSlice};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Largest body chunk tested for residency and sent in one `sendfile` call.
const CHUNK: u64 = 512 << 10;

/// What a pipe asks to hold: the largest fill.
const PIPE_BYTES: usize = amped_sys::pipe::WANT;

/// The buffer of the read + write path (`--no-zero-copy`, TLS): bytes read and sent per step.
const COPY_BYTES: usize = 64 << 10;

/// Empty pipes kept per thread for the next cold chunk (each costs two descriptors).
const SPARE_PIPES: usize = 32;

/// The largest read into a response's buffer (`--read-path copy`): as much as a pipe fill.
const COPY_FILL: u64 = PIPE_BYTES as u64;

/// How bodies are sent.
#[derive(Clone, Copy, Debug)]
pub struct SendOptions {
    /// Use sendfile (else pread + write).
    pub zero_copy: bool,
    /// Test page-cache residency before sending file data.
    pub residency_test: bool,
    /// What a cold chunk becomes: a pipe fill or a read-ahead.
    pub read_path: ReadPath,
    /// Return [`SendOutcome::Progress`] after each call that moved bytes without finishing,
    /// instead of going on: a `pool` worker on a blocking socket, which looks between calls
    /// for connections waiting for it (a client reading slowly but steadily would otherwise
    /// keep it until the response ends).
    pub yield_each_step: bool,
}

/// The result of a send attempt.
#[derive(Debug)]
pub enum SendOutcome {
    /// Everything was sent.
    Done,
    /// The socket buffer is full: wait until it is writable.
    WouldBlock,
    /// Bytes went and more remain (only with [`SendOptions::yield_each_step`]): send again.
    Progress,
    /// The next chunk is not in memory: run this job, hand its result to
    /// [`Outgoing::resume`], then send again.
    NotResident(Job),
    /// The peer went away, or the file shrank under us: close the connection.
    Failed(io::Error),
}

/// A response on its way out.
#[derive(Debug)]
pub struct Outgoing {
    /// The response.
    pub resp: Response,
    /// Which bytes go next ([`crate::send_plan`]).
    plan: SendPlan,
    /// The pipe holding the next bytes of the body (`--read-path pipe`), once a chunk was cold.
    pipe: Option<PagePipe>,
    /// The buffer holding the next bytes of the body (a copy fill), once a chunk was cold, and
    /// how much of it was sent.
    copied: Option<(Copied, usize)>,
    /// A fill that failed: the next send reports it.
    failed: Option<io::Error>,
    /// When sending began (the read lane's order).
    since: Instant,
    /// How much the next fill asks for ([`crate::fill_size`], at most a pipe's capacity).
    fill: FillSize,
    /// A chunk of this body was cold: the rest goes through jobs too (see `send_file_step`).
    /// Held until the response ends, it counts this response among the file's cold transfers.
    met_disk: Option<ColdTransfer>,
}

impl Outgoing {
    /// Starts sending `resp`.
    pub fn new(resp: Response) -> Self {
        Outgoing {
            plan: SendPlan::new(&resp, HeadGoes::Alone),
            resp,
            pipe: None,
            copied: None,
            failed: None,
            since: Instant::now(),
            fill: FillSize::default(),
            met_disk: None,
        }
    }

    /// Body bytes sent so far.
    pub fn body_sent(&self) -> u64 {
        self.plan.body_sent()
    }

    /// Takes the result of the job a [`SendOutcome::NotResident`] named: a filled pipe is
    /// sent from next, a read-ahead chunk is sent without testing again.
    pub fn resume(&mut self, done: JobDone) {
        if let Some(t) = self.resp.timeline.as_mut() {
            t.chunk_back(match done {
                JobDone::Filled(..) => "fill",
                JobDone::Copied(..) => "copy",
                _ => "read_ahead",
            });
        }
        match done {
            JobDone::Copied(Ok(buf)) if !buf.bytes().is_empty() => {
                self.plan.moved_in(buf.bytes().len());
                self.copied = Some((buf, 0));
            }
            JobDone::Copied(result) => {
                self.failed = Some(result.err().unwrap_or_else(|| {
                    io::Error::new(ErrorKind::UnexpectedEof, "file shrank while being sent")
                }));
            }
            JobDone::Filled(pipe, Ok(n)) if n > 0 => {
                self.plan.moved_in(n);
                self.pipe = Some(pipe);
            }
            JobDone::Filled(pipe, result) => {
                give_back(pipe);
                self.failed = Some(match result {
                    Err(e) => e,
                    Ok(_) => {
                        io::Error::new(ErrorKind::UnexpectedEof, "file shrank while being sent")
                    }
                });
            }
            // The chunk the job named has been read in.
            _ => {
                let pos = self.plan.position(&self.resp.body);
                self.plan.resident(&self.resp.body, pos, CHUNK);
            }
        }
    }

    /// Sends as much as the socket takes.
    pub fn send(&mut self, sock: impl AsFd, opts: SendOptions, p: &Pipeline) -> SendOutcome {
        self.send_on(Wire::Plain(sock.as_fd()), opts, p)
    }

    /// Sends as much as `wire` takes. Done only once the transport holds nothing more of
    /// the response (a TLS session may queue encrypted bytes the socket did not take yet).
    pub fn send_on(&mut self, mut wire: Wire<'_>, opts: SendOptions, p: &Pipeline) -> SendOutcome {
        if let Some(t) = self.resp.timeline.as_mut() {
            t.writable_again();
        }
        if let Some(e) = self.failed.take() {
            return SendOutcome::Failed(e);
        }
        loop {
            let step = match self.plan.next(&self.resp.body, CHUNK) {
                Piece::Done => Ok(true),
                Piece::Gather => self.send_gather(&mut wire),
                Piece::Head { more } => self.send_head(&mut wire, more),
                Piece::InHand { more } => self.send_in_hand(&mut wire, more, p),
                Piece::File { pos, len, in_memory } => {
                    self.send_file_range(&mut wire, (pos, len, in_memory), opts, p)
                }
            }
            .and_then(|done| {
                if done { wire.flush().map(|()| true).map_err(Stop::from) } else { Ok(false) }
            });
            match step {
                Ok(true) => return SendOutcome::Done,
                Ok(false) if opts.yield_each_step => return SendOutcome::Progress,
                Ok(false) => continue,
                Err(Stop::WouldBlock) => {
                    self.plan.waited();
                    if let Some(t) = self.resp.timeline.as_mut() {
                        t.unwritable();
                    }
                    return SendOutcome::WouldBlock;
                }
                Err(Stop::NotResident(job)) => {
                    if let Some(t) = self.resp.timeline.as_mut() {
                        t.job_submitted();
                    }
                    return SendOutcome::NotResident(job);
                }
                Err(Stop::Failed(e)) => return SendOutcome::Failed(e),
            }
        }
    }

    /// One gather write of the rest of the head and of the in-memory body. Ok(true) when all
    /// is sent.
    fn send_gather(&mut self, wire: &mut Wire<'_>) -> Result<bool, Stop> {
        let t0 = self.clock();
        let head = &self.resp.head[self.plan.head_sent()..];
        let body = match &self.resp.body {
            Body::Memory(bytes, r) => &bytes[r.start + self.plan.body_sent() as usize..r.end],
            Body::None | Body::File { .. } => &[],
        };
        let (head_len, body_len) = (head.len(), body.len());
        let n =
            wire.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]).map_err(Stop::from)?;
        self.sent("writev", n, t0);
        let from_body = self.plan.sent(n) as usize;
        Ok(n - from_body == head_len && from_body == body_len)
    }

    /// The rest of a file body's head, alone (`more`: with `MSG_MORE`). Ok(false): the plan
    /// names what follows.
    fn send_head(&mut self, wire: &mut Wire<'_>, more: bool) -> Result<bool, Stop> {
        let t0 = self.clock();
        let n = wire.send(&self.resp.head[self.plan.head_sent()..], more).map_err(Stop::from)?;
        self.sent("send", n, t0);
        self.plan.sent(n);
        Ok(false)
    }

    /// The file bytes in hand: written from the buffer, or spliced from the pipe into the
    /// socket.
    fn send_in_hand(
        &mut self,
        wire: &mut Wire<'_>,
        more: bool,
        p: &Pipeline,
    ) -> Result<bool, Stop> {
        let t0 = self.clock();
        if let Some((buf, sent)) =
            self.copied.as_mut().filter(|(buf, sent)| *sent < buf.bytes().len())
        {
            let bytes = buf.bytes();
            let n = wire.send(&bytes[*sent..], more).map_err(Stop::from)?;
            *sent += n;
            if *sent == bytes.len() {
                // Sent: the memory (and its share of the copy budget) goes back now, not when
                // the next trip begins.
                self.copied = None;
            }
            self.sent("send", n, t0);
            return self.body_moved(n, p);
        }
        let (Some(pipe), Some(sock)) = (self.pipe.as_mut(), wire.raw_socket()) else {
            // (Pipes are filled only for plain sockets with zero copy.)
            return Err(Stop::Failed(io::Error::other("file bytes in hand, no pipe")));
        };
        let n = pipe.drain_to(sock, pipe.held(), more).map_err(Stop::from)?;
        self.sent("splice", n, t0);
        self.body_moved(n, p)
    }

    /// One syscall's worth of the file range `(pos, chunk, in_memory)` the plan named, or the
    /// job that brings it into memory first. Ok(true) when all is sent.
    fn send_file_range(
        &mut self,
        wire: &mut Wire<'_>,
        (pos, chunk, in_memory): (u64, u64, InMemory),
        opts: SendOptions,
        p: &Pipeline,
    ) -> Result<bool, Stop> {
        let Body::File { file, len, .. } = &self.resp.body else { unreachable!("file body") };
        let (file, len) = (file.clone(), *len);
        let t0 = self.clock();
        // Untested pages after a cold chunk go to a job without a test (below); pages known
        // before the socket made the loop wait are tested again, even then: they were read in
        // completely, so the test can only find them reclaimed, never still being read.
        let untested =
            opts.residency_test && self.met_disk.is_some() && in_memory == InMemory::Untested;
        if untested {
            report_if_cold(&file, pos, chunk, p);
        }
        let (kind, n) = if opts.residency_test
            && in_memory != InMemory::Known
            && (untested || !self.test_residency(&file, pos, chunk, p))
        {
            // Once a chunk was cold, the rest of the body goes through jobs as well: the
            // kernel's read-ahead started by that job puts the following pages in the page
            // cache before their read completes, and a residency test counts them as there,
            // so a `sendfile` of them would wait for the disk on the loop (found with
            // `--debox`, docs/DEBOX.md). A job waits for them on a helper instead.
            if self.met_disk.is_none() {
                self.met_disk = Some(ColdTransfer::start(file.clone()));
            }
            let remaining = len - self.plan.body_sent();
            let direct = p.reads_around_cache(&file);
            let job =
                self.cold_chunk_job(file, pos, remaining, opts, direct, p.config().first_fill);
            return Err(Stop::NotResident(job));
        } else if let Some(sock) = wire.raw_socket().filter(|_| opts.zero_copy) {
            let mut off = pos;
            let n = transmit::sendfile(sock, &file.file, &mut off, chunk as usize);
            ("sendfile", n.map_err(Stop::from)?)
        } else {
            ("read+send", copy_chunk(wire, &file.file, pos, chunk)?)
        };
        self.sent(kind, n, t0);
        self.body_moved(n, p)
    }

    /// `n` bytes of the file body left: Ok(true) when that was the last of them. Nothing
    /// moved means the file shrank under the response.
    fn body_moved(&mut self, n: usize, p: &Pipeline) -> Result<bool, Stop> {
        if n == 0 {
            return Err(Stop::Failed(io::Error::new(
                ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            )));
        }
        self.plan.sent(n);
        let Some(file) = self.plan.whole_file_sent(&self.resp.body) else { return Ok(false) };
        if let Some(pipe) = self.pipe.take() {
            give_back(pipe);
        }
        p.sent_file(file);
        Ok(true)
    }
}

impl Outgoing {
    /// The clock, when this response keeps a timeline.
    fn clock(&self) -> Option<Instant> {
        self.resp.timeline.as_ref().map(|_| Instant::now())
    }

    /// Notes a send call of `kind` that moved `n` bytes since `t0` on the timeline.
    fn sent(&mut self, kind: &'static str, n: usize, t0: Option<Instant>) {
        if let (Some(t), Some(t0)) = (self.resp.timeline.as_mut(), t0) {
            t.send(kind, n, t0.elapsed());
        }
    }

    /// The residency test of `file[pos .. pos+chunk]`; true when it may be sent now (resident,
    /// or the test cannot tell). A miss is counted and reported to the page policy. While a
    /// helper reads pages of the file for another response, the answer is "not resident"
    /// without asking the kernel, which would count pages still being read (see
    /// [`crate::cache::file::ReadInFlight`]): this response's job then waits for them on a
    /// helper, not its `sendfile` on the loop. That wait is counted on its own
    /// (`being_read_waits`), not as a miss: the pages may be in memory already.
    fn test_residency(
        &mut self,
        file: &crate::cache::FileEntry,
        pos: u64,
        chunk: u64,
        p: &Pipeline,
    ) -> bool {
        if file.being_read() {
            if let Some(t) = self.resp.timeline.as_mut() {
                t.step("residency", Duration::ZERO, Some("being_read"));
            }
            p.chunk_being_read();
            return false;
        }
        let t0 = self.clock();
        let resident = residency::is_resident(&file.file, pos, chunk);
        if let (Some(t), Some(t0)) = (self.resp.timeline.as_mut(), t0)
            && matches!(resident, Ok(false))
        {
            // Only misses are steps: hits would split a run of sends into many steps.
            t.step("residency", t0.elapsed(), Some("miss"));
        }
        match resident {
            Ok(false) => {
                p.chunk_not_resident(file);
                false
            }
            Ok(true) | Err(_) => {
                self.plan.resident(&self.resp.body, pos, chunk);
                true
            }
        }
    }

    /// The job that gets a cold chunk at `pos` on its way: a read-ahead of the chunk
    /// (`--read-path read-ahead`), a direct read into a huge page (`direct`: the page policy's
    /// choice, [`crate::cache::pages`]; page and budget share are taken by the helper, which
    /// makes it a pipe fill if there are none), a pipe fill (with zero copy, and a pipe to be
    /// had), else a read into the response's buffer if it fits [`crate::copy_budget`], and a
    /// read-ahead where nothing else can be had.
    fn cold_chunk_job(
        &mut self,
        file: std::sync::Arc<crate::cache::FileEntry>,
        pos: u64,
        remaining: u64,
        opts: SendOptions,
        direct: bool,
        first_fill: u64,
    ) -> Job {
        let (since, continues) = (self.since, self.plan.body_sent() > 0);
        let reading = ReadInFlight::start(file);
        if opts.read_path == ReadPath::ReadAhead {
            let len = remaining.min(CHUNK);
            return Job::ReadAhead { reading, offset: pos, len, since, continues };
        }
        // Around the page cache: at most what fits one huge page from the aligned offset
        // below `pos`, so that the read is one disk request. The trip takes its page and its
        // share of the copy budget when its read starts, on the helper (a pipe fill if there
        // are none then), so trips waiting in the lane hold no memory.
        if direct {
            // One huge page, one disk request (4 MiB trips, two requests each, were no faster
            // and held twice the memory).
            let len = self.fill.direct_trip(remaining, pos);
            return Job::Copy {
                reading,
                offset: pos,
                len,
                since,
                continues,
                direct: true,
                held: None,
            };
        }
        // A pipe when the bytes may go to the socket without a copy and one can be had; else
        // (`--no-zero-copy`, TLS, no descriptor for a pipe) the bytes are copied anyway, so the
        // helper's read is the copy: into the response's buffer, which the loop then writes.
        let pipe = match opts.read_path {
            ReadPath::Pipe if opts.zero_copy => self.pipe.take().or_else(take_spare),
            _ => None,
        };
        if let Some(pipe) = pipe {
            let len = self.fill.take(remaining, pipe.capacity() as u64, first_fill);
            return Job::Fill { reading, offset: pos, len, pipe, since, continues };
        }
        let len = self.fill.take(remaining, COPY_FILL, first_fill);
        match crate::copy_budget::reserve(len) {
            Some(held) => Job::Copy {
                reading,
                offset: pos,
                len,
                since,
                continues,
                direct: false,
                held: Some(held),
            },
            // No memory for a buffer: Flash's read-ahead, sent with a small copy per step.
            None => {
                Job::ReadAhead { reading, offset: pos, len: remaining.min(CHUNK), since, continues }
            }
        }
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            give_back(pipe);
        }
    }
}

/// For a chunk that goes to a job untested (its body met the disk): the residency test all
/// the same where a miss of this file is evidence for the page policy, a miss counted and
/// reported as any other. The test decides nothing here (pages under read look resident); it
/// keeps the policy's evidence what io_uring, which tests every cold read, sees. Without it a
/// transfer of a smaller file that met the disk reported its first chunk and then nothing, and
/// large files' chunks went through the page cache for want of "pressure" while smaller ones
/// were being read from the disk all along (docs/BENCHMARKS.md §3b, session 20).
fn report_if_cold(file: &crate::cache::FileEntry, pos: u64, chunk: u64, p: &Pipeline) {
    if p.miss_is_evidence(file)
        && !file.being_read()
        && matches!(residency::is_resident(&file.file, pos, chunk), Ok(false))
    {
        p.chunk_not_resident(file);
    }
}

thread_local! {
    /// Empty pipes of this thread, ready for the next cold chunk.
    static SPARES: RefCell<Vec<PagePipe>> = const { RefCell::new(Vec::new()) };
}

/// An empty pipe: a spare one, or a new one (`None` if none can be made, e.g. out of
/// descriptors: the chunk then takes another path).
fn take_spare() -> Option<PagePipe> {
    SPARES.with(|s| s.borrow_mut().pop()).or_else(|| PagePipe::new(PIPE_BYTES).ok())
}

/// Keeps `pipe` for the next cold chunk if it can be emptied and few are kept already.
fn give_back(mut pipe: PagePipe) {
    if pipe.discard() {
        SPARES.with(|s| {
            let mut spares = s.borrow_mut();
            if spares.len() < SPARE_PIPES {
                spares.push(pipe);
            }
        });
    }
}

/// Read + write through a user-space buffer (the `--no-zero-copy` path).
fn copy_chunk(
    wire: &mut Wire<'_>,
    file: &std::fs::File,
    pos: u64,
    chunk: u64,
) -> Result<usize, Stop> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; COPY_BYTES]);
    }
    BUF.with(|b| {
        let mut buf = b.borrow_mut();
        let want = chunk.min(buf.len() as u64) as usize;
        let got = amped_sys::files::read_at(file, &mut buf[..want], pos).map_err(Stop::Failed)?;
        if got == 0 {
            return Ok(0);
        }
        wire.send(&buf[..got], false).map_err(Stop::from)
    })
}

enum Stop {
    WouldBlock,
    NotResident(Job),
    Failed(io::Error),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            ErrorKind::WouldBlock => Stop::WouldBlock,
            ErrorKind::Interrupted => Stop::WouldBlock,
            _ => Stop::Failed(e),
        }
    }
}

#[cfg(test)]
#[path = "transmit_tests.rs"]
mod tests;
