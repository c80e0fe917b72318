//! amped: a Flash-style static web server.
//!
//! The request's path through the code (see docs/ARCHITECTURE.md):
//! [`arch`] accepts and reads → [`pipeline`] parses, consults the [`cache`]s and builds a
//! response, or hands out a [`disk::Job`] for whatever may block on the disk (translating the
//! path, opening the file) → [`transmit`] sends it (residency test, sendfile) along the
//! [`send_plan`] → [`access_log`].
//! Each module uses only those below it: `arch` → `transmit` → `pipeline` → `disk` → `cache`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod access_log;
pub mod arch;
pub mod cache;
pub mod client_limits;
pub mod config;
pub mod copy_budget;
pub mod debox;
pub mod disk;
pub mod errlog;
pub mod fill_size;
pub mod huge_pool;
pub mod metrics;
pub mod operator;
pub mod pipeline;
pub mod sd_notify;
pub mod send_plan;
pub mod stats;
pub mod stats_listener;
pub mod timeline;
pub mod tls;
pub mod transmit;
pub mod transport;

/// The `Server` header value.
pub const SERVER_NAME: &str = "amped";
