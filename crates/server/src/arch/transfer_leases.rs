//! `--transfers-at-once N`: how many transfers under way AMPED's read lane lets read at once.
//!
//! A transfer that read keeps its place while its read is at the disk and for [`HOLD_FOR`]
//! after, the time its connection takes to send what was read and queue its next read; the
//! others wait in the lane's oldest-first order until a place is free. So at most N long
//! transfers move at once, each at a larger share of the disk, the way a server that sends one
//! response at a time reads each file (sped: one reader, each file at the whole disk's pace),
//! where without a limit every transfer under way takes its turn and all of them end late. A
//! connection whose client reads slowly does not queue its next read within [`HOLD_FOR`] and
//! loses its place, so slow clients do not hold it. New responses' first reads are never
//! held back. 0 (the default) lets any number read.

use std::time::{Duration, Instant};

/// How long a transfer keeps its place after its read finished.
pub const HOLD_FOR: Duration = Duration::from_millis(20);

/// The transfers holding a place now.
#[derive(Debug)]
pub struct TransferLeases {
    /// At most this many hold one (0: no limit).
    max: usize,
    held: Vec<Lease>,
}

#[derive(Debug)]
struct Lease {
    token: u64,
    /// A read of it is at the disk.
    reading: bool,
    /// Otherwise it holds its place until then.
    until: Instant,
}

impl Lease {
    fn live(&self, now: Instant) -> bool {
        self.reading || self.until > now
    }
}

impl TransferLeases {
    /// At most `max` transfers reading at once (0: no limit).
    pub fn new(max: usize) -> TransferLeases {
        TransferLeases { max, held: Vec::new() }
    }

    /// Whether a read of the transfer of connection `token` may start at `now`.
    pub fn may_read(&self, token: u64, now: Instant) -> bool {
        self.max == 0
            || self.held.iter().any(|l| l.token == token && l.live(now))
            || self.held.iter().filter(|l| l.live(now)).count() < self.max
    }

    /// A read of `token`'s transfer started at `now` (after [`TransferLeases::may_read`]).
    pub fn reading(&mut self, token: u64, now: Instant) {
        if self.max == 0 {
            return;
        }
        self.held.retain(|l| l.live(now) || l.token == token);
        match self.held.iter_mut().find(|l| l.token == token) {
            Some(l) => l.reading = true,
            None => self.held.push(Lease { token, reading: true, until: now }),
        }
    }

    /// `token`'s read finished at `now`: it keeps its place for [`HOLD_FOR`].
    pub fn read_done(&mut self, token: u64, now: Instant) {
        if let Some(l) = self.held.iter_mut().find(|l| l.token == token) {
            l.reading = false;
            l.until = now + HOLD_FOR;
        }
    }

    /// Whether a limit is set.
    pub fn limits(&self) -> bool {
        self.max > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_lets_every_transfer_read() {
        let leases = TransferLeases::new(0);
        assert!((0..100).all(|t| leases.may_read(t, Instant::now())));
    }

    #[test]
    fn a_place_is_kept_while_reading_and_briefly_after() {
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        let mut l = TransferLeases::new(1);
        assert!(l.may_read(7, t0));
        l.reading(7, t0);
        assert!(!l.may_read(8, t0 + ms(500)), "7's read is at the disk, however long");
        l.read_done(7, t0 + ms(500));
        assert!(!l.may_read(8, t0 + ms(510)), "7 is sending what it read");
        assert!(l.may_read(7, t0 + ms(510)), "7 goes on");
        assert!(l.may_read(8, t0 + ms(500) + HOLD_FOR), "7 did not come back in time");
        l.reading(8, t0 + ms(500) + HOLD_FOR);
        assert!(!l.may_read(7, t0 + ms(500) + HOLD_FOR), "7 waits now");
    }

    #[test]
    fn two_places_two_transfers() {
        let t0 = Instant::now();
        let mut l = TransferLeases::new(2);
        l.reading(1, t0);
        l.reading(2, t0);
        assert!(!l.may_read(3, t0));
        l.read_done(1, t0);
        l.read_done(2, t0);
        assert!(l.may_read(3, t0 + HOLD_FOR), "both places free again");
        assert!(l.limits() && !TransferLeases::new(0).limits());
    }
}
