//! Listening sockets: bind with `SO_REUSEADDR`, optionally `SO_REUSEPORT` (N independent
//! event loops or processes on one port, New Flash's "4p" set-up), a deep backlog.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};

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

/// Prepares an accepted connection: TCP_NODELAY (responses go out whole, no Nagle delay on
/// the last partial segment of a pipelined batch) and the blocking mode the caller wants.
pub fn prepare_stream(stream: &std::net::TcpStream, nonblocking: bool) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_nonblocking(nonblocking)
}

/// Accepts one connection in a single `accept4` (non-blocking, close-on-exec; TCP_NODELAY is
/// inherited from a listener made by [`bind`]). `WouldBlock` when the backlog is empty;
/// `EMFILE`/`ENFILE` pass through so the caller can back off.
pub fn accept_nonblocking(listener: &TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    use rustix::net::{SocketFlags, acceptfrom_with};
    let (fd, addr) = acceptfrom_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)?;
    let peer = addr
        .and_then(|a| SocketAddr::try_from(a).ok())
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok((std::net::TcpStream::from(fd), peer))
}

/// True for the accept errors that mean "out of descriptors": back off, don't spin.
pub fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == libc::EMFILE || code == libc::ENFILE || code == libc::ENOBUFS || code == libc::ENOMEM)
}
