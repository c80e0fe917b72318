//! The AMPED helper path, for real: a file evicted from the page cache
//! (posix_fadvise DONTNEED, via python3) must be found non-resident by the residency test and
//! brought in by a helper (amped), or handled inline (sped). Checked through the stats endpoint.
//! These tests name their architecture and do not go through `arch_tests!`.

use crate::common::*;
use std::path::Path;
use std::process::Command;
use std::thread;

const STATS: &str = "/.amped/stats";
const LEN: usize = 4 << 20;

/// fsync `path` and drop its pages from the page cache. `DONTNEED` passes over a page that
/// is locked or referenced at that instant (a read or a pipe still holding it), so the drop is
/// tried again for up to a second before the test is declared unable to evict here.
pub(crate) fn evict(path: &Path) {
    let script = "import os,sys\n\
                  fd=os.open(sys.argv[1],os.O_RDONLY)\n\
                  os.fsync(fd)\n\
                  os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)\n\
                  os.close(fd)";
    let len = std::fs::metadata(path).unwrap().len();
    let mut resident = None;
    for _ in 0..20 {
        let status =
            Command::new("python3").arg("-c").arg(script).arg(path).status().expect("run python3");
        assert!(status.success(), "python3 fadvise failed");
        resident = resident_bytes(path);
        match resident {
            Some(r) if r >= len / 2 => thread::sleep(std::time::Duration::from_millis(50)),
            _ => return,
        }
    }
    panic!("eviction did not work here: {} bytes still resident", resident.unwrap_or(0));
}

/// Resident bytes of `path` according to util-linux `fincore`, if it is installed.
pub(crate) fn resident_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

fn fill(root: &Path) {
    for i in 0..4 {
        write(root, &format!("big{i}.bin"), pseudo_random(LEN, 100 + i as u64));
    }
}

fn evict_all(s: &Server) {
    for i in 0..4 {
        evict(&s.path(&format!("big{i}.bin")));
    }
}

/// GET /big{i}.bin and assert it is byte-identical.
fn fetch_and_check(s: &Server, i: usize) {
    let r = s.get(&format!("/big{i}.bin"));
    r.assert_status(200);
    assert!(r.body == pseudo_random(LEN, 100 + i as u64), "body of big{i}.bin differs");
}

/// amped: an evicted file is detected as non-resident and brought in by a helper; the body is
/// exact; once resident, a repeat request needs no residency miss.
#[test]
fn amped_evicted_file_goes_through_helper() {
    let s = Server::start(&["--arch", "amped"], &["--stats-path", STATS], fill);
    evict_all(&s);
    let before = stats(s.addr, STATS);
    fetch_and_check(&s, 0);
    let after = stats(s.addr, STATS);
    assert!(
        counter(&after, "residency_misses") > counter(&before, "residency_misses"),
        "no residency miss recorded: {after}"
    );
    assert!(counter(&after, "jobs_helper") >= 1, "no helper job: {after}");
    // warm now: a repeat request finds the pages resident
    fetch_and_check(&s, 0);
    let warm = stats(s.addr, STATS);
    assert_eq!(
        counter(&warm, "residency_misses"),
        counter(&after, "residency_misses"),
        "resident file counted as a miss: {warm}"
    );
}

/// amped: four evicted files fetched concurrently are all answered exactly (connections parked
/// on helpers resume correctly).
#[test]
fn amped_concurrent_evicted_files() {
    let s = Server::start(&["--arch", "amped", "--helpers", "2"], &["--stats-path", STATS], fill);
    evict_all(&s);
    thread::scope(|scope| {
        for i in 0..4 {
            let s = &s;
            scope.spawn(move || fetch_and_check(s, i));
        }
    });
    let st = stats(s.addr, STATS);
    assert!(counter(&st, "residency_misses") >= 4, "{st}");
    assert!(counter(&st, "jobs_helper") >= 4, "{st}");
}

/// sped: the same request runs its jobs inline, never on a helper.
#[test]
fn sped_evicted_file_runs_inline() {
    let s = Server::start(&["--arch", "sped"], &["--stats-path", STATS], fill);
    evict_all(&s);
    fetch_and_check(&s, 1);
    let st = stats(s.addr, STATS);
    assert!(counter(&st, "jobs_inline") >= 1, "no inline job: {st}");
    assert_eq!(counter(&st, "jobs_helper"), 0, "sped used a helper: {st}");
}
