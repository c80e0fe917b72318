//! The closed loop's shared request budget (`--requests N`): threads take requests from one
//! counter so that exactly N are issued however the threads race, and a session of K requests
//! is reserved whole, so N requests in sessions of K open exactly ceil(N/K) connections.

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests still to be issued; `None` when the run is bounded by time only.
#[derive(Debug)]
pub struct Budget {
    left: Option<AtomicU64>,
}

impl Budget {
    /// A budget of `requests`, or an unlimited one.
    pub fn new(requests: Option<u64>) -> Budget {
        Budget { left: requests.map(AtomicU64::new) }
    }

    /// Takes up to `want` requests; returns how many were granted (0 when spent).
    pub fn take(&self, want: u64) -> u64 {
        let Some(left) = &self.left else { return want };
        match left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(n.min(want)))
        {
            Ok(before) => before.min(want),
            Err(_) => 0,
        }
    }

    /// Returns requests that were reserved but will not be issued.
    pub fn give_back(&self, unused: u64) {
        if let Some(left) = &self.left {
            left.fetch_add(unused, Ordering::Relaxed);
        }
    }

    /// Whether no request is left.
    pub fn is_spent(&self) -> bool {
        self.left.as_ref().is_some_and(|n| n.load(Ordering::Relaxed) == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_exactly_the_budget() {
        let b = Budget::new(Some(7));
        assert_eq!([b.take(3), b.take(3), b.take(3), b.take(3)], [3, 3, 1, 0]);
        assert!(b.is_spent());
        b.give_back(2);
        assert_eq!(b.take(5), 2);
        let unlimited = Budget::new(None);
        assert_eq!(unlimited.take(5), 5);
        assert!(!unlimited.is_spent());
    }

    #[test]
    fn threads_never_overdraw() {
        let b = Budget::new(Some(10_000));
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        std::iter::from_fn(|| Some(b.take(3))).take_while(|&n| n > 0).sum::<u64>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(total, 10_000);
    }
}
