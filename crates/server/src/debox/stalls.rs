//! Loop stalls: calls on an event-loop thread that took longer than the threshold, kept in a
//! bounded ring of the most recent ones with what each was about and why it waited, plus
//! counts per call that are never dropped.

use amped_sys::debox::{About, Call, Sample, describe_fd};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// How many recent stalls are kept, of each kind (disk calls, other calls).
pub const RECENT: usize = 64;

/// One stall.
#[derive(Clone, Debug, Serialize)]
pub struct Stall {
    /// When it ended (Unix time, ms).
    pub at_unix_ms: u64,
    /// The call.
    pub call: &'static str,
    /// The amped source line that made it.
    pub site: String,
    /// The file or peer it was about.
    pub about: String,
    /// Its wall time, ms.
    pub ms: f64,
    /// Whether the call is one that can wait for the disk (and was probed).
    pub disk_call: bool,
    /// What the profile could tell about why it waited.
    pub reason: String,
}

/// Every stall seen.
#[derive(Default, Debug, Serialize)]
pub struct Stalls {
    /// Stalls in all.
    pub count: u64,
    /// Of those, in calls that can wait for the disk (the rest are socket calls, slowed by
    /// preemption or a busy machine rather than the disk).
    pub in_disk_calls: u64,
    /// Stalls per call.
    pub by_call: BTreeMap<&'static str, u64>,
    /// The most recent, oldest first.
    pub recent: VecDeque<Stall>,
    /// The most recent in calls that can wait for the disk, oldest first (kept apart so that
    /// many short socket stalls on a busy machine do not push them out).
    pub recent_disk: VecDeque<Stall>,
}

static STALLS: Mutex<Stalls> = Mutex::new(Stalls {
    count: 0,
    in_disk_calls: 0,
    by_call: BTreeMap::new(),
    recent: VecDeque::new(),
    recent_disk: VecDeque::new(),
});

/// Records `s` as a stall (call this while the call's descriptor is still open).
pub fn record(s: &Sample<'_>) {
    let stall = Stall {
        at_unix_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        call: s.call.name(),
        site: format!("{}:{}", s.site.file(), s.site.line()),
        about: match s.about {
            About::Nothing => String::new(),
            About::Fd(fd) => describe_fd(fd),
            About::Path(p) => p.display().to_string(),
        },
        ms: s.wall_ns as f64 / 1e6,
        disk_call: s.call.may_sleep_on_disk(),
        reason: reason(s),
    };
    let mut all = STALLS.lock().unwrap_or_else(PoisonError::into_inner);
    all.count += 1;
    all.in_disk_calls += u64::from(stall.disk_call);
    *all.by_call.entry(stall.call).or_default() += 1;
    let ring = if stall.disk_call { &mut all.recent_disk } else { &mut all.recent };
    if ring.len() == RECENT {
        ring.pop_front();
    }
    ring.push_back(stall);
}

/// A copy of what was recorded.
pub fn snapshot() -> Stalls {
    let all = STALLS.lock().unwrap_or_else(PoisonError::into_inner);
    Stalls {
        count: all.count,
        in_disk_calls: all.in_disk_calls,
        by_call: all.by_call.clone(),
        recent: all.recent.clone(),
        recent_disk: all.recent_disk.clone(),
    }
}

/// Why a call waited, as far as its sample tells.
pub fn reason(s: &Sample<'_>) -> String {
    if matches!(s.errno, Some(e) if e == EMFILE || e == ENFILE) {
        return "descriptor limit (EMFILE/ENFILE)".into();
    }
    let Some(u) = s.usage else {
        return "socket call, timed only (it never waits for the disk): preempted or waiting \
                for a CPU on a busy machine, or a slow kernel path"
            .into();
    };
    let slept_ms = s.slept().unwrap_or_default().as_secs_f64() * 1e3;
    if u.major_faults > 0 {
        return format!(
            "{} major page fault(s): waited {slept_ms:.2} ms for the disk",
            u.major_faults
        );
    }
    if u.vol_switches > 0 && s.call.reads_file_data() {
        return format!(
            "page-cache miss: slept {} time(s), {slept_ms:.2} ms, waiting for the disk",
            u.vol_switches
        );
    }
    if u.blkio_ns > 0 {
        return format!("block I/O wait {:.2} ms", u.blkio_ns as f64 / 1e6);
    }
    if u.vol_switches > 0 {
        let what = if s.call == Call::Open || s.call == Call::Stat {
            "metadata read or inode lock"
        } else {
            "a lock or I/O"
        };
        return format!("slept {} time(s), {slept_ms:.2} ms ({what})", u.vol_switches);
    }
    if u.run_delay_ns * 2 > s.wall_ns {
        return format!("waited {:.2} ms for a CPU (run queue)", u.run_delay_ns as f64 / 1e6);
    }
    if u.invol_switches > 0 {
        return "preempted".into();
    }
    format!("busy in the kernel {:.2} ms (on CPU)", u.cpu_ns as f64 / 1e6)
}

const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

#[cfg(test)]
mod tests {
    use super::*;
    use amped_sys::debox::Usage;
    use std::panic::Location;

    fn sample(call: Call, usage: Option<Usage>, errno: Option<i32>) -> Sample<'static> {
        Sample {
            call,
            site: Location::caller(),
            wall_ns: 4_000_000,
            usage,
            errno,
            about: About::Nothing,
        }
    }

    #[test]
    fn reasons_name_the_disk_the_descriptor_limit_and_the_cpu() {
        let slept = Usage { vol_switches: 3, cpu_ns: 100_000, ..Usage::default() };
        assert!(reason(&sample(Call::Sendfile, Some(slept), None)).starts_with("page-cache miss"));
        assert!(reason(&sample(Call::Open, Some(slept), None)).contains("inode lock"));
        assert!(reason(&sample(Call::Accept, None, Some(EMFILE))).contains("descriptor limit"));
        let queued = Usage { run_delay_ns: 3_000_000, ..Usage::default() };
        assert!(reason(&sample(Call::FileRead, Some(queued), None)).contains("for a CPU"));
        let fault = Usage { major_faults: 1, ..Usage::default() };
        assert!(reason(&sample(Call::FileRead, Some(fault), None)).contains("major page fault"));
        assert!(reason(&sample(Call::Writev, None, None)).starts_with("socket call"));
    }

    #[test]
    fn the_ring_keeps_the_latest_and_counts_all() {
        let before = snapshot().count;
        for _ in 0..RECENT + 3 {
            record(&sample(Call::SpliceOut, None, None));
        }
        let s = snapshot();
        assert_eq!(s.count, before + RECENT as u64 + 3);
        assert_eq!(s.recent.len(), RECENT);
        record(&sample(Call::SpliceIn, None, None));
        let s = snapshot();
        assert_eq!(s.recent.len(), RECENT, "a disk stall goes to its own ring");
        assert_eq!(s.recent_disk.back().unwrap().call, "splice_in");
        assert!(s.by_call["splice_out"] >= RECENT as u64 + 3);
    }
}
