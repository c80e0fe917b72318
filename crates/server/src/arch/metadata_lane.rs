//! AMPED's metadata lane: the queue of `Job::Resolve`s (path translation, `open`, `fstat`, a
//! small file's body) and the threads serving it in arrival order — fixed at a number of
//! threads, or adapting to its queue in the spirit of SEDA's thread-pool controller.
//!
//! **Why adapt.** Right after a cold start every request misses the path cache and needs a
//! resolve that reads the disk (~1 ms each on an SSD-like disk with many arms), and requests
//! arrive faster than `--helpers` threads can resolve them: on the emulated SSD each waited
//! 180–250 ms in this queue for the first seconds, while the disk served 32 reads at once.
//! More threads would have cleared it; on a disk with one arm, more threads only move the
//! queue into the disk. So `--metadata-helpers auto` starts at `--helpers` and grows while
//! jobs wait, and gives the threads back when the wait is over.
//!
//! **The rule** ([`LaneSize::should_grow`]), decided by a helper as it takes a job — never by
//! the event loop, whose submit stays a channel send and a clock read: add one thread when
//! the job just taken (the oldest that was waiting: the lane is FIFO) waited at least
//! [`GROW_AFTER`], more jobs wait than there are idle helpers to take them, no thread added
//! earlier is still starting, the last one was added at least [`GROW_SPACING`] ago, and the
//! lane is below its maximum — and the lane's jobs have been running for less than
//! [`SLOW_SERVICE`] on average. So the lane grows one thread at a time, only while the queue
//! really delays requests (a burst of cached resolves that drains in microseconds adds none)
//! and only while each resolve is quick: resolves that take milliseconds each are waiting for
//! a disk that serves one read at a time (an HDD's arm, a volume at its IOPS cap), where more
//! threads only move the queue into the disk and take its time from the read lane's
//! transfers — measured on the emulated one-arm disk, an unconditional `auto` made amped's p95
//! 6–13 % worse at 79–88 % busy (docs/BENCHMARKS.md §3b, session 8).
//! A thread beyond the minimum that finds no job for [`RETIRE_AFTER`] exits.
//!
//! **Slow jobs run one at a time while others wait for the disk** in an adaptive lane
//! ([`super::slow_gate`]): while that moving average is at or above [`SLOW_SERVICE`] and the
//! lane's `yield_to` says other work waits for the disk (the server: a transfer under way
//! waits in the read lane), the lane's other threads wait with the job they took until the
//! one running ends (or stalls). Four resolves at a one-arm disk at once took its time from
//! transfers under way: on a heavy-tailed trace the largest timed out.
//!
//! A limit of the rule: growth needs a helper to take a job, so if every helper is stuck in
//! one call (a hung network file system) the lane does not grow — as the fixed lane would
//! not; a controller thread could, at the cost of waking up while the server idles.
//!
//! **Coalescing.** A lane started with a key ([`MetadataLane::start_keyed`]: the server keys a
//! resolve by its URL path) holds a job whose key matches one queued or running as that job's
//! follower, run right after it on the same thread ([`super::coalesce`]): after a cold start a
//! popular file's later requests no longer wait the whole backlog again behind its first.
//! Followers are not queued, so they neither count as waiting for the growth rule nor, being
//! served from warm caches, in the moving average of run times.
//!
//! Dropping the lane closes the queue: its threads run the jobs still queued, then exit, and
//! every thread — those added too — is joined.

use super::coalesce::Coalescer;
use super::slow_gate::{STALL, SlowGate};
use crate::cache::lock;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job taken after waiting this long (with more waiting than idle helpers) adds a thread.
pub const GROW_AFTER: Duration = Duration::from_millis(2);
/// At most one thread is added per this interval.
pub const GROW_SPACING: Duration = Duration::from_millis(1);
/// A thread beyond the minimum that has had no job for this long exits.
pub const RETIRE_AFTER: Duration = Duration::from_secs(3);
/// While jobs take this long to run (a moving average), the lane does not grow: the disk
/// behind it, not the lane, is what they wait for.
pub const SLOW_SERVICE: Duration = Duration::from_millis(4);

/// How many threads serve the lane: `min` always, up to `max` while jobs wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneSize {
    /// Threads kept however idle the lane is (`--helpers`, or `--metadata-helpers N`).
    pub min: usize,
    /// Threads it may grow to (`min` when fixed).
    pub max: usize,
    /// Jobs running this long on average stop growth ([`SLOW_SERVICE`] in the server).
    pub slow_service: Duration,
    /// While they do, one job runs at a time ([`super::slow_gate`]).
    pub one_when_slow: bool,
}

/// What a helper sees as it takes a job: the input of the growth rule.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// Threads serving the lane now.
    pub threads: usize,
    /// Of them, those waiting for a job.
    pub idle: usize,
    /// Jobs still queued.
    pub waiting: usize,
    /// How long the job just taken waited.
    pub waited: Duration,
    /// A thread added earlier has not started taking jobs yet.
    pub starting: bool,
    /// How long the lane's jobs have been taking to run (a moving average).
    pub service: Duration,
    /// Time since the last thread was added (`None`: never).
    pub since_growth: Option<Duration>,
}

impl LaneSize {
    /// A lane of `n` threads (at least one), never more or fewer.
    pub fn fixed(n: usize) -> LaneSize {
        let n = n.max(1);
        LaneSize { min: n, max: n, slow_service: SLOW_SERVICE, one_when_slow: false }
    }

    /// A lane of `min` threads (at least one) growing up to `max` while jobs wait, and
    /// running one job at a time while they are slow.
    pub fn adaptive(min: usize, max: usize) -> LaneSize {
        let min = min.max(1);
        LaneSize { min, max: max.max(min), slow_service: SLOW_SERVICE, one_when_slow: true }
    }

    /// The same lane with another service time that stops growth.
    pub fn with_slow_service(self, slow_service: Duration) -> LaneSize {
        LaneSize { slow_service, ..self }
    }

    /// The lane `cfg` asks for: `--helpers` threads by default, `--metadata-helpers N`, or
    /// with `auto` from `--helpers` up to `--metadata-helpers-max`.
    pub fn configured(cfg: &crate::config::Config) -> LaneSize {
        use crate::config::MetadataHelpers;
        match cfg.metadata_helpers {
            MetadataHelpers::AsHelpers => LaneSize::fixed(cfg.helpers),
            MetadataHelpers::Fixed(n) => LaneSize::fixed(n),
            MetadataHelpers::Auto { max } => LaneSize::adaptive(cfg.helpers, max),
        }
    }

    /// Whether the lane's size can change.
    pub fn adapts(&self) -> bool {
        self.max > self.min
    }

    /// Whether the helper that saw `seen` adds a thread (see the module's doc).
    pub fn should_grow(&self, seen: &Seen) -> bool {
        seen.threads < self.max
            && !seen.starting
            && seen.waiting > seen.idle
            && seen.waited >= GROW_AFTER
            && seen.since_growth.is_none_or(|d| d >= GROW_SPACING)
            && seen.service < self.slow_service
    }

    /// Whether an idle thread may leave a lane of `threads` threads.
    pub fn may_retire(&self, threads: usize) -> bool {
        threads > self.min
    }
}

/// A job and when it was queued.
struct Queued<T> {
    at: Instant,
    job: T,
    /// Its key, when the lane coalesces by key: it leads the jobs that follow it.
    key: Option<u64>,
}

/// What [`MetadataLane::push`] did with a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Queued in arrival order.
    Queued,
    /// Held to run right after the job with the same key queued or running.
    Followed,
}

/// Runs one job on a lane thread; false once nobody takes results any more (the thread
/// then exits).
type Run<T> = Box<dyn Fn(T) -> bool + Send + Sync>;
/// Told +1 when a thread joins the lane and -1 when one leaves (the server's gauges).
type OnThreads = Box<dyn Fn(i64) + Send + Sync>;
/// A job's coalescing key (`None`: the job is never coalesced).
type Key<T> = Box<dyn Fn(&T) -> Option<u64> + Send + Sync>;

/// A running metadata lane carrying jobs of type `T`.
pub struct MetadataLane<T: Send + 'static> {
    jobs: Option<Sender<Queued<T>>>,
    crew: Arc<Crew<T>>,
}

/// What the lane's threads share.
struct Crew<T> {
    queue: Receiver<Queued<T>>,
    size: LaneSize,
    retire_after: Duration,
    run: Run<T>,
    on_threads: OnThreads,
    key: Key<T>,
    /// Keys of the jobs queued or running, and their followers.
    followers: Coalescer<T>,
    /// Threads waiting for a job now.
    idle: AtomicUsize,
    /// How long jobs take to run, ns: a moving average over the last few (0: none yet).
    service_ns: AtomicU64,
    /// Holds all but one job back while they are slow (`one_when_slow`) and `yield_to` holds.
    gate: SlowGate,
    yield_to: Box<dyn Fn() -> bool + Send + Sync>,
    state: Mutex<CrewState>,
}

/// The lane's threads, counted (changed rarely: under a lock).
#[derive(Default)]
struct CrewState {
    threads: usize,
    peak: usize,
    /// A thread added by the growth rule has not started yet.
    starting: bool,
    last_growth: Option<Instant>,
    /// Threads started so far (their names' numbers).
    spawned: usize,
    handles: Vec<JoinHandle<()>>,
}

impl CrewState {
    /// Counts a thread about to start (`grown`: by the growth rule); returns its number.
    fn reserve(&mut self, grown: bool) -> usize {
        self.threads += 1;
        self.peak = self.peak.max(self.threads);
        self.starting |= grown;
        self.spawned += 1;
        self.spawned
    }
}

impl<T: Send + 'static> MetadataLane<T> {
    /// A lane that never coalesces (the tests' lanes; the server keys its resolves).
    #[cfg(test)]
    pub fn start(
        size: LaneSize,
        retire_after: Duration,
        run: impl Fn(T) -> bool + Send + Sync + 'static,
        on_threads: impl Fn(i64) + Send + Sync + 'static,
    ) -> std::io::Result<MetadataLane<T>> {
        Self::start_keyed(size, retire_after, |_| None, || true, run, on_threads)
    }

    /// Starts a lane of `size.min` threads, each running jobs with `run`; `on_threads`
    /// follows the thread count. Threads beyond the minimum retire after `retire_after`
    /// without a job ([`RETIRE_AFTER`] in the server). A job whose `key` matches one queued or
    /// running follows it (see the module's doc); `None` keys are never coalesced. While jobs
    /// are slow and `yield_to` says other work waits for the disk, one runs at a time
    /// (`size.one_when_slow`).
    pub fn start_keyed(
        size: LaneSize,
        retire_after: Duration,
        key: impl Fn(&T) -> Option<u64> + Send + Sync + 'static,
        yield_to: impl Fn() -> bool + Send + Sync + 'static,
        run: impl Fn(T) -> bool + Send + Sync + 'static,
        on_threads: impl Fn(i64) + Send + Sync + 'static,
    ) -> std::io::Result<MetadataLane<T>> {
        let (jobs, queue) = unbounded();
        let crew = Arc::new(Crew {
            queue,
            size,
            retire_after,
            run: Box::new(run),
            on_threads: Box::new(on_threads),
            key: Box::new(key),
            followers: Coalescer::default(),
            idle: AtomicUsize::new(0),
            service_ns: AtomicU64::new(0),
            gate: SlowGate::new(STALL),
            yield_to: Box::new(yield_to),
            state: Mutex::new(CrewState::default()),
        });
        let lane = MetadataLane { jobs: Some(jobs), crew };
        for _ in 0..size.min {
            lane.crew.add_thread()?;
        }
        Ok(lane)
    }

    /// Queues `job`, or holds it behind the job with the same key (never blocks: the queue
    /// is unbounded, as the fixed lane's always was).
    pub fn push(&self, job: T) -> Pushed {
        let jobs = self.jobs.as_ref().expect("the lane is open until it is dropped");
        // Only a job that will wait leads (a lane that keeps up takes no lock for this), and
        // one can follow only while some job leads.
        let waits = jobs.len() >= self.crew.idle.load(Ordering::SeqCst);
        let key = if waits || self.crew.followers.any() { (self.crew.key)(&job) } else { None };
        let job = match key {
            Some(k) => match self.crew.followers.offer(k, job) {
                Some(job) => job,
                None => return Pushed::Followed,
            },
            None => job,
        };
        jobs.send(Queued { at: Instant::now(), job, key })
            .expect("lane threads outlive its sender");
        Pushed::Queued
    }

    /// Threads serving the lane now.
    pub fn threads(&self) -> usize {
        lock(&self.crew.state).threads
    }

    /// Most threads the lane has had at once.
    pub fn peak(&self) -> usize {
        lock(&self.crew.state).peak
    }
}

impl<T: Send + 'static> Crew<T> {
    /// Counts and starts one of the first `min` threads.
    fn add_thread(self: &Arc<Self>) -> std::io::Result<()> {
        let n = lock(&self.state).reserve(false);
        self.spawn(n, false)
    }

    /// Starts the thread numbered `n`, already counted by [`CrewState::reserve`] (`grown`:
    /// by the growth rule).
    fn spawn(self: &Arc<Self>, n: usize, grown: bool) -> std::io::Result<()> {
        (self.on_threads)(1);
        let crew = self.clone();
        let spawned =
            std::thread::Builder::new().name(format!("meta-helper-{n}")).spawn(move || {
                crate::debox::set_role(crate::debox::Role::Helper);
                crew.work(grown);
            });
        let mut st = lock(&self.state);
        match spawned {
            Ok(handle) => {
                st.handles.retain(|h| !h.is_finished());
                st.handles.push(handle);
                Ok(())
            }
            Err(e) => {
                st.threads -= 1;
                st.starting &= !grown;
                drop(st);
                (self.on_threads)(-1);
                Err(e)
            }
        }
    }

    /// A lane thread: takes jobs in arrival order and runs them until the lane closes, the
    /// results have nowhere to go, or (beyond the minimum) it has idled long enough.
    fn work(self: Arc<Self>, grown: bool) {
        if grown {
            lock(&self.state).starting = false;
        }
        let adapts = self.size.adapts();
        loop {
            self.idle.fetch_add(1, Ordering::SeqCst);
            let taken = if adapts {
                self.queue.recv_timeout(self.retire_after)
            } else {
                self.queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
            };
            self.idle.fetch_sub(1, Ordering::SeqCst);
            let queued = match taken {
                Ok(queued) => queued,
                Err(RecvTimeoutError::Timeout) if self.retire() => return,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if adapts {
                self.grow_if_waiting(queued.at);
            }
            // Held until the job and its followers have run.
            let _pass = self.size.one_when_slow.then(|| self.gate.enter(|| self.slow()));
            // Run times drive growth and the gate; a fixed lane has neither.
            let started = (adapts || self.size.one_when_slow).then(Instant::now);
            let ran = (self.run)(queued.job);
            if let (true, Some(started)) = (ran, started) {
                self.ran_for(started.elapsed());
            }
            let followers = queued.key.map(|k| self.followers.finished(k)).unwrap_or_default();
            if !ran || !followers.into_iter().all(|job| (self.run)(job)) {
                break;
            }
        }
        lock(&self.state).threads -= 1;
        (self.on_threads)(-1);
    }

    /// Whether the lane's jobs are slow (their moving average at least `slow_service`) while
    /// other work waits for the disk: then one runs at a time.
    fn slow(&self) -> bool {
        Duration::from_nanos(self.service_ns.load(Ordering::Relaxed)) >= self.size.slow_service
            && (self.yield_to)()
    }

    /// Folds a job's run time into the moving average (one eighth per job; concurrent updates
    /// may lose one, which an average can afford).
    fn ran_for(&self, took: Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let old = self.service_ns.load(Ordering::Relaxed);
        let new = if old == 0 { took } else { old - old / 8 + took / 8 };
        self.service_ns.store(new.max(1), Ordering::Relaxed);
    }

    /// Applies the growth rule for a job queued at `at` that this thread has just taken.
    fn grow_if_waiting(self: &Arc<Self>, at: Instant) {
        let (waiting, idle) = (self.queue.len(), self.idle.load(Ordering::SeqCst));
        if waiting <= idle {
            return; // the common case, decided without the lock
        }
        let now = Instant::now();
        let (seen, n) = {
            let mut st = lock(&self.state);
            let seen = Seen {
                threads: st.threads,
                idle,
                waiting,
                waited: now.saturating_duration_since(at),
                starting: st.starting,
                service: Duration::from_nanos(self.service_ns.load(Ordering::Relaxed)),
                since_growth: st.last_growth.map(|t| now.saturating_duration_since(t)),
            };
            if !self.size.should_grow(&seen) {
                return;
            }
            st.last_growth = Some(now);
            (seen, st.reserve(true))
        };
        match self.spawn(n, true) {
            Ok(()) => crate::errlog::debug!(
                "metadata lane grew to {} threads ({waiting} jobs waiting, the oldest {:.1} ms)",
                seen.threads + 1,
                seen.waited.as_secs_f64() * 1e3
            ),
            Err(e) => crate::errlog::warn!("cannot add a metadata helper thread: {e}"),
        }
    }

    /// Leaves the lane if it has more than its minimum.
    fn retire(&self) -> bool {
        let mut st = lock(&self.state);
        if !self.size.may_retire(st.threads) {
            return false;
        }
        st.threads -= 1;
        drop(st);
        (self.on_threads)(-1);
        true
    }
}

impl<T: Send + 'static> Drop for MetadataLane<T> {
    fn drop(&mut self) {
        // The threads run what is queued, see the queue closed and exit. A thread may add
        // another while it drains, pushing its handle before it exits: join until none is left.
        self.jobs.take();
        loop {
            let handles = std::mem::take(&mut lock(&self.crew.state).handles);
            if handles.is_empty() {
                break;
            }
            for h in handles {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    fn seen(threads: usize, idle: usize, waiting: usize, waited_ms: u64) -> Seen {
        Seen {
            threads,
            idle,
            waiting,
            waited: Duration::from_millis(waited_ms),
            starting: false,
            service: Duration::from_millis(1),
            since_growth: None,
        }
    }

    #[test]
    fn the_lane_grows_only_while_jobs_wait_that_no_idle_helper_takes() {
        let lane = LaneSize::adaptive(4, 16);
        let ms = Duration::from_millis;
        let starting = Seen { starting: true, ..seen(4, 0, 50, 10) };
        let just_grew = Seen { since_growth: Some(ms(0)), ..seen(5, 0, 50, 10) };
        let grew_before = Seen { since_growth: Some(GROW_SPACING), ..seen(5, 0, 50, 10) };
        let slow_disk = Seen { service: SLOW_SERVICE, ..seen(4, 0, 50, 100) };
        for (case, s, grows) in [
            ("a backlog that has waited", seen(4, 0, 50, 10), true),
            ("one job waiting, no idle helper", seen(4, 0, 1, 2), true),
            ("a backlog of cheap jobs, not yet delayed", seen(4, 0, 50, 1), false),
            ("idle helpers will take what waits", seen(4, 3, 3, 10), false),
            ("nothing waits", seen(4, 0, 0, 10), false),
            ("at the maximum", seen(16, 0, 500, 100), false),
            ("the thread added last has not started", starting, false),
            ("a thread was added a moment ago", just_grew, false),
            ("the last thread was added a spacing ago", grew_before, true),
            ("resolves are slow: the disk is the bottleneck", slow_disk, false),
        ] {
            assert_eq!(lane.should_grow(&s), grows, "{case}: {s:?}");
        }
        let fixed = LaneSize::fixed(4);
        assert!(!fixed.adapts());
        assert!(!fixed.should_grow(&seen(4, 0, 500, 100)), "a fixed lane never grows");
    }

    #[test]
    fn only_threads_beyond_the_minimum_retire() {
        let lane = LaneSize::adaptive(4, 16);
        assert!(lane.adapts());
        assert_eq!((lane.may_retire(4), lane.may_retire(5)), (false, true));
        let sizes = |l: LaneSize| (l.min, l.max);
        assert_eq!(sizes(LaneSize::adaptive(0, 0)), (1, 1), "at least one thread");
        assert_eq!(sizes(LaneSize::adaptive(4, 2)), (4, 4), "the maximum is at least min");
    }

    /// A lane whose jobs sleep `job_ms` and count themselves; `gauge` follows its threads.
    fn sleepy_lane(
        size: LaneSize,
        retire_after: Duration,
        job_ms: u64,
    ) -> (MetadataLane<u32>, Arc<AtomicUsize>, Arc<AtomicI64>) {
        let (ran, gauge) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicI64::new(0)));
        let (r, g) = (ran.clone(), gauge.clone());
        let lane = MetadataLane::start(
            size,
            retire_after,
            move |_job: u32| {
                std::thread::sleep(Duration::from_millis(job_ms));
                r.fetch_add(1, Ordering::SeqCst);
                true
            },
            move |d| {
                g.fetch_add(d, Ordering::SeqCst);
            },
        )
        .unwrap();
        (lane, ran, gauge)
    }

    /// Waits (at most 20 s) until `done` holds.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "{what} did not happen within 20 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn slow_jobs_grow_the_lane_to_its_maximum_and_idle_threads_leave() {
        // Each job takes 20 ms, ten times GROW_AFTER: every job after the first has waited
        // (and the lane is told that 20 ms a job is not a slow disk).
        let size = LaneSize::adaptive(1, 4).with_slow_service(Duration::from_secs(1));
        let (lane, ran, gauge) = sleepy_lane(size, Duration::from_millis(50), 20);
        assert_eq!((lane.threads(), gauge.load(Ordering::SeqCst)), (1, 1));
        for job in 0..40 {
            lane.push(job);
        }
        eventually("all 40 jobs run", || ran.load(Ordering::SeqCst) == 40);
        assert_eq!(lane.peak(), 4, "grew to the maximum, not beyond");
        eventually("the added threads retire", || lane.threads() == 1);
        assert_eq!(gauge.load(Ordering::SeqCst), 1, "the gauge followed");
        assert_eq!(lane.peak(), 4);
    }

    #[test]
    fn jobs_slower_than_the_slow_service_time_do_not_grow_the_lane() {
        // 20 ms a job is a disk serving one read at a time: more threads would only queue
        // there. (The first job's time is not known when the second is taken, so at most
        // one thread may be added before the average says so.)
        let (lane, ran, _gauge) =
            sleepy_lane(LaneSize::adaptive(1, 4), Duration::from_millis(50), 20);
        for job in 0..20 {
            lane.push(job);
        }
        eventually("all 20 jobs run", || ran.load(Ordering::SeqCst) == 20);
        assert!(lane.peak() <= 2, "grew to {} behind a slow disk", lane.peak());
    }

    /// Runs one slow job (20 ms: 5× `SLOW_SERVICE`) on a lane of `size`, so its run times say
    /// slow, then `more` at once; returns the most that ran together among those.
    fn peak_of_slow_jobs(size: LaneSize, more: u32) -> usize {
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let ran = Arc::new(AtomicUsize::new(0));
        let (n, p, r) = (now.clone(), peak.clone(), ran.clone());
        let lane = MetadataLane::start(
            size,
            RETIRE_AFTER,
            move |_job: u32| {
                p.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                n.fetch_sub(1, Ordering::SeqCst);
                r.fetch_add(1, Ordering::SeqCst);
                true
            },
            |_| {},
        )
        .unwrap();
        lane.push(0);
        eventually("the first job runs", || ran.load(Ordering::SeqCst) == 1);
        peak.store(0, Ordering::SeqCst);
        for job in 1..=more {
            lane.push(job);
        }
        let all = more as usize + 1;
        eventually("all jobs run", || ran.load(Ordering::SeqCst) == all);
        peak.load(Ordering::SeqCst)
    }

    #[test]
    fn once_jobs_are_known_to_be_slow_an_adaptive_lane_runs_one_at_a_time_a_fixed_one_not() {
        for (size, want_peak) in [(LaneSize::adaptive(4, 16), 1), (LaneSize::fixed(4), 4)] {
            assert_eq!(peak_of_slow_jobs(size, 12), want_peak, "{size:?}");
        }
    }

    #[test]
    fn an_auto_lane_that_cannot_grow_still_runs_slow_jobs_one_at_a_time() {
        // `--metadata-helpers-max` equal to `--helpers`: no growth, but the gate still applies.
        let size = LaneSize::adaptive(3, 3);
        assert!(!size.adapts() && size.one_when_slow);
        assert_eq!(peak_of_slow_jobs(size, 9), 1);
    }

    #[test]
    fn a_fixed_lane_keeps_its_size_under_a_backlog() {
        let (lane, ran, gauge) = sleepy_lane(LaneSize::fixed(2), Duration::from_millis(50), 5);
        for job in 0..20 {
            lane.push(job);
        }
        eventually("all 20 jobs run", || ran.load(Ordering::SeqCst) == 20);
        assert_eq!((lane.threads(), lane.peak(), gauge.load(Ordering::SeqCst)), (2, 2, 2));
    }

    #[test]
    fn dropping_a_grown_lane_runs_every_queued_job_and_joins_every_thread() {
        let size = LaneSize::adaptive(1, 6).with_slow_service(Duration::from_secs(1));
        let (lane, ran, gauge) = sleepy_lane(size, RETIRE_AFTER, 10);
        for job in 0..30 {
            lane.push(job);
        }
        eventually("the lane grows", || lane.threads() >= 3);
        for job in 30..60 {
            lane.push(job);
        }
        drop(lane);
        assert_eq!(ran.load(Ordering::SeqCst), 60, "no queued job was lost");
        assert_eq!(gauge.load(Ordering::SeqCst), 0, "every thread left, added ones too");
    }

    #[test]
    fn jobs_with_the_key_of_one_in_the_lane_run_right_after_it_not_at_the_back() {
        // One thread, held by job "x" until released; meanwhile "a1" and "b1" queue, and two
        // more "a" jobs arrive: they follow "a1" and run before "b1", each of them once.
        let (release, released) = crossbeam_channel::bounded::<()>(0);
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let lane = MetadataLane::start_keyed(
            LaneSize::fixed(1),
            RETIRE_AFTER,
            |job: &String| job.bytes().next().map(u64::from),
            || true,
            move |job: String| {
                if job == "x" {
                    released.recv().unwrap();
                }
                o.lock().unwrap().push(job);
                true
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(lane.push("x".into()), Pushed::Queued);
        eventually("the thread holds x", || {
            lane.crew.queue.is_empty() && lane.crew.idle.load(Ordering::SeqCst) == 0
        });
        assert_eq!(lane.push("a1".into()), Pushed::Queued);
        assert_eq!(lane.push("b1".into()), Pushed::Queued, "another key queues");
        assert_eq!(lane.push("a2".into()), Pushed::Followed);
        assert_eq!(lane.push("a3".into()), Pushed::Followed);
        release.send(()).unwrap();
        eventually("every job ran", || order.lock().unwrap().len() == 5);
        assert_eq!(*order.lock().unwrap(), ["x", "a1", "a2", "a3", "b1"]);
        eventually("the lane is idle", || lane.crew.idle.load(Ordering::SeqCst) == 1);
        assert_eq!(lane.push("a4".into()), Pushed::Queued, "its leader ran: a new one leads");
        drop(lane);
        assert_eq!(order.lock().unwrap().len(), 6, "dropping the lane ran the last one");
    }

    #[test]
    fn a_thread_whose_results_have_nowhere_to_go_leaves() {
        let gauge = Arc::new(AtomicI64::new(0));
        let g = gauge.clone();
        let lane = MetadataLane::start(
            LaneSize::adaptive(2, 4),
            RETIRE_AFTER,
            |_job: u32| false,
            move |d| {
                g.fetch_add(d, Ordering::SeqCst);
            },
        )
        .unwrap();
        lane.push(1);
        eventually("one thread left", || gauge.load(Ordering::SeqCst) == 1);
        drop(lane);
        assert_eq!(gauge.load(Ordering::SeqCst), 0);
    }
}
