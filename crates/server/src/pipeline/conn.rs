//! Per-connection protocol state: the bytes received but not yet consumed, a request body
//! still being discarded, the request parked on a job, and whether the connection must close
//! after its current response. Owned by whichever architecture serves the connection.

use super::Request;
use crate::client_limits::ConnectionSlot;
use amped_http::ChunkedDiscard;
use std::net::SocketAddr;
use std::time::Instant;

/// Protocol state of one connection.
#[derive(Debug)]
pub struct ConnState {
    /// Received, not yet consumed bytes (the start of the next request head).
    pub inbuf: Vec<u8>,
    /// The client's address.
    pub peer: SocketAddr,
    /// Request-body bytes still to be read and thrown away.
    pub(super) discard: u64,
    /// A chunked request body being read and thrown away.
    pub(super) chunked: Option<ChunkedDiscard>,
    /// The request waiting for a job's result (boxed: a request is about half a KiB, and
    /// most connections, idle ones above all, wait for none).
    pub(super) pending: Option<Box<Request>>,
    /// No further request is read on this connection.
    pub(super) closing: bool,
    /// Responses produced so far.
    pub(super) served: u64,
    /// Where the connection stands with `--max-connections-per-ip`.
    pub(super) admission: Admission,
    /// When the first byte of the request now arriving was read (`--slow-log` only).
    pub(super) first_byte: Option<Instant>,
}

/// A connection's standing with the per-address connection limit.
#[derive(Debug)]
pub(super) enum Admission {
    /// Not counted yet (or the limit is off).
    Unchecked,
    /// Counted; the slot is given back when the connection's state is dropped.
    Counted {
        /// Held, never read: dropping it uncounts the connection.
        _slot: Option<ConnectionSlot>,
    },
    /// Over the limit: its request is answered 429 and the connection closed.
    Refused,
}

impl ConnState {
    /// State of a freshly accepted connection.
    pub fn new(peer: SocketAddr) -> Self {
        ConnState {
            inbuf: Vec::new(),
            peer,
            discard: 0,
            chunked: None,
            pending: None,
            closing: false,
            served: 0,
            admission: Admission::Unchecked,
            first_byte: None,
        }
    }

    /// True between requests of a keep-alive connection (the idle timeout applies); false on
    /// a fresh connection or while a request is arriving (the header timeout applies).
    pub fn is_idle(&self) -> bool {
        self.served > 0 && self.inbuf.is_empty() && self.discard == 0 && self.chunked.is_none()
    }

    /// True when bytes of an unfinished request have arrived.
    pub fn has_partial_request(&self) -> bool {
        !self.inbuf.is_empty() || self.chunked.is_some()
    }

    /// Appends received bytes.
    pub fn received(&mut self, bytes: &[u8]) {
        if self.inbuf.is_empty() && self.discard == 0 && crate::timeline::on() {
            self.first_byte = Some(Instant::now());
        }
        self.inbuf.extend_from_slice(bytes);
    }

    /// How many more bytes the pipeline may want before it decides (a read-size hint).
    pub fn read_hint(&self, max_head: usize) -> usize {
        if self.discard > 0 {
            self.discard.min(64 << 10) as usize
        } else if self.chunked.is_some() {
            64 << 10
        } else {
            max_head.saturating_sub(self.inbuf.len()).max(1)
        }
    }
}
