//! Everything that may block on the disk, and nothing else: translating a URL path
//! ([`translate`]), rendering a directory listing ([`listing`]), opening a file ([`open`]: the one open policy, a
//! step machine run with blocking calls here and on the ring by io_uring), and the [`Job`]s
//! that resolve a path and open it, or bring a cold chunk into memory ([`job`]), and which
//! pieces of a long transfer to ask the disk for ahead ([`ask_ahead`]). None of it runs in an
//! event loop by itself: the pipeline hands it out as a [`Job`] and the architecture decides
//! who waits for it (the loop inline in SPED, a helper in AMPED, a stage in staged, the
//! connection's thread in MT/pool/MP; io_uring submits the opens and reads to its ring).
//!
//! Layering: `arch/` → `pipeline/` → `disk/` → `cache/`. This module uses the caches' entry
//! types ([`crate::cache::FileEntry`]) and the page policy, and knows nothing of the pipeline;
//! [`fs_error`] is the one table from file-system errors to answers.

pub mod ask_ahead;
pub mod fs_error;
pub mod job;
pub mod listing;
pub mod open;
pub mod translate;

pub use job::{Copied, Job, JobDone, JobTimes, Resolved};
pub use open::{FileOpen, OpenOp, OpenOutcome, OpenRules, OpenStep};
