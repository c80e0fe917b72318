//! Level-triggered epoll with `u64` tokens, plus an eventfd [`Waker`].
//!
//! The event loops use level triggering on purpose: a connection that still has buffered
//! input or a writable socket is reported again on the next wait, so a step that stops early
//! (e.g. to be fair to other connections) never loses a wake-up.

use crate::debox::{About, Call, around};
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{EventfdFlags, Timespec, eventfd};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// What a registered descriptor should be polled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Readable (or peer hang-up).
    Read,
    /// Writable (or error): used only while response bytes remain unsent.
    Write,
    /// Both.
    ReadWrite,
    /// Nothing but errors and hang-ups (a connection parked on a helper job).
    None,
}

impl Interest {
    fn flags(self) -> EventFlags {
        match self {
            Interest::Read => EventFlags::IN | EventFlags::RDHUP,
            Interest::Write => EventFlags::OUT,
            Interest::ReadWrite => EventFlags::IN | EventFlags::RDHUP | EventFlags::OUT,
            Interest::None => EventFlags::empty(),
        }
    }
}

/// One readiness report.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    /// The token given at registration.
    pub token: u64,
    /// Readable, or the peer hung up (a read will say which).
    pub readable: bool,
    /// Writable.
    pub writable: bool,
    /// Error or hang-up on the descriptor.
    pub hangup: bool,
}

/// An epoll instance.
pub struct Poller {
    fd: OwnedFd,
    events: Vec<epoll::Event>,
}

impl Poller {
    /// Creates an epoll instance that reports up to `batch` events per wait.
    pub fn new(batch: usize) -> io::Result<Self> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        Ok(Poller { fd, events: Vec::with_capacity(batch.max(1)) })
    }

    /// Registers `fd` under `token`.
    #[track_caller]
    pub fn add(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        let data = EventData::new_u64(token);
        Ok(around(Call::EpollCtl, About::Nothing, || {
            epoll::add(&self.fd, fd, data, interest.flags())
        })?)
    }

    /// Registers a listening socket shared between processes: `EPOLLEXCLUSIVE` wakes only one
    /// of the waiters per incoming connection (no thundering herd).
    #[track_caller]
    pub fn add_exclusive(&self, fd: impl AsFd, token: u64) -> io::Result<()> {
        let flags = EventFlags::IN | EventFlags::EXCLUSIVE;
        let data = EventData::new_u64(token);
        Ok(around(Call::EpollCtl, About::Nothing, || epoll::add(&self.fd, fd, data, flags))?)
    }

    /// Changes what `fd` is polled for.
    #[track_caller]
    pub fn modify(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        let data = EventData::new_u64(token);
        Ok(around(Call::EpollCtl, About::Nothing, || {
            epoll::modify(&self.fd, fd, data, interest.flags())
        })?)
    }

    /// Stops polling `fd`. Closing a descriptor also removes it.
    #[track_caller]
    pub fn delete(&self, fd: impl AsFd) -> io::Result<()> {
        Ok(around(Call::EpollCtl, About::Nothing, || epoll::delete(&self.fd, fd))?)
    }

    /// Waits up to `timeout` (forever if `None`) and returns the ready descriptors.
    /// EINTR is reported as an empty batch.
    #[track_caller]
    pub fn wait(
        &mut self,
        timeout: Option<Duration>,
    ) -> io::Result<impl Iterator<Item = Ready> + '_> {
        let ts =
            timeout.map(|d| Timespec { tv_sec: d.as_secs() as _, tv_nsec: d.subsec_nanos() as _ });
        self.events.clear();
        let cap = self.events.capacity();
        let events = &mut self.events;
        let fd = &self.fd;
        match around(Call::EpollWait, About::Nothing, || {
            epoll::wait(fd, rustix::buffer::spare_capacity(events), ts.as_ref())
        }) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        debug_assert!(self.events.len() <= cap);
        Ok(self.events.iter().map(|ev| {
            let flags = ev.flags;
            Ready {
                token: ev.data.u64(),
                readable: flags.intersects(EventFlags::IN | EventFlags::RDHUP),
                writable: flags.contains(EventFlags::OUT),
                hangup: flags.intersects(EventFlags::ERR | EventFlags::HUP),
            }
        }))
    }
}

/// Wakes an event loop from another thread (helper completions, shutdown) through an eventfd.
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// Creates a non-blocking eventfd.
    pub fn new() -> io::Result<Self> {
        let fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        Ok(Waker { fd })
    }

    /// Makes the eventfd readable. Never blocks (the counter saturating is not an error).
    pub fn wake(&self) {
        let _ =
            around(Call::Wake, About::Nothing, || rustix::io::write(&self.fd, &1u64.to_ne_bytes()));
    }

    /// Resets the counter after a wake-up has been seen.
    pub fn drain(&self) {
        let mut buf = [0u8; 8];
        let _ = around(Call::Wake, About::Nothing, || rustix::io::read(&self.fd, &mut buf));
    }

    /// The descriptor, to register with a [`Poller`].
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
