//! A fixed pool of threads (the seed httpd's "pool N"): an acceptor puts accepted connections
//! into a bounded queue (`--queue`, default 4 × `--threads`), and `--threads` workers each take
//! one connection at a time and serve it to its end on a blocking socket
//! ([`super::blocking`]), running disk jobs inline. One pipeline, so one set of caches.
//!
//! **When every worker is busy.** New connections wait in the queue, in arrival order. While
//! connections wait there, a worker never waits on a client that has sent nothing to read —
//! one trickling its head (slowloris) or idle between keep-alive requests — nor on one that
//! takes no more of a response (a slow reader, its socket buffer full): it parks that
//! connection, with any response in flight, in the [`super::waiting_room`], whose thread
//! watches it with epoll and queues it again when the client sends more or can take more, and
//! takes the next one. So slow and idle clients cost the pool a parked socket each, not a
//! worker, and a normal client is served behind them; a worker blocked on its connection
//! notices waiting ones within a tick. Without waiting connections a worker keeps its
//! connection as before. When the queue is full too, the acceptor answers the new
//! connection `503 Service Unavailable` with `Retry-After: 1` and `Connection: close`,
//! counts it in the `queue_overflows` stat and says so on stderr (at most one line a second):
//! overload is visible and answered, never a silent hang. `--max-connections` still caps the
//! connections open in total (queued or served); at that cap the acceptor stops accepting and
//! the kernel's backlog holds newcomers, as in the other architectures.
//!
//! `--pin` pins worker i to CPU i mod the number of CPUs. Shutdown: the acceptor closes the
//! listener; workers finish the connections they hold and those already queued (answering at
//! most the request in flight, with `Connection: close`) until the shutdown deadline, when the
//! sockets still open are shut down.

use super::blocking::{self, Acceptor, Aside, Connection, Session};
use super::lifecycle::{Stop, TICK};
use super::waiting_room::WaitingRoom;
use crate::pipeline::Pipeline;
use crate::transmit::{Outgoing, SendOptions};
use crossbeam_channel::{Receiver, Select, TrySendError, bounded, unbounded};
use std::io::{self, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Serves `listener` (blocking) with `cfg.threads` workers until shutdown.
pub fn run(
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    shutdown: &Arc<AtomicBool>,
) -> io::Result<()> {
    let cfg = pipeline.config().clone();
    let acceptor = Acceptor::new(&pipeline, listener, shutdown)?;
    let stop = acceptor.stop.clone();
    let (queue, taken) = bounded::<Connection>(cfg.queue);
    let (ready_tx, ready) = unbounded::<Session>();
    let (room, room_thread) = WaitingRoom::start(pipeline.clone(), stop.clone(), ready_tx)?;
    let room = Arc::new(room);
    let workers = (0..cfg.threads)
        .map(|i| {
            let inbox = Inbox { taken: Some(taken.clone()), ready: Some(ready.clone()) };
            start_worker(i, pipeline.clone(), inbox, room.clone(), stop.clone())
        })
        .collect::<io::Result<Vec<_>>>()?;
    drop((taken, ready));
    let mut overflow = OverflowReport::default();
    while let Some(conn) = acceptor.next() {
        match queue.try_send(conn) {
            Ok(()) => {}
            Err(TrySendError::Full(conn)) => {
                pipeline.queue_overflowed();
                refuse(&pipeline, conn);
                overflow.note(cfg.threads, cfg.queue);
            }
            Err(TrySendError::Disconnected(_)) => break, // no worker left (cannot happen: they catch panics)
        }
    }
    drop(queue); // workers drain what is queued, then see the queue closed
    acceptor.close();
    let deadline = Instant::now() + 2 * TICK;
    while (workers.iter().any(|w| !w.is_finished()) || !room_thread.is_finished())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn start_worker(
    i: usize,
    pipeline: Arc<Pipeline>,
    mut inbox: Inbox,
    room: Arc<WaitingRoom>,
    stop: Arc<Stop>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("pool-{i}")).spawn(move || {
        if pipeline.config().pin {
            let _ = amped_sys::limits::pin_current_thread(amped_sys::limits::nth_allowed_cpu(i));
        }
        let (taken, ready) = (inbox.taken.clone(), inbox.ready.clone());
        let others_waiting = move || {
            taken.as_ref().is_some_and(|q| !q.is_empty())
                || ready.as_ref().is_some_and(|q| !q.is_empty())
        };
        while let Some(session) = inbox.next(&pipeline) {
            // A bug hit by one connection must not shrink the pool; the panic is reported on
            // stderr by the default hook and the connection is closed.
            let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
                blocking::serve_session(
                    &pipeline,
                    session,
                    &stop,
                    Aside::WhenOthersWait(&others_waiting),
                )
            }));
            if let Ok(Some(waiting)) = served {
                room.park(waiting);
            }
        }
    })
}

/// What a worker takes work from: newly accepted connections and parked ones whose client
/// has sent more. Each side is dropped once closed and drained.
struct Inbox {
    taken: Option<Receiver<Connection>>,
    ready: Option<Receiver<Session>>,
}

impl Inbox {
    /// The next connection to serve; `None` once both sides are closed and drained.
    fn next(&mut self, pipeline: &Pipeline) -> Option<Session> {
        loop {
            let mut select = Select::new();
            let ready = self.ready.as_ref().map(|r| select.recv(r));
            let taken = self.taken.as_ref().map(|r| select.recv(r));
            if ready.is_none() && taken.is_none() {
                return None;
            }
            let op = select.select();
            if Some(op.index()) == ready {
                match op.recv(self.ready.as_ref()?) {
                    Ok(session) => return Some(session),
                    Err(_) => self.ready = None,
                }
            } else {
                match op.recv(self.taken.as_ref()?) {
                    Ok(conn) => return Some(Session::new(conn, pipeline)),
                    Err(_) => self.taken = None,
                }
            }
        }
    }
}

/// Answers a connection the queue has no room for: 503, `Connection: close` (logged like any
/// other response).
fn refuse(pipeline: &Pipeline, conn: Connection) {
    let mut sock: &TcpStream = &conn.sock;
    if sock.set_nonblocking(true).is_err() {
        return;
    }
    // Read what already arrived, so that closing does not reset the connection (and lose the
    // 503 in the client's kernel) over unread request bytes.
    let mut scratch = [0u8; 4096];
    let _ = sock.read(&mut scratch);
    let mut out = Outgoing::new(pipeline.overload_response(conn.peer));
    let opts = SendOptions {
        zero_copy: false,
        residency_test: false,
        read_path: crate::config::ReadPath::ReadAhead,
        yield_each_step: false,
    };
    let _ = out.send(&*conn.sock, opts, pipeline);
    pipeline.complete(&out.resp, out.body_sent());
    let _ = sock.shutdown(Shutdown::Write);
}

/// Rate-limits the stderr line about refused connections to one a second.
#[derive(Default)]
struct OverflowReport {
    last: Option<Instant>,
    refused: u64,
}

impl OverflowReport {
    fn note(&mut self, threads: usize, queue: usize) {
        self.refused += 1;
        let now = Instant::now();
        if self.last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            crate::errlog::warn!(
                "pool: all {threads} threads busy and {queue} connections queued; refused {} connection(s) with 503 since the last report (see --threads, --queue)",
                self.refused
            );
            self.last = Some(now);
            self.refused = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_is_a_complete_503() {
        let dir = tempfile::tempdir().unwrap();
        let root = Some(dir.path().to_path_buf());
        let p = Pipeline::for_tests(crate::config::Args { root, ..Default::default() });
        let resp = p.overload_response("127.0.0.1:9".parse().unwrap());
        let head = String::from_utf8(resp.head.clone()).unwrap();
        assert!(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{head}");
        assert!(head.contains("\r\nRetry-After: 1\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(head.contains(&format!("\r\nContent-Length: {}", resp.body.len())), "{head}");
        assert!(resp.close);
    }
}
