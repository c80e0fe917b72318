//! io_uring: one submission/completion ring whose operations *own* their memory.
//!
//! The `io-uring` crate makes pushing a submission-queue entry `unsafe`: the kernel reads and
//! writes the memory an entry points to at any moment until that entry's completion arrives.
//! This wrapper turns the contract into structure. Every operation **moves** what the kernel
//! will touch — a receive or read buffer, a gather list with its `msghdr`, a path, a `statx`
//! record, a peer-address slot — into the ring's table of operations in flight, under the
//! entry's `user_data`, and hands it back only with the operation's final completion. The
//! caller cannot free, grow or reuse a buffer the kernel may still use, so the architectures
//! above stay free of `unsafe`. Dropping the ring cancels whatever is in flight and waits for
//! the completions; memory whose completion never came is leaked, never freed.
//!
//! Only what amped's `uring` architecture needs is here: accept, recv, gather send, file read,
//! `openat`, `statx` on a descriptor, multishot poll (a helper's eventfd) and cancellation.

use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// `user_data` of cancel requests: their completions are swallowed.
const CANCEL_TAG: u64 = u64::MAX;
/// `user_data` of read-ahead advice: nobody waits for it, its completions are swallowed.
const ADVICE_TAG: u64 = u64::MAX - 1;
/// How long dropping a ring waits for cancelled operations to complete.
const DROP_WAIT: Duration = Duration::from_secs(2);

/// Handle of an operation in flight, for [`Ring::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpId(u64);

/// Bytes a gather send takes from after the head.
#[derive(Debug)]
pub enum Chunk {
    /// Nothing.
    Empty,
    /// Shared bytes (a cached small file, a generated page).
    Shared(Arc<[u8]>),
    /// An owned buffer (a chunk just read from a file).
    Owned(Vec<u8>),
    /// A huge page lent for a direct read (the chunk is a range of it).
    Page(crate::direct::Lent),
}

impl Chunk {
    /// The bytes held.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Empty => &[],
            Chunk::Shared(b) => b,
            Chunk::Owned(v) => v,
            Chunk::Page(p) => p.bytes(),
        }
    }
}

/// What one gather send transmits: `head[head_from..]` then `body[body_range]`.
#[derive(Debug)]
pub struct Gather {
    /// Response head (or an empty vector once it is sent).
    pub head: Vec<u8>,
    /// First unsent head byte.
    pub head_from: usize,
    /// Body bytes.
    pub body: Chunk,
    /// Unsent body range.
    pub body_range: Range<usize>,
}

impl Gather {
    /// Bytes still to send.
    pub fn remaining(&self) -> usize {
        self.head.len() - self.head_from + self.body_range.len()
    }

    /// The bytes still to send: the rest of the head, then the rest of the body.
    pub fn unsent(&self) -> [&[u8]; 2] {
        [&self.head[self.head_from..], &self.body.bytes()[self.body_range.clone()]]
    }

    /// A gather list of `bytes` alone (e.g. already encrypted), as a head with no body.
    pub fn of(bytes: Vec<u8>) -> Gather {
        Gather { head: bytes, head_from: 0, body: Chunk::Empty, body_range: 0..0 }
    }

    /// Records `n` bytes as sent; returns how many of them were body bytes.
    pub fn advance(&mut self, n: usize) -> usize {
        let from_head = n.min(self.head.len() - self.head_from);
        self.head_from += from_head;
        let from_body = (n - from_head).min(self.body_range.len());
        self.body_range.start += from_body;
        from_body
    }
}

pub use crate::files::FileStat;

/// What a completed operation produced (its memory handed back).
#[derive(Debug)]
pub enum Event {
    /// An accepted connection (blocking, close-on-exec) and its peer.
    Accepted(io::Result<(OwnedFd, Option<SocketAddr>)>),
    /// Bytes received; the buffer comes back with them appended.
    Received(io::Result<usize>, Vec<u8>),
    /// Bytes read from a file; the buffer comes back with them appended.
    Read(io::Result<usize>, Vec<u8>),
    /// Bytes read into a lent huge page, from its start ([`Ring::read_page`]).
    ReadPage(io::Result<usize>, crate::direct::Lent),
    /// Bytes sent from the gather list (not yet advanced over them).
    Sent(io::Result<usize>, Gather),
    /// A file opened read-only.
    Opened(io::Result<File>),
    /// A descriptor's metadata.
    Stat(io::Result<FileStat>),
    /// A multishot poll fired (or ended, when `more` is false).
    Polled(io::Result<()>),
}

/// One completion: the caller's token, whether more completions of the same (multishot)
/// operation follow, and the event.
#[derive(Debug)]
pub struct Completion {
    /// The token given when the operation was submitted.
    pub token: u64,
    /// A multishot operation is still armed.
    pub more: bool,
    /// What happened.
    pub event: Event,
}

/// The memory an operation in flight lends the kernel.
enum Held {
    Accept(Box<(socket2::SockAddrStorage, libc::socklen_t)>),
    Recv(Vec<u8>),
    Read(Vec<u8>),
    ReadPage(crate::direct::Lent),
    Send(Box<SendMsg>),
    #[allow(dead_code, reason = "never read: it keeps the path alive for the kernel")]
    Open(CString),
    Statx(Box<libc::statx>),
    Poll,
}

/// A gather list and the `msghdr`/`iovec`s pointing into it (boxed: the pointers stay valid).
struct SendMsg {
    gather: Gather,
    iov: [libc::iovec; 2],
    msg: libc::msghdr,
}

struct Slot {
    generation: u32,
    op: Option<(u64, Held)>,
    /// With `--debox`: when the operation was queued and how many `io_uring_enter`s had
    /// returned then.
    queued: Option<(Instant, u64)>,
}

/// Ring operations as `--debox` counts them (per opcode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// `IORING_OP_ACCEPT`.
    Accept,
    /// `IORING_OP_RECV`.
    Recv,
    /// `IORING_OP_POLL_ADD` (a dozing connection's one-shot poll, the helpers' eventfd).
    Poll,
    /// `IORING_OP_SENDMSG`.
    SendMsg,
    /// `IORING_OP_READ` of a file.
    Read,
    /// `IORING_OP_OPENAT`.
    OpenAt,
    /// `IORING_OP_STATX`.
    Statx,
}

impl OpKind {
    /// Every kind, in output order.
    pub const ALL: [OpKind; 7] = [
        OpKind::Accept,
        OpKind::Recv,
        OpKind::Poll,
        OpKind::SendMsg,
        OpKind::Read,
        OpKind::OpenAt,
        OpKind::Statx,
    ];

    /// The opcode's name in the profile.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Accept => "accept",
            OpKind::Recv => "recv",
            OpKind::Poll => "poll_add",
            OpKind::SendMsg => "sendmsg",
            OpKind::Read => "read",
            OpKind::OpenAt => "openat",
            OpKind::Statx => "statx",
        }
    }

    /// Operations whose time in flight is the client's (or the helpers'), not a wait of the
    /// server's: an accept or receive waits for a peer to send.
    pub fn waits_for_peer(self) -> bool {
        matches!(self, OpKind::Accept | OpKind::Recv | OpKind::Poll)
    }

    /// Operations that may wait for the disk.
    pub fn may_wait_for_disk(self) -> bool {
        matches!(self, OpKind::Read | OpKind::OpenAt | OpKind::Statx)
    }

    fn of(held: &Held) -> OpKind {
        match held {
            Held::Accept(_) => OpKind::Accept,
            Held::Recv(_) => OpKind::Recv,
            Held::Read(_) | Held::ReadPage(_) => OpKind::Read,
            Held::Send(_) => OpKind::SendMsg,
            Held::Open(_) => OpKind::OpenAt,
            Held::Statx(_) => OpKind::Statx,
            Held::Poll => OpKind::Poll,
        }
    }
}

/// One opcode's totals (`--debox`): from the moment an operation was queued to the moment the
/// loop took its completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTotals {
    /// Operations completed.
    pub count: u64,
    /// Completed with an error (a cancellation included).
    pub errors: u64,
    /// Queued → completion taken, total, ns.
    pub total_ns: u64,
    /// The longest, ns.
    pub max_ns: u64,
    /// Operations that took the slow threshold (`--debox-stall-ms`) or longer.
    pub slow: u64,
    /// Their time, ns.
    pub slow_ns: u64,
    /// Completed only after a later `io_uring_enter` than the one that submitted them: they
    /// could not finish while being submitted (a read that went async to the disk, a receive
    /// waiting for the client).
    pub after_wait: u64,
}

impl OpTotals {
    fn add(&mut self, ns: u64, error: bool, slow: bool, after_wait: bool) {
        self.count += 1;
        self.errors += u64::from(error);
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        if slow {
            self.slow += 1;
            self.slow_ns += ns;
        }
        self.after_wait += u64::from(after_wait);
    }

    fn merge(&mut self, o: &OpTotals) {
        self.count += o.count;
        self.errors += o.errors;
        self.total_ns += o.total_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
        self.slow += o.slow;
        self.slow_ns += o.slow_ns;
        self.after_wait += o.after_wait;
    }
}

/// Every ring's totals, merged after each batch of completions.
static OP_TOTALS: std::sync::Mutex<[OpTotals; 7]> = std::sync::Mutex::new(
    [OpTotals { count: 0, errors: 0, total_ns: 0, max_ns: 0, slow: 0, slow_ns: 0, after_wait: 0 };
        7],
);

/// Operations slower than this count as slow (`--debox-stall-ms`, set by the server).
static SLOW_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000);

/// Sets the slow threshold of ring operations.
pub fn set_slow_threshold(t: Duration) {
    SLOW_NS.store(t.as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The ring operations' totals so far (with `--debox`), per opcode that completed any.
pub fn op_totals() -> Vec<(OpKind, OpTotals)> {
    let t = OP_TOTALS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    OpKind::ALL.iter().zip(t.iter()).filter(|(_, t)| t.count > 0).map(|(k, t)| (*k, *t)).collect()
}

/// An io_uring instance plus the table of operations in flight.
pub struct Ring {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
    /// Completions copied out of the queue (reused between calls).
    ready: Vec<(u64, i32, u32)>,
    /// `io_uring_enter`s returned so far.
    enters: u64,
    /// With `--debox`: this batch's totals per opcode (merged into [`OP_TOTALS`]).
    ops: [OpTotals; 7],
    ops_dirty: bool,
    /// The kernel takes `IORING_OP_FADVISE` (5.6 and later); without it advice is skipped.
    advises: bool,
}

impl Ring {
    /// Sets up a ring of `entries` submission slots and checks that the kernel supports every
    /// operation amped submits. The error says why io_uring cannot be used (ENOSYS, EPERM from
    /// `kernel.io_uring_disabled` or seccomp, a missing opcode).
    pub fn new(entries: u32) -> io::Result<Ring> {
        let cq = entries.saturating_mul(4);
        // Single issuer + deferred task work: completions are processed only when this thread
        // waits, in batches. Older kernels reject the flags: fall back to a plain ring.
        let ring = IoUring::builder()
            .setup_cqsize(cq)
            .setup_submit_all()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|e| {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    IoUring::builder().setup_cqsize(cq).build(entries)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| {
                let why = match e.raw_os_error() {
                    Some(libc::EPERM) => {
                        "permission denied: kernel.io_uring_disabled or a seccomp filter"
                            .to_string()
                    }
                    Some(libc::ENOSYS) => "not implemented by this kernel".to_string(),
                    _ => e.to_string(),
                };
                io::Error::new(e.kind(), format!("io_uring_setup: {why}"))
            })?;
        let mut probe = io_uring::Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| io::Error::new(e.kind(), format!("io_uring probe: {e}")))?;
        for (code, name) in [
            (opcode::Accept::CODE, "ACCEPT"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::Read::CODE, "READ"),
            (opcode::OpenAt::CODE, "OPENAT"),
            (opcode::Statx::CODE, "STATX"),
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        ] {
            if !probe.is_supported(code) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("kernel lacks IORING_OP_{name}"),
                ));
            }
        }
        Ok(Ring {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            ready: Vec::new(),
            enters: 0,
            ops: [OpTotals::default(); 7],
            ops_dirty: false,
            advises: probe.is_supported(opcode::Fadvise::CODE),
        })
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.live
    }

    /// Accepts one connection on `listener`.
    pub fn accept(&mut self, token: u64, listener: BorrowedFd<'_>) -> OpId {
        let mut addr = Box::new((socket2::SockAddrStorage::zeroed(), 0 as libc::socklen_t));
        addr.1 = addr.0.size_of();
        // SockAddrStorage is repr(transparent) over sockaddr_storage.
        let sa = &mut addr.0 as *mut socket2::SockAddrStorage as *mut libc::sockaddr;
        let entry = opcode::Accept::new(types::Fd(listener.as_raw_fd()), sa, &mut addr.1)
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.push(token, entry, Held::Accept(addr))
    }

    /// Receives up to `max` bytes from `sock`, appended to `buf`.
    pub fn recv(&mut self, token: u64, sock: BorrowedFd<'_>, mut buf: Vec<u8>, max: usize) -> OpId {
        buf.reserve(max);
        let spare = buf.spare_capacity_mut();
        let len = spare.len().min(max).min(u32::MAX as usize) as u32;
        let entry =
            opcode::Recv::new(types::Fd(sock.as_raw_fd()), spare.as_mut_ptr().cast(), len).build();
        self.push(token, entry, Held::Recv(buf))
    }

    /// Reads up to `max` bytes of `file` at `offset`, appended to `buf`.
    pub fn read(
        &mut self,
        token: u64,
        file: BorrowedFd<'_>,
        mut buf: Vec<u8>,
        offset: u64,
        max: usize,
    ) -> OpId {
        buf.reserve(max);
        let spare = buf.spare_capacity_mut();
        let len = spare.len().min(max).min(u32::MAX as usize) as u32;
        let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), spare.as_mut_ptr().cast(), len)
            .offset(offset)
            .build();
        self.push(token, entry, Held::Read(buf))
    }

    /// Reads up to `len` bytes of `file` at `offset` into the start of `page` (at most a huge
    /// page): with a descriptor opened for direct reads, `offset` and `len` aligned to
    /// [`crate::direct::ALIGN`], one disk request the kernel serves without a thread.
    pub fn read_page(
        &mut self,
        token: u64,
        file: BorrowedFd<'_>,
        mut page: crate::direct::Lent,
        offset: u64,
        len: usize,
    ) -> OpId {
        let bytes = page.bytes_mut();
        let len = len.min(bytes.len()) as u32;
        let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), bytes.as_mut_ptr(), len)
            .offset(offset)
            .build();
        self.push(token, entry, Held::ReadPage(page))
    }

    /// Sends what `gather` has left in one `sendmsg` (`MSG_NOSIGNAL`; `MSG_MORE` when `more`).
    /// A partial send completes with the count: advance the gather and send again.
    pub fn send(&mut self, token: u64, sock: BorrowedFd<'_>, gather: Gather, more: bool) -> OpId {
        // SAFETY: msghdr is a plain C struct of pointers and integers; all-zero is valid.
        let msg: libc::msghdr = unsafe { std::mem::zeroed() };
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let mut boxed = Box::new(SendMsg { gather, iov: [empty, empty], msg });
        let s = &mut *boxed;
        let mut n = 0;
        let head = &s.gather.head[s.gather.head_from..];
        if !head.is_empty() {
            s.iov[n] =
                libc::iovec { iov_base: head.as_ptr() as *mut libc::c_void, iov_len: head.len() };
            n += 1;
        }
        let body = &s.gather.body.bytes()[s.gather.body_range.clone()];
        if !body.is_empty() {
            s.iov[n] =
                libc::iovec { iov_base: body.as_ptr() as *mut libc::c_void, iov_len: body.len() };
            n += 1;
        }
        s.msg.msg_iov = s.iov.as_mut_ptr();
        s.msg.msg_iovlen = n as _;
        let mut flags = libc::MSG_NOSIGNAL;
        if more {
            flags |= libc::MSG_MORE;
        }
        let entry =
            opcode::SendMsg::new(types::Fd(sock.as_raw_fd()), &s.msg).flags(flags as u32).build();
        self.push(token, entry, Held::Send(boxed))
    }

    /// Opens `path` with [`crate::files::SERVING_OPEN_FLAGS`] (read-only, non-blocking: a FIFO
    /// swapped in cannot hang the open; close-on-exec). Fails at once for a path containing NUL.
    pub fn open(&mut self, token: u64, path: &Path) -> io::Result<OpId> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        let flags = crate::files::SERVING_OPEN_FLAGS;
        let entry = opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), c.as_ptr()).flags(flags).build();
        Ok(self.push(token, entry, Held::Open(c)))
    }

    /// `statx` of an open descriptor (`AT_EMPTY_PATH`): the metadata of exactly what was opened.
    pub fn statx(&mut self, token: u64, file: BorrowedFd<'_>) -> OpId {
        // SAFETY: statx is a plain C struct of integers; all-zero is valid.
        let mut buf: Box<libc::statx> = Box::new(unsafe { std::mem::zeroed() });
        let ptr = &mut *buf as *mut libc::statx as *mut types::statx;
        let entry = opcode::Statx::new(types::Fd(file.as_raw_fd()), c"".as_ptr(), ptr)
            .flags(libc::AT_EMPTY_PATH)
            .mask(libc::STATX_BASIC_STATS)
            .build();
        self.push(token, entry, Held::Statx(buf))
    }

    /// Multishot poll for readability of `fd` (an eventfd): one completion per wake-up.
    pub fn poll_readable(&mut self, token: u64, fd: BorrowedFd<'_>) -> OpId {
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build();
        self.push(token, entry, Held::Poll)
    }

    /// Asks the kernel to start reading `len` bytes of `file` at `offset` into the page cache
    /// (`fadvise(WILLNEED)` on the ring's workers: the advice may block, the loop does not).
    /// Fire and forget: no completion is reported, and the descriptor may close at once (the
    /// kernel took its own reference at submission). Nothing happens on a kernel without
    /// `IORING_OP_FADVISE`.
    pub fn advise_will_need(&mut self, file: BorrowedFd<'_>, offset: u64, len: u64) {
        if !self.advises || len == 0 {
            return;
        }
        let len = libc::off_t::try_from(len).unwrap_or(libc::off_t::MAX);
        let entry =
            opcode::Fadvise::new(types::Fd(file.as_raw_fd()), len, libc::POSIX_FADV_WILLNEED)
                .offset(offset)
                .build()
                .user_data(ADVICE_TAG);
        self.push_entry(&entry);
    }

    /// Whether an operation's error says it was cancelled (`ECANCELED`).
    pub fn was_cancelled(e: &io::Error) -> bool {
        e.raw_os_error() == Some(libc::ECANCELED)
    }

    /// One-shot poll for readability of `sock`: a connection waits for its next request this
    /// way without lending the kernel a buffer (completes as `Event::Polled`).
    pub fn poll_once(&mut self, token: u64, sock: BorrowedFd<'_>) -> OpId {
        let entry = opcode::PollAdd::new(types::Fd(sock.as_raw_fd()), libc::POLLIN as u32).build();
        self.push(token, entry, Held::Poll)
    }

    /// Asks the kernel to cancel `op`. Its completion still arrives (usually `ECANCELED`,
    /// or the real result if it finished first). No effect on a finished operation.
    pub fn cancel(&mut self, op: OpId) {
        let (index, generation) = split(op.0);
        let Some(slot) = self.slots.get(index) else { return };
        if slot.generation != generation || slot.op.is_none() {
            return;
        }
        let entry = opcode::AsyncCancel::new(op.0).build().user_data(CANCEL_TAG);
        self.push_entry(&entry);
    }

    /// Submits what is queued and waits until at least one completion is ready or `timeout`
    /// passes. A signal ends the wait early (not an error).
    #[track_caller]
    pub fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        use crate::debox::{About, Call, around};
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        let submitter = self.ring.submitter();
        let result =
            around(Call::UringEnter, About::Nothing, || submitter.submit_with_args(1, &args));
        self.enters += 1;
        match result {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Moves the ready completions into `out`.
    pub fn completions(&mut self, out: &mut Vec<Completion>) {
        let mut ready = std::mem::take(&mut self.ready);
        let mut cq = self.ring.completion();
        cq.sync();
        ready.extend(cq.map(|c| (c.user_data(), c.result(), c.flags())));
        for (user_data, result, flags) in ready.drain(..) {
            if user_data == CANCEL_TAG || user_data == ADVICE_TAG {
                continue;
            }
            if let Some(c) = self.complete(user_data, result, cqueue::more(flags)) {
                out.push(c);
            }
        }
        self.ready = ready;
        if self.ops_dirty {
            let mut all = OP_TOTALS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (total, batch) in all.iter_mut().zip(self.ops.iter_mut()) {
                total.merge(batch);
                *batch = OpTotals::default();
            }
            self.ops_dirty = false;
        }
    }

    fn complete(&mut self, user_data: u64, res: i32, more: bool) -> Option<Completion> {
        let (index, generation) = split(user_data);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        if more {
            let (token, _) = slot.op.as_ref()?;
            return Some(Completion {
                token: *token,
                more,
                event: Event::Polled(status(res).map(drop)),
            });
        }
        let (token, held) = slot.op.take()?;
        if let Some((at, enters)) = slot.queued.take() {
            let ns = at.elapsed().as_nanos() as u64;
            let slow = ns >= SLOW_NS.load(std::sync::atomic::Ordering::Relaxed);
            // Queued before enter number `enters + 1`, which submitted it; taken now, after
            // `self.enters` of them.
            let after_wait = self.enters > enters + 1;
            self.ops[OpKind::of(&held) as usize].add(ns, res < 0, slow, after_wait);
            self.ops_dirty = true;
        }
        self.free.push(index as u32);
        self.live -= 1;
        let r = status(res);
        let event = match held {
            Held::Accept(addr) => Event::Accepted(r.map(|fd| {
                // SAFETY: the kernel just created descriptor `fd` for this accept; nothing else owns it.
                let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
                let (storage, len) = *addr;
                // SAFETY: the kernel wrote a socket address of `len` bytes into the storage,
                // as accept4(2) would.
                let peer = unsafe { socket2::SockAddr::new(storage, len) }.as_socket();
                (fd, peer)
            })),
            Held::Recv(buf) => {
                let (r, buf) = appended(r, buf);
                Event::Received(r, buf)
            }
            Held::Read(buf) => {
                let (r, buf) = appended(r, buf);
                Event::Read(r, buf)
            }
            Held::ReadPage(page) => Event::ReadPage(r.map(|n| n as usize), page),
            Held::Send(s) => Event::Sent(r.map(|n| n as usize), s.gather),
            Held::Open(_) => Event::Opened(r.map(|fd| {
                // SAFETY: the kernel just opened descriptor `fd` for this request; nothing else owns it.
                unsafe { File::from_raw_fd(fd as i32) }
            })),
            Held::Statx(st) => Event::Stat(r.map(|_| file_stat(&st))),
            Held::Poll => Event::Polled(r.map(drop)),
        };
        Some(Completion { token, more, event })
    }

    fn push(&mut self, token: u64, entry: squeue::Entry, held: Held) -> OpId {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot { generation: 0, op: None, queued: None });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.generation = slot.generation.wrapping_add(1);
        slot.op = Some((token, held));
        slot.queued = crate::debox::enabled().then(|| (Instant::now(), self.enters));
        self.live += 1;
        let user_data = (u64::from(slot.generation) << 32) | index as u64;
        debug_assert!(user_data != CANCEL_TAG && user_data != ADVICE_TAG);
        self.push_entry(&entry.user_data(user_data));
        OpId(user_data)
    }

    fn push_entry(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: every pointer in `entry` leads into memory owned by `self.slots` (the
            // `Held` stored under this entry's user_data just before this push) or into static
            // data (the empty path of statx). A slot's `Held` is moved out only in `complete`,
            // when the kernel has posted the operation's final completion, or leaked by `Drop`
            // when that completion cannot be awaited; boxed and heap storage does not move when
            // the slot table grows. Cancel and advice entries point to no memory at all.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return;
            }
            // Queue full: hand what is queued to the kernel and retry.
            if let Err(e) = self.ring.submit() {
                if !matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN | libc::EINTR)) {
                    panic!("io_uring submit failed with a full queue: {e}");
                }
                let mut cq = self.ring.completion();
                cq.sync();
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.live == 0 {
            return;
        }
        let cancel =
            opcode::AsyncCancel2::new(types::CancelBuilder::any()).build().user_data(CANCEL_TAG);
        self.push_entry(&cancel);
        let deadline = Instant::now() + DROP_WAIT;
        let mut sink = Vec::new();
        while self.live > 0 && Instant::now() < deadline {
            if self.submit_and_wait(Duration::from_millis(50)).is_err() {
                break;
            }
            self.completions(&mut sink);
            sink.clear(); // drops returned buffers and closes returned descriptors
        }
        if self.live > 0 {
            // The kernel may still write into these: never free them.
            for slot in self.slots.drain(..) {
                std::mem::forget(slot);
            }
        }
    }
}

fn split(user_data: u64) -> (usize, u32) {
    ((user_data & 0xffff_ffff) as usize, (user_data >> 32) as u32)
}

fn status(res: i32) -> io::Result<u32> {
    if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res as u32) }
}

/// Extends `buf` over the `n` bytes the kernel wrote into its spare capacity.
fn appended(r: io::Result<u32>, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
    match r {
        Ok(n) => {
            let n = (n as usize).min(buf.capacity() - buf.len());
            // SAFETY: the operation completed having written `n` bytes at the start of the
            // spare capacity it was given (the kernel never reports more than it was offered).
            unsafe { buf.set_len(buf.len() + n) };
            (Ok(n), buf)
        }
        Err(e) => (Err(e), buf),
    }
}

fn file_stat(st: &libc::statx) -> FileStat {
    let t = st.stx_mtime;
    let mtime = if t.tv_sec >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(t.tv_sec as u64, t.tv_nsec)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_nanos(u64::from(t.tv_nsec))
    };
    FileStat {
        size: st.stx_size,
        mtime,
        ino: st.stx_ino,
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        is_file: u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFREG,
        mode: u32::from(st.stx_mode),
        uid: st.stx_uid,
        gid: st.stx_gid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    fn wait_one(ring: &mut Ring) -> Completion {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.is_empty() {
            assert!(Instant::now() < deadline, "no completion within 5 s");
            ring.submit_and_wait(Duration::from_millis(100)).unwrap();
            ring.completions(&mut out);
        }
        assert_eq!(out.len(), 1, "{out:?}");
        out.pop().unwrap()
    }

    #[test]
    fn accept_recv_send_round_trip() {
        let mut ring = Ring::new(64).expect("io_uring available");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        ring.accept(1, listener.as_fd());
        let mut client = TcpStream::connect(addr).unwrap();
        let c = wait_one(&mut ring);
        let Event::Accepted(Ok((fd, peer))) = c.event else { panic!("{c:?}") };
        assert_eq!(c.token, 1);
        assert_eq!(peer, Some(client.local_addr().unwrap()));
        client.write_all(b"hello").unwrap();
        ring.recv(2, fd.as_fd(), b"<".to_vec(), 64);
        let Event::Received(Ok(5), buf) = wait_one(&mut ring).event else { panic!() };
        assert_eq!(buf, b"<hello");
        let g = Gather {
            head: b"HEAD".to_vec(),
            head_from: 1,
            body: Chunk::Shared(Arc::from(&b"xbodyx"[..])),
            body_range: 1..5,
        };
        ring.send(3, fd.as_fd(), g, false);
        let Event::Sent(Ok(7), mut g) = wait_one(&mut ring).event else { panic!() };
        assert_eq!(g.advance(7), 4);
        assert_eq!(g.remaining(), 0);
        let mut got = [0u8; 7];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"EADbody");
    }

    #[test]
    fn open_statx_read_match_std() {
        let dir = std::env::temp_dir().join(format!("amped-uring-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.txt");
        std::fs::write(&path, b"0123456789").unwrap();
        let mut ring = Ring::new(8).unwrap();
        ring.open(1, &path).unwrap();
        let Event::Opened(Ok(file)) = wait_one(&mut ring).event else { panic!() };
        ring.statx(2, file.as_fd());
        let Event::Stat(Ok(st)) = wait_one(&mut ring).event else { panic!() };
        let meta = file.metadata().unwrap();
        assert_eq!(
            (st.size, st.ino, st.dev, st.mtime),
            (meta.len(), meta.ino(), meta.dev(), meta.modified().unwrap())
        );
        assert!(st.is_file);
        ring.read(3, file.as_fd(), Vec::new(), 2, 100);
        let Event::Read(Ok(8), buf) = wait_one(&mut ring).event else { panic!() };
        assert_eq!(buf, b"23456789");
        ring.open(4, &dir.join("missing")).unwrap();
        let Event::Opened(Err(e)) = wait_one(&mut ring).event else { panic!() };
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        ring.open(5, &dir).unwrap();
        let Event::Opened(Ok(d)) = wait_one(&mut ring).event else { panic!() };
        ring.statx(6, d.as_fd());
        let Event::Stat(Ok(st)) = wait_one(&mut ring).event else { panic!() };
        assert!(!st.is_file);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cancel_returns_the_buffer_and_drop_waits() {
        let mut ring = Ring::new(8).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let op = ring.recv(7, server.as_fd(), Vec::with_capacity(16), 16);
        ring.submit_and_wait(Duration::from_millis(10)).unwrap();
        ring.cancel(op);
        let c = wait_one(&mut ring);
        let Event::Received(Err(e), buf) = c.event else { panic!("{c:?}") };
        assert_eq!(e.raw_os_error(), Some(libc::ECANCELED));
        assert!(buf.is_empty());
        assert_eq!(ring.in_flight(), 0);
        ring.cancel(op); // already finished: nothing happens
        ring.accept(8, listener.as_fd());
        ring.recv(9, server.as_fd(), Vec::new(), 16);
        drop(ring); // cancels both and waits for them
        drop(client);
    }

    #[test]
    fn accepted_sockets_inherit_tcp_nodelay_from_the_listener() {
        let mut ring = Ring::new(8).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        rustix::net::sockopt::set_tcp_nodelay(&listener, true).unwrap();
        ring.accept(1, listener.as_fd());
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let Event::Accepted(Ok((fd, _))) = wait_one(&mut ring).event else { panic!() };
        assert!(rustix::net::sockopt::tcp_nodelay(&fd).unwrap());
    }

    #[test]
    fn advice_brings_pages_in_and_reports_nothing() {
        let dir = std::env::temp_dir().join(format!("amped-uring-advice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap(); // written back, so its pages can go
        crate::residency::evict(&file).unwrap();
        let (at, len) = (256 << 10, 128 << 10);
        if crate::residency::is_resident(&file, at, len).unwrap_or(true) {
            eprintln!("skipped: this file system keeps the pages of {path:?}");
            return std::fs::remove_dir_all(&dir).unwrap();
        }
        let mut ring = Ring::new(8).unwrap();
        ring.advise_will_need(file.as_fd(), at, len);
        let (deadline, mut out) = (Instant::now() + Duration::from_secs(5), Vec::new());
        while !crate::residency::is_resident(&file, at, len).unwrap() {
            assert!(Instant::now() < deadline, "the advised pages never came in");
            ring.submit_and_wait(Duration::from_millis(20)).unwrap();
            ring.completions(&mut out);
        }
        assert!(out.is_empty(), "advice reports no completion: {out:?}");
        assert_eq!(ring.in_flight(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
