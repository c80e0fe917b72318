//! HTTP dates (IMF-fixdate, RFC 9110 §5.6.7) and the per-thread cache of "now".
//!
//! Design note: every response carries a Date header, but the value only changes once a second,
//! so each thread keeps the last formatted second and reformats only when the clock moves on
//! (the same trick as nginx's cached time strings). Thread-local rather than shared, so no locks
//! or atomics on the hot path; each thread's copy is at most one second stale.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
const HTTP_DATE_LEN: usize = 29;

thread_local! {
    /// (Unix second, its formatted date); second u64::MAX means "not yet formatted".
    static NOW: Cell<(u64, [u8; HTTP_DATE_LEN])> = const { Cell::new((u64::MAX, [0; HTTP_DATE_LEN])) };
}

/// The current time as a 29-byte IMF-fixdate, formatted at most once per second per thread.
pub fn http_date_now() -> [u8; HTTP_DATE_LEN] {
    let now = SystemTime::now();
    let second = unix_seconds(now);
    NOW.with(|cell| {
        let (cached_second, cached) = cell.get();
        if cached_second == second {
            return cached;
        }
        let fresh = format_fixed(now);
        cell.set((second, fresh));
        fresh
    })
}

/// Formats `t` as an IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
pub fn fmt_http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// Whole seconds since the Unix epoch; times before it count as 0 (HTTP dates cannot say less).
pub(crate) fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// IMF-fixdate into a fixed array. Four-digit years always give 29 bytes; should a year ever
/// not, the tail is padded with spaces rather than panicking.
fn format_fixed(t: SystemTime) -> [u8; HTTP_DATE_LEN] {
    let mut out = [b' '; HTTP_DATE_LEN];
    for (slot, byte) in out.iter_mut().zip(httpdate::fmt_http_date(t).bytes()) {
        *slot = byte;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_imf_fixdate() {
        let cases = [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (1_700_000_000, "Tue, 14 Nov 2023 22:13:20 GMT"),
        ];
        for (secs, text) in cases {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(fmt_http_date(t), text);
            assert_eq!(&format_fixed(t), text.as_bytes());
        }
    }

    #[test]
    fn now_is_a_parsable_recent_date() {
        let bytes = http_date_now();
        let text = std::str::from_utf8(&bytes).unwrap();
        let parsed = httpdate::parse_http_date(text).unwrap();
        let age = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(age < Duration::from_secs(5), "{text}");
        // Second call within the same second comes from the cache and is identical or newer.
        assert!(
            httpdate::parse_http_date(std::str::from_utf8(&http_date_now()).unwrap()).unwrap()
                >= parsed
        );
    }
}
