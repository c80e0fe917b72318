//! One event-loop thread: an epoll instance, its share of the connections, and its own
//! [`Stats`]. Threads share nothing on the hot path but the closed loop's request budget.
//!
//! Every socket is registered once, edge-triggered, for reading and writing; request bytes are
//! written as soon as they are queued and only what the socket refused waits for the next
//! writable edge (so a keep-alive request costs one `send` and one `read`). How requests are
//! paced lives in [`closed`] and [`open`]; this module owns the loop, connection life cycles,
//! timeouts and failure accounting.
//!
//! Accounting invariant: every request handed to a connection ends exactly once, as a
//! response ([`Stats::record_response`]), as an error of one kind ([`Stats::record_errors`]),
//! or — only when the server announced `Connection: close` with requests still queued behind
//! the closing response — re-issued (open loop: same due time) or returned to the budget
//! (closed loop). Interrupting the run (Ctrl-C) abandons what is in flight.

mod closed;
mod open;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::Timespec;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::fd::OwnedFd;
use slab::Slab;

use crate::budget::Budget;
use crate::config::{Config, Mode};
use crate::conn::{self, Conn, Pending, Phase, Quota, ReadOutcome};
use crate::start::Ticket;
use crate::stats::{ErrorKind, Stats};
use crate::workload::{Picker, Workload};

use open::OpenLoop;

/// How often timeouts are checked and progress is published.
const SCAN_EVERY: Duration = Duration::from_millis(100);
/// After a failed connect to a server that did answer before, no new connection is opened for
/// this long: a server that died mid-run is retried ten times a second, not in a tight loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(100);
/// Events taken per `epoll_wait`.
const EVENTS: usize = 1024;
/// Bytes per `read`; responses are never kept, so one buffer serves every connection.
const SCRATCH: usize = 256 * 1024;
/// Token of the open loop's schedule timer (connection tokens are generation<<32 | slot).
const TIMER_TOKEN: u64 = u64::MAX;

/// What every thread of a run shares (read-only but for the budget and the progress cell).
pub struct Shared<'a> {
    pub config: &'a Config,
    pub workload: &'a Workload,
    /// Closed loop's request budget.
    pub budget: &'a Budget,
    /// Set by Ctrl-C.
    pub interrupted: &'a AtomicBool,
    /// Where this thread publishes its counts for the progress line.
    pub progress: &'a ProgressCell,
    /// This thread's place at the start line, where time zero is handed out.
    pub ticket: Ticket<'a>,
}

/// A thread's counts, published every [`SCAN_EVERY`] for the progress line.
#[derive(Debug, Default)]
pub struct ProgressCell {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
}

/// One event-loop thread.
pub struct Worker<'a> {
    config: &'a Config,
    workload: &'a Workload,
    budget: &'a Budget,
    interrupted: &'a AtomicBool,
    progress: &'a ProgressCell,
    /// Crossed (taken) when the thread is ready to start.
    ticket: Option<Ticket<'a>>,
    epoll: OwnedFd,
    conns: Slab<Conn>,
    next_generation: u32,
    scratch: Vec<u8>,
    events: Vec<Event>,
    picker: Picker<'a>,
    /// Open-loop state; `None` in closed loop.
    open: Option<OpenLoop>,
    /// Requests due (open loop) or re-issued, waiting for a connection with room.
    backlog: VecDeque<Pending>,
    /// This thread's connection limit.
    limit: usize,
    /// Connections counting toward the limit.
    active: usize,
    /// Requests queued on connections and not yet ended.
    outstanding: usize,
    /// Some connect has succeeded on this thread (else a connect failure ends the run).
    connected_once: bool,
    /// No new connection before this instant (set by a failed connect, see [`CONNECT_BACKOFF`]).
    connect_backoff: Option<Instant>,
    /// No more requests are issued (deadline, interrupt, unreachable server).
    stopping: bool,
    /// Closed loop: when issuing stops (`--duration` after time zero).
    deadline: Option<Instant>,
    /// Once issuing has stopped: when anything still unanswered is written off as timed out.
    hard_stop: Option<Instant>,
    stats: Stats,
    /// Reused list of connections the timeout scan ends.
    doomed: Vec<(usize, Option<ErrorKind>)>,
}

impl<'a> Worker<'a> {
    /// Thread `index`'s worker.
    pub fn new(shared: Shared<'a>, index: usize) -> Result<Worker<'a>, String> {
        let config = shared.config;
        let epoll =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| format!("epoll_create: {e}"))?;
        let open = match config.mode {
            Mode::Closed => None,
            Mode::Open { rate } => Some(OpenLoop::new(config, &epoll, rate, index)?),
        };
        Ok(Worker {
            config,
            workload: shared.workload,
            budget: shared.budget,
            interrupted: shared.interrupted,
            progress: shared.progress,
            ticket: Some(shared.ticket),
            epoll,
            conns: Slab::new(),
            next_generation: 0,
            scratch: vec![0; SCRATCH],
            events: Vec::with_capacity(EVENTS),
            picker: shared.workload.picker(index, config.threads, config.seed),
            open,
            backlog: VecDeque::new(),
            limit: config.connections_of(index),
            active: 0,
            outstanding: 0,
            connected_once: false,
            connect_backoff: None,
            stopping: false,
            deadline: None,
            hard_stop: None,
            stats: Stats::default(),
            doomed: Vec::new(),
        })
    }

    /// Runs to the end of the run and returns what was measured.
    pub fn run(mut self) -> Stats {
        if self.open.is_some() {
            self.open_pool(Instant::now());
            self.await_pool();
        }
        let origin = self.ticket.take().map_or_else(Instant::now, Ticket::cross);
        if let Some(interval) = self.config.interval {
            self.stats.start_windows(origin, interval);
        }
        match &mut self.open {
            // The schedule itself ends at the duration: every request due before it is sent.
            Some(open) => open.start_at(origin),
            None => self.deadline = self.config.duration.map(|d| origin + d),
        }
        let mut next_scan = Instant::now() + SCAN_EVERY;
        loop {
            let now = Instant::now();
            if self.interrupted.load(Ordering::Relaxed) {
                break;
            }
            self.check_stop(now);
            if self.open.is_some() {
                self.release_due(now);
                self.dispatch(now);
            } else {
                self.top_up(now);
            }
            if now >= next_scan {
                self.scan_timeouts(now);
                self.publish();
                next_scan = now + SCAN_EVERY;
            }
            if self.is_done() {
                break;
            }
            let wake = [Some(next_scan), self.deadline.filter(|_| !self.stopping), self.hard_stop];
            let wake = wake.into_iter().flatten().min().unwrap_or(next_scan);
            self.arm_timer(now);
            self.wait(wake.saturating_duration_since(Instant::now()));
        }
        self.stats.finished = Some(Instant::now());
        self.publish();
        self.stats
    }

    /// Stops issuing at the deadline; writes off what is left after the drain allowance.
    fn check_stop(&mut self, now: Instant) {
        if !self.stopping && self.deadline.is_some_and(|d| now >= d) {
            self.stop(now);
        }
        let issuing_over = self.stopping || self.open.as_ref().is_some_and(OpenLoop::exhausted);
        if issuing_over && self.hard_stop.is_none() {
            self.hard_stop = Some(now + self.config.timeout + Duration::from_secs(1));
        }
        if self.hard_stop.is_some_and(|h| now >= h) {
            let keys: Vec<usize> = self.conns.iter().map(|(key, _)| key).collect();
            for key in keys {
                self.fail(key, ErrorKind::Timeout, "still unanswered when the run ended".into());
            }
            let left = self.backlog.drain(..).map(|r| r.start);
            self.stats.record_errors(ErrorKind::Timeout, left, now, || {
                "never sent before the run ended".into()
            });
        }
    }

    /// Stops issuing requests; what is in flight is still awaited.
    fn stop(&mut self, now: Instant) {
        self.stopping = true;
        self.hard_stop.get_or_insert(now + self.config.timeout + Duration::from_secs(1));
        if let Some(open) = &mut self.open {
            open.stop();
        }
    }

    /// Nothing in flight and nothing more to issue.
    fn is_done(&self) -> bool {
        let issuing_over = match &self.open {
            None => self.stopping || self.budget.is_spent(),
            Some(open) => (self.stopping || open.exhausted()) && self.backlog.is_empty(),
        };
        issuing_over && self.outstanding == 0
    }

    /// Waits for events (at most `timeout`) and handles them.
    fn wait(&mut self, timeout: Duration) {
        let millis = timeout.as_nanos().div_ceil(1_000_000).min(1000) as i64;
        let timeout = Timespec { tv_sec: millis / 1000, tv_nsec: (millis % 1000) * 1_000_000 };
        self.events.clear();
        if epoll::wait(&self.epoll, spare_capacity(&mut self.events), Some(&timeout)).is_err() {
            return; // EINTR: the loop re-checks everything anyway
        }
        let events = std::mem::take(&mut self.events);
        for event in &events {
            self.on_event(event.data.u64(), event.flags);
        }
        self.events = events;
    }

    /// Handles readiness of one connection (or of the schedule timer).
    fn on_event(&mut self, token: u64, flags: EventFlags) {
        if token == TIMER_TOKEN {
            if let Some(open) = &mut self.open {
                open.timer_fired();
            }
            return;
        }
        let key = (token & u64::from(u32::MAX)) as usize;
        let Some(conn) = self.conns.get_mut(key) else { return };
        if u64::from(conn.generation) != token >> 32 {
            return; // an event for an earlier connection in this slot
        }
        if conn.phase == Phase::Connecting {
            if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                return;
            }
            if let Err(e) = conn.connect_result() {
                let detail = format!("connect to {}: {e}", self.config.addr);
                self.fail(key, ErrorKind::Connect, detail);
                return;
            }
            conn.phase = Phase::Open;
            self.stats.connections_opened += 1;
            self.connected_once = true;
        }
        if flags.intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR)
        {
            let hangup = flags.intersects(EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR);
            let stats = &mut self.stats;
            let timeout = self.config.timeout;
            let mut answered = 0;
            let outcome =
                self.conns[key].read(&mut self.scratch, hangup, &mut |request, response, now| {
                    // Late is late whenever the scan would have noticed it.
                    if now.saturating_duration_since(request.start) >= timeout {
                        let late =
                            || format!("answered after the {}s timeout", timeout.as_secs_f64());
                        stats.record_errors(ErrorKind::Timeout, [request.start], now, late);
                    } else {
                        stats.record_response(response, request.start, now);
                    }
                    answered += 1;
                });
            self.outstanding -= answered;
            match outcome {
                ReadOutcome::Open => {}
                ReadOutcome::PeerClosed => return self.on_peer_closed(key),
                ReadOutcome::Failed(kind, detail) => return self.fail(key, kind, detail),
            }
        }
        if let Err(e) = self.conns[key].flush() {
            return self.fail(key, ErrorKind::Reset, format!("send: {e}"));
        }
        self.after_progress(key, Instant::now());
    }

    /// A connection moved (connected, got responses, drained its writes): give it more work
    /// or retire it.
    fn after_progress(&mut self, key: usize, now: Instant) {
        if self.conns[key].server_closing {
            self.release_unanswered(key);
            return self.retire(key, now);
        }
        if self.open.is_some() {
            self.open_after_progress(key, now);
        } else {
            self.fill(key, now);
            if self.conns.get(key).is_some_and(|c| c.in_flight.is_empty()) {
                self.retire(key, now);
            }
        }
    }

    /// The server closed the connection cleanly.
    fn on_peer_closed(&mut self, key: usize) {
        let conn = &self.conns[key];
        if !conn.in_flight.is_empty() && !conn.server_closing {
            let detail = format!(
                "server closed the connection with {} requests unanswered",
                conn.in_flight.len()
            );
            return self.fail(key, ErrorKind::Reset, detail);
        }
        self.release_unanswered(key);
        self.close(key);
    }

    /// Requests queued behind a response that announced `Connection: close` were never
    /// answered through no fault of theirs: the open loop re-issues them with their due times;
    /// the closed loop returns them (and the session's unused quota) to the budget.
    fn release_unanswered(&mut self, key: usize) {
        let conn = &mut self.conns[key];
        let unanswered = conn.in_flight.len();
        self.outstanding -= unanswered;
        if self.open.is_some() {
            for request in conn.in_flight.drain(..).rev() {
                self.backlog.push_front(request);
            }
        } else {
            conn.in_flight.clear();
            let unused = match std::mem::replace(&mut conn.quota, Quota::Limited(0)) {
                Quota::Limited(n) => u64::from(n),
                Quota::Unlimited => 0,
            };
            self.budget.give_back(unanswered as u64 + unused);
        }
    }

    /// Ends a connection that has nothing in flight and will carry nothing more. After a
    /// `Connection: close` exchange it waits for the server's FIN (so TIME_WAIT lands there).
    fn retire(&mut self, key: usize, now: Instant) {
        let conn = &mut self.conns[key];
        if conn.server_closing && conn.phase == Phase::Open {
            conn.phase = Phase::AwaitingClose;
            conn.since = now;
            if std::mem::replace(&mut conn.counted, false) {
                self.active -= 1;
            }
        } else {
            self.close(key);
        }
    }

    /// Closes a connection with nothing in flight.
    fn close(&mut self, key: usize) {
        let conn = self.conns.remove(key);
        debug_assert!(conn.in_flight.is_empty());
        if conn.counted {
            self.active -= 1;
        }
    }

    /// Closes a broken connection, counting each request it carried as an error of `kind`.
    fn fail(&mut self, key: usize, kind: ErrorKind, detail: String) {
        let conn = self.conns.remove(key);
        if conn.counted {
            self.active -= 1;
        }
        let lost = conn.in_flight.len();
        self.outstanding -= lost;
        let now = Instant::now();
        // A connect or response that failed with no request waiting still counts once.
        let none_waiting = match kind {
            ErrorKind::Connect | ErrorKind::BadResponse => lost == 0,
            ErrorKind::Timeout | ErrorKind::Reset => false,
        };
        let starts = conn.in_flight.iter().map(|r| r.start).chain(none_waiting.then_some(now));
        self.stats.record_errors(kind, starts, now, || detail);
        if let (None, Quota::Limited(unused)) = (&self.open, conn.quota) {
            self.budget.give_back(u64::from(unused));
        }
        if kind == ErrorKind::Connect {
            self.connect_failed_after_record();
        }
    }

    /// What follows any failed connect: give up if the server never answered, else back off.
    fn connect_failed_after_record(&mut self) {
        if self.connected_once {
            self.connect_backoff = Some(Instant::now() + CONNECT_BACKOFF);
        } else {
            self.give_up_unreachable();
        }
    }

    /// The very first connects failed: the server is not there, so stop rather than spin.
    fn give_up_unreachable(&mut self) {
        self.stats.unreachable = true;
        let now = Instant::now();
        let unsent = self.backlog.drain(..).map(|r| r.start);
        self.stats.record_errors(ErrorKind::Connect, unsent, now, || "server unreachable".into());
        self.stop(now);
    }

    /// Starts a connection carrying `quota` requests. On failure the caller accounts for it
    /// (see [`connect_failed`](Self::connect_failed)).
    fn open_conn(&mut self, quota: Quota, now: Instant) -> Result<usize, String> {
        let fd = conn::start_connect(&self.config.addr)
            .map_err(|e| format!("connect to {}: {e}", self.config.addr))?;
        let generation = self.next_generation;
        let key = self.conns.vacant_key();
        let token = (u64::from(generation) << 32) | key as u64;
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        epoll::add(&self.epoll, &fd, EventData::new_u64(token), flags)
            .map_err(|e| format!("epoll_ctl: {e}"))?;
        let bodyless = self.config.request.bodyless_responses();
        self.conns.insert(Conn::new(fd, generation, quota, now, bodyless));
        self.next_generation = self.next_generation.wrapping_add(1);
        self.active += 1;
        Ok(key)
    }

    /// Counts `requests` (at least one) lost to a connection that could not even be started.
    fn connect_failed(&mut self, detail: String, requests: u64) {
        let now = Instant::now();
        let lost = std::iter::repeat_n(now, requests.max(1) as usize);
        self.stats.record_errors(ErrorKind::Connect, lost, now, || detail);
        self.connect_failed_after_record();
    }

    /// Ends connects, requests and closes that have taken longer than `--timeout`.
    fn scan_timeouts(&mut self, now: Instant) {
        let timeout = self.config.timeout;
        let expired = |since: Instant| now.saturating_duration_since(since) >= timeout;
        self.doomed.clear();
        for (key, conn) in &self.conns {
            let verdict = match conn.phase {
                Phase::Connecting if expired(conn.since) => Some(Some(ErrorKind::Connect)),
                Phase::AwaitingClose if expired(conn.since) => Some(None),
                _ if conn.in_flight.front().is_some_and(|r| expired(r.start)) => {
                    Some(Some(ErrorKind::Timeout))
                }
                _ => None,
            };
            if let Some(verdict) = verdict {
                self.doomed.push((key, verdict));
            }
        }
        let secs = timeout.as_secs_f64();
        let doomed = std::mem::take(&mut self.doomed);
        for &(key, verdict) in &doomed {
            match verdict {
                Some(ErrorKind::Connect) => {
                    self.fail(key, ErrorKind::Connect, format!("connect timed out after {secs}s"))
                }
                Some(kind) => self.fail(key, kind, format!("no response within {secs}s")),
                None => self.close(key),
            }
        }
        self.doomed = doomed;
        let waited = self.backlog.iter().take_while(|r| expired(r.start)).count();
        let starts = self.backlog.drain(..waited).map(|r| r.start);
        self.stats.record_errors(ErrorKind::Timeout, starts, now, || {
            format!("waited {secs}s for a free connection")
        });
    }

    /// Publishes counts for the progress line.
    fn publish(&self) {
        self.progress.requests.store(self.stats.requests, Ordering::Relaxed);
        self.progress.errors.store(self.stats.total_errors(), Ordering::Relaxed);
    }
}
