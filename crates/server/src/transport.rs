//! How a connection's bytes cross the wire: plain TCP, or TLS (rustls) over TCP. The event
//! loops hold a [`Transport`] per connection and read requests through it; [`crate::transmit`]
//! writes responses through the [`Wire`] it lends. Above this layer nothing knows whether the
//! connection is encrypted, with one exception the transport itself decides
//! ([`Transport::send_options`]): a TLS body cannot leave by `sendfile`/`splice` (no kTLS on
//! this kernel), so it is read into a buffer — after the same residency test, so cold data
//! still goes through a job and the loop never waits on the disk — and written through rustls.
//!
//! Both sides are non-blocking. A TLS read may have to write (the handshake, alerts) and a
//! write may leave encrypted bytes queued in rustls when the socket is full; the loop then
//! also watches for writability ([`Transport::interest`]) and every read or write first
//! pushes out what is queued. The handshake is read like a request head: it is bounded by
//! `--header-timeout`. Bytes that are not TLS (a plain-HTTP client on the TLS port) fail the
//! handshake and the connection closes (rustls queues an alert, sent if the socket takes it).

use crate::tls::TlsContext;
use crate::transmit::SendOptions;
use amped_sys::epoll::Interest;
use amped_sys::transmit;
use rustls::ServerConnection;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};

/// Largest amount of encrypted output rustls queues for one connection before a write is
/// refused (the socket must drain first): a 64 KiB body chunk and its head fit whole.
const TLS_QUEUE_LIMIT: usize = 128 << 10;

/// One connection's transport.
#[derive(Debug)]
pub enum Transport {
    /// Bytes as they are.
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<TlsStream>),
}

/// A TCP socket and the TLS session running over it.
#[derive(Debug)]
pub struct TlsStream {
    sock: TcpStream,
    session: ServerConnection,
}

/// Where a response's bytes are written: borrowed from a [`Transport`] for one send.
pub enum Wire<'a> {
    /// Straight to the socket (zero-copy paths allowed).
    Plain(BorrowedFd<'a>),
    /// Through a TLS session.
    Tls(&'a mut TlsStream),
}

impl Transport {
    /// The transport of a connection just accepted: TLS when the listener speaks it.
    pub fn accept(sock: TcpStream, tls: Option<&TlsContext>) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(sock),
            Some(ctx) => {
                let mut session = ctx.session()?;
                session.set_buffer_limit(Some(TLS_QUEUE_LIMIT));
                Transport::Tls(Box::new(TlsStream { sock, session }))
            }
        })
    }

    /// Reads request bytes (decrypted) into `buf`: Ok(0) at the end of the stream,
    /// `WouldBlock` when nothing is there yet (a TLS handshake in progress included).
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(sock) => transmit::recv(&*sock, buf),
            Transport::Tls(tls) => tls.recv(buf),
        }
    }

    /// Whether request bytes already received wait in the transport (a TLS record decrypted
    /// beyond what the last [`Transport::recv`] took): epoll will not announce them.
    pub fn holds_input(&mut self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(tls) => tls
                .session
                .process_new_packets()
                .is_ok_and(|state| state.plaintext_bytes_to_read() > 0),
        }
    }

    /// The writer for a response.
    pub fn wire(&mut self) -> Wire<'_> {
        match self {
            Transport::Plain(sock) => Wire::Plain(<TcpStream as AsFd>::as_fd(sock)),
            Transport::Tls(tls) => Wire::Tls(tls),
        }
    }

    /// `opts` as this transport can honour them: no zero-copy under TLS (the bytes must pass
    /// through rustls), so a cold chunk becomes a read-ahead job rather than a pipe fill.
    pub fn send_options(&self, opts: SendOptions) -> SendOptions {
        match self {
            Transport::Plain(_) => opts,
            Transport::Tls(_) => SendOptions { zero_copy: false, ..opts },
        }
    }

    /// What to wait for when the loop wants `interest`: writability too while encrypted
    /// bytes are queued (a handshake message the socket did not take, the end of a response).
    pub fn interest(&self, interest: Interest) -> Interest {
        match (self, interest) {
            (Transport::Tls(tls), Interest::Read) if tls.session.wants_write() => {
                Interest::ReadWrite
            }
            _ => interest,
        }
    }

    /// Before the connection is dropped: a TLS session says `close_notify` (best effort, the
    /// socket is non-blocking), so the client can tell a complete response from a cut one.
    pub fn close(&mut self) {
        if let Transport::Tls(tls) = self {
            tls.session.send_close_notify();
            let _ = tls.flush();
        }
    }
}

impl AsFd for Transport {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Transport::Plain(sock) => sock.as_fd(),
            Transport::Tls(tls) => tls.sock.as_fd(),
        }
    }
}

impl TlsStream {
    /// Decrypted bytes into `buf`, reading and processing records (and answering the
    /// handshake) until some arrive or the socket has nothing more.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buf) {
                Ok(n) => return Ok(n), // 0: the client's close_notify
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            ignore_would_block(self.flush())?;
            if self.session.read_tls(&mut SockIo(self.sock.as_fd()))? == 0 {
                return Ok(0);
            }
            if let Err(e) = self.session.process_new_packets() {
                let _ = self.flush(); // the alert, if the socket takes it
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
            ignore_would_block(self.flush())?;
        }
    }

    /// Writes out queued encrypted bytes: `WouldBlock` if the socket filled first.
    fn flush(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            if self.session.write_tls(&mut SockIo(self.sock.as_fd()))? == 0 {
                return Err(ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Encrypts what of `bufs` the queue takes (emptying it first if it is full) and, unless
    /// `more` follows at once, starts sending it: a response head waits for the first body
    /// bytes, so both leave in one write, as `MSG_MORE` does for a plain socket. `WouldBlock`
    /// while the queue is full and the socket takes nothing.
    fn write(&mut self, bufs: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
        let mut n = self.session.writer().write_vectored(bufs)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            self.flush()?;
            n = self.session.writer().write_vectored(bufs)?;
            if n == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
        }
        if !more {
            ignore_would_block(self.flush())?;
        }
        Ok(n)
    }
}

impl Wire<'_> {
    /// A gather write of `bufs`; the number of bytes taken.
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Wire::Plain(fd) => transmit::write_vectored(*fd, bufs),
            Wire::Tls(tls) => tls.write(bufs, false),
        }
    }

    /// Writes `buf`; `more` tells a plain socket that more follows (`MSG_MORE`).
    pub fn send(&mut self, buf: &[u8], more: bool) -> io::Result<usize> {
        match self {
            Wire::Plain(fd) => transmit::send(*fd, buf, more),
            Wire::Tls(tls) => tls.write(&[IoSlice::new(buf)], more),
        }
    }

    /// Pushes out whatever the transport still holds of what it took: `WouldBlock` until the
    /// socket has taken everything (a plain socket holds nothing).
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Wire::Plain(_) => Ok(()),
            Wire::Tls(tls) => tls.flush(),
        }
    }

    /// The socket itself, for the zero-copy paths (`sendfile`, `splice`); `None` under TLS
    /// (never asked for: [`Transport::send_options`] turns zero-copy off).
    pub fn raw_socket(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Wire::Plain(fd) => Some(*fd),
            Wire::Tls(_) => None,
        }
    }
}

/// `Ok(())` for a `WouldBlock`: the bytes stay queued and go with the next flush.
fn ignore_would_block(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
        r => r,
    }
}

/// rustls' view of the socket, through `amped_sys` (profiled by `--debox` like every call).
struct SockIo<'a>(BorrowedFd<'a>);

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        transmit::recv(self.0, buf)
    }
}

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        transmit::send(self.0, buf, false)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        transmit::write_vectored(self.0, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
