//! Whether the disk sets the pace: a moving share of the cold reads a driver starts that leave
//! others waiting behind them. AMPED's read lane and io_uring's disk gate each keep one; a
//! transfer off a block device asks ahead only while the disk is saturated
//! (`--fill-ahead-yields`, [`crate::disk::ask_ahead::yields`]).

/// Whether reads keep waiting for the disk: a moving share of the reads started that left
/// others waiting behind them. At or above [`SATURATED`] the disk, not the offered load, sets
/// the pace (every read finds a queue), as at infinite demand; below it the disk has time to
/// spare, as at a fixed rate under its capacity (`--fill-ahead-yields`,
/// [`crate::disk::ask_ahead::yields`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Backlog {
    /// The share, in millionths; each read moves it a 32nd of the way to 0 or 1.
    share: u32,
}

/// The share of reads leaving a queue behind them above which the disk counts as saturated.
pub const SATURATED: f64 = 0.9;

impl Backlog {
    /// A read started; `others_wait`: reads still wait behind it.
    pub fn started(&mut self, others_wait: bool) {
        let target = if others_wait { 1_000_000 } else { 0 };
        self.share = (self.share as i64 + (target - self.share as i64) / 32) as u32;
    }

    /// Whether nearly every recent read left others waiting.
    pub fn saturated(&self) -> bool {
        f64::from(self.share) >= SATURATED * 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_counts_as_saturated_only_while_nearly_every_read_leaves_a_queue() {
        let mut b = Backlog::default();
        assert!(!b.saturated(), "nothing measured: time to spare");
        (0..200).for_each(|_| b.started(true));
        assert!(b.saturated(), "every read left others waiting");
        (0..10).for_each(|i| b.started(i % 3 != 0));
        assert!(!b.saturated(), "a third found no queue: time to spare");
        (0..200).for_each(|i| b.started(i % 4 != 0));
        assert!(!b.saturated(), "three in four is below the mark");
    }
}
