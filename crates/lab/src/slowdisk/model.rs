//! The emulated disk: what a request costs (the delay model) and how requests wait for it (a
//! FIFO queue served by `arms` independent arms).
//!
//! A READ costs `seek_ms + bytes / mbps` (mbps in MB/s, 10^6 bytes per second); a LOOKUP or
//! GETATTR that reaches the daemon costs `meta_ms` (an inode or directory block read on a cold
//! cache). Requests are served in arrival order by `arms` threads; each sleeps off the cost of
//! its request (the real pread on the source is absorbed into that time) before replying, so
//! with one arm a request waits for every request queued before it, like one 2004 disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The delay model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Positioning time of every read, ms.
    pub seek_ms: f64,
    /// Transfer rate, MB/s (10^6 bytes per second).
    pub mbps: f64,
    /// Cost of a lookup or getattr that reaches the daemon, ms.
    pub meta_ms: f64,
    /// Requests in service at once.
    pub arms: u32,
}

impl Model {
    /// The largest number of arms accepted.
    pub const MAX_ARMS: u32 = 256;

    /// Checks the values (finite, non-negative times, positive rate, 1..=256 arms).
    pub fn validate(&self) -> Result<(), String> {
        let ms_ok = |v: f64| v.is_finite() && (0.0..=60_000.0).contains(&v);
        if !ms_ok(self.seek_ms) {
            return Err(format!("--seek-ms {} is not a time in ms (0 to 60000)", self.seek_ms));
        }
        if !ms_ok(self.meta_ms) {
            return Err(format!("--meta-ms {} is not a time in ms (0 to 60000)", self.meta_ms));
        }
        if !(self.mbps.is_finite() && self.mbps > 0.0) {
            return Err(format!("--mbps {} is not a positive rate", self.mbps));
        }
        if !(1..=Self::MAX_ARMS).contains(&self.arms) {
            return Err(format!("--arms {} is not in 1..={}", self.arms, Self::MAX_ARMS));
        }
        Ok(())
    }

    /// What a read of `bytes` costs.
    pub fn read_cost(&self, bytes: u64) -> Duration {
        millis(self.seek_ms + bytes as f64 / (self.mbps * 1e6) * 1e3)
    }

    /// What a lookup or getattr costs.
    pub fn meta_cost(&self) -> Duration {
        millis(self.meta_ms)
    }

    /// One line for logs and summaries.
    pub fn describe(&self) -> String {
        format!(
            "{} ms per read + size at {} MB/s, {} ms per cold lookup/getattr, {} arm{}",
            trim(self.seek_ms),
            trim(self.mbps),
            trim(self.meta_ms),
            self.arms,
            if self.arms == 1 { " (requests queue FIFO)" } else { "s" }
        )
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1e3)
}

/// What kind of disk access a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Meta,
}

/// Counters of the disk since it started (all requests that reached it).
#[derive(Debug, Default)]
pub struct Stats {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    meta: AtomicU64,
    busy_ns: AtomicU64,
    wait_ns: AtomicU64,
    queued: AtomicU64,
    max_queued: AtomicU64,
}

/// A copy of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// READ requests served.
    pub reads: u64,
    pub read_bytes: u64,
    /// LOOKUP and GETATTR requests served.
    pub meta: u64,
    /// Sum over requests of their service time (arm-time busy), ns.
    pub busy_ns: u64,
    /// Sum over requests of their time queued before an arm took them, ns.
    pub wait_ns: u64,
    /// Most requests waiting or in service at once.
    pub max_queued: u64,
}

impl Stats {
    /// A copy of the counters now.
    pub fn snapshot(&self) -> Snapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            reads: get(&self.reads),
            read_bytes: get(&self.read_bytes),
            meta: get(&self.meta),
            busy_ns: get(&self.busy_ns),
            wait_ns: get(&self.wait_ns),
            max_queued: get(&self.max_queued),
        }
    }
}

impl Snapshot {
    /// The counters accumulated since `earlier` (`max_queued` is this snapshot's).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            reads: self.reads.saturating_sub(earlier.reads),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            meta: self.meta.saturating_sub(earlier.meta),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            max_queued: self.max_queued,
        }
    }
}

/// What a request's work produced: the bytes it read (for the counters), and the reply to
/// send once its service time has passed.
pub struct Done {
    pub bytes: u64,
    pub reply: Box<dyn FnOnce() + Send>,
}

type Work = Box<dyn FnOnce() -> Done + Send>;

struct Job {
    op: Op,
    queued: Instant,
    work: Work,
}

/// The queue and its arms. Dropping it closes the queue; the arms finish what is queued
/// (without sleeping once the [`Disk::stop_flag`] is set) and exit.
pub struct Disk {
    tx: crossbeam_channel::Sender<Job>,
    stats: Arc<Stats>,
    stopping: Arc<AtomicBool>,
}

impl Disk {
    /// Starts `model.arms` arm threads.
    pub fn start(model: Model, stats: Arc<Stats>) -> std::io::Result<Disk> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let stopping = Arc::new(AtomicBool::new(false));
        for arm in 0..model.arms {
            let (rx, stats, stopping) = (rx.clone(), stats.clone(), stopping.clone());
            thread::Builder::new()
                .name(format!("slowdisk-arm{arm}"))
                .spawn(move || serve(model, &rx, &stats, &stopping))?;
        }
        Ok(Disk { tx, stats, stopping })
    }

    /// Queues a request; `work` runs on an arm (pread, building the reply) and the reply is
    /// sent when the request's service time is over.
    pub fn submit(&self, op: Op, work: impl FnOnce() -> Done + Send + 'static) {
        let q = self.stats.queued.fetch_add(1, Ordering::Relaxed) + 1;
        self.stats.max_queued.fetch_max(q, Ordering::Relaxed);
        let job = Job { op, queued: Instant::now(), work: Box::new(work) };
        if let Err(crossbeam_channel::SendError(job)) = self.tx.send(job) {
            // No arm left (cannot happen while `self` lives): answer at once.
            self.stats.queued.fetch_sub(1, Ordering::Relaxed);
            ((job.work)().reply)();
        }
    }

    /// The flag that, once set, makes the arms answer without waiting (the mount is going
    /// away), for whoever unmounts.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stopping.clone()
    }
}

fn serve(
    model: Model,
    rx: &crossbeam_channel::Receiver<Job>,
    stats: &Stats,
    stopping: &AtomicBool,
) {
    while let Ok(job) = rx.recv() {
        let start = Instant::now();
        let done = (job.work)();
        let cost = match job.op {
            Op::Read => model.read_cost(done.bytes),
            Op::Meta => model.meta_cost(),
        };
        if !stopping.load(Ordering::Relaxed) {
            sleep_until(start + cost);
        }
        let busy = start.elapsed().max(cost);
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        match job.op {
            Op::Read => {
                stats.reads.fetch_add(1, Ordering::Relaxed);
                stats.read_bytes.fetch_add(done.bytes, Ordering::Relaxed);
            }
            Op::Meta => {
                stats.meta.fetch_add(1, Ordering::Relaxed);
            }
        }
        stats.busy_ns.fetch_add(ns(busy), Ordering::Relaxed);
        stats.wait_ns.fetch_add(ns(start.saturating_duration_since(job.queued)), Ordering::Relaxed);
        stats.queued.fetch_sub(1, Ordering::Relaxed);
        // Counted before the reply, so whoever sees the reply sees the counters too.
        (done.reply)();
    }
}

fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::mpsc;

    fn model(arms: u32) -> Model {
        Model { seek_ms: 5.0, mbps: 40.0, meta_ms: 2.0, arms }
    }

    #[test]
    fn read_costs_a_seek_plus_the_transfer() {
        let m = model(1);
        assert_eq!(m.read_cost(0), Duration::from_millis(5));
        // 128 KiB at 40 MB/s = 3.2768 ms.
        let c = m.read_cost(128 << 10).as_secs_f64() * 1e3;
        assert!((c - 8.2768).abs() < 1e-6, "{c}");
        // 40 MB at 40 MB/s = 1 s.
        assert!((m.read_cost(40_000_000).as_secs_f64() - 1.005).abs() < 1e-9);
        assert_eq!(m.meta_cost(), Duration::from_millis(2));
        let free = Model { seek_ms: 0.0, meta_ms: 0.0, ..m };
        assert_eq!(free.read_cost(0), Duration::ZERO);
    }

    #[test]
    fn validates_the_model() {
        assert!(model(1).validate().is_ok());
        for bad in [
            Model { seek_ms: -1.0, ..model(1) },
            Model { seek_ms: f64::NAN, ..model(1) },
            Model { meta_ms: f64::INFINITY, ..model(1) },
            Model { mbps: 0.0, ..model(1) },
            Model { mbps: -3.0, ..model(1) },
            model(0),
            model(Model::MAX_ARMS + 1),
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert!(model(1).describe().contains("5 ms per read + size at 40 MB/s"));
        assert!(model(1).describe().contains("1 arm (requests queue FIFO)"));
        assert!(model(4).describe().contains("4 arms"));
    }

    /// Submits `n` zero-byte reads (5 ms each) and returns (order of completion, elapsed).
    fn run(arms: u32, n: usize) -> (Vec<usize>, Duration, Snapshot) {
        let stats = Arc::new(Stats::default());
        let disk = Disk::start(model(arms), stats.clone()).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let t0 = Instant::now();
        for i in 0..n {
            let (order, tx) = (order.clone(), tx.clone());
            disk.submit(Op::Read, move || Done {
                bytes: 0,
                reply: Box::new(move || {
                    order.lock().unwrap().push(i);
                    tx.send(()).unwrap();
                }),
            });
        }
        for _ in 0..n {
            rx.recv_timeout(Duration::from_secs(5)).expect("a reply");
        }
        let elapsed = t0.elapsed();
        let order = order.lock().unwrap().clone();
        (order, elapsed, stats.snapshot())
    }

    #[test]
    fn one_arm_serves_requests_one_after_another_in_order() {
        let (order, elapsed, s) = run(1, 8);
        assert_eq!(order, (0..8).collect::<Vec<_>>());
        assert!(elapsed >= Duration::from_millis(40), "{elapsed:?}");
        assert_eq!(s.reads, 8);
        assert!(s.busy_ns >= 40_000_000, "{s:?}");
        // The last request waited for the seven before it (35 ms), the first for none.
        assert!(s.wait_ns >= 100_000_000, "{s:?}");
        assert_eq!(s.max_queued, 8);
    }

    #[test]
    fn more_arms_serve_requests_in_parallel() {
        let (_, elapsed, s) = run(4, 8);
        assert!(elapsed >= Duration::from_millis(10), "{elapsed:?}");
        assert!(elapsed < Duration::from_millis(39), "4 arms should take ~10 ms: {elapsed:?}");
        assert_eq!(s.reads, 8);
    }

    #[test]
    fn a_stopping_disk_answers_without_waiting() {
        let stats = Arc::new(Stats::default());
        let disk =
            Disk::start(Model { seek_ms: 2000.0, meta_ms: 2000.0, ..model(1) }, stats).unwrap();
        disk.stop_flag().store(true, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        disk.submit(Op::Meta, move || Done {
            bytes: 0,
            reply: Box::new(move || tx.send(()).unwrap()),
        });
        rx.recv_timeout(Duration::from_millis(500)).expect("an immediate reply");
    }

    #[test]
    fn snapshots_subtract() {
        let a =
            Snapshot { reads: 3, read_bytes: 10, meta: 1, busy_ns: 5, wait_ns: 2, max_queued: 4 };
        let b =
            Snapshot { reads: 5, read_bytes: 30, meta: 1, busy_ns: 9, wait_ns: 2, max_queued: 6 };
        assert_eq!(
            b.since(&a),
            Snapshot { reads: 2, read_bytes: 20, meta: 0, busy_ns: 4, wait_ns: 0, max_queued: 6 }
        );
    }
}
