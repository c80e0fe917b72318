//! Per-client limits, both off by default: at most `--max-connections-per-ip` connections open
//! from one address, and at most `--rate-limit-per-ip` requests a second from one address (a
//! token bucket holding `--rate-limit-burst` requests). Past either, the request is answered
//! `429 Too Many Requests` with `Retry-After` and the connection closed.
//!
//! Shared by every thread and event loop of a server (`--instances N` included); an `mp`
//! worker process keeps its own. When both are off the pipeline holds no [`ClientLimits`] at
//! all, so the cached path pays one `Option` test per request.

use crate::cache::lock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A request rate: `per_second` on average, up to `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Requests a second, on average.
    pub per_second: f64,
    /// Requests allowed at once (the bucket's size).
    pub burst: f64,
}

/// The per-client limits of one pipeline.
pub struct ClientLimits {
    max_connections: Option<u32>,
    rate: Option<Rate>,
    open: Arc<Mutex<HashMap<IpAddr, u32>>>,
    buckets: Mutex<Buckets>,
}

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
pub struct ConnectionSlot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, u32>>>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
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
            open: Arc::default(),
            buckets: Mutex::new(Buckets { map: HashMap::new(), since_prune: 0 }),
        })
    }

    /// The limits `cfg` asks for, or `None` when both are off.
    pub fn from_config(cfg: &crate::config::Config) -> Option<Arc<ClientLimits>> {
        ClientLimits::new(cfg.max_connections_per_ip, cfg.rate_limit_per_ip).map(Arc::new)
    }

    /// Counts a new connection from `ip`: `Ok` with its slot (`None` when connections are not
    /// limited), or `Err` when `ip` already has its maximum open.
    pub fn open_connection(&self, ip: IpAddr) -> Result<Option<ConnectionSlot>, OverLimit> {
        let Some(max) = self.max_connections else { return Ok(None) };
        let mut open = lock(&self.open);
        let n = open.entry(ip).or_insert(0);
        if *n >= max {
            return Err(OverLimit);
        }
        *n += 1;
        Ok(Some(ConnectionSlot { ip, open: self.open.clone() }))
    }

    /// Takes one request from `ip`'s bucket at `now`: `Ok`, or `Err(seconds)` to wait before
    /// the next one is allowed (for `Retry-After`).
    pub fn take_request(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let Some(rate) = self.rate else { return Ok(()) };
        let mut b = lock(&self.buckets);
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
}
