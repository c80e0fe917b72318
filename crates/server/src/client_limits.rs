//! Per-client limits, both off by default: at most `--max-connections-per-ip` connections open
//! from one address, and at most `--rate-limit-per-ip` requests a second from one address (a
//! token bucket holding `--rate-limit-burst` requests). Past either, the request is answered
//! `429 Too Many Requests` with `Retry-After` and the connection closed.
//!
//! Per server, not per process: shared by every thread and event loop of a server
//! (`--instances N` included) through a [`Local`] store, and under `mp` by every worker
//! process through a [`Shared`] store in the memory the workers already share for their
//! counters (`crate::stats`), so N workers do not allow N times the limits. When both are off
//! the pipeline holds no [`ClientLimits`] at all, so the cached path pays one `Option` test
//! per request.
//!
//! **The shared store** lives in `AtomicU64` words every worker maps, and no lock a dying
//! worker could leave held matters for correctness:
//! - *Connections:* an `mp` worker holds at most
//!   [`MAX_CONNECTIONS_PER_WORKER`](crate::arch::mp::MAX_CONNECTIONS_PER_WORKER) connections,
//!   so each worker owns that many cells (and a few spare) holding the address tag (a 64-bit
//!   hash of the IP, never 0) of its connections, 0 when free. A new connection is first written into a free cell of its worker
//!   and then counted over every worker's cells; over the limit, it is taken back and refused.
//!   Two workers racing for the last place both see the other and both refuse: never more than
//!   the limit. A dead worker's cells are cleared by the parent (`Shared::clear_worker`).
//! - *Rates:* a table of buckets, each an address tag and a GCRA "theoretical arrival time"
//!   (the time at which the bucket would be full again, µs on the monotonic clock, which every
//!   process reads alike), equivalent to the local token bucket. A bucket is updated under a
//!   lock bit in its tag word, held for a few instructions; a worker that dies holding one
//!   leaves that bucket locked, and its addresses are then not rate-limited (fail open). A
//!   bucket whose time is past (full again) carries no information and is reused for another
//!   address; when no bucket is free within [`PROBES`] slots, the request is allowed.

use crate::cache::lock;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// A request rate: `per_second` on average, up to `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Requests a second, on average.
    pub per_second: f64,
    /// Requests allowed at once (the bucket's size).
    pub burst: f64,
}

/// The per-client limits of one server.
pub struct ClientLimits {
    max_connections: Option<u32>,
    rate: Option<Rate>,
    store: Store,
}

/// Where the counts live.
enum Store {
    Local(Local),
    Shared(Shared),
}

/// Counts in this process (every architecture but `mp`).
struct Local {
    open: Arc<Mutex<HashMap<IpAddr, u32>>>,
    buckets: Mutex<Buckets>,
}

/// Counts in memory shared by the `mp` workers (see the module doc).
#[derive(Clone, Copy)]
pub struct Shared {
    /// [`CELLS_PER_WORKER`] connection cells per worker, worker after worker.
    cells: &'static [AtomicU64],
    /// This worker's index (its cells).
    worker: usize,
    /// Buckets: two words each, the tag word (tag | lock bit) and the arrival time.
    buckets: &'static [AtomicU64],
}

/// Connection cells per `mp` worker (one per connection it may hold; a few spare in case a
/// connection's state outlives its socket for a moment).
pub const CELLS_PER_WORKER: usize = crate::arch::mp::MAX_CONNECTIONS_PER_WORKER + 4;
/// Buckets in the shared rate table.
pub const SHARED_BUCKETS: usize = 4096;
/// Buckets looked at for an address before the request is allowed unrecorded.
const PROBES: usize = 8;
/// The lock bit of a bucket's tag word.
const LOCKED: u64 = 1;

/// Token buckets by address.
struct Buckets {
    map: HashMap<IpAddr, Bucket>,
    /// Lookups since the last pruning of full (idle) buckets.
    since_prune: usize,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// One open connection counted against its address; uncounted when dropped.
#[derive(Debug)]
pub struct ConnectionSlot(Slot);

#[derive(Debug)]
enum Slot {
    Local {
        ip: IpAddr,
        open: Arc<Mutex<HashMap<IpAddr, u32>>>,
    },
    /// The shared cell holding the connection's address tag.
    Shared(&'static AtomicU64),
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        match &self.0 {
            Slot::Local { ip, open } => {
                let mut open = lock(open);
                if let Some(n) = open.get_mut(ip) {
                    *n -= 1;
                    if *n == 0 {
                        open.remove(ip);
                    }
                }
            }
            Slot::Shared(cell) => cell.store(0, Ordering::Release),
        }
    }
}

/// The tag of an address in the shared store: a hash the same in every process of one
/// binary, with bit 1 set (never 0) and bit 0 clear (the lock bit of a bucket).
fn tag(ip: IpAddr) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    ip.hash(&mut h);
    (h.finish() | 2) & !LOCKED
}

/// `now` in µs on the monotonic clock, which every process reads alike (an `Instant` is
/// only comparable within one process).
fn shared_usec(now: Instant) -> u64 {
    static BASE: OnceLock<(Instant, u64)> = OnceLock::new();
    let (at, usec) = *BASE.get_or_init(|| (Instant::now(), amped_sys::process::monotonic_usec()));
    let since = now.checked_duration_since(at).map_or(0, |d| d.as_micros() as u64);
    let before = at.checked_duration_since(now).map_or(0, |d| d.as_micros() as u64);
    (usec + since).saturating_sub(before)
}

impl Shared {
    /// The words a server configured with these limits needs in shared memory for
    /// `workers` worker processes.
    pub fn words(max_connections: Option<u32>, rate: Option<Rate>, workers: usize) -> usize {
        max_connections.map_or(0, |_| workers * CELLS_PER_WORKER)
            + rate.map_or(0, |_| SHARED_BUCKETS * 2)
    }

    /// The store of worker `worker` over `words` (as many as [`Shared::words`] said).
    pub fn over(
        words: &'static [AtomicU64],
        max_connections: Option<u32>,
        workers: usize,
        worker: usize,
    ) -> Shared {
        let n = max_connections.map_or(0, |_| workers * CELLS_PER_WORKER).min(words.len());
        let (cells, buckets) = words.split_at(n);
        Shared { cells, worker, buckets }
    }

    /// Frees the connection cells of a worker that died (the parent's job).
    pub fn clear_worker(words: &'static [AtomicU64], max_connections: Option<u32>, worker: usize) {
        if max_connections.is_none() {
            return;
        }
        let from = worker * CELLS_PER_WORKER;
        for c in words.iter().skip(from).take(CELLS_PER_WORKER) {
            c.store(0, Ordering::Release);
        }
    }

    fn open_connection(&self, ip: IpAddr, max: u32) -> Result<Option<ConnectionSlot>, OverLimit> {
        let t = tag(ip);
        let mine = self.cells.iter().skip(self.worker * CELLS_PER_WORKER).take(CELLS_PER_WORKER);
        // No free cell (cannot happen: a worker holds fewer connections): count it nowhere.
        let Some(cell) = mine
            .into_iter()
            .find(|c| c.compare_exchange(0, t, Ordering::AcqRel, Ordering::Relaxed).is_ok())
        else {
            return Ok(None);
        };
        let open = self.cells.iter().filter(|c| c.load(Ordering::Acquire) == t).count();
        if open > max as usize {
            cell.store(0, Ordering::Release);
            return Err(OverLimit);
        }
        Ok(Some(ConnectionSlot(Slot::Shared(cell))))
    }

    fn take_request(&self, ip: IpAddr, now: Instant, rate: Rate) -> Result<(), u64> {
        let (t, now) = (tag(ip), shared_usec(now));
        let slots = self.buckets.len() / 2;
        if slots == 0 {
            return Ok(());
        }
        let start = (t >> 2) as usize % slots;
        let probe = |i: usize| (start + i) % slots;
        // This address's bucket if it has one, else the first one free for reuse.
        let own = (0..PROBES.min(slots))
            .map(probe)
            .find(|&b| self.buckets[2 * b].load(Ordering::Acquire) & !LOCKED == t);
        let chosen = own.or_else(|| {
            (0..PROBES.min(slots)).map(probe).find(|&b| {
                let w = self.buckets[2 * b].load(Ordering::Acquire);
                w == 0
                    || (w & LOCKED == 0 && self.buckets[2 * b + 1].load(Ordering::Acquire) <= now)
            })
        });
        let Some(b) = chosen else { return Ok(()) };
        let (word, tat) = (&self.buckets[2 * b], &self.buckets[2 * b + 1]);
        let Some(seen) = lock_bucket(word) else { return Ok(()) };
        let fresh = seen != t;
        if fresh && own.is_none() {
            // Reusing the bucket of another address: only if it is still free.
            let free = seen == 0 || tat.load(Ordering::Acquire) <= now;
            if !free {
                word.store(seen, Ordering::Release);
                return Ok(());
            }
            tat.store(now, Ordering::Release);
        } else if fresh {
            // Our bucket was taken meanwhile: allow, unrecorded.
            word.store(seen, Ordering::Release);
            return Ok(());
        }
        let result = gcra(tat, now, rate);
        word.store(t, Ordering::Release);
        result
    }
}

/// Sets the lock bit of a bucket's tag word; the tag it held, or `None` if it stayed locked
/// (its holder is slow or died) for a few thousand tries.
fn lock_bucket(word: &AtomicU64) -> Option<u64> {
    for _ in 0..4096 {
        let w = word.load(Ordering::Acquire);
        if w & LOCKED == 0
            && word.compare_exchange(w, w | LOCKED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            return Some(w);
        }
        std::hint::spin_loop();
    }
    None
}

/// The generic cell rate algorithm on one arrival time (the bucket is locked): the same
/// answers as a token bucket of `rate.burst` refilled at `rate.per_second`.
fn gcra(tat: &AtomicU64, now: u64, rate: Rate) -> Result<(), u64> {
    let interval = 1e6 / rate.per_second; // µs per request
    let tolerance = (rate.burst - 1.0).max(0.0) * interval;
    let at = tat.load(Ordering::Acquire).max(now);
    let ahead = (at - now) as f64;
    // 2 µs of slack: times are whole microseconds, each rounded down.
    if ahead > tolerance + 2.0 {
        let wait_s = (ahead - tolerance) / 1e6;
        return Err(wait_s.ceil().max(1.0) as u64);
    }
    tat.store(at + interval.round() as u64, Ordering::Release);
    Ok(())
}

/// The address already has its maximum of connections open.
#[derive(Debug, PartialEq, Eq)]
pub struct OverLimit;

/// Prune the buckets after this many lookups (full buckets carry no information).
const PRUNE_EVERY: usize = 4096;

impl ClientLimits {
    /// The limits, or `None` when both are off.
    pub fn new(max_connections: Option<u32>, rate: Option<Rate>) -> Option<ClientLimits> {
        (max_connections.is_some() || rate.is_some()).then(|| ClientLimits {
            max_connections,
            rate,
            store: Store::Local(Local {
                open: Arc::default(),
                buckets: Mutex::new(Buckets { map: HashMap::new(), since_prune: 0 }),
            }),
        })
    }

    /// The limits, counted in `shared` (an `mp` worker's view of the shared store), or
    /// `None` when both are off.
    pub fn shared(
        max_connections: Option<u32>,
        rate: Option<Rate>,
        shared: Shared,
    ) -> Option<ClientLimits> {
        (max_connections.is_some() || rate.is_some()).then_some(ClientLimits {
            max_connections,
            rate,
            store: Store::Shared(shared),
        })
    }

    /// The limits `cfg` asks for, or `None` when both are off; an `mp` worker counts in the
    /// shared memory `stats` carries.
    pub fn from_config(
        cfg: &crate::config::Config,
        stats: &crate::stats::Stats,
    ) -> Option<Arc<ClientLimits>> {
        let (max, rate) = (cfg.max_connections_per_ip, cfg.rate_limit_per_ip);
        match stats.limit_words() {
            Some(words) if cfg.is_mp_worker() => {
                let shared = Shared::over(words, max, cfg.processes, cfg.worker_index);
                ClientLimits::shared(max, rate, shared)
            }
            _ => ClientLimits::new(max, rate),
        }
        .map(Arc::new)
    }

    /// Counts a new connection from `ip`: `Ok` with its slot (`None` when connections are not
    /// limited), or `Err` when `ip` already has its maximum open.
    pub fn open_connection(&self, ip: IpAddr) -> Result<Option<ConnectionSlot>, OverLimit> {
        let Some(max) = self.max_connections else { return Ok(None) };
        let local = match &self.store {
            Store::Shared(shared) => return shared.open_connection(ip, max),
            Store::Local(local) => local,
        };
        let mut open = lock(&local.open);
        let n = open.entry(ip).or_insert(0);
        if *n >= max {
            return Err(OverLimit);
        }
        *n += 1;
        Ok(Some(ConnectionSlot(Slot::Local { ip, open: local.open.clone() })))
    }

    /// Takes one request from `ip`'s bucket at `now`: `Ok`, or `Err(seconds)` to wait before
    /// the next one is allowed (for `Retry-After`).
    pub fn take_request(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let Some(rate) = self.rate else { return Ok(()) };
        let local = match &self.store {
            Store::Shared(shared) => return shared.take_request(ip, now, rate),
            Store::Local(local) => local,
        };
        let mut b = lock(&local.buckets);
        b.since_prune += 1;
        if b.since_prune >= PRUNE_EVERY {
            b.since_prune = 0;
            let full_after = rate.burst / rate.per_second;
            b.map.retain(|_, k| now.duration_since(k.at).as_secs_f64() < full_after);
        }
        let k = b.map.entry(ip).or_insert(Bucket { tokens: rate.burst, at: now });
        let refill = now.duration_since(k.at).as_secs_f64() * rate.per_second;
        k.tokens = (k.tokens + refill).min(rate.burst);
        k.at = now;
        if k.tokens >= 1.0 {
            k.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - k.tokens) / rate.per_second).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn off_means_no_limiter() {
        assert!(ClientLimits::new(None, None).is_none());
    }

    #[test]
    fn connections_are_counted_per_address_and_released() {
        let l = ClientLimits::new(Some(2), None).unwrap();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = l.open_connection(a).unwrap();
        let _second = l.open_connection(a).unwrap();
        assert!(l.open_connection(a).is_err(), "third from the same address");
        assert!(l.open_connection(b).is_ok(), "another address has its own count");
        drop(first);
        assert!(l.open_connection(a).is_ok(), "a closed connection frees its slot");
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let l = ClientLimits::new(None, Some(Rate { per_second: 2.0, burst: 3.0 })).unwrap();
        let ip: IpAddr = "::1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.take_request(ip, t0), Ok(()));
        }
        assert_eq!(l.take_request(ip, t0), Err(1), "burst spent: wait");
        assert_eq!(
            l.take_request(ip, t0 + Duration::from_millis(500)),
            Ok(()),
            "one token in 0.5 s"
        );
        assert!(l.take_request(ip, t0 + Duration::from_millis(600)).is_err());
        let other: IpAddr = "::2".parse().unwrap();
        assert_eq!(l.take_request(other, t0), Ok(()), "buckets are per address");
        let slow = ClientLimits::new(None, Some(Rate { per_second: 0.1, burst: 1.0 })).unwrap();
        assert_eq!(slow.take_request(ip, t0), Ok(()));
        assert_eq!(slow.take_request(ip, t0), Err(10), "Retry-After: time for one token");
    }

    fn words(n: usize) -> &'static [AtomicU64] {
        Box::leak((0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>().into_boxed_slice())
    }

    #[test]
    fn shared_connection_counts_hold_across_workers() {
        let (max, workers) = (Some(2), 3);
        let w = words(Shared::words(max, None, workers));
        let view = |i| ClientLimits::shared(max, None, Shared::over(w, max, workers, i)).unwrap();
        let (a, b, c) = (view(0), view(1), view(2));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let first = a.open_connection(ip).unwrap();
        let _second = b.open_connection(ip).unwrap();
        assert!(c.open_connection(ip).is_err(), "a third, in a third worker");
        assert!(c.open_connection("10.0.0.2".parse().unwrap()).is_ok(), "another address");
        drop(first);
        let third = c.open_connection(ip).unwrap();
        assert!(a.open_connection(ip).is_err());
        std::mem::forget(third); // the worker dies holding it
        assert!(a.open_connection(ip).is_err());
        Shared::clear_worker(w, max, 2);
        assert!(a.open_connection(ip).is_ok(), "the parent freed the dead worker's cells");
    }

    #[test]
    fn shared_buckets_hold_across_workers_and_match_the_local_ones() {
        let rate = Some(Rate { per_second: 2.0, burst: 3.0 });
        let w = words(Shared::words(None, rate, 2));
        let view = |i| ClientLimits::shared(None, rate, Shared::over(w, None, 2, i)).unwrap();
        let (a, b) = (view(0), view(1));
        let local = ClientLimits::new(None, rate).unwrap();
        let ip: IpAddr = "::1".parse().unwrap();
        let t0 = Instant::now();
        for (i, limits) in [&a, &b, &a].iter().enumerate() {
            assert_eq!(limits.take_request(ip, t0), Ok(()), "request {i}");
            assert_eq!(local.take_request(ip, t0), Ok(()));
        }
        assert_eq!(b.take_request(ip, t0), Err(1), "burst spent in the other worker");
        assert_eq!(local.take_request(ip, t0), Err(1));
        let later = t0 + std::time::Duration::from_millis(500);
        assert_eq!(a.take_request(ip, later), Ok(()), "one request back in 0.5 s");
        assert!(b.take_request(ip, later).is_err());
        assert_eq!(b.take_request("::2".parse().unwrap(), t0), Ok(()), "per address");
        let slow = Some(Rate { per_second: 0.1, burst: 1.0 });
        let w = words(Shared::words(None, slow, 1));
        let s = ClientLimits::shared(None, slow, Shared::over(w, None, 1, 0)).unwrap();
        assert_eq!(s.take_request(ip, t0), Ok(()));
        assert_eq!(s.take_request(ip, t0), Err(10), "Retry-After: time for one request");
    }
}
