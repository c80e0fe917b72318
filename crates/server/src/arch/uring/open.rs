//! Opening a file whose translation is already known, entirely on the ring: the open policy's
//! step machine ([`crate::disk::open`]) decides, and this file only performs its operations as
//! ring requests — `OPENAT`, then `STATX` of the opened descriptor, then (for a small file the
//! file cache keeps in memory) a `READ` of its body — and turns each completion back into the
//! machine's outcome. The result reaches [`crate::pipeline::Pipeline::resume`] as a
//! [`Resolved`], as a helper's blocking open does.

use crate::cache::FileEntry;
use crate::disk::{FileOpen, OpenOp, OpenOutcome, OpenRules, OpenStep as MachineStep, Resolved};
use amped_sys::uring::{Event, OpId, Ring};
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Instant;

/// Where an open stands after a step.
pub(super) enum OpenStep {
    /// Its next ring operation is in flight.
    Submitted(Box<Opening>, OpId),
    /// Finished: resume the pipeline with this (boxed: the file entry it carries is large).
    Done(Box<Resolved>),
}

/// An open in progress on the ring.
#[derive(Debug)]
pub(super) struct Opening {
    url_path: String,
    started: Instant,
    open: FileOpen,
}

impl Opening {
    /// Submits the first operation of the open of `path` (the translation of `url_path`) for
    /// the connection `token`.
    pub fn start(url_path: String, path: PathBuf, ring: &mut Ring, token: u64) -> OpenStep {
        // The check time recorded in the caches is when the file system was first consulted:
        // conservative, an entry never looks fresher than it is.
        let opening = Opening { url_path, started: Instant::now(), open: FileOpen::new(path) };
        opening.submit(ring, token)
    }

    /// The operation in flight completed with `event`: submit the next one, or finish.
    pub fn completed(
        self,
        event: Event,
        ring: &mut Ring,
        token: u64,
        rules: OpenRules<'_>,
    ) -> OpenStep {
        let Opening { url_path, started, open } = self;
        let outcome = match event {
            Event::Opened(r) => OpenOutcome::Opened(r),
            Event::Stat(r) => OpenOutcome::Stated(r),
            Event::Read(r, buf) => OpenOutcome::Read(r.map(|_| buf)),
            // (Not sent for an open: the loop gives an open only its own completions.)
            _ => {
                let e = io::Error::other("unexpected completion during an open");
                return done(url_path, open.into_path(), Err(e), started);
            }
        };
        match open.advance(outcome, rules) {
            MachineStep::Next(open) => Opening { url_path, started, open }.submit(ring, token),
            MachineStep::Done(path, entry) => done(url_path, path, entry, started),
        }
    }

    /// Submits the operation the open waits for.
    fn submit(self, ring: &mut Ring, token: u64) -> OpenStep {
        let op = match self.open.op() {
            OpenOp::Open(path) => ring.open(token, path),
            OpenOp::Stat(file) => Ok(ring.statx(token, file.as_fd())),
            OpenOp::ReadBody { file, max } => {
                Ok(ring.read(token, file.as_fd(), Vec::with_capacity(max), 0, max))
            }
        };
        match op {
            Ok(op) => OpenStep::Submitted(Box::new(self), op),
            Err(e) => {
                let Opening { url_path, started, open } = self;
                done(url_path, open.into_path(), Err(e), started)
            }
        }
    }
}

/// The open of `path` for `url_path`, begun at `started`, ended with `entry`.
fn done(
    url_path: String,
    path: PathBuf,
    entry: io::Result<FileEntry>,
    started: Instant,
) -> OpenStep {
    OpenStep::Done(Box::new(Resolved::known_file(url_path, path, entry, started)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::PagePolicy;
    use crate::disk::open::tests::{BLOCKING_ANSWERS, describe, tree};
    use std::time::Duration;

    /// Runs an open of `path` on `ring` to its end, as the loop does.
    fn open_on_ring(ring: &mut Ring, path: PathBuf, rules: OpenRules<'_>) -> Resolved {
        let mut step = Opening::start("/url".into(), path, ring, 1);
        let mut done = Vec::new();
        loop {
            let opening = match step {
                OpenStep::Done(resolved) => return *resolved,
                OpenStep::Submitted(opening, _) => opening,
            };
            while done.is_empty() {
                ring.submit_and_wait(Duration::from_millis(100)).unwrap();
                ring.completions(&mut done);
            }
            let c = done.remove(0);
            assert_eq!(c.token, 1);
            step = opening.completed(c.event, ring, 1, rules);
        }
    }

    #[test]
    fn the_ring_opens_as_the_blocking_driver_does() {
        let mut ring = Ring::new(8).expect("io_uring available");
        let dir = tree();
        let pages = PagePolicy::new(0);
        let rules = OpenRules {
            keep_bodies_up_to: Some(64),
            pages: &pages,
            kernel_read_ahead_below: u64::MAX,
        };
        for (name, want) in BLOCKING_ANSWERS {
            let r = open_on_ring(&mut ring, dir.path().join(name), rules);
            assert_eq!(r.url_path, "/url");
            assert_eq!(describe(r.file.as_ref().unwrap()), *want, "{name}");
        }
    }

    #[test]
    fn a_cold_small_body_read_on_the_ring_means_pressure_and_gives_its_pages_back() {
        let mut ring = Ring::new(8).expect("io_uring available");
        let dir = tree();
        let path = dir.path().join("small");
        let file = std::fs::File::open(&path).unwrap();
        file.sync_all().unwrap(); // written back, so its pages can go
        let pages = PagePolicy::new(64);
        let rules = OpenRules {
            keep_bodies_up_to: Some(64),
            pages: &pages,
            kernel_read_ahead_below: u64::MAX,
        };
        // Read once while resident: then its miss is a refault, not a first reading.
        let warm = open_on_ring(&mut ring, path.clone(), rules);
        assert!(warm.file.unwrap().unwrap().body.is_some());
        assert!(!pages.under_pressure(), "a resident small body is no miss");
        amped_sys::residency::evict(&file).unwrap();
        if amped_sys::residency::is_resident(&file, 0, 10).unwrap_or(true) {
            eprintln!("skipped: this file system keeps the pages of {path:?}");
            return;
        }
        let r = open_on_ring(&mut ring, path, rules);
        let entry = r.file.unwrap().unwrap();
        assert_eq!(entry.body.as_deref(), Some(&b"0123456789"[..]));
        assert!(pages.under_pressure(), "a cold small body is a miss under io_uring too");
        let resident = amped_sys::residency::is_resident(&entry.file, 0, entry.size);
        assert_eq!(resident.ok(), Some(false), "the body read under pressure keeps no pages");
    }
}
