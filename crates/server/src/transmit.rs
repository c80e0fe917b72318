//! Sending one response: the head, then the body from memory or from a file, picking up where
//! the last attempt stopped. One outcome convention for every architecture ([`SendOutcome`],
//! lighttpd's done / try again / error), so event loops and blocking threads share the code.
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
//! the read + write path below — the same residency test and jobs, a buffer in between.

use crate::config::ReadPath;
use crate::pipeline::{Body, Job, JobDone, Pipeline, Response};
use crate::transport::Wire;
use amped_sys::pipe::PagePipe;
use amped_sys::{residency, transmit};
use std::cell::RefCell;
use std::io::{self, ErrorKind, IoSlice};
use std::os::fd::AsFd;
use std::time::Instant;

/// Largest body chunk tested for residency and sent in one `sendfile` call.
const CHUNK: u64 = 512 << 10;

/// What a pipe asks to hold (`fs.pipe-max-size` is 1 MiB by default): the largest fill.
const PIPE_BYTES: usize = 1 << 20;

/// The first fill of a response moves this much; each further fill of the same response
/// doubles, up to the pipe's capacity. A cold small file starts sending after one short read,
/// while a large transfer soon moves 1 MiB per trip through the read lane, so it queues (and
/// pays the disk's positioning) fewer times. A body whose rest is at most twice this goes in
/// one fill: a second trip through the lane would cost more than the bytes it saves waiting.
const FIRST_FILL: u64 = 128 << 10;

/// The buffer of the read + write path (`--no-zero-copy`, TLS): bytes read and sent per step.
const COPY_BYTES: usize = 64 << 10;

/// Empty pipes kept per thread for the next cold chunk (each costs two descriptors).
const SPARE_PIPES: usize = 32;

/// How bodies are sent.
#[derive(Clone, Copy, Debug)]
pub struct SendOptions {
    /// Use sendfile (else pread + write).
    pub zero_copy: bool,
    /// Test page-cache residency before sending file data.
    pub residency_test: bool,
    /// What a cold chunk becomes: a pipe fill or a read-ahead.
    pub read_path: ReadPath,
}

/// The result of a send attempt.
#[derive(Debug)]
pub enum SendOutcome {
    /// Everything was sent.
    Done,
    /// The socket buffer is full: wait until it is writable.
    WouldBlock,
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
    head_sent: usize,
    body_sent: u64,
    resident_until: u64,
    /// The pipe holding the next bytes of the body (`--read-path pipe`), once a chunk was cold.
    pipe: Option<PagePipe>,
    /// A fill that failed: the next send reports it.
    failed: Option<io::Error>,
    /// When sending began (the read lane's order).
    since: Instant,
    /// Bytes the next fill asks for.
    next_fill: u64,
    /// A chunk of this body was cold: the rest goes through jobs too (see `send_file_step`).
    met_disk: bool,
}

impl Outgoing {
    /// Starts sending `resp`.
    pub fn new(resp: Response) -> Self {
        Outgoing {
            resp,
            head_sent: 0,
            body_sent: 0,
            resident_until: 0,
            pipe: None,
            failed: None,
            since: Instant::now(),
            next_fill: FIRST_FILL,
            met_disk: false,
        }
    }

    /// Body bytes sent so far.
    pub fn body_sent(&self) -> u64 {
        self.body_sent
    }

    /// Takes the result of the job a [`SendOutcome::NotResident`] named: a filled pipe is
    /// sent from next, a read-ahead chunk is sent without testing again.
    pub fn resume(&mut self, done: JobDone) {
        if let Some(t) = self.resp.timeline.as_mut() {
            t.chunk_back(if matches!(done, JobDone::Filled(..)) { "fill" } else { "read_ahead" });
        }
        match done {
            JobDone::Filled(pipe, Ok(n)) if n > 0 => self.pipe = Some(pipe),
            JobDone::Filled(pipe, result) => {
                give_back(pipe);
                self.failed = Some(match result {
                    Err(e) => e,
                    Ok(_) => {
                        io::Error::new(ErrorKind::UnexpectedEof, "file shrank while being sent")
                    }
                });
            }
            _ => self.mark_resident(),
        }
    }

    /// Records that the chunk a [`SendOutcome::NotResident`] named has been read in.
    fn mark_resident(&mut self) {
        if let Body::File { offset, len, .. } = &self.resp.body {
            let pos = offset + self.body_sent;
            self.resident_until = (pos + CHUNK).min(offset + len);
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
            let step = match &self.resp.body {
                Body::None => self.send_memory(&mut wire, &[]),
                Body::Memory(bytes, r) => {
                    let bytes = bytes.clone();
                    let from = r.start + self.body_sent as usize;
                    self.send_memory(&mut wire, &bytes[from..r.end])
                }
                Body::File { .. } => self.send_file_step(&mut wire, opts, p),
            }
            .and_then(|done| {
                if done { wire.flush().map(|()| true).map_err(Stop::from) } else { Ok(false) }
            });
            match step {
                Ok(true) => return SendOutcome::Done,
                Ok(false) => continue,
                Err(Stop::WouldBlock) => {
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

    /// One gather write of the rest of the head and `body`. Ok(true) when all is sent.
    fn send_memory(&mut self, wire: &mut Wire<'_>, body: &[u8]) -> Result<bool, Stop> {
        let head = &self.resp.head[self.head_sent..];
        let head_len = head.len();
        if head.is_empty() && body.is_empty() {
            return Ok(true);
        }
        let t0 = self.clock();
        let n =
            wire.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]).map_err(Stop::from)?;
        self.sent("writev", n, t0);
        let from_head = n.min(head_len);
        self.head_sent += from_head;
        self.body_sent += (n - from_head) as u64;
        Ok(from_head == head_len && n - from_head == body.len())
    }

    /// One syscall's worth of a file response. Ok(true) when all is sent.
    fn send_file_step(
        &mut self,
        wire: &mut Wire<'_>,
        opts: SendOptions,
        p: &Pipeline,
    ) -> Result<bool, Stop> {
        let Body::File { file, offset, len } = &self.resp.body else { unreachable!("file body") };
        let (file, offset, len) = (file.clone(), *offset, *len);
        let remaining = len - self.body_sent;
        let pos = offset + self.body_sent;
        if self.head_sent < self.resp.head.len() {
            let t0 = self.clock();
            let head = &self.resp.head[self.head_sent..];
            let n = wire.send(head, remaining > 0).map_err(Stop::from)?;
            self.sent("send", n, t0);
            self.head_sent += n;
            return Ok(remaining == 0 && self.head_sent == self.resp.head.len());
        }
        if remaining == 0 {
            return Ok(true);
        }
        // Up to the end of what is known to be in memory (a chunk tested, or read in by a job),
        // so a send the socket took only part of is followed by the rest of that range, not by
        // a new test or job for a range reaching past it.
        let known = self.resident_until.saturating_sub(pos);
        let chunk = remaining.min(if known > 0 { known.min(CHUNK) } else { CHUNK });
        // What this step sends: the chunk, or one buffer of it on the copying path.
        let step = if opts.zero_copy { chunk } else { chunk.min(COPY_BYTES as u64) };
        let t0 = self.clock();
        let (kind, n) = if let Some(pipe) = self.pipe.as_mut().filter(|pipe| pipe.held() > 0)
            && let Some(sock) = wire.raw_socket()
        {
            let held = pipe.held() as u64;
            ("splice", pipe.drain_to(sock, held as usize, remaining > held).map_err(Stop::from)?)
        } else if opts.residency_test
            && pos + step > self.resident_until
            && (self.met_disk || !self.test_residency(&file, pos, chunk, p))
        {
            // Once a chunk was cold, the rest of the body goes through jobs as well: the
            // kernel's read-ahead started by that job puts the following pages in the page
            // cache before their read completes, and a residency test counts them as there,
            // so a `sendfile` of them would wait for the disk on the loop (found with
            // `--debox`, docs/DEBOX.md). A job waits for them on a helper instead.
            self.met_disk = true;
            return Err(Stop::NotResident(self.cold_chunk_job(file, pos, remaining, opts)));
        } else if let Some(sock) = wire.raw_socket().filter(|_| opts.zero_copy) {
            let mut off = pos;
            let n = transmit::sendfile(sock, &file.file, &mut off, chunk as usize);
            ("sendfile", n.map_err(Stop::from)?)
        } else {
            ("read+send", copy_chunk(wire, &file.file, pos, chunk)?)
        };
        self.sent(kind, n, t0);
        if n == 0 {
            return Err(Stop::Failed(io::Error::new(
                ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            )));
        }
        self.body_sent += n as u64;
        let done = self.body_sent == len;
        if done && let Some(pipe) = self.pipe.take() {
            give_back(pipe);
        }
        if done {
            p.sent_file(&file);
        }
        Ok(done)
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
    /// or the test cannot tell). A miss is counted and reported to the page policy.
    fn test_residency(
        &mut self,
        file: &crate::cache::FileEntry,
        pos: u64,
        chunk: u64,
        p: &Pipeline,
    ) -> bool {
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
                self.resident_until = pos + chunk;
                true
            }
        }
    }

    /// The job that gets a cold chunk at `pos` on its way: a pipe fill (with zero copy, and a
    /// pipe to be had), else a read-ahead of the chunk.
    fn cold_chunk_job(
        &mut self,
        file: std::sync::Arc<crate::cache::FileEntry>,
        pos: u64,
        remaining: u64,
        opts: SendOptions,
    ) -> Job {
        let (since, continues) = (self.since, self.body_sent > 0);
        let pipe = match opts.read_path {
            ReadPath::Pipe if opts.zero_copy => self.pipe.take().or_else(take_spare),
            _ => None,
        };
        match pipe {
            Some(pipe) => {
                let cap = pipe.capacity() as u64;
                let len = if remaining <= 2 * FIRST_FILL {
                    remaining.min(cap)
                } else {
                    remaining.min(self.next_fill.min(cap))
                };
                self.next_fill = (self.next_fill * 2).min(cap);
                Job::Fill { file, offset: pos, len, pipe, since, continues }
            }
            None => {
                Job::ReadAhead { file, offset: pos, len: remaining.min(CHUNK), since, continues }
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

thread_local! {
    /// Empty pipes of this thread, ready for the next cold chunk.
    static SPARES: RefCell<Vec<PagePipe>> = const { RefCell::new(Vec::new()) };
}

/// An empty pipe: a spare one, or a new one (`None` if none can be made, e.g. out of
/// descriptors: the chunk then takes the read-ahead path).
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
