//! Byte ranges (RFC 9110 §14): turns a Range header into "send it all", "send this slice" or 416.
//!
//! Deliberately small: one range per response. Multi-range requests get the whole body with 200,
//! which RFC 9110 §14.2 permits (a server MAY ignore Range), and which spares us multipart bodies.

/// What to send for a GET carrying a Range header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RangeOutcome {
    /// Ignore the header: 200 with the whole representation.
    Full,
    /// 206 with bytes `start..=end_inclusive` (always within the representation).
    Partial {
        /// First byte offset.
        start: u64,
        /// Last byte offset, inclusive, at most `len - 1`.
        end_inclusive: u64,
    },
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Parse a Range header for a representation of `len` bytes. Only the "bytes" unit is known;
/// other units, syntax errors and multiple ranges give `Full`. A single "a-b", "a-" or "-n":
/// start at or past the end, a suffix of 0, or any valid range on an empty representation is
/// `Unsatisfiable`; the end is clipped to `len - 1`.
pub fn parse_range(header: &str, len: u64) -> RangeOutcome {
    let Some(set) = strip_bytes_unit(header.trim()) else {
        return RangeOutcome::Full;
    };
    // A list may carry empty elements (RFC 9110 §5.6.1); only real specs count.
    let mut specs = set.split(',').map(str::trim).filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return RangeOutcome::Full;
    };
    let Some((first, last)) = spec.split_once('-') else {
        return RangeOutcome::Full;
    };
    match (digits(first), digits(last)) {
        // "-n": the last n bytes.
        (None, Some(n)) if first.is_empty() => suffix(n, len),
        // "a-": from a to the end.
        (Some(start), None) if last.is_empty() => bounded(start, u64::MAX, len),
        // "a-b": invalid (ignored) when b < a.
        (Some(start), Some(end)) if start <= end => bounded(start, end, len),
        _ => RangeOutcome::Full,
    }
}

/// The range set after a case-insensitive "bytes=" unit.
fn strip_bytes_unit(header: &str) -> Option<&str> {
    let (unit, set) = header.split_once('=')?;
    unit.trim().eq_ignore_ascii_case("bytes").then_some(set)
}

/// A non-empty run of ASCII digits; values past u64::MAX saturate, which is harmless here since
/// they lie beyond any representation.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |acc, d| acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))))
}

fn bounded(start: u64, end: u64, len: u64) -> RangeOutcome {
    if start >= len {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial { start, end_inclusive: end.min(len - 1) }
}

fn suffix(n: u64, len: u64) -> RangeOutcome {
    if n == 0 || len == 0 {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial { start: len.saturating_sub(n), end_inclusive: len - 1 }
}

#[cfg(test)]
mod tests {
    use super::RangeOutcome::{Full, Partial, Unsatisfiable};
    use super::*;

    const fn p(start: u64, end_inclusive: u64) -> RangeOutcome {
        Partial { start, end_inclusive }
    }

    #[test]
    fn range_cases() {
        let cases: &[(&str, &str, u64, RangeOutcome)] = &[
            ("first byte", "bytes=0-0", 50, p(0, 0)),
            ("closed", "bytes=10-19", 50, p(10, 19)),
            ("end clipped", "bytes=10-1000", 50, p(10, 49)),
            ("open end", "bytes=5-", 50, p(5, 49)),
            ("suffix", "bytes=-5", 50, p(45, 49)),
            ("suffix longer than body", "bytes=-500", 50, p(0, 49)),
            ("last byte", "bytes=49-49", 50, p(49, 49)),
            ("start at end", "bytes=50-", 50, Unsatisfiable),
            ("start past end", "bytes=100-200", 50, Unsatisfiable),
            ("zero suffix", "bytes=-0", 50, Unsatisfiable),
            ("empty body closed", "bytes=0-0", 0, Unsatisfiable),
            ("empty body suffix", "bytes=-5", 0, Unsatisfiable),
            ("huge start", "bytes=99999999999999999999999-", 50, Unsatisfiable),
            ("huge end", "bytes=0-99999999999999999999999", 50, p(0, 49)),
            ("multiple ranges", "bytes=0-1,3-4", 50, Full),
            ("trailing empty element", "bytes=0-1, ", 50, p(0, 1)),
            ("other unit", "items=0-1", 50, Full),
            ("unit case-insensitive", "Bytes=0-1", 50, p(0, 1)),
            ("reversed", "bytes=5-1", 50, Full),
            ("no dash", "bytes=5", 50, Full),
            ("just dash", "bytes=-", 50, Full),
            ("negative start", "bytes=--5", 50, Full),
            ("spaces inside", "bytes=1 - 2", 50, Full),
            ("empty set", "bytes=", 50, Full),
            ("garbage", "lol", 50, Full),
            ("no unit", "0-1", 50, Full),
        ];
        for (name, header, len, expected) in cases {
            assert_eq!(parse_range(header, *len), *expected, "{name}: {header:?} len {len}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn partial_is_always_inside_the_body(header in "(bytes|items)=[0-9,-]{0,12}", len in 0u64..100) {
                if let Partial { start, end_inclusive } = parse_range(&header, len) {
                    prop_assert!(start <= end_inclusive && end_inclusive < len, "{header} len {len}");
                }
            }

            #[test]
            fn any_text_is_handled(header in any::<String>(), len in any::<u64>()) {
                if let Partial { start, end_inclusive } = parse_range(&header, len) {
                    prop_assert!(start <= end_inclusive && end_inclusive < len);
                }
            }
        }
    }
}
