//! How much one trip through a busy disk's queue reads for a response, shared by AMPED's pipe
//! fills ([`crate::transmit`]) and io_uring's cold reads ([`crate::arch::uring`]).
//!
//! The first trip reads [`FIRST_FILL`]; each further trip of the same response doubles, up to
//! the caller's cap (a pipe's capacity, or io_uring's largest read). A cold small file starts
//! sending after one short read, while a large transfer soon moves a megabyte per trip, so it
//! queues (and pays the disk's positioning) fewer times. A body whose rest is at most twice
//! [`FIRST_FILL`] goes in one trip: a second one would cost more than the bytes it saves
//! waiting.

/// What the first trip reads.
pub const FIRST_FILL: u64 = 128 << 10;

/// The size of a response's next trip.
#[derive(Clone, Copy, Debug)]
pub struct FillSize {
    /// Bytes the next trip asks for (32 bits keep a connection's slot small).
    next: u32,
}

impl Default for FillSize {
    fn default() -> Self {
        FillSize { next: FIRST_FILL as u32 }
    }
}

impl FillSize {
    /// The length of the next trip for a body with `remaining` bytes to read, at most `cap`;
    /// the trip after it may be twice as long.
    pub fn take(&mut self, remaining: u64, cap: u64) -> u64 {
        let len = if remaining <= 2 * FIRST_FILL {
            remaining.min(cap)
        } else {
            remaining.min(u64::from(self.next).min(cap))
        };
        self.next = (u64::from(self.next) * 2).min(cap).min(u64::from(u32::MAX)) as u32;
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_double_up_to_the_cap_and_a_short_rest_goes_at_once() {
        let (k, cap) = (1 << 10, 1 << 20);
        let mut f = FillSize::default();
        let lens: Vec<u64> = (0..5).map(|_| f.take(100 << 20, cap)).collect();
        assert_eq!(lens, [128 * k, 256 * k, 512 * k, cap, cap]);
        let mut f = FillSize::default();
        assert_eq!(f.take(256 * k, cap), 256 * k, "a rest of twice the first trip in one");
        assert_eq!(FillSize::default().take(300 * k, cap), 128 * k);
        assert_eq!(FillSize::default().take(200 * k, 64 * k), 64 * k, "never past the cap");
    }
}
