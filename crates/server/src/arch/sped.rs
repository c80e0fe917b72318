//! SPED (Flash §3.3): one event loop that runs every job inline. A file-system lookup or a
//! page that is not in memory stalls every connection until the disk answers — kept on purpose,
//! so the weakness AMPED removes can be measured.

use super::job_results::JobRunner;
use crate::pipeline::{Job, JobDone, Pipeline};
use std::sync::Arc;

/// Runs jobs on the event-loop thread: a SPED loop is the shared event loop with this runner.
pub struct InlineRunner {
    pipeline: Arc<Pipeline>,
}

impl InlineRunner {
    /// Runs `pipeline`'s jobs where they are asked for.
    pub fn new(pipeline: Arc<Pipeline>) -> InlineRunner {
        InlineRunner { pipeline }
    }
}

impl JobRunner for InlineRunner {
    fn submit(&mut self, _token: u64, job: Job) -> Option<JobDone> {
        Some(self.pipeline.run_job_inline(job))
    }
}
