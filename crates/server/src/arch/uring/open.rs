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
use amped_sys::uring::FileStat;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The next ring operation of an open in progress.
pub(super) enum OpenStep {
    /// `statx` the opened descriptor ([`Opening::file`]).
    Stat,
    /// Read the body: up to `max` bytes at offset 0.
    ReadBody(usize),
    /// Finished: resume the pipeline with this.
    Done(Resolved),
}

/// An open in progress.
#[derive(Debug)]
pub(super) struct Opening {
    url_path: String,
    /// The canonical path to open.
    pub path: PathBuf,
    started: Instant,
    file: Option<File>,
    stat: Option<FileStat>,
}

impl Opening {
    /// An open of `path` (the translation of `url_path`) starting now.
    pub fn new(url_path: String, path: PathBuf) -> Opening {
        // The check time recorded in the caches is when the file system was first consulted:
        // conservative, an entry never looks fresher than it is.
        Opening { url_path, path, started: Instant::now(), file: None, stat: None }
    }

    /// The `openat` completed.
    pub fn opened(&mut self, r: io::Result<File>) -> OpenStep {
        match r {
            Ok(f) => {
                self.file = Some(f);
                OpenStep::Stat
            }
            Err(e) => self.finish(Err(e)),
        }
    }

    /// The `statx` of the opened descriptor completed.
    pub fn statted(&mut self, r: io::Result<FileStat>, cfg: &Config) -> OpenStep {
        let st = match r {
            Ok(st) => st,
            Err(e) => return self.finish(Err(e)),
        };
        if !st.is_file {
            return self.finish(Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a regular file",
            )));
        }
        self.stat = Some(st);
        if keeps_body_in_memory(cfg, st.size) {
            // One byte more than expected: a file that grew since statx is not taken whole.
            return OpenStep::ReadBody(st.size as usize + 1);
        }
        self.finish(Ok(None))
    }

    /// The opened descriptor (for the `statx` and the body read).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// The body read completed. Kept in memory only if it is exactly the size `statx` saw;
    /// otherwise the file is served from its descriptor like a large one.
    pub fn body_read(&mut self, r: io::Result<usize>, buf: Vec<u8>) -> OpenStep {
        let size = self.stat.map_or(0, |s| s.size);
        match r {
            Ok(n) if n as u64 == size => self.finish(Ok(Some(Arc::from(buf)))),
            Ok(_) => self.finish(Ok(None)),
            Err(e) => self.finish(Err(e)),
        }
    }

    fn finish(&mut self, body: io::Result<Option<Arc<[u8]>>>) -> OpenStep {
        let (url_path, path) = (std::mem::take(&mut self.url_path), std::mem::take(&mut self.path));
        let (file, stat) = (self.file.take(), self.stat.take());
        let entry = body.and_then(|body| {
            let (Some(file), Some(st)) = (file, stat) else {
                return Err(io::Error::other("open finished without a descriptor"));
            };
            let size = body.as_ref().map_or(st.size, |b| b.len() as u64);
            Ok(FileEntry {
                path: path.clone(),
                file,
                size,
                mtime: st.mtime,
                ino: st.ino,
                dev: st.dev,
                access: Access { mode: st.mode, uid: st.uid, gid: st.gid },
                body,
            })
        });
        OpenStep::Done(Resolved::known_file(url_path, path, entry, self.started))
    }
}
