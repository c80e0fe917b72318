//! The live progress line on stderr, printed only when stderr is a terminal (never into a
//! pipe or a log, and never on stdout where the report goes).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::worker::ProgressCell;

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_secs(1);

/// Redraws `elapsed  requests  req/s  errors` every second until `done`, then erases it.
pub fn print_until(cells: &[ProgressCell], done: &AtomicBool, origin: Instant) {
    let mut last = (origin, 0u64);
    let mut next = Instant::now() + EVERY;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now < next {
            continue;
        }
        next = now + EVERY;
        let requests: u64 = cells.iter().map(|c| c.requests.load(Ordering::Relaxed)).sum();
        let errors: u64 = cells.iter().map(|c| c.errors.load(Ordering::Relaxed)).sum();
        let rate = (requests - last.1) as f64
            / now.saturating_duration_since(last.0).as_secs_f64().max(1e-9);
        last = (now, requests);
        let elapsed = now.saturating_duration_since(origin).as_secs_f64();
        eprint!(
            "\r\x1b[K{elapsed:7.1}s  {requests:>12} requests  {rate:>10.0} req/s  {errors:>8} errors"
        );
        let _ = std::io::stderr().flush();
    }
    eprint!("\r\x1b[K");
}
