//! The page-yield policy (`--page-yield-above`, off by default, here 64 KiB): under memory
//! pressure — a smaller file found
//! not resident — a large file drops its pages once sent; without pressure, or with the
//! policy off, nothing is dropped. Pressure is made by evicting a small file that was served
//! before (posix_fadvise DONTNEED; a file's first reading is no evidence of pressure); the outcome is read from the stats endpoint and, where util-linux
//! `fincore` is installed, from the page cache itself.

use crate::amped_helpers::{evict, resident_bytes};
use crate::common::*;
use std::path::Path;

const STATS: &str = "/.amped/stats";
/// Above `--small-file-bytes` (so it is sent from the page cache), below the yield threshold.
const SMALL: usize = 40 << 10;
const LARGE: usize = 2 << 20;

fn fill(root: &Path) {
    write(root, "small.bin", pseudo_random(SMALL, 1));
    write(root, "large.bin", pseudo_random(LARGE, 2));
    // Written pages stay dirty until written back, and dirty pages cannot be dropped.
    for name in ["small.bin", "large.bin"] {
        std::fs::File::open(root.join(name)).unwrap().sync_all().unwrap();
    }
}

fn fetch(s: &Server, name: &str, len: usize, seed: u64) {
    let r = s.get(name);
    r.assert_status(200);
    assert!(r.body == pseudo_random(len, seed), "body of {name} differs");
}

fn yields(s: &Server) -> u64 {
    counter(&stats(s.addr, STATS), "page_yields")
}

/// Pressure: the small file missed, so the large one gives its pages back after its send; its
/// next request is still answered exactly (read back in). The architectures that test
/// residency before sending (the event loops and io_uring) learn of the pressure this way; the
/// blocking ones (mt, pool, mp) send without testing and learn of it only from small bodies
/// read cold when opened.
#[test]
fn under_pressure_a_large_file_yields_its_pages() {
    for arch in ["amped", "sped", "uring"] {
        let s = Server::start(
            &["--arch", arch],
            &["--stats-path", STATS, "--page-yield-above", "65536"],
            fill,
        );
        fetch(&s, "/large.bin", LARGE, 2);
        fetch(&s, "/small.bin", SMALL, 1);
        assert_eq!(yields(&s), 0, "{arch}: yielded without pressure");
        evict(&s.path("small.bin"));
        fetch(&s, "/small.bin", SMALL, 1);
        fetch(&s, "/large.bin", LARGE, 2);
        // It yields a moment after its send (once the socket buffers let go of its pages), at
        // the event loop's next housekeeping tick.
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(yields(&s), 1, "{arch}: large file did not yield under pressure");
        // (How many pages actually go is the kernel's call: those a socket still references
        // stay, moved to the inactive list to be reclaimed first. The syscall is tested in
        // amped-sys.)
        fetch(&s, "/large.bin", LARGE, 2);
    }
}

/// No pressure: a cached large file is never dropped, however often it is sent.
#[test]
fn without_pressure_large_files_keep_their_pages() {
    let s = Server::start(
        &["--arch", "amped"],
        &["--stats-path", STATS, "--page-yield-above", "65536"],
        fill,
    );
    for _ in 0..3 {
        fetch(&s, "/large.bin", LARGE, 2);
        fetch(&s, "/small.bin", SMALL, 1);
    }
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(yields(&s), 0);
    if let Some(resident) = resident_bytes(&s.path("large.bin")) {
        assert_eq!(resident, LARGE as u64, "large file lost pages without pressure");
    }
}

/// `--page-yield-above 0` turns the policy off, pressure or not; so does the default.
#[test]
fn the_policy_is_off_by_default_and_with_zero() {
    for extra in [&["--stats-path", STATS, "--page-yield-above", "0"][..], &["--stats-path", STATS]]
    {
        let s = Server::start(&["--arch", "amped"], extra, fill);
        evict(&s.path("small.bin"));
        fetch(&s, "/small.bin", SMALL, 1);
        fetch(&s, "/large.bin", LARGE, 2);
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(yields(&s), 0, "yielded with {extra:?}");
    }
}
