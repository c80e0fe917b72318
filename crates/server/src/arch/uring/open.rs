//! Opening a file whose translation is already known, entirely on the ring: `openat`, then
//! `statx` of the opened descriptor, then — for a small file the file cache keeps in memory —
//! a `read` of its body. The same outcome as [`crate::disk::Job::run`]'s blocking open
//! (same flags, same "regular files only" rule, same small-body policy), delivered as a
//! [`Resolved`] to [`crate::pipeline::Pipeline::resume`]. New Flash's lesson holds: the loop
//! receives the open descriptor and its metadata and never repeats the file-system call.

use crate::cache::FileEntry;
use crate::cache::file::Access;
use crate::config::Config;
use crate::disk::{Resolved, keeps_body_in_memory};
use amped_sys::uring::{Event, FileStat, OpId, Ring};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Where an open stands after a step.
pub(super) enum OpenStep {
    /// Its next ring operation is in flight.
    Submitted(Box<Opening>, OpId),
    /// Finished: resume the pipeline with this.
    Done(Resolved),
}

/// An open in progress.
#[derive(Debug)]
pub(super) struct Opening {
    url_path: String,
    /// The canonical path to open.
    path: PathBuf,
    started: Instant,
    stage: Stage,
}

/// The ring operation an open waits for, and what it holds meanwhile.
#[derive(Debug)]
enum Stage {
    /// The `openat`.
    Open,
    /// The `statx` of the opened descriptor.
    Stat(File),
    /// The read of a small body (the file's metadata in hand).
    Body(File, FileStat),
}

impl Opening {
    /// Submits the `openat` of `path` (the translation of `url_path`) for the connection
    /// `token`.
    pub fn start(url_path: String, path: PathBuf, ring: &mut Ring, token: u64) -> OpenStep {
        // The check time recorded in the caches is when the file system was first consulted:
        // conservative, an entry never looks fresher than it is.
        let opening =
            Box::new(Opening { url_path, path, started: Instant::now(), stage: Stage::Open });
        match ring.open(token, &opening.path) {
            Ok(op) => OpenStep::Submitted(opening, op),
            Err(e) => opening.finish(Err(e)),
        }
    }

    /// The operation in flight completed with `event`: submit the next one, or finish.
    pub fn completed(
        mut self: Box<Self>,
        event: Event,
        ring: &mut Ring,
        token: u64,
        cfg: &Config,
    ) -> OpenStep {
        match (std::mem::replace(&mut self.stage, Stage::Open), event) {
            (Stage::Open, Event::Opened(Ok(file))) => {
                let op = ring.statx(token, file.as_fd());
                self.stage = Stage::Stat(file);
                OpenStep::Submitted(self, op)
            }
            (Stage::Stat(file), Event::Stat(Ok(st))) => {
                if !st.is_file {
                    let e = io::Error::new(io::ErrorKind::PermissionDenied, "not a regular file");
                    return self.finish(Err(e));
                }
                if !keeps_body_in_memory(cfg, st.size) {
                    let entry = entry(&self.path, file, st, None);
                    return self.finish(Ok(entry));
                }
                // One byte more than expected: a file that grew since statx is not taken whole.
                let max = st.size as usize + 1;
                let op = ring.read(token, file.as_fd(), Vec::with_capacity(max), 0, max);
                self.stage = Stage::Body(file, st);
                OpenStep::Submitted(self, op)
            }
            (Stage::Body(file, st), Event::Read(r, buf)) => {
                // Kept in memory only if it is exactly the size `statx` saw; otherwise the
                // file is served from its descriptor like a large one.
                let body = match r {
                    Ok(n) if n as u64 == st.size => Some(Arc::from(buf)),
                    Ok(_) => None,
                    Err(e) => return self.finish(Err(e)),
                };
                let entry = entry(&self.path, file, st, body);
                self.finish(Ok(entry))
            }
            (_, Event::Opened(Err(e)) | Event::Stat(Err(e)) | Event::Read(Err(e), _)) => {
                self.finish(Err(e))
            }
            // (Not sent for an open: the loop gives an open only its own completions.)
            (_, _) => self.finish(Err(io::Error::other("unexpected completion during an open"))),
        }
    }

    fn finish(self, entry: io::Result<FileEntry>) -> OpenStep {
        let Opening { url_path, path, started, .. } = self;
        OpenStep::Done(Resolved::known_file(url_path, path, entry, started))
    }
}

/// The file cache's entry for `file` at `path` with the metadata `st` (and `body`, if kept).
fn entry(path: &std::path::Path, file: File, st: FileStat, body: Option<Arc<[u8]>>) -> FileEntry {
    let size = body.as_ref().map_or(st.size, |b| b.len() as u64);
    FileEntry {
        path: path.to_path_buf(),
        file,
        size,
        mtime: st.mtime,
        ino: st.ino,
        dev: st.dev,
        access: Access { mode: st.mode, uid: st.uid, gid: st.gid },
        body,
    }
}
