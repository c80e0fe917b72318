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

use crate::pipeline::{Body, Job, Pipeline, Response};
use crate::stats::bump;
use amped_sys::{residency, transmit};
use std::io::{self, ErrorKind, IoSlice};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

/// Largest body chunk tested for residency and sent in one `sendfile` call.
const CHUNK: u64 = 512 << 10;

/// How bodies are sent.
#[derive(Clone, Copy, Debug)]
pub struct SendOptions {
    /// Use sendfile (else pread + write).
    pub zero_copy: bool,
    /// Test page-cache residency before sending file data.
    pub residency_test: bool,
}

/// The result of a send attempt.
#[derive(Debug)]
pub enum SendOutcome {
    /// Everything was sent.
    Done,
    /// The socket buffer is full: wait until it is writable.
    WouldBlock,
    /// The next chunk is not in memory: run this read-ahead job, call
    /// [`Outgoing::mark_resident`], then send again.
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
}

impl Outgoing {
    /// Starts sending `resp`.
    pub fn new(resp: Response) -> Self {
        Outgoing { resp, head_sent: 0, body_sent: 0, resident_until: 0 }
    }

    /// Body bytes sent so far.
    pub fn body_sent(&self) -> u64 {
        self.body_sent
    }

    /// Records that the chunk a [`SendOutcome::NotResident`] named has been read in, so it
    /// is sent without testing again.
    pub fn mark_resident(&mut self) {
        if let Body::File { offset, len, .. } = &self.resp.body {
            let pos = offset + self.body_sent;
            self.resident_until = (pos + CHUNK).min(offset + len);
        }
    }

    /// Sends as much as the socket takes.
    pub fn send(&mut self, sock: impl AsFd, opts: SendOptions, p: &Pipeline) -> SendOutcome {
        let sock = sock.as_fd();
        loop {
            let step = match &self.resp.body {
                Body::None => self.send_memory(sock, &[]),
                Body::Memory(bytes, r) => {
                    let bytes = bytes.clone();
                    let from = r.start + self.body_sent as usize;
                    self.send_memory(sock, &bytes[from..r.end])
                }
                Body::File { .. } => self.send_file_step(sock, opts, p),
            };
            match step {
                Ok(true) => return SendOutcome::Done,
                Ok(false) => continue,
                Err(Stop::WouldBlock) => return SendOutcome::WouldBlock,
                Err(Stop::NotResident(job)) => return SendOutcome::NotResident(job),
                Err(Stop::Failed(e)) => return SendOutcome::Failed(e),
            }
        }
    }

    /// One gather write of the rest of the head and `body`. Ok(true) when all is sent.
    fn send_memory(
        &mut self,
        sock: std::os::fd::BorrowedFd<'_>,
        body: &[u8],
    ) -> Result<bool, Stop> {
        let head = &self.resp.head[self.head_sent..];
        if head.is_empty() && body.is_empty() {
            return Ok(true);
        }
        let n = transmit::write_vectored(sock, &[IoSlice::new(head), IoSlice::new(body)])
            .map_err(Stop::from)?;
        let from_head = n.min(head.len());
        self.head_sent += from_head;
        self.body_sent += (n - from_head) as u64;
        Ok(from_head == head.len() && n - from_head == body.len())
    }

    /// One syscall's worth of a file response. Ok(true) when all is sent.
    fn send_file_step(
        &mut self,
        sock: std::os::fd::BorrowedFd<'_>,
        opts: SendOptions,
        p: &Pipeline,
    ) -> Result<bool, Stop> {
        let Body::File { file, offset, len } = &self.resp.body else { unreachable!("file body") };
        let (file, offset, len) = (file.clone(), *offset, *len);
        let remaining = len - self.body_sent;
        let pos = offset + self.body_sent;
        if self.head_sent < self.resp.head.len() {
            let head = &self.resp.head[self.head_sent..];
            self.head_sent += transmit::send(sock, head, remaining > 0).map_err(Stop::from)?;
            return Ok(remaining == 0 && self.head_sent == self.resp.head.len());
        }
        if remaining == 0 {
            return Ok(true);
        }
        let chunk = remaining.min(CHUNK);
        if opts.residency_test && pos + chunk > self.resident_until {
            match residency::is_resident(&file.file, pos, chunk) {
                Ok(true) => self.resident_until = pos + chunk,
                Ok(false) => {
                    bump(&p.stats.residency_misses);
                    p.caches.pages.note_miss(file.size);
                    return Err(Stop::NotResident(Job::ReadAhead {
                        file,
                        offset: pos,
                        len: chunk,
                    }));
                }
                Err(_) => self.resident_until = pos + chunk, // cannot tell: just send
            }
        }
        let n = if opts.zero_copy {
            let mut off = pos;
            transmit::sendfile(sock, &file.file, &mut off, chunk as usize).map_err(Stop::from)?
        } else {
            copy_chunk(sock, &file.file, pos, chunk)?
        };
        if n == 0 {
            return Err(Stop::Failed(io::Error::new(
                ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            )));
        }
        self.body_sent += n as u64;
        let done = self.body_sent == len;
        if done && p.caches.pages.enabled() {
            let yielded = p.caches.pages.sent(&file);
            p.stats.page_yields.fetch_add(yielded, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(done)
    }
}

/// Read + write through a user-space buffer (the `--no-zero-copy` path).
fn copy_chunk(
    sock: std::os::fd::BorrowedFd<'_>,
    file: &std::fs::File,
    pos: u64,
    chunk: u64,
) -> Result<usize, Stop> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 64 << 10]);
    }
    BUF.with(|b| {
        let mut buf = b.borrow_mut();
        let want = chunk.min(buf.len() as u64) as usize;
        let got = file.read_at(&mut buf[..want], pos).map_err(Stop::Failed)?;
        if got == 0 {
            return Ok(0);
        }
        transmit::send(sock, &buf[..got], false).map_err(Stop::from)
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
