//! DeBox for amped (`--debox`): where every system call of the server waited, per thread
//! role and call site, and which event-loop calls stalled — after the DeBox paper's
//! per-call performance data, gathered in-process instead of by a kernel patch.
//!
//! The measuring is in `amped_sys::debox` (every syscall wrapper reports a sample when it
//! is on); this module installs the sink, keeps the thread's role, aggregates the samples
//! ([`table`]), keeps the loop stalls ([`stalls`]) and renders the profile as JSON
//! ([`report`]): served at `--stats-path?debox` and written to `--debox-out` at exit.
//! docs/DEBOX.md explains every field.

pub mod report;
pub mod stalls;
pub mod table;

use amped_sys::debox::Sample;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a thread does, which decides how its calls are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// An event loop (sped, amped, uring): it must never block.
    Loop,
    /// A helper of an event loop (amped's helpers, staged's job-stage threads): blocking is
    /// its job.
    Helper,
    /// A thread or process serving connections with blocking calls (mt, pool, mp), or any
    /// thread that did not say.
    Worker,
}

impl Role {
    /// Every role, in output order.
    pub const ALL: [Role; 3] = [Role::Loop, Role::Helper, Role::Worker];

    /// The name used in the profile.
    pub fn name(self) -> &'static str {
        match self {
            Role::Loop => "loop",
            Role::Helper => "helper",
            Role::Worker => "worker",
        }
    }
}

thread_local! {
    static ROLE: Cell<Role> = const { Cell::new(Role::Worker) };
}

/// Says what the calling thread is, for the profile (cheap; call it once at thread start).
pub fn set_role(role: Role) {
    ROLE.with(|r| r.set(role));
}

static STALL_NS: AtomicU64 = AtomicU64::new(1_000_000);

/// Turns the profile on for this process, with loop calls of `stall` or longer recorded as
/// stalls.
pub fn start(stall: Duration) {
    STALL_NS.store(stall.as_nanos() as u64, Ordering::Relaxed);
    amped_sys::uring::set_slow_threshold(stall);
    amped_sys::debox::enable(sink);
}

/// Whether the profile is on.
pub fn enabled() -> bool {
    amped_sys::debox::enabled()
}

/// The stall threshold.
pub fn stall_threshold() -> Duration {
    Duration::from_nanos(STALL_NS.load(Ordering::Relaxed))
}

fn sink(s: &Sample<'_>) {
    let role = ROLE.with(Cell::get);
    let stall = role == Role::Loop
        && !s.call.is_idle_wait()
        && s.wall_ns >= STALL_NS.load(Ordering::Relaxed);
    if stall {
        stalls::record(s);
    }
    table::record(role, s, stall);
}
