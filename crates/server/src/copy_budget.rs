//! The bound on file bytes read into responses' buffers and not yet sent (`Job::Copy`: TLS,
//! `--no-zero-copy`, `--read-path copy`, `--direct-io-above`). Such bytes are the process's own
//! memory, which the kernel cannot reclaim as it can the page cache: a thousand slow clients
//! each holding a megabyte would be a gigabyte, and in a memory cgroup the OOM killer. A trip
//! that does not fit takes a path that holds no buffer (a pipe fill or a read-ahead) instead.
//! A read through the page cache takes its share when it is queued (TLS has no pipe to fall
//! back on later); a direct read when it starts, on the helper, so that trips waiting in the
//! lane hold nothing. The share travels with the bytes ([`crate::disk::Copied`]) and goes
//! back when they are sent.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes all responses of the process may hold in buffers at once.
pub const LIMIT: u64 = 32 << 20;

/// Bytes held now.
static HELD: AtomicU64 = AtomicU64::new(0);

/// A share of [`LIMIT`], given back when dropped.
#[derive(Debug)]
pub struct Held(u64);

/// Takes `bytes` of the budget, if that many are free.
pub fn reserve(bytes: u64) -> Option<Held> {
    HELD.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
        held.checked_add(bytes).filter(|&total| total <= LIMIT)
    })
    .ok()
    .map(|_| Held(bytes))
}

/// Bytes held now (for tests and the stats).
pub fn held() -> u64 {
    HELD.load(Ordering::Acquire)
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// Held by the unit tests whose trips need the budget free, or that fill it: the budget is
/// the process's, and tests run in parallel.
#[cfg(test)]
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_refused_past_the_limit_and_given_back_when_dropped() {
        let _alone = exclusive();
        // Other tests in this process may hold shares: measure against what is free now.
        let a = reserve(LIMIT / 2).expect("half the budget is free");
        assert!(reserve(LIMIT).is_none(), "never more than the limit");
        let before = held();
        drop(a);
        assert_eq!(held(), before - LIMIT / 2);
    }
}
