//! The per-call tables: each thread adds its samples to its own table (an uncontended lock),
//! and a report merges every thread's table on demand. A thread that ends folds its table
//! into the retired one, so thread-per-connection servers do not grow the registry.

use super::Role;
use amped_sys::debox::{Call, Sample};
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The totals of one call made from one source line by threads of one role.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Role of the threads that made it.
    pub role: Role,
    /// The call.
    pub call: Call,
    /// The amped source line that made it.
    pub site: &'static Location<'static>,
    /// Calls made.
    pub count: u64,
    /// Calls that failed (would-block included).
    pub errors: u64,
    /// Wall time, total and largest, ns.
    pub total_ns: u64,
    /// Largest wall time of one call, ns.
    pub max_ns: u64,
    /// Calls probed for usage (those that may sleep on the disk).
    pub probed: u64,
    /// Probed calls that blocked (slept, or took a major fault).
    pub blocked: u64,
    /// Time the probed calls slept (wall minus CPU minus run-queue wait), ns.
    pub slept_ns: u64,
    /// Largest sleep of one call, ns.
    pub max_slept_ns: u64,
    /// Voluntary context switches during probed calls.
    pub vol_switches: u64,
    /// Involuntary context switches during probed calls.
    pub invol_switches: u64,
    /// Major page faults during probed calls.
    pub major_faults: u64,
    /// Minor page faults during probed calls.
    pub minor_faults: u64,
    /// Run-queue wait during probed calls, ns.
    pub run_delay_ns: u64,
    /// Block-I/O delay during probed calls (delay accounting), ns.
    pub blkio_ns: u64,
    /// Calls recorded as loop stalls.
    pub stalls: u64,
}

impl Entry {
    fn new(role: Role, call: Call, site: &'static Location<'static>) -> Entry {
        Entry {
            role,
            call,
            site,
            count: 0,
            errors: 0,
            total_ns: 0,
            max_ns: 0,
            probed: 0,
            blocked: 0,
            slept_ns: 0,
            max_slept_ns: 0,
            vol_switches: 0,
            invol_switches: 0,
            major_faults: 0,
            minor_faults: 0,
            run_delay_ns: 0,
            blkio_ns: 0,
            stalls: 0,
        }
    }

    /// Adds one sample (`stall`: it was recorded as a loop stall).
    pub fn add(&mut self, s: &Sample<'_>, stall: bool) {
        let ns = s.wall.as_nanos() as u64;
        self.count += 1;
        self.errors += u64::from(s.errno.is_some());
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.stalls += u64::from(stall);
        let (Some(u), Some(slept)) = (s.usage, s.slept()) else { return };
        let slept = slept.as_nanos() as u64;
        let mut probe = Entry::new(self.role, self.call, self.site);
        probe.probed = 1;
        probe.blocked = u64::from(s.blocked());
        (probe.slept_ns, probe.max_slept_ns) = (slept, slept);
        probe.vol_switches = u.vol_switches;
        probe.invol_switches = u.invol_switches;
        probe.major_faults = u.major_faults;
        probe.minor_faults = u.minor_faults;
        probe.run_delay_ns = u.run_delay_ns;
        probe.blkio_ns = u.blkio_ns;
        self.merge(&probe);
    }

    /// Adds another entry's totals.
    pub fn merge(&mut self, o: &Entry) {
        self.count += o.count;
        self.errors += o.errors;
        self.total_ns += o.total_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
        self.probed += o.probed;
        self.blocked += o.blocked;
        self.slept_ns += o.slept_ns;
        self.max_slept_ns = self.max_slept_ns.max(o.max_slept_ns);
        self.vol_switches += o.vol_switches;
        self.invol_switches += o.invol_switches;
        self.major_faults += o.major_faults;
        self.minor_faults += o.minor_faults;
        self.run_delay_ns += o.run_delay_ns;
        self.blkio_ns += o.blkio_ns;
        self.stalls += o.stalls;
    }

    fn same_row(&self, role: Role, call: Call, site: &'static Location<'static>) -> bool {
        self.role == role && self.call == call && std::ptr::eq(self.site, site)
    }
}

/// A list of entries, one per (role, call, site).
#[derive(Default, Debug)]
pub struct Table {
    entries: Vec<Entry>,
}

impl Table {
    /// Adds a sample made by a thread of `role`.
    pub fn add(&mut self, role: Role, s: &Sample<'_>, stall: bool) {
        // A thread makes calls from a few dozen lines at most: a scan beats hashing.
        match self.entries.iter_mut().find(|e| e.same_row(role, s.call, s.site)) {
            Some(e) => e.add(s, stall),
            None => {
                let mut e = Entry::new(role, s.call, s.site);
                e.add(s, stall);
                self.entries.push(e);
            }
        }
    }

    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: &Table) {
        for o in &other.entries {
            match self.entries.iter_mut().find(|e| e.same_row(o.role, o.call, o.site)) {
                Some(e) => e.merge(o),
                None => self.entries.push(o.clone()),
            }
        }
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

type Shared = Arc<Mutex<Table>>;

static LIVE: Mutex<Vec<Shared>> = Mutex::new(Vec::new());
static RETIRED: Mutex<Table> = Mutex::new(Table { entries: Vec::new() });

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This thread's table, registered while the thread lives.
struct Mine(Shared);

impl Mine {
    fn register() -> Mine {
        let t = Shared::default();
        lock(&LIVE).push(t.clone());
        Mine(t)
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        lock(&LIVE).retain(|t| !Arc::ptr_eq(t, &self.0));
        lock(&RETIRED).merge(&lock(&self.0));
    }
}

thread_local! {
    static MINE: Mine = Mine::register();
}

/// Adds a sample to the calling thread's table.
pub fn record(role: Role, s: &Sample<'_>, stall: bool) {
    // During thread teardown the table may be gone already: that sample is dropped.
    let _ = MINE.try_with(|m| lock(&m.0).add(role, s, stall));
}

/// Every thread's table merged, retired threads included.
pub fn merged() -> Table {
    let mut all = Table::default();
    all.merge(&lock(&RETIRED));
    let live: Vec<Shared> = lock(&LIVE).clone();
    for t in live {
        all.merge(&lock(&t));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use amped_sys::debox::{About, Usage};
    use std::time::Duration;

    fn sample(call: Call, wall_us: u64, usage: Option<Usage>) -> Sample<'static> {
        Sample {
            call,
            site: Location::caller(),
            wall: Duration::from_micros(wall_us),
            usage,
            errno: None,
            about: About::Nothing,
        }
    }

    #[test]
    fn adds_counts_maxima_and_sleep_and_merges_by_row() {
        let mut t = Table::default();
        let site = Location::caller();
        let slow =
            Usage { vol_switches: 2, cpu_ns: 100_000, run_delay_ns: 50_000, ..Usage::default() };
        let mut a = sample(Call::Sendfile, 1_000, Some(slow));
        a.site = site;
        let mut b =
            sample(Call::Sendfile, 200, Some(Usage { cpu_ns: 200_000, ..Usage::default() }));
        b.site = site;
        t.add(Role::Loop, &a, true);
        t.add(Role::Loop, &b, false);
        t.add(Role::Helper, &a, false);
        assert_eq!(t.entries().len(), 2, "role separates rows");
        let e = &t.entries()[0];
        assert_eq!((e.count, e.probed, e.blocked, e.stalls), (2, 2, 1, 1));
        assert_eq!(e.max_ns, 1_000_000);
        assert_eq!(e.total_ns, 1_200_000);
        assert_eq!(e.slept_ns, 850_000, "wall minus cpu minus run delay, for the blocked call");
        assert_eq!(e.vol_switches, 2);
        let mut u = Table::default();
        u.merge(&t);
        u.merge(&t);
        assert_eq!(u.entries()[0].count, 4);
        assert_eq!(u.entries()[0].max_ns, 1_000_000);
    }

    #[test]
    fn an_ended_thread_folds_into_the_retired_table() {
        let site_count = |t: &Table| {
            t.entries().iter().filter(|e| e.call == Call::Wake && e.role == Role::Worker).count()
        };
        std::thread::spawn(|| record(Role::Worker, &sample(Call::Wake, 3, None), false))
            .join()
            .unwrap();
        assert!(site_count(&lock(&RETIRED)) >= 1);
        assert!(site_count(&merged()) >= 1);
    }
}
