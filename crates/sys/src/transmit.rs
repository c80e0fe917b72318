//! Moving response bytes to a socket: gather writes, `MSG_MORE` sends and zero-copy
//! `sendfile`, and the `recv` of request bytes. Every function reports `WouldBlock` as an `io::Error` of that kind and never
//! raises SIGPIPE (a vanished peer is an `EPIPE`/`ECONNRESET` error).

use crate::debox::{About, Call, around};
use rustix::net::{RecvFlags, SendFlags};
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsFd;

/// `writev`: header and a small in-memory body leave in one syscall (Flash §5.4 gather write).
#[track_caller]
pub fn write_vectored(sock: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let sock = sock.as_fd();
    Ok(around(Call::Writev, About::Fd(sock), || rustix::io::writev(sock, bufs))?)
}

/// `send` with `MSG_MORE` when `more` is set: the kernel holds a short header back until the
/// following `sendfile` fills the segment, so header and body share packets.
#[track_caller]
pub fn send(sock: impl AsFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = SendFlags::NOSIGNAL;
    if more {
        flags |= SendFlags::MORE;
    }
    let sock = sock.as_fd();
    Ok(around(Call::Send, About::Fd(sock), || rustix::net::send(sock, buf, flags))?)
}

/// Zero-copy `sendfile` of up to `len` bytes from `file` at `*offset`; advances `*offset`.
/// Returns 0 when the file ended early (truncated under us).
#[track_caller]
pub fn sendfile(sock: impl AsFd, file: &File, offset: &mut u64, len: usize) -> io::Result<usize> {
    let about = About::Fd(file.as_fd());
    Ok(around(Call::Sendfile, about, || rustix::fs::sendfile(sock, file, Some(offset), len))?)
}

/// `recv` of what a socket holds, up to `buf.len()` bytes (0: the peer closed its side).
#[track_caller]
pub fn recv(sock: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let sock = sock.as_fd();
    let r = around(Call::Recv, About::Fd(sock), || {
        rustix::net::recv(sock, &mut *buf, RecvFlags::empty())
    });
    Ok(r?.0)
}
