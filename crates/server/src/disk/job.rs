//! Jobs: the pipeline's operations that may block on the disk, packaged so that an
//! architecture decides who runs them — the serving thread itself (SPED, MT, pool, MP), a
//! helper thread (AMPED) or the kernel through io_uring. A job carries everything it needs and
//! touches no cache; its result goes back to the pipeline through [`crate::pipeline::Pipeline::resume`].
//!
//! New Flash (§3.2 of the brief): the helper does the `open`/`stat` itself and hands the open
//! descriptor and metadata back, so the event loop never repeats a file-system operation
//! hoping it will now hit the cache.

use super::ask_ahead;
use super::open::{OpenRules, open_blocking};
use super::translate::{TranslateRequest, Translation, translate};
use crate::cache::file::ReadInFlight;
use crate::cache::{FileEntry, PagePolicy};
use crate::config::Config;
use crate::copy_budget::Held;
use amped_sys::direct::Lent;
use amped_sys::pipe::PagePipe;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A blocking operation.
#[derive(Debug)]
pub enum Job {
    /// Translate `url_path` (unless the translation is already `known`) and open the file.
    Resolve {
        /// Normalised URL path (the path-cache key).
        url_path: String,
        /// Relative file-system path.
        rel: PathBuf,
        /// The target ended in `/`.
        trailing_slash: bool,
        /// A fresh translation from the path cache, if there was one.
        known: Option<Translation>,
    },
    /// Bring `len` bytes of the file at `offset` into the page cache.
    ReadAhead {
        /// The file, marked as being read until the job has run (dropped with it).
        reading: ReadInFlight,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// When the response began (transfers under way are served oldest first).
        since: Instant,
        /// Part of the body was sent already: a transfer under way, not a new request.
        continues: bool,
    },
    /// Move up to `len` bytes of the file at `offset` into `pipe` (`--read-path pipe`): the
    /// pipe then holds the pages until the event loop splices them into the socket.
    Fill {
        /// The file, marked as being read until the job has run (dropped with it).
        reading: ReadInFlight,
        /// Start of the range.
        offset: u64,
        /// Length of the range (at most the pipe's capacity is moved).
        len: u64,
        /// The response's pipe, empty; it comes back in [`JobDone::Filled`].
        pipe: PagePipe,
        /// When the response began (transfers under way are served oldest first).
        since: Instant,
        /// Part of the body was sent already: a transfer under way, not a new request.
        continues: bool,
    },
    /// Read up to `len` bytes of the file at `offset` into a new buffer (`--read-path copy`):
    /// the event loop then writes the buffer to the socket, so no page-cache page is held by a
    /// pipe or a socket buffer once the read has returned.
    Copy {
        /// The file, marked as being read until the job has run (dropped with it).
        reading: ReadInFlight,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// When the response began (transfers under way are served oldest first).
        since: Instant,
        /// Part of the body was sent already: a transfer under way, not a new request.
        continues: bool,
        /// Read around the page cache (`--direct-io-above`), where the file system allows:
        /// into a huge page with a share of the copy budget taken when the read starts, or,
        /// with none to be had then, into a pipe ([`JobDone::Filled`]) as a [`Job::Fill`].
        direct: bool,
        /// The share of the copy budget ([`crate::copy_budget`]) the buffer holds until its
        /// bytes are sent: taken when the job was queued (a read through the page cache), or
        /// none yet (a direct read takes it when it starts).
        held: Option<Held>,
    },
}

/// The file bytes a [`Job::Copy`] read, for the loop to write.
#[derive(Debug)]
pub struct Copied {
    store: Store,
    /// Where in `store` the bytes are.
    range: std::ops::Range<usize>,
    /// The share of the copy budget the bytes hold, given back when they are dropped.
    _held: Option<Held>,
}

/// The memory of a [`Copied`].
#[derive(Debug)]
enum Store {
    /// A buffer of its own.
    Heap(Vec<u8>),
    /// A huge page lent for a direct read ([`crate::huge_pool`]).
    Huge(Lent),
}

impl Copied {
    /// Bytes read into a buffer of their own.
    pub fn heap(buf: Vec<u8>) -> Copied {
        Copied { range: 0..buf.len(), store: Store::Heap(buf), _held: None }
    }

    /// The same bytes, holding `held` until they are dropped.
    fn holding(self, held: Option<Held>) -> Copied {
        Copied { _held: held, ..self }
    }

    /// Whether the bytes came from a direct read into a lent huge page.
    pub fn in_huge_page(&self) -> bool {
        matches!(self.store, Store::Huge(_))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.store {
            Store::Heap(buf) => &buf[self.range.clone()],
            Store::Huge(page) => &page.bytes()[self.range.clone()],
        }
    }
}

/// A job's result.
#[derive(Debug)]
pub enum JobDone {
    /// Result of [`Job::Resolve`].
    Resolved(Resolved),
    /// The pages of a [`Job::ReadAhead`] were read (or the read failed; the send will tell).
    ReadAhead,
    /// A [`Job::Fill`] ran: its pipe, and the bytes moved (0: the file ended early).
    Filled(PagePipe, io::Result<usize>),
    /// A [`Job::Copy`] ran: the buffer, holding what was read (empty: the file ended early),
    /// or why the read failed.
    Copied(io::Result<Copied>),
    /// The job panicked (a bug): the request is answered 500 and its connection closed, rather
    /// than left waiting for a result that will never come.
    Failed,
    /// The architecture had no room to queue the job (admission control, `staged`): the
    /// request is answered 503 with `Retry-After` and its connection closed.
    Refused,
}

/// What a resolve job found.
#[derive(Debug)]
pub struct Resolved {
    /// The URL path it was asked about.
    pub url_path: String,
    /// The translation (freshly computed, or the known one).
    pub translation: Translation,
    /// True when the translation was computed now (so it may be cached).
    pub translated_now: bool,
    /// The opened file, for `Translation::File`.
    pub file: Option<io::Result<FileEntry>>,
    /// The listing page, for `Translation::Listing` (or why the directory could not be read).
    pub listing: Option<io::Result<Vec<u8>>>,
    /// When the file system was consulted (the job's end).
    pub at: Instant,
    /// When it ran and how long its open took (`--slow-log` only).
    pub times: Option<Box<JobTimes>>,
}

/// When a resolve job ran, for the request's timeline.
#[derive(Debug)]
pub struct JobTimes {
    /// When the job began running.
    pub ran_from: Instant,
    /// How long its `open`/`fstat` (and small-body read) took, if it opened a file.
    pub open: Option<Duration>,
}

/// Asks the disk ahead of a fill or copy of `range` of `file` (`--fill-ahead`, for a
/// transfer under way since `since`), unless it yields to new requests' reads (the disk has time
/// to spare and is slow: [`ask_ahead::yields`], with `--fill-ahead-yields on`).
fn ask_ahead_of(
    cfg: &Config,
    file: &FileEntry,
    range: std::ops::Range<u64>,
    since: Instant,
    new_reads_first: bool,
) {
    let pieces = ask_ahead::depth(cfg, file.dev, since.elapsed(), new_reads_first);
    ask_ahead::advise(&file.file, ask_ahead::range(range.start, range.end, pieces, 0));
}

impl Job {
    /// Runs the job, blocking as long as the disk takes; what it finds cold is reported to
    /// `pages`. `new_reads_first`: the disk has time to spare (not nearly every read lately found
    /// others waiting) and is slow (most reads took over 2 ms), so a fill off a block device
    /// does not ask ahead ([`ask_ahead::yields`], [`crate::arch::disk_pace`]).
    pub fn run(self, cfg: &Config, pages: &PagePolicy, new_reads_first: bool) -> JobDone {
        match self {
            Job::Resolve { url_path, rel, trailing_slash, known } => {
                let ran_from = Instant::now();
                let translated_now = known.is_none();
                let translation = known.unwrap_or_else(|| {
                    let root = match cfg.current_root() {
                        Ok(root) => root,
                        Err(e) => return super::translate::from_io(&e, &cfg.root),
                    };
                    translate(&TranslateRequest {
                        root: &root,
                        rel: &rel,
                        trailing_slash,
                        url_path: &url_path,
                        follow_outside: cfg.follow_outside_symlinks,
                        listing: cfg.listing,
                        precompressed: &cfg.response.precompressed,
                    })
                });
                let opening = Instant::now();
                let file = match &translation {
                    Translation::File(p, _) => {
                        Some(open_blocking(p.clone(), OpenRules::new(cfg, pages)))
                    }
                    _ => None,
                };
                let open_time = file.is_some().then(|| opening.elapsed());
                let listing = match &translation {
                    Translation::Listing(dir) => {
                        Some(super::listing::render(dir, &url_path, cfg.dotfiles))
                    }
                    _ => None,
                };
                JobDone::Resolved(Resolved {
                    url_path,
                    translation,
                    translated_now,
                    file,
                    listing,
                    at: Instant::now(),
                    times: crate::timeline::on()
                        .then(|| Box::new(JobTimes { ran_from, open: open_time })),
                })
            }
            Job::ReadAhead { reading, offset, len, .. } => {
                read_ahead(&reading.file().file, offset, len);
                JobDone::ReadAhead
            }
            Job::Fill { reading, offset, len, mut pipe, since, .. } => {
                let file = &reading.file().file;
                // Whole blocks through a mapping; where the file cannot be mapped (or shrank
                // under it), the splice below says what there is.
                if cfg.fill_blocks
                    && let Ok(moved) = pipe.fill_mapped(file, offset, len as usize)
                {
                    return JobDone::Filled(pipe, Ok(moved));
                }
                ask_ahead_of(cfg, reading.file(), offset..offset + len, since, new_reads_first);
                let moved = pipe.fill(file, offset, len as usize);
                JobDone::Filled(pipe, moved)
            }
            Job::Copy { reading, offset, len, since, continues, direct: true, .. } => {
                let share = crate::copy_budget::reserve(amped_sys::direct::HUGE as u64);
                match share.and_then(|held| crate::huge_pool::lend().map(|page| (held, page))) {
                    Some((held, page)) => JobDone::Copied(
                        copy_in_direct(reading.file(), offset, len, page)
                            .map(|c| c.holding(Some(held))),
                    ),
                    // The budget or the pages are held by other trips: through a pipe, as a
                    // file below the threshold (the pages of it are read again next time).
                    None => {
                        match PagePipe::new(amped_sys::pipe::WANT) {
                            Ok(pipe) => Job::Fill { reading, offset, len, pipe, since, continues }
                                .run(cfg, pages, new_reads_first),
                            Err(_) => JobDone::Copied(
                                copy_in(&reading.file().file, offset, len).map(Copied::heap),
                            ),
                        }
                    }
                }
            }
            Job::Copy { reading, offset, len, since, held, .. } => {
                let file = &reading.file().file;
                ask_ahead_of(cfg, reading.file(), offset..offset + len, since, new_reads_first);
                JobDone::Copied(copy_in(file, offset, len).map(|b| Copied::heap(b).holding(held)))
            }
        }
    }

    /// The file bytes this job reads from the disk (none for metadata jobs).
    pub fn disk_bytes(&self) -> u64 {
        match self {
            Job::Resolve { .. } => 0,
            Job::ReadAhead { len, .. } | Job::Fill { len, .. } | Job::Copy { len, .. } => *len,
        }
    }

    /// Whether this job continues a transfer under way (part of its body was sent).
    pub fn continues(&self) -> bool {
        matches!(
            self,
            Job::ReadAhead { continues: true, .. }
                | Job::Fill { continues: true, .. }
                | Job::Copy { continues: true, .. }
        )
    }

    /// When the work this job serves began, for the jobs that move file data (the read
    /// lane serves the oldest first, so a large file's later chunks do not queue behind
    /// every newer request); `None` for metadata jobs.
    pub fn since(&self) -> Option<Instant> {
        match self {
            Job::Resolve { .. } => None,
            Job::ReadAhead { since, .. } | Job::Fill { since, .. } | Job::Copy { since, .. } => {
                Some(*since)
            }
        }
    }
}

impl Resolved {
    /// The result for a file whose translation was already known (from the path cache), when
    /// its open ([`super::open::FileOpen`]) ran outside [`Job::run`] — on io_uring's ring.
    pub fn known_file(
        url_path: String,
        path: PathBuf,
        file: io::Result<FileEntry>,
        at: Instant,
    ) -> Resolved {
        Resolved {
            url_path,
            translation: Translation::File(path, amped_http::EncodingSet::EMPTY),
            translated_now: false,
            file: Some(file),
            listing: None,
            at,
            times: None,
        }
    }
}

/// Faults the range into the page cache by reading it (the helper blocks, the loop does not).
/// The whole range is advised first, so the disk gets it as one request even when the file's
/// read-ahead is off (`--kernel-read-ahead off`) and each read below would ask for its own.
fn read_ahead(file: &File, offset: u64, len: u64) {
    let _ = amped_sys::files::will_need(file, offset, len);
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 128 << 10]);
    }
    SCRATCH.with(|s| {
        let mut buf = s.borrow_mut();
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let n = (end - pos).min(buf.len() as u64) as usize;
            match amped_sys::files::read_at(file, &mut buf[..n], pos) {
                Ok(0) | Err(_) => break,
                Ok(k) => pos += k as u64,
            }
        }
    });
}

/// Reads `len` bytes of `file` at `offset` into a new buffer, fewer where the file ends; an
/// error only when nothing could be read.
fn copy_in(file: &File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0;
    while got < buf.len() {
        match amped_sys::files::read_at(file, &mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if got == 0 => return Err(e),
            Err(_) => break,
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// [`copy_in`] around the page cache (`--direct-io-above`): one aligned direct read of the
/// bytes from `offset` on that fit a huge page (at most `len`), into `page` (lent by
/// [`crate::huge_pool`]) — one disk request. Where the file cannot be opened for direct reads
/// (a file system without them) or the direct read fails, the bytes are read through the page
/// cache instead.
fn copy_in_direct(entry: &FileEntry, offset: u64, len: u64, mut page: Lent) -> io::Result<Copied> {
    use amped_sys::direct::{ALIGN, Span};
    let through_cache = || copy_in(&entry.file, offset, len).map(Copied::heap);
    let Some(direct) = entry.direct_file() else {
        return through_cache();
    };
    let Span { start, skip, want } = Span::of(offset, len);
    let target = &mut page.bytes_mut()[..want];
    let mut got = 0;
    while got < want {
        match amped_sys::files::read_at(direct, &mut target[got..], start + got as u64) {
            Ok(n) => {
                got += n;
                if n == 0 || !(n as u64).is_multiple_of(ALIGN) {
                    break; // the end of the file
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return through_cache(),
        }
    }
    let end = got.min(skip + len as usize).max(skip);
    Ok(Copied { store: Store::Huge(page), range: skip..end, _held: None })
}
