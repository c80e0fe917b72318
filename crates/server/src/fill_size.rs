//! How much one trip through a busy disk's queue reads for a response, shared by AMPED's pipe
//! fills ([`crate::transmit`]) and io_uring's cold reads ([`crate::arch::uring`]).
//!
//! The first trip reads `--first-fill` ([`FIRST_FILL`] unless set); each further trip of the
//! same response doubles, up to the caller's cap (a pipe's capacity, or io_uring's largest
//! read). A cold small file starts sending after one short read, while a large transfer soon
//! moves a megabyte per trip, so it queues (and pays the disk's positioning) fewer times. A
//! body whose rest is at most twice the first trip goes in one trip: a second one would cost
//! more than the bytes it saves waiting.
//!
//! A trip around the page cache (a direct read of a large file, `--direct-io-above`) does not
//! grow: it reads all it may at once ([`FillSize::direct_trip`]). Its read is one disk request of any
//! size up to a huge page, and the disk's read-ahead does not make the small first trips large
//! as it does through the page cache, so on a volume that caps requests per second the ramp
//! cost three requests per file (128 + 256 + 512 KiB + 1 MiB for what one 2 MiB request
//! brings): without it amped and sped moved 12–13 % more under the IOPS cap
//! (docs/BENCHMARKS.md §3b, session 21). A file that large waits a little longer for its first
//! byte — one 2 MiB read instead of one of 128 KiB — and nothing else does.

/// What the first trip reads unless `--first-fill` says otherwise.
pub const FIRST_FILL: u64 = 128 << 10;

/// The size of a response's next trip.
#[derive(Clone, Copy, Debug, Default)]
pub struct FillSize {
    /// Bytes the next trip asks for, 0 before the first (32 bits keep a connection's slot
    /// small).
    next: u32,
}

impl FillSize {
    /// The length of the next trip for a body with `remaining` bytes to read, at most `cap`,
    /// a first trip reading `first` (`--first-fill`); the trip after it may be twice as long.
    pub fn take(&mut self, remaining: u64, cap: u64, first: u64) -> u64 {
        let next = if self.next == 0 { first } else { u64::from(self.next) };
        let len =
            if remaining <= 2 * first { remaining.min(cap) } else { remaining.min(next.min(cap)) };
        self.next = (next * 2).min(cap).min(u64::from(u32::MAX)) as u32;
        len
    }

    /// The length of a trip that reads all it may at once: `remaining`, at most `cap`. The
    /// trips after it (through the page cache, should the response go on that way) are as long
    /// as the caller's cap allows.
    fn whole(&mut self, remaining: u64, cap: u64) -> u64 {
        self.next = u64::from(self.next).max(cap).min(u64::from(u32::MAX)) as u32;
        remaining.min(cap)
    }

    /// The length of a direct trip at file offset `pos` with `remaining` bytes to read: all it
    /// may at once, at most what one huge page holds from the aligned offset below `pos`, so
    /// that the read is one disk request (AMPED's helpers and io_uring alike).
    pub fn direct_trip(&mut self, remaining: u64, pos: u64) -> u64 {
        use amped_sys::direct::{HUGE, room_from};
        self.whole(remaining, HUGE as u64).min(room_from(pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_double_up_to_the_cap_and_a_short_rest_goes_at_once() {
        let (k, cap) = (1 << 10, 1 << 20);
        let mut f = FillSize::default();
        let lens: Vec<u64> = (0..5).map(|_| f.take(100 << 20, cap, FIRST_FILL)).collect();
        assert_eq!(lens, [128 * k, 256 * k, 512 * k, cap, cap]);
        let mut f = FillSize::default();
        assert_eq!(
            f.take(256 * k, cap, FIRST_FILL),
            256 * k,
            "a rest of twice the first trip in one"
        );
        assert_eq!(FillSize::default().take(300 * k, cap, FIRST_FILL), 128 * k);
        assert_eq!(
            FillSize::default().take(200 * k, 64 * k, FIRST_FILL),
            64 * k,
            "never past the cap"
        );
    }

    #[test]
    fn a_larger_first_trip_reads_a_medium_file_at_once_and_then_doubles() {
        let (k, m) = (1 << 10, 1 << 20);
        let mut f = FillSize::default();
        assert_eq!(f.take(700 * k, m, 512 * k), 700 * k, "a rest within twice the first: one trip");
        let mut f = FillSize::default();
        let lens: Vec<u64> = (0..3).map(|_| f.take(100 * m, 4 * m, 512 * k)).collect();
        assert_eq!(lens, [512 * k, m, 2 * m]);
        assert_eq!(FillSize::default().take(3 * m, m, m), m, "never past the cap");
    }

    #[test]
    fn a_whole_trip_reads_all_it_may_and_the_next_trips_do_not_start_small() {
        let (k, m) = (1 << 10, 1 << 20);
        let mut f = FillSize::default();
        assert_eq!(f.whole(100 * m, 2 * m), 2 * m, "no ramp");
        assert_eq!(f.whole(300 * k, 2 * m), 300 * k, "at most the rest");
        assert_eq!(
            f.take(100 * m, m, FIRST_FILL),
            m,
            "a later trip through the page cache is full size"
        );
    }
}
