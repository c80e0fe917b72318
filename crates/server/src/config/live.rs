//! The options a reload (SIGHUP) may change while connections are being served: the
//! timeouts and the discarded-body limit. They are atomics shared by every clone of a
//! [`Config`], so a reload changes them for every thread at once; each connection picks the
//! new value up the next time it sets a deadline (a deadline already set is kept).
//!
//! Everything else in a `Config` is fixed at start-up: caches, threads and listeners are
//! built from it (see `crate::reload` for what a reload says about those).

use super::Config;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The live options (relaxed atomics: each value stands alone).
#[derive(Debug)]
pub struct Live {
    /// header, keep-alive, send, shutdown timeouts, in nanoseconds.
    timeouts: [AtomicU64; 4],
    max_discard_body: AtomicU64,
}

const HEADER: usize = 0;
const KEEPALIVE: usize = 1;
const SEND: usize = 2;
const SHUTDOWN: usize = 3;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Live {
    /// Header, keep-alive, send and shutdown timeouts (in that order) and the body limit.
    pub fn new(timeouts: [Duration; 4], max_discard_body: u64) -> Live {
        Live {
            timeouts: timeouts.map(|d| AtomicU64::new(nanos(d))),
            max_discard_body: AtomicU64::new(max_discard_body),
        }
    }

    fn timeout(&self, i: usize) -> Duration {
        Duration::from_nanos(self.timeouts[i].load(Ordering::Relaxed))
    }

    /// The graceful-shutdown deadline.
    pub fn shutdown_timeout(&self) -> Duration {
        self.timeout(SHUTDOWN)
    }

    /// Takes every live value of `other` (a freshly re-read configuration).
    pub fn update_from(&self, other: &Live) {
        for (mine, theirs) in self.timeouts.iter().zip(&other.timeouts) {
            mine.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let body = other.max_discard_body.load(Ordering::Relaxed);
        self.max_discard_body.store(body, Ordering::Relaxed);
    }
}

impl Config {
    /// Time allowed to receive a request head.
    pub fn header_timeout(&self) -> Duration {
        self.live.timeout(HEADER)
    }

    /// Idle keep-alive time.
    pub fn keepalive_timeout(&self) -> Duration {
        self.live.timeout(KEEPALIVE)
    }

    /// Time a response may make no progress.
    pub fn send_timeout(&self) -> Duration {
        self.live.timeout(SEND)
    }

    /// Graceful-shutdown deadline.
    pub fn shutdown_timeout(&self) -> Duration {
        self.live.shutdown_timeout()
    }

    /// Largest request body read and discarded on GET/HEAD.
    pub fn max_discard_body(&self) -> u64 {
        self.live.max_discard_body.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_reaches_every_clone() {
        let dir = tempfile::tempdir().unwrap();
        let args =
            || crate::config::Args { root: Some(dir.path().to_path_buf()), ..Default::default() };
        let cfg = Config::resolve(args()).unwrap();
        let clone = cfg.clone();
        let mut newer = args();
        newer.header_timeout = Some(2.5);
        newer.max_discard_body = Some(7);
        cfg.live.update_from(&Config::resolve(newer).unwrap().live);
        assert_eq!(clone.header_timeout(), Duration::from_millis(2500));
        assert_eq!(clone.max_discard_body(), 7);
        assert_eq!(clone.keepalive_timeout(), Duration::from_secs(15), "unchanged");
    }
}
