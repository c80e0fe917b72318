//! Listening sockets: bind with `SO_REUSEADDR`, optionally `SO_REUSEPORT` (N independent
//! event loops or processes on one port, New Flash's "4p" set-up), a deep backlog; Unix
//! stream sockets; sockets passed by systemd (socket activation).
//!
//! Every listener is handed to the architectures as a `std::net::TcpListener` whatever its
//! family: they only accept on it (with [`accept_nonblocking`] / [`accept_blocking`], which
//! take any stream socket, or the io_uring accept), read, write and sendfile, which work the
//! same on a Unix socket. TCP-only options are set on TCP listeners only; a client of a Unix
//! socket has no IP address and is reported as `0.0.0.0:0`.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// How to open a listener.
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    /// Set `SO_REUSEPORT` so several sockets can bind the same address.
    pub reuse_port: bool,
    /// Put the socket in non-blocking mode (event loops) or leave it blocking (threads).
    pub nonblocking: bool,
    /// The accept backlog.
    pub backlog: i32,
}

/// Opens a TCP listener on `addr`.
pub fn bind(addr: SocketAddr, opts: ListenOptions) -> io::Result<TcpListener> {
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    // Accepted sockets inherit TCP_NODELAY from the listener on Linux: one setsockopt here
    // instead of one per connection.
    socket.set_tcp_nodelay(true)?;
    if opts.reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(opts.backlog)?;
    socket.set_nonblocking(opts.nonblocking)?;
    Ok(socket.into())
}

/// Opens a Unix stream listener at `path`, replacing a socket file left there by a previous
/// run (any other kind of file there is an error: it is not ours to delete).
pub fn bind_unix(path: &Path, opts: ListenOptions) -> io::Result<TcpListener> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a socket"));
        }
        Err(_) => {}
    }
    let socket = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)?;
    socket.bind(&SockAddr::unix(path)?)?;
    socket.listen(opts.backlog)?;
    socket.set_nonblocking(opts.nonblocking)?;
    Ok(socket.into())
}

/// The listening sockets systemd passed to this process (socket activation: `LISTEN_PID` is
/// our pid and `LISTEN_FDS` counts descriptors from 3), each checked to be a listening stream
/// socket and made close-on-exec. Empty when the process was not socket-activated.
pub fn systemd_listeners() -> io::Result<Vec<TcpListener>> {
    let ours = std::env::var("LISTEN_PID").ok().and_then(|p| p.parse::<u32>().ok())
        == Some(std::process::id());
    let count = std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse::<i32>().ok());
    match (ours, count) {
        (true, Some(n)) if n > 0 => (3..3 + n)
            .map(|fd| {
                crate::process::inherited_listener(fd).map_err(|e| {
                    io::Error::new(e.kind(), format!("LISTEN_FDS (systemd socket activation): {e}"))
                })
            })
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// Prepares an accepted connection: TCP_NODELAY (responses go out whole, no Nagle delay on
/// the last partial segment of a pipelined batch; not for Unix sockets, which have no such
/// option) and the blocking mode the caller wants.
pub fn prepare_stream(stream: &std::net::TcpStream, nonblocking: bool) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    stream.set_nonblocking(nonblocking)
}

/// Accepts one connection on a blocking listener in a single `accept4` (close-on-exec), from
/// any stream socket family (`TcpListener::accept` fails on a Unix socket's address).
pub fn accept_blocking(listener: &TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    use rustix::net::{SocketFlags, acceptfrom_with};
    let (fd, addr) = acceptfrom_with(listener, SocketFlags::CLOEXEC)?;
    Ok((std::net::TcpStream::from(fd), peer_or_unspecified(addr)))
}

fn peer_or_unspecified(addr: Option<rustix::net::SocketAddrAny>) -> SocketAddr {
    addr.and_then(|a| SocketAddr::try_from(a).ok())
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// Accepts one connection in a single `accept4` (non-blocking, close-on-exec; TCP_NODELAY is
/// inherited from a listener made by [`bind`]). `WouldBlock` when the backlog is empty;
/// `EMFILE`/`ENFILE` pass through so the caller can back off.
#[track_caller]
pub fn accept_nonblocking(listener: &TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    use crate::debox::{About, Call, around};
    use rustix::net::{SocketFlags, acceptfrom_with};
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let (fd, addr) = around(Call::Accept, About::Nothing, || acceptfrom_with(listener, flags))?;
    Ok((std::net::TcpStream::from(fd), peer_or_unspecified(addr)))
}

/// True for the accept errors that mean "out of descriptors": back off, don't spin.
pub fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == libc::EMFILE || code == libc::ENFILE || code == libc::ENOBUFS || code == libc::ENOMEM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn unix_listeners_accept_and_replace_stale_sockets() {
        let dir = std::env::temp_dir().join(format!("amped-sys-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let opts = ListenOptions { reuse_port: false, nonblocking: false, backlog: 16 };
        let first = bind_unix(&path, opts).unwrap();
        drop(first); // leaves the socket file behind, as a crash would
        let listener = bind_unix(&path, opts).unwrap();
        let mut client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (mut conn, peer) = accept_blocking(&listener).unwrap();
        assert_eq!(peer, SocketAddr::from(([0, 0, 0, 0], 0)));
        prepare_stream(&conn, false).unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        std::fs::write(dir.join("plain"), "x").unwrap();
        assert!(bind_unix(&dir.join("plain"), opts).is_err(), "a plain file is not replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
