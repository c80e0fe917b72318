//! Closed-loop pacing (wrk, ab): every connection sends its next request as soon as a response
//! completes, so the offered load follows the server's speed.
//!
//! Requests come from the shared [`Budget`](crate::budget::Budget): one at a time for
//! keep-alive connections, a whole session (`--requests-per-conn K`, `--close` = 1) at a time
//! when the connection opens, which is what makes N requests open exactly ceil(N/K)
//! connections. Latency runs from when a request is queued, which for a new connection
//! includes the TCP handshake (as in ab).

use std::time::Instant;

use super::Worker;
use crate::conn::{Pending, Quota};
use crate::stats::ErrorKind;
use crate::workload::{CLOSE_END, KEEP_ALIVE_END};

impl Worker<'_> {
    /// Opens connections until the thread's share is busy or the budget is spent.
    pub(super) fn top_up(&mut self, now: Instant) {
        if self.connect_backoff.is_some_and(|t| now < t) {
            return;
        }
        while !self.stopping && self.active < self.limit {
            let quota = match self.config.per_conn {
                Some(k) => match self.budget.take(u64::from(k)) {
                    0 => return,
                    n => Quota::Limited(n as u32),
                },
                None if self.budget.is_spent() => return,
                None => Quota::Unlimited,
            };
            let key = match self.open_conn(quota, now) {
                Ok(key) => key,
                Err(detail) => {
                    let reserved = match quota {
                        Quota::Limited(n) => u64::from(n),
                        Quota::Unlimited => 0,
                    };
                    self.budget.give_back(reserved);
                    return self.connect_failed(detail, 1);
                }
            };
            self.fill(key, now);
            if self.conns.get(key).is_some_and(|c| c.in_flight.is_empty()) {
                self.close(key); // another thread took the last of the budget
            }
        }
    }

    /// Queues requests on a connection up to the pipeline depth and writes them.
    pub(super) fn fill(&mut self, key: usize, now: Instant) {
        let depth = self.config.pipeline;
        let conn = &mut self.conns[key];
        let mut added = false;
        while !self.stopping && conn.has_room(depth) {
            if conn.quota == Quota::Unlimited && self.budget.take(1) == 0 {
                break;
            }
            let last = conn.quota == Quota::Limited(1);
            let target = self.picker.next_target();
            let end = if last { CLOSE_END } else { KEEP_ALIVE_END };
            conn.enqueue(Pending { target, start: now }, self.workload.head(target), end, last);
            self.stats.record_send(now);
            self.outstanding += 1;
            added = true;
        }
        if added && let Err(e) = conn.flush() {
            self.fail(key, ErrorKind::Reset, format!("send: {e}"));
        }
    }
}
