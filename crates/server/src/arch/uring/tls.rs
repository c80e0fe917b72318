//! TLS under the ring: a rustls session driven from buffers rather than a socket. The ring
//! receives ciphertext into a buffer, [`RingTls::received`] decrypts it into the connection's
//! request bytes; a response's gather list is encrypted by [`RingTls::encrypt`] and the
//! ciphertext leaves in a ring send of its own ([`RingTls::output`]). File chunks are read
//! through the ring as for plain connections (there is no `sendfile` here either), so TLS
//! changes what is sent, not how the loop waits.

use super::{Phase, SPARE_RECV, UringLoop};
use amped_sys::uring::Gather;
use rustls::ServerConnection;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::os::fd::AsFd;
use std::time::Instant;

/// The TLS session of one connection.
#[derive(Debug)]
pub(super) struct RingTls {
    session: ServerConnection,
}

impl RingTls {
    /// `session`, set to encrypt a whole gather list (a head and a 128 KiB chunk) at once:
    /// its ciphertext is always sent before the next is encrypted, so nothing piles up.
    pub fn new(mut session: ServerConnection) -> RingTls {
        session.set_buffer_limit(None);
        RingTls { session }
    }

    /// Feeds received ciphertext and appends the request bytes it carried to `plain`.
    /// Err: not TLS, or the peer broke the protocol (close the connection).
    pub fn received(&mut self, mut cipher: &[u8], plain: &mut Vec<u8>) -> io::Result<()> {
        let mut buf = [0u8; 16 << 10];
        while !cipher.is_empty() {
            self.session.read_tls(&mut cipher)?;
            self.session
                .process_new_packets()
                .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
            loop {
                match self.session.reader().read(&mut buf) {
                    Ok(0) => break, // close_notify: what arrived before it still counts
                    Ok(n) => plain.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Encrypts what of `g`'s unsent bytes the session takes; returns how many. `last`: the
    /// response closes the connection, so `close_notify` follows once all is taken.
    pub fn encrypt(&mut self, g: &Gather, last: bool) -> io::Result<usize> {
        let [head, body] = g.unsent();
        let n = self.session.writer().write_vectored(&[IoSlice::new(head), IoSlice::new(body)])?;
        if last && n == head.len() + body.len() {
            self.session.send_close_notify();
        }
        Ok(n)
    }

    /// Whether ciphertext waits to be sent (a handshake message, session tickets, records).
    pub fn wants_write(&self) -> bool {
        self.session.wants_write()
    }

    /// The ciphertext waiting, as a gather list for a ring send (`buf`: a spare vector).
    pub fn output(&mut self, mut buf: Vec<u8>) -> Gather {
        buf.clear();
        while self.session.wants_write() {
            if self.session.write_tls(&mut buf).is_err() {
                break; // (writing to a vector does not fail)
            }
        }
        Gather::of(buf)
    }
}

/// The loop's side of a TLS connection.
impl UringLoop {
    /// Sends the ciphertext a TLS connection has waiting (then the connection goes on where
    /// it was: its response, or the pipeline).
    pub(super) fn send_tls_output(&mut self, key: usize) {
        let token = self.token(key);
        let spare = self.spare_recv.pop().unwrap_or_default();
        let c = &mut self.conns[key];
        let g = c.tls.as_mut().expect("a TLS connection").output(spare);
        c.phase = Phase::Send;
        c.deadline = Phase::Send.deadline(&self.pipeline.cfg, Instant::now());
        c.op = Some(self.ring.send(token, c.sock.as_fd(), g, false));
    }

    /// A TLS connection's ciphertext send completed: the rest of it, or go on.
    pub(super) fn tls_sent(&mut self, key: usize, r: io::Result<usize>, mut g: Gather) {
        let token = self.token(key);
        let c = &mut self.conns[key];
        match r {
            Ok(n) if n > 0 => {
                g.advance(n);
                if g.remaining() > 0 {
                    c.op = Some(self.ring.send(token, c.sock.as_fd(), g, false));
                    return;
                }
                if self.spare_recv.len() < SPARE_RECV {
                    g.head.clear(); // (a receive appends: spare buffers are empty)
                    self.spare_recv.push(g.head);
                }
                self.advance(key)
            }
            _ => self.close(key), // the peer went away
        }
    }

    /// Received ciphertext on a TLS connection: decrypt it into the request bytes, send what
    /// the session has to say (handshake, tickets), then go on. False if the connection
    /// must close (not TLS, a protocol error, the end of the stream).
    pub(super) fn tls_received(
        &mut self,
        key: usize,
        r: io::Result<usize>,
        mut buf: Vec<u8>,
    ) -> bool {
        let c = &mut self.conns[key];
        let tls = c.tls.as_mut().expect("a TLS connection");
        let mut plain = Vec::new();
        let ok = matches!(r, Ok(n) if n > 0) && tls.received(&buf, &mut plain).is_ok();
        if !plain.is_empty() {
            c.state.received(&plain);
        }
        buf.clear();
        if self.spare_recv.len() < SPARE_RECV {
            self.spare_recv.push(buf);
        }
        ok
    }
}
