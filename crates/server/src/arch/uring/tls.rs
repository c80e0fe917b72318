//! TLS under the ring: a rustls session driven from buffers rather than a socket. The ring
//! receives ciphertext into a buffer, [`RingTls::received`] decrypts it into the connection's
//! request bytes; a response's gather list is encrypted by [`RingTls::encrypt`] and the
//! ciphertext leaves in a ring send of its own ([`RingTls::output`]). File chunks are read
//! through the ring as for plain connections (there is no `sendfile` here either), so TLS
//! changes what is sent, not how the loop waits.

use super::{Doing, Phase, SPARE_RECV, Sending, UringLoop};
use crate::pipeline::ConnState;
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

    /// A receive of ciphertext completed with `r` into `buf`: decrypts it into `state`'s
    /// request bytes and keeps `buf` among the `spare` receive buffers. False if the
    /// connection must close (not TLS, a protocol error, the end of the stream).
    pub fn take_received(
        &mut self,
        r: io::Result<usize>,
        mut buf: Vec<u8>,
        state: &mut ConnState,
        spare: &mut Vec<Vec<u8>>,
    ) -> bool {
        let mut plain = Vec::new();
        let ok = matches!(r, Ok(n) if n > 0) && self.received(&buf, &mut plain).is_ok();
        if !plain.is_empty() {
            state.received(&plain);
        }
        buf.clear();
        if spare.len() < SPARE_RECV {
            spare.push(buf);
        }
        ok
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
    /// Sends ciphertext of a TLS connection (`cipher`, from [`RingTls::output`]): part of the
    /// response `out`, or, without one, what the session had to say between receives.
    pub(super) fn send_ciphertext(
        &mut self,
        key: usize,
        cipher: Gather,
        out: Option<Box<Sending>>,
    ) {
        let token = self.conns.token(key);
        let c = &mut self.conns[key];
        c.phase = Phase::Send;
        c.deadline = Phase::Send.deadline(&self.pipeline, Instant::now());
        let op = self.ring.send(token, c.sock.as_fd(), cipher, false);
        c.doing = match out {
            Some(out) => Doing::Responding { out, op: Some(op) },
            None => Doing::SendingTls { op },
        };
    }

    /// A TLS connection's ciphertext send completed: the rest of it, or go on where the
    /// connection was (the response `out`, or the pipeline).
    pub(super) fn tls_sent(
        &mut self,
        key: usize,
        r: io::Result<usize>,
        mut g: Gather,
        out: Option<Box<Sending>>,
    ) {
        match r {
            Ok(n) if n > 0 => {
                g.advance(n);
                if g.remaining() > 0 {
                    return self.send_ciphertext(key, g, out);
                }
                if self.spare_recv.len() < SPARE_RECV {
                    g.head.clear(); // (a receive appends: spare buffers are empty)
                    self.spare_recv.push(g.head);
                }
                match out {
                    Some(out) => self.pump(key, out),
                    None => self.advance(key),
                }
            }
            _ => self.finalize(key, out), // the peer went away: log what was sent, close
        }
    }
}
