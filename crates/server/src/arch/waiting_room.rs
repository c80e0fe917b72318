//! `pool`'s waiting room: connections whose client has sent nothing to read while other
//! connections are waiting for a worker. A worker hands such a connection here
//! ([`WaitingRoom::park`]) and takes the next one instead of blocking on a slow or idle
//! client; one thread watches the parked connections with epoll and, when a client sends more,
//! puts its connection back in the workers' queue with its protocol state and deadline intact.
//!
//! So a slowloris (clients trickling a head byte by byte) or a crowd of idle keep-alive
//! clients costs the pool a parked socket each, not a worker: a worker is taken only while a
//! request can actually be read or answered. Without a queue of waiting connections nothing is
//! parked and the pool behaves exactly as before (the worker waits on its socket), so the
//! cached path pays one atomic load per read.
//!
//! Deadlines still hold while parked: every [`TICK`] the room answers a head that is overdue
//! with 408 (as the event loops do) and closes idle connections past their keep-alive time. At
//! graceful shutdown it closes idle parked connections at once, lets those with a request
//! arriving finish, and ends when none is left.

use super::blocking::{Session, Stop};
use super::lifecycle::TICK;
use crate::pipeline::Pipeline;
use amped_sys::epoll::{Interest, Poller, Waker};
use crossbeam_channel::{Receiver, Sender, unbounded};
use slab::Slab;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The token of the waker in the epoll set.
const WAKE: u64 = u64::MAX;

/// Where workers park connections.
pub struct WaitingRoom {
    arrivals: Sender<Session>,
    waker: Arc<Waker>,
}

impl WaitingRoom {
    /// Starts the room's thread; connections whose client sent more go to `ready`.
    pub fn start(
        pipeline: Arc<Pipeline>,
        stop: Arc<Stop>,
        ready: Sender<Session>,
    ) -> io::Result<(WaitingRoom, JoinHandle<()>)> {
        let (arrivals, incoming) = unbounded();
        let waker = Arc::new(Waker::new()?);
        let thread_waker = waker.clone();
        // The epoll set is made on the room's thread (its event buffer stays there); whether
        // that worked comes back before the pool starts serving.
        let (started_tx, started) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("pool-waiting".into()).spawn(move || {
            let made = Poller::new(256).and_then(|poller| {
                poller.add(thread_waker.as_fd(), WAKE, Interest::Read)?;
                Ok(poller)
            });
            let poller = match made {
                Ok(poller) => {
                    let _ = started_tx.send(Ok(()));
                    poller
                }
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            let parked = Slab::new();
            Watch { poller, parked, incoming, ready, waker: thread_waker }.run(&pipeline, &stop);
        })?;
        started.recv().map_err(|_| io::Error::other("the pool's waiting room did not start"))??;
        Ok((WaitingRoom { arrivals, waker }, thread))
    }

    /// Parks `session` until its client sends more (closed if the room has shut down).
    pub fn park(&self, session: Session) {
        if self.arrivals.send(session).is_ok() {
            self.waker.wake();
        }
    }
}

/// The room's thread state.
struct Watch {
    poller: Poller,
    parked: Slab<Session>,
    incoming: Receiver<Session>,
    ready: Sender<Session>,
    waker: Arc<Waker>,
}

impl Watch {
    fn run(&mut self, pipeline: &Pipeline, stop: &Stop) {
        loop {
            let tokens: Vec<u64> = match self.poller.wait(Some(TICK)) {
                Ok(events) => events.map(|e| e.token).collect(),
                Err(_) => Vec::new(),
            };
            for token in tokens {
                if token == WAKE {
                    self.waker.drain();
                } else if let Some(session) = self.unpark(token as usize) {
                    // Readable, closed or failed: a worker finds out which.
                    let _ = self.ready.send(session);
                }
            }
            while let Ok(session) = self.incoming.try_recv() {
                let key = self.parked.insert(session);
                if self
                    .poller
                    .add(&*self.parked[key].conn.sock, key as u64, Interest::Read)
                    .is_err()
                {
                    self.parked.remove(key);
                }
            }
            self.sweep(pipeline, stop);
            if stop.draining() && self.parked.is_empty() {
                return;
            }
        }
    }

    /// Expires overdue connections; at shutdown closes the idle ones (all at its deadline).
    fn sweep(&mut self, pipeline: &Pipeline, stop: &Stop) {
        let now = Instant::now();
        let (draining, expired) = (stop.draining(), stop.expired());
        let due: Vec<usize> = self
            .parked
            .iter()
            .filter(|(_, s)| {
                expired || s.deadline() <= now || (draining && !s.has_partial_request())
            })
            .map(|(key, _)| key)
            .collect();
        for key in due {
            if let Some(session) = self.unpark(key)
                && session.deadline() <= now
            {
                session.expire(pipeline);
            }
        }
    }

    fn unpark(&mut self, key: usize) -> Option<Session> {
        let session = self.parked.try_remove(key)?;
        let _ = self.poller.delete(&*session.conn.sock);
        Some(session)
    }
}
