//! Opening a file whose path is known — the server's one open policy, as a step machine. It
//! decides; its driver performs. [`FileOpen::op`] names the next operation (`open`, then
//! `fstat` of what was opened, then for a small file its body's read), the driver performs it
//! however it performs I/O and hands the outcome to [`FileOpen::advance`], which decides the
//! step after. Two drivers run it: [`open_blocking`] with blocking calls (inside a
//! [`crate::disk::Job`], so on a helper, a stage, or the serving thread), and the io_uring
//! architecture as `OPENAT` → `STATX` → `READ` on its ring (`arch/uring/open.rs`). So both
//! open with the same flags ([`amped_sys::files::SERVING_OPEN_FLAGS`]), refuse the same files,
//! keep the same bodies in memory, apply the same page policy, and report errors the same way
//! (an `io::Error` that [`crate::disk::fs_error`] turns into a status).
//!
//! The decisions, in order:
//! * anything but a regular file (a directory, FIFO, socket or device swapped in since the
//!   translation) is refused as "not a regular file" (403);
//! * with the file cache on, a file of at most `--small-file-bytes` has its body read into
//!   memory: one byte more than `fstat` saw is asked for, and the body is kept only if exactly
//!   the size `fstat` saw came back — a file that grew or shrank in between is served from its
//!   descriptor like a large one (its metadata and body would disagree otherwise);
//! * a file served from its descriptor is opened for random access when
//!   `--kernel-read-ahead off`, or when it is at least `--kernel-read-ahead BYTES` large (the
//!   server's fills and ask-ahead then decide every read of it);
//! * page policy ([`crate::cache::pages`]): a small body found not resident before its read
//!   counts as a small-file miss (memory pressure), and a body read while under pressure gives
//!   its pages back (amped keeps its own copy). The residency test and the page drop are
//!   `cachestat`/`fadvise` on the open descriptor: neither waits for the disk.
//!
//! New Flash's lesson holds for both drivers: the loop receives the open descriptor with its
//! metadata and never repeats the file-system call.

use crate::cache::{FileEntry, PagePolicy};
use crate::config::Config;
use amped_sys::files::FileStat;
use amped_sys::residency;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What decides an open besides the file itself.
#[derive(Clone, Copy, Debug)]
pub struct OpenRules<'a> {
    /// Bodies of at most this many bytes are read into memory; `None` (no file cache): none.
    pub keep_bodies_up_to: Option<u64>,
    /// The page policy small bodies report to.
    pub pages: &'a PagePolicy,
    /// Files served from their descriptor and smaller than this keep the kernel's read-ahead
    /// (`--kernel-read-ahead`); larger ones are opened for random access, so the disk reads
    /// only what is asked for (`u64::MAX`: every file keeps it; 0: none).
    pub kernel_read_ahead_below: u64,
}

impl<'a> OpenRules<'a> {
    /// The rules `cfg` sets, reporting to `pages`.
    pub fn new(cfg: &Config, pages: &'a PagePolicy) -> OpenRules<'a> {
        OpenRules {
            keep_bodies_up_to: cfg.opt.file_cache.then_some(cfg.small_file_bytes),
            pages,
            kernel_read_ahead_below: cfg.kernel_read_ahead_below,
        }
    }

    /// Whether a file of `size` bytes has its body read into memory when it is opened.
    pub fn keeps_body(&self, size: u64) -> bool {
        self.keep_bodies_up_to.is_some_and(|max| size <= max)
    }
}

/// An open in progress: the path, and what the open holds while it waits for its next
/// operation.
#[derive(Debug)]
pub struct FileOpen {
    path: PathBuf,
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    /// Waiting for the open.
    Open,
    /// Waiting for the metadata of the opened file.
    Stat(File),
    /// Waiting for the small body's read (the metadata in hand).
    Body(File, FileStat),
}

/// The operation an open needs next.
#[derive(Debug)]
pub enum OpenOp<'a> {
    /// Open `path` with [`amped_sys::files::SERVING_OPEN_FLAGS`].
    Open(&'a Path),
    /// Take the metadata of the opened file (`fstat`, or `statx` with `AT_EMPTY_PATH`).
    Stat(&'a File),
    /// Read the file from its start, up to `max` bytes (one more than its size).
    ReadBody {
        /// The opened file.
        file: &'a File,
        /// The most bytes to read.
        max: usize,
    },
}

/// The outcome of the operation [`FileOpen::op`] named.
#[derive(Debug)]
pub enum OpenOutcome {
    /// Of [`OpenOp::Open`].
    Opened(io::Result<File>),
    /// Of [`OpenOp::Stat`].
    Stated(io::Result<FileStat>),
    /// Of [`OpenOp::ReadBody`]: the bytes read.
    Read(io::Result<Vec<u8>>),
}

/// Where an open stands after a step.
#[derive(Debug)]
pub enum OpenStep {
    /// It needs another operation ([`FileOpen::op`]).
    Next(FileOpen),
    /// Finished: the path opened, and the file or why not.
    Done(PathBuf, io::Result<FileEntry>),
}

impl FileOpen {
    /// An open of `path` (a translation's canonical path); its first operation is the open.
    pub fn new(path: PathBuf) -> FileOpen {
        FileOpen { path, stage: Stage::Open }
    }

    /// The path being opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The operation the open waits for.
    pub fn op(&self) -> OpenOp<'_> {
        match &self.stage {
            Stage::Open => OpenOp::Open(&self.path),
            Stage::Stat(file) => OpenOp::Stat(file),
            Stage::Body(file, st) => OpenOp::ReadBody { file, max: body_read_max(st.size) },
        }
    }

    /// The operation [`FileOpen::op`] named ended with `outcome`: the next step.
    pub fn advance(self, outcome: OpenOutcome, rules: OpenRules<'_>) -> OpenStep {
        let FileOpen { path, stage } = self;
        match (stage, outcome) {
            (Stage::Open, OpenOutcome::Opened(Ok(file))) => {
                OpenStep::Next(FileOpen { path, stage: Stage::Stat(file) })
            }
            (Stage::Stat(file), OpenOutcome::Stated(Ok(st))) => after_stat(path, file, st, rules),
            (Stage::Body(file, st), OpenOutcome::Read(Ok(bytes))) => {
                let body = (bytes.len() as u64 == st.size).then(|| Arc::<[u8]>::from(bytes));
                if body.is_some() {
                    // Its pages were all in the page cache: a later miss of it is a refault.
                    rules.pages.cached_whole(st.dev, st.ino, st.size);
                }
                if body.is_some() && rules.pages.under_pressure() {
                    // amped answers from its own copy: the page cache's is left to other files.
                    let _ = residency::evict(&file);
                }
                let entry = FileEntry::from_stat(path.clone(), file, &st, body);
                OpenStep::Done(path, Ok(entry))
            }
            (
                _,
                OpenOutcome::Opened(Err(e))
                | OpenOutcome::Stated(Err(e))
                | OpenOutcome::Read(Err(e)),
            ) => OpenStep::Done(path, Err(e)),
            (_, _) => OpenStep::Done(path, Err(io::Error::other("open step out of order"))),
        }
    }

    /// Gives the path back, for a driver that could not perform the operation (the open then
    /// ends with the driver's error).
    pub fn into_path(self) -> PathBuf {
        self.path
    }
}

/// The step after the metadata `st` of `file` came: refuse it, finish, or read its body.
fn after_stat(path: PathBuf, file: File, st: FileStat, rules: OpenRules<'_>) -> OpenStep {
    if !st.is_file {
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "not a regular file");
        return OpenStep::Done(path, Err(e));
    }
    if !rules.keeps_body(st.size) {
        if st.size >= rules.kernel_read_ahead_below {
            // Sets a flag of the open file; it waits for nothing, so the loop may do it too.
            let _ = amped_sys::files::no_read_ahead(&file);
        }
        let entry = FileEntry::from_stat(path.clone(), file, &st, None);
        return OpenStep::Done(path, Ok(entry));
    }
    if rules.pages.watches_misses()
        && st.size > 0
        && !residency::is_resident(&file, 0, st.size).unwrap_or(true)
    {
        rules.pages.note_miss(st.dev, st.ino, st.size);
    }
    OpenStep::Next(FileOpen { path, stage: Stage::Body(file, st) })
}

/// How much a small body's read asks for: one byte more than the file's size, so a file that
/// grew since its metadata was taken shows (and is not kept).
fn body_read_max(size: u64) -> usize {
    size as usize + 1
}

/// Runs an open of `path` with blocking calls (in a job: it may wait for the disk).
pub fn open_blocking(path: PathBuf, rules: OpenRules<'_>) -> io::Result<FileEntry> {
    use amped_sys::files;
    let mut open = FileOpen::new(path);
    loop {
        let outcome = match open.op() {
            OpenOp::Open(path) => OpenOutcome::Opened(files::open_for_serving(path)),
            OpenOp::Stat(file) => OpenOutcome::Stated(files::fstat(file).map(|m| (&m).into())),
            OpenOp::ReadBody { file, max } => {
                OpenOutcome::Read(files::read_up_to(file, max as u64))
            }
        };
        match open.advance(outcome, rules) {
            OpenStep::Next(next) => open = next,
            OpenStep::Done(_, entry) => return entry,
        }
    }
}

#[cfg(test)]
#[path = "open_tests.rs"]
pub(crate) mod tests;
