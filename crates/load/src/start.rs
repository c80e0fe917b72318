//! The start line: every thread gets ready (an open-loop pool connects first, so that 10,000
//! handshakes are not charged to the first requests' latency), then all start from one shared
//! time zero, which the open loop's schedule and the run's duration count from.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Lets the woken threads reach their loops before the first request is due.
const HEAD_START: Duration = Duration::from_millis(1);

/// Threads still to arrive, and time zero once they all have.
#[derive(Debug)]
struct State {
    expected: usize,
    origin: Option<Instant>,
}

/// A one-shot rendezvous of the run's threads that hands out time zero.
#[derive(Debug)]
pub struct StartLine {
    state: Mutex<State>,
    all_ready: Condvar,
}

impl StartLine {
    /// A start line for `threads` threads.
    pub fn new(threads: usize) -> StartLine {
        StartLine {
            state: Mutex::new(State { expected: threads, origin: None }),
            all_ready: Condvar::new(),
        }
    }

    /// A thread's place at the line; dropping it without crossing (the thread failed to
    /// start, or panicked) stops the others from waiting for it.
    pub fn ticket(&self) -> Ticket<'_> {
        Ticket { line: self, crossed: false }
    }

    /// Time zero, once set.
    pub fn origin(&self) -> Option<Instant> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).origin
    }

    fn arrive(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.expected = state.expected.saturating_sub(1);
        if state.expected == 0 && state.origin.is_none() {
            state.origin = Some(Instant::now() + HEAD_START);
            self.all_ready.notify_all();
        }
        state
    }
}

/// One thread's place at a [`StartLine`].
#[derive(Debug)]
pub struct Ticket<'a> {
    line: &'a StartLine,
    crossed: bool,
}

impl Ticket<'_> {
    /// Waits until every thread is ready (or gone); returns time zero.
    pub fn cross(mut self) -> Instant {
        self.crossed = true;
        let mut state = self.line.arrive();
        loop {
            if let Some(origin) = state.origin {
                return origin;
            }
            state = self.line.all_ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.crossed {
            drop(self.line.arrive());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_threads_get_the_same_origin() {
        let line = StartLine::new(4);
        drop(line.ticket()); // a thread that never started
        let origins: Vec<Instant> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3).map(|_| s.spawn(|| line.ticket().cross())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(origins.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(line.origin(), Some(origins[0]));
    }
}
