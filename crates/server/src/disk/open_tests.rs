//! The open policy tested in process: first the step machine alone, fed scripted outcomes (a
//! table: what each operation returned → which operations it asked for and what the request
//! gets), then the blocking driver on a real tree, then the page policy on a file whose pages
//! are evicted. The io_uring driver is held to the same answers in `arch/uring/open.rs`.

use super::*;
use crate::disk::fs_error::classify;
use std::time::SystemTime;

/// What one scripted outcome is.
#[derive(Clone, Copy, Debug)]
enum Script {
    /// The open succeeds.
    Opens,
    /// The metadata: a regular file (or not) of this size.
    Stat { size: u64, is_file: bool },
    /// The body's read returns this many bytes.
    Reads(usize),
    /// The operation fails with this errno.
    Errno(i32),
}

/// What the request gets: the status an error is answered with, or the entry's size and the
/// length of the body kept in memory.
#[derive(Debug, PartialEq)]
enum Got {
    Status(u16),
    Entry { size: u64, body: Option<usize> },
}

/// Any open file (the machine never reads it itself).
fn some_file() -> File {
    File::open(std::env::current_exe().unwrap()).unwrap()
}

fn stat(size: u64, is_file: bool) -> FileStat {
    let mode = if is_file { libc::S_IFREG } else { libc::S_IFDIR } | 0o644;
    FileStat { size, mtime: SystemTime::UNIX_EPOCH, ino: 7, dev: 1, is_file, mode, uid: 0, gid: 0 }
}

fn err<T>(errno: i32) -> io::Result<T> {
    Err(io::Error::from_raw_os_error(errno))
}

/// Plays `script` against an open under `rules`: returns the operations asked for (`open`,
/// `stat`, `read N`: N the most bytes asked) and what the request got.
fn play(script: &[Script], keep_up_to: Option<u64>) -> (Vec<String>, Got) {
    let pages = PagePolicy::new(0);
    let rules = OpenRules {
        keep_bodies_up_to: keep_up_to,
        pages: &pages,
        kernel_read_ahead_below: u64::MAX,
    };
    let mut open = FileOpen::new(PathBuf::from("/srv/f"));
    let (mut asked, mut script) = (Vec::new(), script.iter());
    loop {
        asked.push(match open.op() {
            OpenOp::Open(_) => "open".to_string(),
            OpenOp::Stat(_) => "stat".to_string(),
            OpenOp::ReadBody { max, .. } => format!("read {max}"),
        });
        let next = *script.next().expect("the open asked for more than the script holds");
        let outcome = match (open.op(), next) {
            (OpenOp::Open(_), Script::Opens) => OpenOutcome::Opened(Ok(some_file())),
            (OpenOp::Open(_), Script::Errno(e)) => OpenOutcome::Opened(err(e)),
            (_, Script::Stat { size, is_file }) => OpenOutcome::Stated(Ok(stat(size, is_file))),
            (OpenOp::Stat(_), Script::Errno(e)) => OpenOutcome::Stated(err(e)),
            (_, Script::Reads(n)) => OpenOutcome::Read(Ok(vec![b'x'; n])),
            (_, Script::Errno(e)) => OpenOutcome::Read(err(e)),
            (_, Script::Opens) => OpenOutcome::Opened(Ok(some_file())),
        };
        match open.advance(outcome, rules) {
            OpenStep::Next(next) => open = next,
            OpenStep::Done(path, entry) => {
                assert_eq!(path, Path::new("/srv/f"));
                let got = match entry {
                    Ok(e) => Got::Entry { size: e.size, body: e.body.map(|b| b.len()) },
                    Err(e) => Got::Status(classify(&e).status().as_u16()),
                };
                assert!(script.next().is_none(), "the open ended before its script");
                return (asked, got);
            }
        }
    }
}

/// One case: its name, the script, the largest body kept, the operations asked for, the answer.
type Case<'a> = (&'a str, &'a [Script], Option<u64>, &'a [&'a str], Got);

#[test]
fn each_outcome_leads_to_one_next_step() {
    use Script::*;
    let file = |size| Stat { size, is_file: true };
    let entry = |size, body| Got::Entry { size, body };
    #[rustfmt::skip]
    let cases: &[Case<'_>] = &[
        ("missing", &[Errno(libc::ENOENT)], Some(1000), &["open"], Got::Status(404)),
        ("unreadable", &[Errno(libc::EACCES)], Some(1000), &["open"], Got::Status(403)),
        ("out of descriptors", &[Errno(libc::EMFILE)], Some(1000), &["open"], Got::Status(503)),
        ("stat fails", &[Opens, Errno(libc::EIO)], Some(1000), &["open", "stat"], Got::Status(500)),
        ("a directory swapped in", &[Opens, Stat { size: 4096, is_file: false }], Some(1000),
            &["open", "stat"], Got::Status(403)),
        ("large: served from its descriptor", &[Opens, file(2000)], Some(1000),
            &["open", "stat"], entry(2000, None)),
        ("small: body kept", &[Opens, file(100), Reads(100)], Some(1000),
            &["open", "stat", "read 101"], entry(100, Some(100))),
        ("at the limit: body kept", &[Opens, file(1000), Reads(1000)], Some(1000),
            &["open", "stat", "read 1001"], entry(1000, Some(1000))),
        ("empty: empty body kept", &[Opens, file(0), Reads(0)], Some(1000),
            &["open", "stat", "read 1"], entry(0, Some(0))),
        ("grew since stat: not kept", &[Opens, file(100), Reads(101)], Some(1000),
            &["open", "stat", "read 101"], entry(100, None)),
        ("shrank since stat: not kept", &[Opens, file(100), Reads(40)], Some(1000),
            &["open", "stat", "read 101"], entry(100, None)),
        ("body read fails", &[Opens, file(100), Errno(libc::EIO)], Some(1000),
            &["open", "stat", "read 101"], Got::Status(500)),
        ("no file cache: no body", &[Opens, file(10)], None, &["open", "stat"], entry(10, None)),
        ("outcome out of order", &[Reads(3)], Some(1000), &["open"], Got::Status(500)),
    ];
    for (name, script, keep, asked, got) in cases {
        let (a, g) = play(script, *keep);
        assert_eq!(a, *asked, "{name}: operations asked for");
        assert_eq!(g, *got, "{name}: what the request gets");
    }
}

/// A folder on disk (not a tmpfs: its files' pages can be evicted) with the names of
/// [`BLOCKING_ANSWERS`].
pub(crate) fn tree() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("amped-open").tempdir_in("/var/tmp").unwrap();
    std::fs::write(dir.path().join("small"), b"0123456789").unwrap();
    std::fs::write(dir.path().join("large"), vec![7u8; 100]).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let made = std::process::Command::new("mkfifo").arg(dir.path().join("fifo")).status();
    assert!(made.unwrap().success(), "mkfifo failed");
    dir
}

/// What the blocking driver gives for each name of [`tree`] (with bodies up to 64 bytes kept):
/// the table the io_uring driver is held to as well.
pub(crate) const BLOCKING_ANSWERS: &[(&str, &str)] = &[
    ("small", "entry 10, body 10"),
    ("large", "entry 100, no body"),
    ("sub", "403"),
    ("fifo", "403"),
    ("missing", "404"),
];

/// An open's result, as [`BLOCKING_ANSWERS`] writes it.
pub(crate) fn describe(r: &io::Result<FileEntry>) -> String {
    match r {
        Ok(e) => match &e.body {
            Some(b) => format!("entry {}, body {}", e.size, b.len()),
            None => format!("entry {}, no body", e.size),
        },
        Err(e) => classify(e).status().as_u16().to_string(),
    }
}

#[test]
fn the_blocking_driver_opens_regular_files_only() {
    let dir = tree();
    let pages = PagePolicy::new(0);
    let rules =
        OpenRules { keep_bodies_up_to: Some(64), pages: &pages, kernel_read_ahead_below: u64::MAX };
    for (name, want) in BLOCKING_ANSWERS {
        let got = open_blocking(dir.path().join(name), rules);
        assert_eq!(describe(&got), *want, "{name}");
    }
    let small = open_blocking(dir.path().join("small"), rules).unwrap();
    assert_eq!(small.body.as_deref(), Some(&b"0123456789"[..]));
    assert_eq!(small.path, dir.path().join("small"));
}

#[test]
fn a_cold_small_body_means_pressure_and_gives_its_pages_back() {
    let dir = tree();
    let path = dir.path().join("small");
    File::open(&path).unwrap().sync_all().unwrap(); // written back, so its pages can go
    let pages = PagePolicy::new(64);
    let rules =
        OpenRules { keep_bodies_up_to: Some(64), pages: &pages, kernel_read_ahead_below: u64::MAX };

    // Resident (just written): no miss, no pressure, the pages stay.
    let warm = open_blocking(path.clone(), rules).unwrap();
    assert!(warm.body.is_some());
    assert!(!pages.under_pressure(), "a resident small body is no miss");
    assert_eq!(residency::is_resident(&warm.file, 0, warm.size).ok(), Some(true));

    // Evicted: the open counts a small-file miss, and the body it read lets its pages go.
    residency::evict(&warm.file).unwrap();
    if residency::is_resident(&warm.file, 0, warm.size).unwrap_or(true) {
        eprintln!("skipped: this file system keeps the pages of {path:?}");
        return;
    }
    let cold = open_blocking(path, rules).unwrap();
    assert_eq!(cold.body.as_deref(), Some(&b"0123456789"[..]));
    assert!(pages.under_pressure(), "a cold small body is a miss");
    assert_eq!(residency::is_resident(&cold.file, 0, cold.size).ok(), Some(false));
}

/// Opens a fresh 1 MiB file under `rules`, drops its pages and reads its first page: whether
/// the page after it was read too (the kernel's read-ahead), or `None` where this file system
/// keeps its pages.
fn page_after_one_read_is_resident(rules: OpenRules<'_>) -> Option<bool> {
    let dir = tree();
    let path = dir.path().join("large");
    std::fs::write(&path, vec![5u8; 1 << 20]).unwrap();
    File::open(&path).unwrap().sync_all().unwrap(); // written back, so its pages can go
    let entry = open_blocking(path.clone(), rules).unwrap();
    residency::evict(&entry.file).unwrap();
    if residency::is_resident(&entry.file, 0, 4096).unwrap_or(true) {
        eprintln!("skipped: this file system keeps the pages of {path:?}");
        return None;
    }
    let mut page = [0u8; 4096];
    assert_eq!(amped_sys::files::read_at(&entry.file, &mut page, 0).unwrap(), 4096);
    assert_eq!(page, [5u8; 4096]);
    assert_eq!(residency::is_resident(&entry.file, 0, 4096).ok(), Some(true));
    let next = residency::is_resident(&entry.file, 4096, 4096).unwrap();
    let later = residency::is_resident(&entry.file, 64 << 10, 64 << 10).unwrap();
    assert!(next || !later, "a later page came in without the next one");
    Some(next)
}

#[test]
fn with_kernel_read_ahead_off_a_read_brings_in_only_its_own_pages() {
    let pages = PagePolicy::new(0);
    let off = OpenRules { keep_bodies_up_to: Some(64), pages: &pages, kernel_read_ahead_below: 0 };
    // The kernel's first read-ahead window would have brought in at least the next pages.
    let read_ahead = page_after_one_read_is_resident(off);
    assert_ne!(read_ahead, Some(true), "the page after the read was read ahead");
}

#[test]
fn a_read_ahead_size_keeps_the_kernels_read_ahead_for_smaller_files_only() {
    let pages = PagePolicy::new(0);
    let rules = |below| OpenRules {
        keep_bodies_up_to: Some(64),
        pages: &pages,
        kernel_read_ahead_below: below,
    };
    // A file of exactly the size is read as with `off`.
    assert_ne!(
        page_after_one_read_is_resident(rules(1 << 20)),
        Some(true),
        "1 MiB file, below 1 MiB"
    );
    // One byte more and the file keeps the kernel's read-ahead, where the device reads ahead.
    if page_after_one_read_is_resident(rules((1 << 20) + 1)) == Some(false) {
        eprintln!("skipped: this device does not read ahead");
    }
}
