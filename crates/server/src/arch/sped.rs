//! SPED (Flash §3.3): one event loop that runs every job inline. A file-system lookup or a
//! page that is not in memory stalls every connection until the disk answers — kept on purpose,
//! so the weakness AMPED removes can be measured.

use super::event_loop::EventLoop;
use super::job_results::JobRunner;
use crate::pipeline::{Job, JobDone, Pipeline};
use crate::tls::TlsContext;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs jobs on the event-loop thread.
pub struct InlineRunner {
    pipeline: Arc<Pipeline>,
}

impl JobRunner for InlineRunner {
    fn submit(&mut self, _token: u64, job: Job) -> Option<JobDone> {
        Some(self.pipeline.run_job_inline(job))
    }
}

/// Serves `listener` (over TLS with `tls`) with a SPED loop until shutdown.
pub fn run(
    pipeline: Arc<Pipeline>,
    listener: TcpListener,
    tls: Option<Arc<TlsContext>>,
    shutdown: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    let runner = InlineRunner { pipeline: pipeline.clone() };
    EventLoop::new(pipeline, runner, listener)?.speaking(tls).run(shutdown)
}
