//! Open-loop pacing (wrk2, oha `--latency-correction`): requests are released on a fixed
//! schedule whatever the server does, and each one's latency runs from its *due* time, so a
//! server stall is charged to every request that should have been sent during it instead of
//! to one (coordinated omission, the error wrk2 was written to correct).
//!
//! Due requests join a backlog and go to an idle connection (most recently freed first), else
//! to a new connection while this thread's share of `--connections` allows, else — with
//! `--pipeline` above 1 — behind the requests of a busy connection. Kept-alive pools are opened
//! before the schedule starts. A request waiting for a free connection is the
//! server's doing and is charged to latency; the generator's own lateness — noticing a due
//! request more than [`LAG_WARNING`] late — is counted separately as a schedule lag warning.
//! A timerfd wakes the loop at the next due time with nanosecond resolution (epoll_wait's
//! timeout is in milliseconds).

use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::OwnedFd;
use rustix::time::{self, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};

use super::{TIMER_TOKEN, Worker};
use crate::config::Config;
use crate::conn::Quota;
use crate::schedule::Schedule;
use crate::stats::ErrorKind;
use crate::workload::{CLOSE_END, KEEP_ALIVE_END};

/// Releasing a request later than this after its due time counts as a schedule lag warning.
pub const LAG_WARNING: Duration = Duration::from_millis(5);

/// The open loop's per-thread state.
pub struct OpenLoop {
    schedule: Schedule,
    /// One-shot timer for the next due time.
    timer: OwnedFd,
    /// The due time the timer is set for.
    armed: Option<Instant>,
    /// Idle connections (slot, generation), most recently freed last; entries may be stale
    /// and are checked when taken.
    idle: Vec<(usize, u32)>,
    /// Busy connections with pipeline room, likewise.
    busy: Vec<(usize, u32)>,
}

impl OpenLoop {
    /// Thread `index`'s schedule and timer.
    /// Its time zero is set by [`start_at`](Self::start_at).
    pub fn new(
        config: &Config,
        epoll: &OwnedFd,
        rate: f64,
        index: usize,
    ) -> Result<OpenLoop, String> {
        let (threads, limit, end) = (config.threads, config.requests, config.duration);
        let schedule = Schedule::new(Instant::now(), rate, (index, threads), limit, end);
        let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
        let timer = time::timerfd_create(TimerfdClockId::Monotonic, flags)
            .map_err(|e| format!("timerfd_create: {e}"))?;
        epoll::add(epoll, &timer, EventData::new_u64(TIMER_TOKEN), EventFlags::IN | EventFlags::ET)
            .map_err(|e| format!("epoll_ctl: {e}"))?;
        Ok(OpenLoop { schedule, timer, armed: None, idle: Vec::new(), busy: Vec::new() })
    }

    /// Starts the schedule at time zero.
    pub fn start_at(&mut self, origin: Instant) {
        self.schedule.start_at(origin);
    }

    /// The schedule has no more requests.
    pub fn exhausted(&self) -> bool {
        self.schedule.peek().is_none()
    }

    /// Ends the schedule early.
    pub fn stop(&mut self) {
        self.schedule.stop();
    }

    /// The timer expired: clear it so the next arming takes effect.
    pub fn timer_fired(&mut self) {
        let mut ticks = [0u8; 8];
        let _ = rustix::io::read(&self.timer, &mut ticks);
        self.armed = None;
    }
}

impl Worker<'_> {
    /// Opens the kept-alive pool before the schedule starts (sessions open on demand).
    pub(super) fn open_pool(&mut self, now: Instant) {
        if self.config.per_conn.is_some() {
            return;
        }
        while self.active < self.limit && !self.stopping {
            match self.open_conn(Quota::Unlimited, now) {
                Ok(key) => self.list(key),
                Err(detail) => return self.connect_failed(detail, 1),
            }
        }
    }

    /// Waits (at most `--timeout`) until the pool's connects have completed or failed.
    pub(super) fn await_pool(&mut self) {
        let give_up = Instant::now() + self.config.timeout;
        while !self.stopping
            && Instant::now() < give_up
            && !self.interrupted.load(std::sync::atomic::Ordering::Relaxed)
            && self.conns.iter().any(|(_, c)| c.phase == crate::conn::Phase::Connecting)
        {
            self.wait(Duration::from_millis(10));
        }
    }

    /// Moves every request due by `now` into the backlog.
    pub(super) fn release_due(&mut self, now: Instant) {
        let Some(open) = &mut self.open else { return };
        while let Some(due) = open.schedule.peek() {
            if due > now {
                break;
            }
            open.schedule.advance();
            let lag = now - due;
            if lag > LAG_WARNING {
                self.stats.lag_warnings += 1;
            }
            self.stats.max_lag = self.stats.max_lag.max(lag);
            let target = self.picker.next_target();
            self.backlog.push_back(crate::conn::Pending { target, start: due });
        }
        self.stats.backlog_max = self.stats.backlog_max.max(self.backlog.len());
    }

    /// Hands backlog requests to connections with room, opening connections up to the limit.
    pub(super) fn dispatch(&mut self, now: Instant) {
        while !self.backlog.is_empty() {
            let key = match self.take_idle() {
                Some(key) => key,
                None if self.active < self.limit && !self.stats.unreachable => {
                    let quota = self.config.per_conn.map_or(Quota::Unlimited, Quota::Limited);
                    match self.open_conn(quota, now) {
                        Ok(key) => key,
                        Err(detail) => {
                            // The request it was meant for fails with it.
                            self.backlog.pop_front();
                            self.connect_failed(detail, 1);
                            continue;
                        }
                    }
                }
                None => match self.take_busy() {
                    Some(key) => key,
                    None => return,
                },
            };
            let conn = &mut self.conns[key];
            if let Some(request) = self.backlog.pop_front() {
                let last = conn.quota == Quota::Limited(1);
                let end = if last { CLOSE_END } else { KEEP_ALIVE_END };
                conn.enqueue(request, self.workload.head(request.target), end, last);
                self.stats.record_send(now);
                self.outstanding += 1;
            }
            match conn.flush() {
                Err(e) => self.fail(key, ErrorKind::Reset, format!("send: {e}")),
                Ok(()) => self.list(key),
            }
        }
    }

    /// After responses: offer the connection again, or retire it when its session is over.
    pub(super) fn open_after_progress(&mut self, key: usize, now: Instant) {
        let conn = &self.conns[key];
        if conn.has_room(self.config.pipeline) {
            self.list(key);
        } else if conn.in_flight.is_empty() {
            self.retire(key, now);
        }
    }

    /// Sets the timer for the next due time, if it changed.
    pub(super) fn arm_timer(&mut self, now: Instant) {
        let Some(open) = &mut self.open else { return };
        let next = open.schedule.peek();
        if next == open.armed {
            return;
        }
        open.armed = next;
        let wait = next.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(now).max(Duration::from_micros(1))
        });
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        let value =
            Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: i64::from(wait.subsec_nanos()) };
        let spec = Itimerspec { it_interval: zero, it_value: value };
        // Cannot fail for a valid timerfd and a normalised value; if it did, the loop still
        // wakes at the next scan and releases what is due (counted as lag).
        let _ = time::timerfd_settime(&open.timer, TimerfdTimerFlags::empty(), &spec);
    }

    /// Puts a connection with room on the idle or the busy list (once each).
    fn list(&mut self, key: usize) {
        let Some(open) = &mut self.open else { return };
        let conn = &mut self.conns[key];
        if !conn.has_room(self.config.pipeline) {
            return;
        }
        let entry = (key, conn.generation);
        if conn.in_flight.is_empty() {
            if !std::mem::replace(&mut conn.listed_idle, true) {
                open.idle.push(entry);
            }
        } else if !std::mem::replace(&mut conn.listed_busy, true) {
            open.busy.push(entry);
        }
    }

    /// The most recently freed connection that is still idle.
    fn take_idle(&mut self) -> Option<usize> {
        let open = self.open.as_mut()?;
        while let Some((key, generation)) = open.idle.pop() {
            let Some(conn) = self.conns.get_mut(key).filter(|c| c.generation == generation) else {
                continue;
            };
            conn.listed_idle = false;
            if conn.in_flight.is_empty() && conn.has_room(self.config.pipeline) {
                return Some(key);
            }
        }
        None
    }

    /// A busy connection that can take one more pipelined request.
    fn take_busy(&mut self) -> Option<usize> {
        let open = self.open.as_mut()?;
        while let Some((key, generation)) = open.busy.pop() {
            let Some(conn) = self.conns.get_mut(key).filter(|c| c.generation == generation) else {
                continue;
            };
            conn.listed_busy = false;
            if conn.has_room(self.config.pipeline) {
                return Some(key);
            }
        }
        None
    }
}
