//! MT, a thread per connection (Flash-MT, §3.2 of the paper; the seed httpd's "nopool"): an
//! acceptor thread spawns a thread for every accepted connection, which serves all of that
//! connection's requests on a blocking socket ([`super::blocking`]) and may block on the disk
//! without stopping anyone else. All threads share one pipeline, so one set of caches (behind
//! mutexes — the synchronisation cost the paper charges MT with).
//!
//! `--max-connections` caps the live connection threads: at the cap the acceptor waits for one
//! to finish and the kernel's backlog holds newcomers. `--pin` does not apply (threads come and
//! go; pin the whole process with `taskset` instead).
//!
//! Shutdown: the acceptor notices the signal within a tick, closes the listener (new
//! connections are refused) and waits for the connection threads until the shutdown deadline,
//! when it shuts down the sockets still open.

use super::blocking::{self, Acceptor};
use crate::pipeline::Pipeline;
use std::io;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Stack of a connection thread: the pipeline keeps its buffers on the heap.
const STACK: usize = 256 << 10;
/// Pause after the system refused to create a thread.
const SPAWN_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `listener` (blocking) with a thread per connection until shutdown.
pub fn run(
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    shutdown: &Arc<AtomicBool>,
) -> io::Result<()> {
    let acceptor = Acceptor::new(&pipeline, listener, shutdown)?;
    while let Some(conn) = acceptor.next() {
        let (p, s, g) = (pipeline.clone(), acceptor.stop.clone(), acceptor.gate.clone());
        let spawned =
            std::thread::Builder::new().name("conn".into()).stack_size(STACK).spawn(move || {
                blocking::serve(&p, conn, &s);
                // The last connection of a burst gives the heap back: each thread's buffers
                // were freed into one of the allocator's arenas, which keep them otherwise.
                if g.is_empty() {
                    amped_sys::memory::trim_heap();
                }
            });
        if let Err(e) = spawned {
            // The connection was moved into the closure and is closed with it.
            crate::errlog::error!(
                "cannot start a connection thread: {e}; pausing accepts for {SPAWN_BACKOFF:?}"
            );
            std::thread::sleep(SPAWN_BACKOFF);
        }
    }
    acceptor.close();
    Ok(())
}
