//! Moving response bytes to a socket: gather writes, `MSG_MORE` sends and zero-copy
//! `sendfile`. Every function reports `WouldBlock` as an `io::Error` of that kind and never
//! raises SIGPIPE (a vanished peer is an `EPIPE`/`ECONNRESET` error).

use rustix::net::SendFlags;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsFd;

/// `writev`: header and a small in-memory body leave in one syscall (Flash §5.4 gather write).
pub fn write_vectored(sock: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    Ok(rustix::io::writev(sock, bufs)?)
}

/// `send` with `MSG_MORE` when `more` is set: the kernel holds a short header back until the
/// following `sendfile` fills the segment, so header and body share packets.
pub fn send(sock: impl AsFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = SendFlags::NOSIGNAL;
    if more {
        flags |= SendFlags::MORE;
    }
    Ok(rustix::net::send(sock, buf, flags)?)
}

/// Zero-copy `sendfile` of up to `len` bytes from `file` at `*offset`; advances `*offset`.
/// Returns 0 when the file ended early (truncated under us).
pub fn sendfile(sock: impl AsFd, file: &File, offset: &mut u64, len: usize) -> io::Result<usize> {
    Ok(rustix::fs::sendfile(sock, file, Some(offset), len)?)
}
