//! `amplab slowdisk` for real: mounts a tiny tree through the FUSE slow disk, reads a file
//! through it (content equal to the source; the first read pays the configured delay, the
//! second comes from the page cache), checks that it is read-only, and that SIGTERM unmounts.
//! Runs only as root with /dev/fuse (skipped with a printed reason otherwise); bounded in time;
//! the mount is always removed (`umount -l`), whatever happens.

#[path = "common/fuse.rs"]
mod fuse;

use std::time::{Duration, Instant};

const SEEK_MS: u64 = 150;

#[test]
fn reads_through_the_slow_disk_then_from_the_page_cache() {
    if let Some(why) = fuse::skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    let data: Vec<u8> =
        (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(src.join("d/file.bin"), &data).unwrap();
    std::fs::write(src.join("small.txt"), b"hello\n").unwrap();
    let mount = tmp.path().canonicalize().unwrap().join("mnt");

    let seek = SEEK_MS.to_string();
    let mut daemon =
        fuse::mount(&src, &mount, &["--seek-ms", &seek, "--meta-ms", "0", "--mbps", "1000"]);

    let path = mount.join("d/file.bin");
    let t0 = Instant::now();
    let first = std::fs::read(&path).unwrap();
    let cold = t0.elapsed();
    assert!(first == data, "content differs through the mount");
    assert!(cold >= Duration::from_millis(SEEK_MS), "the first read took only {cold:?}");

    // The page cache may drop a page between the two reads on a busy machine (seen once in
    // CI: 0.3 s for the repeat); the claim is that repeats are served from it, so the
    // faster of two repeats is what is judged.
    let repeat = || {
        let t1 = Instant::now();
        let again = std::fs::read(&path).unwrap();
        assert!(again == data);
        t1.elapsed()
    };
    let warm = repeat().min(repeat());
    assert!(
        warm < Duration::from_millis(SEEK_MS / 3) && warm * 5 < cold,
        "the repeated read took {warm:?} (cold {cold:?}): not served from the page cache"
    );
    eprintln!("cold read {cold:?}, repeated read {warm:?}");

    assert_eq!(std::fs::read(mount.join("small.txt")).unwrap(), b"hello\n");
    let e = std::fs::write(mount.join("new.txt"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(30), "writes must fail with EROFS: {e}"); // EROFS

    let status =
        daemon.stop(Duration::from_secs(10)).expect("amplab slowdisk did not exit on SIGTERM");
    assert!(status.success(), "{status}");
    assert!(!fuse::mounted(&mount), "still mounted after SIGTERM");
}

/// Cold lookups of several files in one directory reach the emulated disk together, as on a
/// local file system (the FUSE default would serialize them in the kernel): with enough arms,
/// six of them take about one lookup's time, not six.
#[test]
fn lookups_in_one_directory_run_in_parallel() {
    if let Some(why) = fuse::skip_reason() {
        println!("skipped: {why}");
        return;
    }
    const META_MS: u64 = 300;
    const FILES: usize = 6;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..FILES {
        std::fs::write(src.join(format!("d/f{i}")), b"x").unwrap();
    }
    let mount = tmp.path().canonicalize().unwrap().join("mnt");
    let meta = META_MS.to_string();
    let mut daemon =
        fuse::mount(&src, &mount, &["--meta-ms", &meta, "--seek-ms", "0", "--arms", "8"]);
    std::fs::metadata(mount.join("d")).unwrap(); // the directory's own lookup, first
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for i in 0..FILES {
            let path = mount.join(format!("d/f{i}"));
            s.spawn(move || assert_eq!(std::fs::metadata(path).unwrap().len(), 1));
        }
    });
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(META_MS), "the lookups took only {took:?}");
    assert!(
        took < Duration::from_millis(META_MS * 3),
        "{FILES} lookups in one directory took {took:?}: serialized ({} ms would be one by one)",
        META_MS * FILES as u64
    );
    let status =
        daemon.stop(Duration::from_secs(10)).expect("amplab slowdisk did not exit on SIGTERM");
    assert!(status.success(), "{status}");
}
