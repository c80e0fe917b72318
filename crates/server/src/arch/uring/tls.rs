//! TLS under the ring: a rustls session driven from buffers rather than a socket. The ring
//! receives ciphertext into a buffer, [`RingTls::received`] decrypts it into the connection's
//! request bytes; a response's gather list is encrypted by [`RingTls::encrypt`] and the
//! ciphertext leaves in a ring send of its own ([`RingTls::output`]). File chunks are read
//! through the ring as for plain connections (there is no `sendfile` here either), so TLS
//! changes what is sent, not how the loop waits.

use amped_sys::uring::Gather;
use rustls::ServerConnection;
use std::io::{self, ErrorKind, IoSlice, Read, Write};

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
