//! What the load generator (`ampload`) and the lab (`amplab`) share about workloads, so both
//! read an access log the same way and draw the same numbers from the same seed:
//!
//! * [`rng`] — SplitMix64, and Zipf and weighted samplers over it;
//! * [`clf`] — Common Log Format (and Combined) lines, with one tolerance rule for real logs;
//! * [`lists`] — URL lists and weighted traces, and the line rule all three formats share.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod clf;
pub mod lists;
pub mod rng;

pub use rng::{SplitMix64, Weighted, Zipf};
