//! The per-call tables. Each thread adds its samples to a table of its own that only it writes:
//! a fixed array of rows found by hashing (role, call, call site), whose counters the owner
//! updates with relaxed atomic loads and stores — plain moves, no lock and no read-modify-write,
//! since nobody else writes them. The probe totals of a row (only calls that can wait for the
//! disk have them, and those already cost two `getrusage`s) sit behind an uncontended lock.
//! A report reads every thread's table on demand; a thread that ends folds its table into the
//! retired one, so thread-per-connection servers do not grow the registry. A thread with more
//! distinct rows than its table holds adds the rest to a shared overflow table under a lock.

use super::Role;
use amped_sys::debox::{Call, Sample};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// What probing found in one row's calls (only calls that may wait for the disk are probed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// Calls probed.
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
}

impl Probe {
    /// What the probe of one sample found; `None` if the call was not probed.
    pub fn of(s: &Sample<'_>) -> Option<Probe> {
        let (u, slept) = (s.usage?, s.slept()?.as_nanos() as u64);
        Some(Probe {
            probed: 1,
            blocked: u64::from(s.blocked()),
            slept_ns: slept,
            max_slept_ns: slept,
            vol_switches: u.vol_switches,
            invol_switches: u.invol_switches,
            major_faults: u.major_faults,
            minor_faults: u.minor_faults,
            run_delay_ns: u.run_delay_ns,
            blkio_ns: u.blkio_ns,
        })
    }

    /// Adds another probe's totals.
    pub fn merge(&mut self, o: &Probe) {
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
    }
}

/// Which row a sample belongs to: one call made from one source line by threads of one role.
#[derive(Clone, Copy, Debug)]
struct Key {
    role: Role,
    call: Call,
    site: &'static Location<'static>,
}

impl Key {
    fn is(&self, o: &Key) -> bool {
        self.role == o.role && self.call == o.call && std::ptr::eq(self.site, o.site)
    }

    /// Fibonacci hashing of the site's address mixed with the call and role; a table takes the
    /// top bits.
    fn hash(&self) -> u64 {
        let site = std::ptr::from_ref(self.site) as usize as u64;
        let kind = ((self.call as u64) << 2) | self.role as u64;
        (site ^ kind).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

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
    /// Wall time of all the calls, ns.
    pub total_ns: u64,
    /// Largest wall time of one call, ns.
    pub max_ns: u64,
    /// Calls recorded as loop stalls.
    pub stalls: u64,
    /// What probing the calls found.
    pub probe: Probe,
}

impl Entry {
    fn new(key: Key) -> Entry {
        Entry {
            role: key.role,
            call: key.call,
            site: key.site,
            count: 0,
            errors: 0,
            total_ns: 0,
            max_ns: 0,
            stalls: 0,
            probe: Probe::default(),
        }
    }

    fn key(&self) -> Key {
        Key { role: self.role, call: self.call, site: self.site }
    }

    /// Adds one sample (`stall`: it was recorded as a loop stall).
    pub fn add(&mut self, s: &Sample<'_>, stall: bool) {
        self.count += 1;
        self.errors += u64::from(s.errno.is_some());
        self.total_ns += s.wall_ns;
        self.max_ns = self.max_ns.max(s.wall_ns);
        self.stalls += u64::from(stall);
        if let Some(p) = Probe::of(s) {
            self.probe.merge(&p);
        }
    }

    /// Adds another entry's totals.
    pub fn merge(&mut self, o: &Entry) {
        self.count += o.count;
        self.errors += o.errors;
        self.total_ns += o.total_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
        self.stalls += o.stalls;
        self.probe.merge(&o.probe);
    }
}

/// A list of entries, one per (role, call, site): what reports, retired threads and the
/// overflow are kept in.
#[derive(Default, Debug)]
pub struct Table {
    entries: Vec<Entry>,
}

impl Table {
    /// Adds a sample made by a thread of `role`.
    pub fn add(&mut self, role: Role, s: &Sample<'_>, stall: bool) {
        let key = Key { role, call: s.call, site: s.site };
        self.row(key).add(s, stall);
    }

    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: &Table) {
        for o in &other.entries {
            self.row(o.key()).merge(o);
        }
    }

    fn row(&mut self, key: Key) -> &mut Entry {
        match self.entries.iter().position(|e| e.key().is(&key)) {
            Some(i) => &mut self.entries[i],
            None => {
                self.entries.push(Entry::new(key));
                self.entries.last_mut().expect("just pushed")
            }
        }
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

/// Adds `n` to a counter only the calling thread writes.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// One row of a thread's table: its key, set once, and its totals.
#[derive(Default)]
struct Row {
    key: OnceLock<Key>,
    count: AtomicU64,
    errors: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
    stalls: AtomicU64,
    probe: Mutex<Probe>,
}

impl Row {
    #[inline]
    fn add(&self, s: &Sample<'_>, stall: bool) {
        bump(&self.count, 1);
        if s.errno.is_some() {
            bump(&self.errors, 1);
        }
        bump(&self.total_ns, s.wall_ns);
        if s.wall_ns > self.max_ns.load(Relaxed) {
            self.max_ns.store(s.wall_ns, Relaxed);
        }
        if stall {
            bump(&self.stalls, 1);
        }
        if s.usage.is_some() {
            self.add_probe(s);
        }
    }

    #[inline(never)]
    fn add_probe(&self, s: &Sample<'_>) {
        if let Some(p) = Probe::of(s) {
            lock(&self.probe).merge(&p);
        }
    }

    fn entry(&self) -> Option<Entry> {
        let key = *self.key.get()?;
        Some(Entry {
            count: self.count.load(Relaxed),
            errors: self.errors.load(Relaxed),
            total_ns: self.total_ns.load(Relaxed),
            max_ns: self.max_ns.load(Relaxed),
            stalls: self.stalls.load(Relaxed),
            probe: *lock(&self.probe),
            ..Entry::new(key)
        })
    }
}

/// One thread's table: `2^bits` rows, each found by hashing its key (open addressing, linear
/// probing). Only the owning thread may add to it (its counters are updated with a load and a
/// store, not a read-modify-write); any thread may read it.
pub struct ThreadTable {
    rows: Box<[Row]>,
    shift: u32,
}

impl ThreadTable {
    /// A table of `2^bits` rows (`bits` from 1 to 16).
    pub fn new(bits: u32) -> ThreadTable {
        let bits = bits.clamp(1, 16);
        ThreadTable {
            rows: (0..1usize << bits).map(|_| Row::default()).collect(),
            shift: 64 - bits,
        }
    }

    /// Adds a sample made by a thread of `role`; false if the sample's row is not in the
    /// table and the table is full.
    #[inline]
    pub fn add(&self, role: Role, s: &Sample<'_>, stall: bool) -> bool {
        let key = Key { role, call: s.call, site: s.site };
        let mask = self.rows.len() - 1;
        let mut i = (key.hash() >> self.shift) as usize;
        for _ in 0..self.rows.len() {
            let row = &self.rows[i];
            match row.key.get() {
                Some(k) if k.is(&key) => {}
                Some(_) => {
                    i = (i + 1) & mask;
                    continue;
                }
                None => {
                    let _ = row.key.set(key);
                }
            }
            row.add(s, stall);
            return true;
        }
        false
    }

    /// The rows in use, as they are now.
    pub fn snapshot(&self) -> Table {
        Table { entries: self.rows.iter().filter_map(Row::entry).collect() }
    }
}

/// Rows per thread, as a power of two: a thread makes calls from a few dozen lines at most.
const ROW_BITS: u32 = 6;

static LIVE: Mutex<Vec<Arc<ThreadTable>>> = Mutex::new(Vec::new());
static RETIRED: Mutex<Table> = Mutex::new(Table { entries: Vec::new() });
static OVERFLOW: Mutex<Table> = Mutex::new(Table { entries: Vec::new() });

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This thread's table, registered while the thread lives.
struct Mine(Arc<ThreadTable>);

impl Mine {
    fn register() -> Mine {
        let t = Arc::new(ThreadTable::new(ROW_BITS));
        lock(&LIVE).push(t.clone());
        Mine(t)
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        // RETIRED is held while the table leaves LIVE, so a report sees it in one or the other.
        let mut retired = lock(&RETIRED);
        retired.merge(&self.0.snapshot());
        lock(&LIVE).retain(|t| !Arc::ptr_eq(t, &self.0));
    }
}

thread_local! {
    static MINE: Mine = Mine::register();
}

/// Adds a sample to `table`, or to the shared overflow table if `table` is full.
#[inline]
fn add_or_overflow(table: &ThreadTable, role: Role, s: &Sample<'_>, stall: bool) {
    if !table.add(role, s, stall) {
        overflow(role, s, stall);
    }
}

#[cold]
#[inline(never)]
fn overflow(role: Role, s: &Sample<'_>, stall: bool) {
    lock(&OVERFLOW).add(role, s, stall);
}

/// Adds a sample to the calling thread's table.
#[inline]
pub fn record(role: Role, s: &Sample<'_>, stall: bool) {
    // During thread teardown the table may be gone already: that sample is dropped.
    let _ = MINE.try_with(|m| add_or_overflow(&m.0, role, s, stall));
}

/// Every thread's table merged, retired threads and the overflow included.
pub fn merged() -> Table {
    let mut all = Table::default();
    let retired = lock(&RETIRED);
    all.merge(&retired);
    let live: Vec<Arc<ThreadTable>> = lock(&LIVE).clone();
    drop(retired);
    for t in live {
        all.merge(&t.snapshot());
    }
    all.merge(&lock(&OVERFLOW));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use amped_sys::debox::{About, Usage};

    #[track_caller]
    fn sample(call: Call, wall_us: u64, usage: Option<Usage>) -> Sample<'static> {
        Sample {
            call,
            site: Location::caller(),
            wall_ns: wall_us * 1_000,
            usage,
            errno: None,
            about: About::Nothing,
        }
    }

    /// The same samples, added to a thread's table and to a plain one, give the same rows.
    fn both(samples: &[(Role, &Sample<'_>, bool)]) -> Table {
        let (mut plain, mine) = (Table::default(), ThreadTable::new(ROW_BITS));
        for (role, s, stall) in samples {
            plain.add(*role, s, *stall);
            assert!(mine.add(*role, s, *stall));
        }
        let snap = mine.snapshot();
        assert_eq!(snap.entries().len(), plain.entries().len());
        for e in plain.entries() {
            let m = snap.entries().iter().find(|m| m.key().is(&e.key())).expect("same rows");
            assert_eq!(
                (m.count, m.errors, m.total_ns, m.max_ns, m.stalls, m.probe),
                (e.count, e.errors, e.total_ns, e.max_ns, e.stalls, e.probe)
            );
        }
        plain
    }

    #[test]
    fn adds_counts_maxima_and_sleep_and_merges_by_row() {
        let slow =
            Usage { vol_switches: 2, cpu_ns: 100_000, run_delay_ns: 50_000, ..Usage::default() };
        let (a, mut b) =
            (sample(Call::Sendfile, 1_000, Some(slow)), sample(Call::Sendfile, 200, None));
        b.site = a.site;
        b.usage = Some(Usage { cpu_ns: 200_000, ..Usage::default() });
        b.errno = Some(11);
        let mut w = sample(Call::Writev, 30, None);
        w.site = a.site;
        let t = both(&[
            (Role::Loop, &a, true),
            (Role::Loop, &b, false),
            (Role::Helper, &a, false),
            (Role::Loop, &w, false),
        ]);
        assert_eq!(t.entries().len(), 3, "role and call separate rows of one site");
        let e = &t.entries()[0];
        assert_eq!((e.count, e.errors, e.probe.probed, e.probe.blocked, e.stalls), (2, 1, 2, 1, 1));
        assert_eq!(e.max_ns, 1_000_000);
        assert_eq!(e.total_ns, 1_200_000);
        assert_eq!(
            e.probe.slept_ns, 850_000,
            "wall minus cpu minus run delay, for the blocked call"
        );
        assert_eq!(e.probe.max_slept_ns, 850_000);
        assert_eq!(e.probe.vol_switches, 2);
        let writev = &t.entries()[2];
        assert_eq!((writev.count, writev.total_ns, writev.probe), (1, 30_000, Probe::default()));
        let mut u = Table::default();
        u.merge(&t);
        u.merge(&t);
        assert_eq!(u.entries()[0].count, 4);
        assert_eq!(u.entries()[0].max_ns, 1_000_000);
    }

    #[test]
    fn colliding_rows_are_kept_apart_and_a_full_table_sends_the_rest_to_the_overflow() {
        // Two rows: whatever the hashes, two keys fit (linear probing) and a third does not.
        let t = ThreadTable::new(1);
        let a = sample(Call::Recv, 1, None);
        let b = sample(Call::Recv, 2, None);
        let c = sample(Call::Recv, 4, None);
        for _ in 0..3 {
            assert!(t.add(Role::Loop, &a, false));
            assert!(t.add(Role::Loop, &b, false));
        }
        assert!(!t.add(Role::Loop, &c, false), "the table is full");
        let snap = t.snapshot();
        let total: Vec<(u32, u64, u64)> = {
            let mut v: Vec<_> =
                snap.entries().iter().map(|e| (e.site.line(), e.count, e.total_ns)).collect();
            v.sort();
            v
        };
        assert_eq!(total, vec![(a.site.line(), 3, 3_000), (b.site.line(), 3, 6_000)]);
        add_or_overflow(&t, Role::Loop, &c, true);
        let over = merged();
        let row = over.entries().iter().find(|e| std::ptr::eq(e.site, c.site)).expect("overflow");
        assert_eq!((row.count, row.stalls, row.total_ns), (1, 1, 4_000));
    }

    #[test]
    fn a_live_thread_is_read_in_place_and_counted_once_after_it_ends() {
        let s = sample(Call::Wake, 3, None);
        let site = s.site;
        let count = |t: &Table| {
            t.entries()
                .iter()
                .filter(|e| std::ptr::eq(e.site, site) && e.role == Role::Worker)
                .map(|e| e.count)
                .sum::<u64>()
        };
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (done, added) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            record(Role::Worker, &s, false);
            record(Role::Worker, &s, false);
            done.send(()).unwrap();
            wait.recv().unwrap();
        });
        added.recv().unwrap();
        assert_eq!(count(&merged()), 2, "read while the thread lives");
        go.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(count(&lock(&RETIRED)), 2);
        assert_eq!(count(&merged()), 2, "folded into the retired table, not counted twice");
    }
}
