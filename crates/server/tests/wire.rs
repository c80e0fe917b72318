//! Black-box wire tests: start the real `amped` binary on 127.0.0.1:0 against a temporary
//! document root and talk raw bytes over `TcpStream` (plus `curl` as a real client).
//!
//! Every test written inside [`arch_tests!`] runs once per architecture listed in that macro's
//! `ARCHS` table, as `<topic>::<arch>::<test>` (e.g. `protocol::sped::pipelined_in_order`), so a
//! new architecture is covered by appending one line there and writing no new test.
//!
//! Run one architecture: `cargo test -p amped --test wire -- ::sped::`. Run against another
//! build of the server: `AMPED_BIN=target/release/amped cargo test -p amped --test wire`.

#[path = "common/mod.rs"]
mod common;

/// Expand each test once per architecture.
///
/// ```ignore
/// arch_tests! {
///     /// doc
///     fn name(arch) { let s = Server::start(arch, &["--opt"], |root| { ... }); ... }
/// }
/// ```
/// Inside the body `arch: &[&str]` holds the command-line arguments selecting the architecture.
macro_rules! arch_tests {
    // ARCHS: module name => arguments selecting the architecture. Add architectures here.
    (@archs $tests:tt) => {
        arch_tests!(@expand $tests
            sped => ["--arch", "sped"],
            amped => ["--arch", "amped"],
            mt => ["--arch", "mt"],
            // A pool serves one connection per thread and the suite holds ~300 open at once
            // (many_idle_connections), so it runs with a pool that large; what a saturated
            // pool does is tested in archs_specific.
            pool => ["--arch", "pool", "--threads", "320"],
            mp => ["--arch", "mp", "--processes", "2"],
            amped_x2 => ["--arch", "amped", "--instances", "2"],
            uring => ["--arch", "uring"],
            staged => ["--arch", "staged"],
        );
    };
    (@expand $tests:tt $($arch:ident => $args:tt,)*) => {
        $(
            mod $arch {
                #[allow(unused_imports)]
                use super::*;
                arch_tests!(@tests $args $tests);
            }
        )*
    };
    (@tests $args:tt { $( $(#[$meta:meta])* fn $name:ident($arch:ident) $body:block )* }) => {
        $(
            $(#[$meta])*
            #[test]
            fn $name() {
                let $arch: &[&str] = &$args;
                $body
            }
        )*
    };
    ($($tests:tt)*) => {
        arch_tests!(@archs { $($tests)* });
    };
}

#[path = "wire/amped_helpers.rs"]
mod amped_helpers;
#[path = "wire/archs_specific.rs"]
mod archs_specific;
#[path = "wire/caching_staleness.rs"]
mod caching_staleness;
#[path = "wire/cli.rs"]
mod cli;
#[path = "wire/conditional_range.rs"]
mod conditional_range;
#[path = "wire/debox.rs"]
mod debox;
#[path = "wire/error_pages.rs"]
mod error_pages;
#[path = "wire/framing.rs"]
mod framing;
#[path = "wire/limits_timeouts.rs"]
mod limits_timeouts;
#[path = "wire/listeners.rs"]
mod listeners;
#[path = "wire/memory_bounds.rs"]
mod memory_bounds;
#[path = "wire/metadata_lane.rs"]
mod metadata_lane;
#[path = "wire/metrics.rs"]
mod metrics;
#[path = "wire/observability.rs"]
mod observability;
#[path = "wire/operator.rs"]
mod operator;
#[path = "wire/page_yield.rs"]
mod page_yield;
#[path = "wire/paths_security.rs"]
mod paths_security;
#[path = "wire/precompressed.rs"]
mod precompressed;
#[path = "wire/protocol.rs"]
mod protocol;
#[path = "wire/read_path.rs"]
mod read_path;
#[path = "wire/real_client.rs"]
mod real_client;
#[path = "wire/reliability.rs"]
mod reliability;
#[path = "wire/response_headers.rs"]
mod response_headers;
#[path = "wire/slow_log.rs"]
mod slow_log;
#[path = "wire/staged_specific.rs"]
mod staged_specific;
#[path = "wire/tls.rs"]
mod tls;
#[path = "wire/uring_specific.rs"]
mod uring_specific;
