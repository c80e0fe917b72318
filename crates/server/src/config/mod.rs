//! Configuration: command line and TOML file merged, validated and resolved in one step into
//! a [`Config`] the rest of the server reads and never second-guesses.

pub mod cli;
mod listen;
mod live;
pub mod memory;
pub mod response;

use crate::client_limits::Rate;
use crate::errlog::Level;
use amped_http::Limits;
use amped_sys::privileges::{Identity, lookup_group, lookup_user};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use cli::Args;
pub use listen::ListenAddr;
pub use live::Live;
pub use response::ResponseOptions;

/// The concurrency architectures. Each drives the same request pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// One event loop; blocking disk work runs inline (Flash-SPED).
    Sped,
    /// One event loop plus helper threads for every operation that may block on disk.
    Amped,
    /// A thread per connection (Flash-MT).
    Mt,
    /// A fixed pool of threads taking connections from a bounded queue.
    Pool,
    /// Worker processes sharing the listening socket (Flash-MP, Apache prefork).
    Mp,
    /// An io_uring event loop.
    Uring,
    /// Stages with their own queues and controller-sized thread pools (SEDA's Haboob).
    Staged,
}

impl Arch {
    /// Whether this architecture's cold reads ask the disk ahead themselves by default instead
    /// of leaving it to the kernel (`--kernel-read-ahead off --fill-ahead-after 0`): AMPED's,
    /// whose helpers' fills then read every byte once and overlap a transfer's next read with
    /// its send (heavy-tailed log: +5–9 % on the IOPS cap, +12–34 % on the SSD-like model,
    /// p95 −40 % on the one-arm disk; docs/BENCHMARKS.md §3b, sessions 14–15). Not io_uring's,
    /// whose large requests come from the kernel's windows (−24–28 % on the IOPS cap without
    /// them), nor the others', whose reads the pair was not measured with.
    pub fn asks_ahead_itself(self) -> bool {
        matches!(self, Arch::Amped)
    }

    /// Whether the kernel reads ahead of cold reads by default (`--kernel-read-ahead`): not
    /// where the architecture asks ahead itself, nor under `staged`, whose fills the kernel's
    /// windows (8 MiB on the lab's disk) made read 1.14–1.21× the bytes it sent on the
    /// heavy-tailed log under the IOPS cap; without them 0.94–0.95× and +23 % Mb/s
    /// (docs/BENCHMARKS.md §3b, session 18; `--fill-ahead-after` keeps its 2000 there).
    pub fn kernel_reads_ahead(self) -> bool {
        !self.asks_ahead_itself() && self != Arch::Staged
    }

    /// `--share-large-reads`'s default here: [`DEFAULT_SHARE_LARGE_READS`], except under
    /// `uring`, where sharing cost 17 % on the crowd log (its reads through the page cache
    /// are ~0.3 MB where its direct reads are ~1.2 MB, and the IOPS cap counts requests;
    /// docs/BENCHMARKS.md §3b, session 30): 0 there.
    pub fn shares_large_reads_from(self) -> u32 {
        if self == Arch::Uring { 0 } else { DEFAULT_SHARE_LARGE_READS }
    }

    /// All architectures, in the order the docs list them.
    pub const ALL: [Arch; 7] =
        [Arch::Sped, Arch::Amped, Arch::Mt, Arch::Pool, Arch::Mp, Arch::Uring, Arch::Staged];

    /// The `--arch` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sped => "sped",
            Arch::Amped => "amped",
            Arch::Mt => "mt",
            Arch::Pool => "pool",
            Arch::Mp => "mp",
            Arch::Uring => "uring",
            Arch::Staged => "staged",
        }
    }

    fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether connections are served by an event loop on a non-blocking listener.
    pub fn is_event_driven(self) -> bool {
        matches!(self, Arch::Sped | Arch::Amped | Arch::Uring | Arch::Staged)
    }

    /// Whether HTTPS (`--tls-cert`) is served: by the epoll event loops (through the TLS
    /// transport) and the io_uring loop (from its buffers).
    pub fn speaks_tls(self) -> bool {
        matches!(self, Arch::Sped | Arch::Amped | Arch::Staged | Arch::Uring)
    }

    /// Whether `--instances` applies (independent event loops on one port). Not `staged`:
    /// its stages and their controllers are one per server, observed as one in the stats.
    pub fn takes_instances(self) -> bool {
        matches!(self, Arch::Sped | Arch::Amped | Arch::Uring)
    }
}

/// How a file chunk found not in the page cache reaches the socket (the loop never waits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// A helper splices the chunk from the file into a pipe (waiting for the disk); the loop
    /// splices it from the pipe into the socket. The pipe holds the pages, so memory pressure
    /// cannot evict them in between and nothing is read twice. Where the bytes are copied
    /// anyway (`--no-zero-copy`, TLS) or no pipe can be had, [`ReadPath::Copy`] instead.
    Pipe,
    /// A helper reads the chunk (bringing it into the page cache) and the loop then
    /// `sendfile`s it, hoping the pages are still there (Flash's and New Flash's way).
    ReadAhead,
    /// A helper reads the chunk into a buffer of the response; the loop writes the buffer to
    /// the socket. One copy, but no page-cache page stays held once the read returns (a pipe
    /// or a socket buffer holding file pages keeps them from reclaim), as with io_uring.
    Copy,
}

impl ReadPath {
    /// The `--read-path` spellings.
    pub const NAMES: [(&'static str, ReadPath); 3] =
        [("pipe", ReadPath::Pipe), ("read-ahead", ReadPath::ReadAhead), ("copy", ReadPath::Copy)];

    fn parse(s: &str) -> Option<ReadPath> {
        by_name(&Self::NAMES, s)
    }
}

/// How many cold reads may be at the disk at once (`--disk-concurrency`; see
/// `arch/disk_concurrency.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskBound {
    /// This many.
    Fixed(usize),
    /// `--helpers`, deepened up to four times as many while a doubling moves more (the
    /// default).
    Auto,
}

/// How many threads serve AMPED's metadata lane (`--metadata-helpers`; see
/// `arch/metadata_lane.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataHelpers {
    /// As many as `--helpers`, fixed.
    AsHelpers,
    /// This many, fixed.
    Fixed(usize),
    /// From `--helpers`, growing while jobs wait, up to `max` (`--metadata-helpers-max`).
    Auto {
        /// The most threads the lane may have.
        max: usize,
    },
}

/// Whether the metadata lane adapts when `--metadata-helpers` is not given: it does, since
/// the adaptive lane (with its slow-service condition) measured equal on the one-arm disk and
/// the IOPS cap and better after a cold start on the SSD-like disk (docs/BENCHMARKS.md §3b,
/// session 8). `false` makes the fixed `--helpers` lane the default again.
const METADATA_LANE_ADAPTS_BY_DEFAULT: bool = true;

/// `--fill-ahead`'s default: a fill of a transfer under way long enough asks the disk for its
/// whole megabyte at once (seven pieces after the first). With it the heavy-tailed trace over
/// the one-arm disk had no request unanswered in seven rounds and its longest answer at
/// ~21 s, against one unanswered in three of five rounds and ~28–30 s without; the SPECweb-like
/// cold start within ~1 % (docs/BENCHMARKS.md §3b, session 10).
const FILL_AHEAD: u64 = 7;
/// `--fill-ahead-after`'s default but under AMPED ([`Arch::asks_ahead_itself`]): only
/// transfers under way this long ask ahead, so a new response's first fill does not put its
/// reads ahead of others'.
const FILL_AHEAD_AFTER: Duration = Duration::from_secs(2);

impl MetadataHelpers {
    /// Parses `--metadata-helpers` (`auto` or N) and `--metadata-helpers-max` against
    /// `--helpers`.
    fn resolve(
        given: Option<&str>,
        max: Option<usize>,
        helpers: usize,
    ) -> Result<MetadataHelpers, ConfigError> {
        if let Some(m) = max
            && !(helpers..=1024).contains(&m)
        {
            return err(format!(
                "--metadata-helpers-max {m} is not in --helpers ({helpers})..=1024"
            ));
        }
        let auto = MetadataHelpers::Auto { max: max.unwrap_or(helpers.saturating_mul(4)) };
        match given {
            None if max.is_none() && !METADATA_LANE_ADAPTS_BY_DEFAULT => {
                Ok(MetadataHelpers::AsHelpers)
            }
            None | Some("auto") => Ok(auto),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) && max.is_none() => Ok(MetadataHelpers::Fixed(n)),
                Ok(n) if (1..=1024).contains(&n) => {
                    err("--metadata-helpers-max needs --metadata-helpers auto")
                }
                _ => err(format!("--metadata-helpers '{s}' is not auto or 1..=1024")),
            },
        }
    }
}

/// The order in which the read lane serves chunks of transfers under way (new requests and
/// transfers under way are served in turn either way; see `arch/read_lane.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferOrder {
    /// Each transfer's next chunk queues behind the chunks already waiting: transfers share
    /// the lane's turns round-robin, whatever their age or size.
    Fair,
    /// The chunk of the response that began first goes first.
    Oldest,
}

impl TransferOrder {
    /// The `--transfer-order` spellings.
    pub const NAMES: [(&'static str, TransferOrder); 2] =
        [("fair", TransferOrder::Fair), ("oldest", TransferOrder::Oldest)];

    fn parse(s: &str) -> Option<TransferOrder> {
        by_name(&Self::NAMES, s)
    }
}

/// The value spelled `s` in a table of option spellings.
fn by_name<T: Copy>(names: &[(&str, T)], s: &str) -> Option<T> {
    names.iter().find(|(n, _)| *n == s).map(|&(_, v)| v)
}

/// The bounds within which `staged`'s controllers size each stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageLimits {
    /// Jobs a stage queue holds; a request finding the queue full is answered 503.
    pub queue: usize,
    /// Most threads the thread-pool controller gives one stage (it starts with one).
    pub threads_max: usize,
    /// Most jobs a stage thread takes per turn (the batching controller works below it).
    pub batch_max: usize,
}

/// Where the access log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLog {
    /// No access log.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to a file.
    File(PathBuf),
}

/// What an access-log line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// Combined Log Format.
    Combined,
    /// Combined Log Format plus the request time in seconds.
    CombinedTime,
}

/// Where the error log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorLog {
    /// No error log.
    Off,
    /// Standard error (the default).
    Stderr,
    /// Appended to a file.
    File(PathBuf),
}

/// `--direct-io-above`'s least default: one huge page (2 MiB), a direct trip's size. Below it
/// a file would take one request around the page cache where the kernel reads it in one too.
pub const DIRECT_IO_LEAST: u64 = amped_sys::direct::HUGE as u64;

/// `--direct-io-above`'s default where the memory to cache files in is unknown.
pub const DIRECT_IO_UNKNOWN_MEMORY: u64 = 8 << 20;

/// `--share-large-reads`'s default: a large file eight or more responses read from the disk at
/// once goes through the page cache. Two and four at once lost 16–46 % on a heavy-tailed log
/// (its large files are not asked for close enough in time for their pages to be shared);
/// eight was level there and took a log with three popular 40 MB downloads out of its bad
/// state (docs/BENCHMARKS.md §3b, session 30).
pub const DEFAULT_SHARE_LARGE_READS: u32 = 8;

/// `--direct-io-above`'s default with `memory` bytes to cache files in ([`memory::available`]):
/// a 32nd of it, at least [`DIRECT_IO_LEAST`]. With more memory, larger files stay cached
/// until they are asked for again, and reading them around the cache would read them again
/// each time. On the heavy-tailed log under the IOPS cap (docs/BENCHMARKS.md §3b, session 21,
/// direct trips a whole huge page from the first): with 128 MiB, 4 MiB moved 1.29–1.39× what
/// 8 MiB did, 2 MiB and 1 MiB less than 4; with 1 GiB, 32 MiB moved 1.05–1.10× what 8 MiB did
/// and 1.16–1.19× what 4 MiB did (session 18: 64 MiB less than 32).
pub fn default_direct_io_above(memory: Option<u64>) -> u64 {
    memory.map_or(DIRECT_IO_UNKNOWN_MEMORY, |m| (m / 32).max(DIRECT_IO_LEAST))
}

/// Which of Flash's optimizations are on (each can be switched off to measure its impact).
#[derive(Clone, Copy, Debug)]
pub struct Optimizations {
    /// Pathname-translation cache.
    pub path_cache: bool,
    /// Response-header cache.
    pub header_cache: bool,
    /// File cache (open descriptors, small bodies in memory).
    pub file_cache: bool,
    /// sendfile for bodies (otherwise read + write).
    pub zero_copy: bool,
    /// Page-cache residency test before sending file data from an event loop.
    pub residency_test: bool,
    /// What happens to a chunk the residency test finds cold.
    pub read_path: ReadPath,
    /// Cold chunks of files of at least this many bytes are read around the page cache
    /// (`--direct-io-above`; 0: never).
    pub direct_io_above: u64,
}

/// The resolved, validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Canonical document root (as resolved at start-up; see `root_link`).
    pub root: PathBuf,
    /// The root as given, when it leads through a symlink (`current -> releases/v2`): it is
    /// resolved again by every translation, so switching the link is seen within a second.
    pub root_link: Option<PathBuf>,
    /// Listening addresses (at least one; systemd's sockets replace them when amped is
    /// socket-activated).
    pub listen: Vec<ListenAddr>,
    /// `Server` header value (`None`: no header).
    pub server_header: Option<String>,
    /// Concurrency architecture.
    pub arch: Arch,
    /// AMPED helper threads.
    pub helpers: usize,
    /// Pool threads.
    pub threads: usize,
    /// Pool queue capacity (connections waiting for a thread).
    pub queue: usize,
    /// MP worker processes.
    pub processes: usize,
    /// `staged`: the stages' queue capacity, thread ceiling and batch ceiling.
    pub stages: StageLimits,
    /// Event-loop instances on one port.
    pub instances: usize,
    /// Pin loops/processes to CPUs.
    pub pin: bool,
    /// Optimization switches.
    pub opt: Optimizations,
    /// Path-cache capacity (entries).
    pub path_cache_entries: usize,
    /// File-cache capacity (open descriptors).
    pub file_cache_entries: usize,
    /// File-cache budget for in-memory bodies (bytes).
    pub file_cache_bytes: u64,
    /// Largest file kept in memory.
    pub small_file_bytes: u64,
    /// Under memory pressure, files larger than this yield their pages once sent (0: never).
    pub page_yield_above: u64,
    /// The read lane's order for chunks of transfers under way.
    pub transfer_order: TransferOrder,
    /// Transfers under way reading at once in AMPED's read lane (`--transfers-at-once`; 0:
    /// any number).
    pub transfers_at_once: usize,
    /// Files smaller than this keep the kernel's read-ahead of cold reads
    /// (`--kernel-read-ahead`: `on` is `u64::MAX`, `off` 0); larger ones are read only by the
    /// server's own fills and ask-ahead.
    pub kernel_read_ahead_below: u64,
    /// Direct reads stop while the disk's bytes, not its requests, bind
    /// (`--disk-charge-test`, [`crate::arch::disk_charge`]).
    pub disk_charge_test: bool,
    /// Only refaults are evidence of memory pressure (`--refault-test`,
    /// [`crate::cache::refaults`]); off: every miss.
    pub refault_test: bool,
    /// A large file at least half cached is read through the page cache
    /// (`--keep-cached-large`, [`crate::cache::pages`]).
    pub keep_cached_large: bool,
    /// A large file at least this many responses read from the disk at once is read through
    /// the page cache (`--share-large-reads`, [`crate::cache::pages`]; 0: never).
    pub share_large_reads: u32,
    /// A pipe fill moves pages through a huge-page mapping of the file, which reads whole
    /// 2 MiB blocks (`--fill-blocks`).
    pub fill_blocks: bool,
    /// Further 128 KiB pieces a pipe fill asks the disk for at once (0: none).
    pub fill_ahead: u64,
    /// Only transfers under way at least this long ask ahead (`--fill-ahead-after`).
    pub fill_ahead_after: Duration,
    /// Transfers off a block device do not ask ahead while the disk has time to spare and is
    /// slow (`--fill-ahead-yields`, [`crate::disk::ask_ahead::yields`]).
    pub fill_ahead_yields: bool,
    /// Bytes a cold response's first trip through the disk reads (`--first-fill`).
    pub first_fill: u64,
    /// Cold reads at the disk at once (`--disk-concurrency`).
    pub disk_concurrency: DiskBound,
    /// Threads of AMPED's metadata lane (`--metadata-helpers`, `--metadata-helpers-max`).
    pub metadata_helpers: MetadataHelpers,
    /// A resolve of a URL path already in the metadata lane follows that one
    /// (`--no-resolve-coalescing` turns it off).
    pub coalesce_resolves: bool,
    /// Staleness bound of every cache: metadata older than this is revalidated.
    pub revalidate_after: Duration,
    /// The options a reload changes while serving (timeouts, body limit): read them through
    /// [`Config::header_timeout`] and its siblings.
    pub live: Arc<Live>,
    /// Connection cap (per loop/process).
    pub max_connections: usize,
    /// Request-head limits.
    pub limits: Limits,
    /// Access-log destination.
    pub access_log: AccessLog,
    /// Access-log line format.
    pub access_log_format: AccessLogFormat,
    /// Error-log destination.
    pub error_log: ErrorLog,
    /// Least important error-log lines kept.
    pub log_level: Level,
    /// Serve dotfiles.
    pub dotfiles: bool,
    /// Follow symlinks leading outside the root.
    pub follow_outside_symlinks: bool,
    /// Directory listings.
    pub listing: bool,
    /// URL path of the stats endpoint.
    pub stats_path: Option<String>,
    /// Address of the separate stats listener.
    pub stats_listen: Option<std::net::SocketAddr>,
    /// URL path of the Prometheus metrics.
    pub metrics_path: Option<String>,
    /// The slow-request log (`--slow-log`), if on.
    pub slow_log: Option<SlowLogOptions>,
    /// The DeBox profile (`--debox`), if on.
    pub debox: Option<DeboxOptions>,
    /// Inherited listener descriptors (mp worker processes; empty elsewhere).
    pub worker_fds: Vec<i32>,
    /// Response features: pre-compressed variants, headers, error pages, SPA fallback.
    pub response: ResponseOptions,
    /// Inherited shared-counters descriptor (mp worker processes).
    pub stats_fd: Option<i32>,
    /// This mp worker's index (0 in every other process).
    pub worker_index: usize,
    /// Who to serve as once the listener is bound (`--user`/`--group`).
    pub run_as: Option<Identity>,
    /// Directory to chroot into before switching user; `root` is then given inside it.
    pub chroot: Option<PathBuf>,
    /// Serve as root without a warning.
    pub allow_root: bool,
    /// Connections one client address may have open (`None`: unlimited).
    pub max_connections_per_ip: Option<u32>,
    /// Requests a second one client address may send (`None`: unlimited).
    pub rate_limit_per_ip: Option<Rate>,
    /// HTTPS on every `listen` address (`--tls-cert`, `--tls-key`), if on.
    pub tls: Option<TlsFiles>,
    /// The plain-HTTP address whose requests are redirected to https (`--redirect-http`).
    pub redirect_http: Option<std::net::SocketAddr>,
}

/// The certificate and key files of `--tls-cert` / `--tls-key` (loaded by [`crate::tls`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain (PEM), as an absolute path: a reload re-reads it.
    pub cert: PathBuf,
    /// The private key (PEM).
    pub key: PathBuf,
}

/// Which requests the slow-request log gets (docs/DEBOX.md).
#[derive(Clone, Debug, PartialEq)]
pub struct SlowLogOptions {
    /// The log file.
    pub path: PathBuf,
    /// Requests this long or longer are logged.
    pub threshold: Duration,
    /// One in this many of the others is logged too (0: none).
    pub sample: u64,
}

/// How the DeBox profile runs (docs/DEBOX.md).
#[derive(Clone, Debug, PartialEq)]
pub struct DeboxOptions {
    /// Loop calls this long or longer are stalls.
    pub stall: Duration,
    /// Where the profile is written at exit.
    pub out: Option<PathBuf>,
}

/// A configuration error: one line for the user.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    /// The message on one line: control characters a value brought in (a config file's
    /// multi-line string, say) are shown escaped (found by the `config_file` fuzz target).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

impl Config {
    /// Whether this process is an `mp` worker (started by its parent with `--worker-fd`).
    pub fn is_mp_worker(&self) -> bool {
        !self.worker_fds.is_empty()
    }

    /// Reads the TOML file named by `--config` (if any), merges it under the command line and
    /// resolves the result.
    pub fn load(args: Args) -> Result<Config, ConfigError> {
        let args = match &args.config {
            None => args,
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .or_else(|e| err(format!("cannot read config file {}: {e}", path.display())))?;
                let file: Args = toml::from_str(&text).or_else(|e| {
                    let at = e.span().map(|s| line_column(&text, s.start)).unwrap_or_default();
                    let msg = e.message().trim_end();
                    err(format!("invalid config file {}{at}: {msg}", path.display()))
                })?;
                args.merge_file(file)
            }
        };
        Config::resolve(args)
    }

    /// Shrinks the file cache so that its open descriptors, those of `--max-connections`
    /// connections and a small reserve fit in `fd_limit` descriptors (RLIMIT_NOFILE), across
    /// every instance of the process. Returns the new capacity if it had to shrink.
    pub fn fit_descriptors(&mut self, fd_limit: u64) -> Option<usize> {
        const RESERVE: u64 = 64;
        let conns = (self.max_connections as u64).min(fd_limit / 2);
        let per_instance = fd_limit.saturating_sub(conns + RESERVE) / self.instances.max(1) as u64;
        let fit = (per_instance as usize).max(16);
        (fit < self.file_cache_entries).then(|| {
            self.file_cache_entries = fit;
            fit
        })
    }

    /// The document root as it is now: `root`, or where the root link leads at this moment.
    /// Blocking (a `realpath` walk when the root is a link): called from jobs only.
    pub fn current_root(&self) -> std::io::Result<std::borrow::Cow<'_, std::path::Path>> {
        match &self.root_link {
            None => Ok(std::borrow::Cow::Borrowed(&self.root)),
            Some(link) => std::fs::canonicalize(link).map(std::borrow::Cow::Owned),
        }
    }

    /// Validates and resolves merged arguments.
    pub fn resolve(a: Args) -> Result<Config, ConfigError> {
        let root_arg = a.root.clone().unwrap_or_else(|| PathBuf::from("."));
        let root = std::fs::canonicalize(&root_arg)
            .or_else(|e| err(format!("cannot serve {}: {e}", root_arg.display())))?;
        if !root.is_dir() {
            return err(format!("cannot serve {}: not a directory", root_arg.display()));
        }
        let listen_s = if a.listen.is_empty() { vec!["127.0.0.1:8080".into()] } else { a.listen };
        let listen = listen_s
            .iter()
            .map(|s| {
                ListenAddr::parse(s).map_or_else(
                    || {
                        err(format!(
                            "invalid --listen address '{s}' (want ADDR:PORT, :PORT or unix:PATH)"
                        ))
                    },
                    Ok,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let server_header = match a.server_header.as_deref() {
            None => Some(crate::SERVER_NAME.to_string()),
            Some("off") => None,
            Some(v) if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic() || b == b' ') => {
                return err(format!("--server-header '{v}' must be printable ASCII, or 'off'"));
            }
            Some(v) => Some(v.to_string()),
        };
        let arch_s = a.arch.as_deref().unwrap_or("amped");
        let Some(arch) = Arch::parse(arch_s) else {
            return err(format!(
                "unknown --arch '{arch_s}' (choose sped, amped, mt, pool, mp, uring or staged)"
            ));
        };
        let instances = positive("instances", a.instances.unwrap_or(1))?;
        if instances > 1 && !arch.takes_instances() {
            return err(format!(
                "--instances applies to sped, amped and uring, not {}",
                arch.name()
            ));
        }
        let (tls, redirect_http) = tls_options(&a.tls_cert, &a.tls_key, &a.redirect_http, arch)?;
        let threads = positive("threads", a.threads.unwrap_or(16))?;
        let limits = Limits {
            max_head_bytes: at_least("max-head-bytes", a.max_head_bytes.unwrap_or(8192), 256)?,
            max_uri_bytes: at_least("max-uri-bytes", a.max_uri_bytes.unwrap_or(4096), 16)?,
            max_headers: at_least("max-headers", a.max_headers.unwrap_or(64), 1)?,
        };
        let access_log = match a.access_log.as_deref() {
            None | Some("off") => AccessLog::Off,
            Some("-") => AccessLog::Stdout,
            Some("") => return err("--access-log needs a path, '-' or 'off'"),
            Some(p) => AccessLog::File(PathBuf::from(p)),
        };
        let access_log_format = match a.access_log_format.as_deref() {
            None | Some("combined") => AccessLogFormat::Combined,
            Some("combined+time") => AccessLogFormat::CombinedTime,
            Some(other) => {
                return err(format!(
                    "unknown --access-log-format '{other}' (choose combined or combined+time)"
                ));
            }
        };
        let error_log = match a.error_log.as_deref() {
            None | Some("-") => ErrorLog::Stderr,
            Some("off") => ErrorLog::Off,
            Some("") => return err("--error-log needs a path, '-' or 'off'"),
            Some(p) => ErrorLog::File(PathBuf::from(p)),
        };
        let level_s = a.log_level.as_deref().unwrap_or("notice");
        let Some(log_level) = Level::parse(level_s) else {
            return err(format!(
                "unknown --log-level '{level_s}' (choose error, warn, notice, info or debug)"
            ));
        };
        let stats_listen = match a.stats_listen.as_deref().map(ListenAddr::parse) {
            None => None,
            Some(Some(ListenAddr::Tcp(addr))) => Some(addr),
            Some(_) => return err("--stats-listen wants a TCP address (ADDR:PORT or :PORT)"),
        };
        let stats_path = match a.stats_path {
            Some(p) if !p.starts_with('/') => {
                return err(format!("--stats-path '{p}' must start with '/'"));
            }
            other => other,
        };
        let metrics_path = match a.metrics_path {
            Some(p) if !p.starts_with('/') => {
                return err(format!("--metrics-path '{p}' must start with '/'"));
            }
            Some(p) if stats_path.as_ref() == Some(&p) => {
                return err("--metrics-path and --stats-path must differ");
            }
            other => other,
        };
        let read_path = match a.read_path.as_deref() {
            None => ReadPath::Pipe,
            Some(s) => ReadPath::parse(s).ok_or_else(|| {
                ConfigError(format!("--read-path '{s}' is not one of: pipe, read-ahead"))
            })?,
        };
        let transfer_order = match a.transfer_order.as_deref() {
            None => TransferOrder::Oldest,
            Some(s) => TransferOrder::parse(s).ok_or_else(|| {
                ConfigError(format!("--transfer-order '{s}' is not one of: fair, oldest"))
            })?,
        };
        let transfers_at_once = match a.transfers_at_once {
            Some(n) if n > 1024 => {
                return err(format!("--transfers-at-once {n} is not in 0..=1024"));
            }
            n => n.unwrap_or(0),
        };
        let kernel_read_ahead_below =
            read_ahead_below(a.kernel_read_ahead.as_deref(), arch.kernel_reads_ahead())?;
        let fill_blocks = on_off("fill-blocks", a.fill_blocks.as_deref(), false)?;
        let fill_ahead_yields = on_off("fill-ahead-yields", a.fill_ahead_yields.as_deref(), true)?;
        let disk_charge_test = on_off("disk-charge-test", a.disk_charge_test.as_deref(), true)?;
        let refault_test = on_off("refault-test", a.refault_test.as_deref(), true)?;
        let keep_cached_large = on_off("keep-cached-large", a.keep_cached_large.as_deref(), true)?;
        let share_large_reads = match a.share_large_reads {
            Some(n) if n > 1024 => {
                return err(format!("--share-large-reads {n} is not in 0..=1024"));
            }
            n => n.unwrap_or(arch.shares_large_reads_from()),
        };
        let fill_ahead = match a.fill_ahead {
            Some(n) if n > 7 => return err(format!("--fill-ahead {n} is not in 0..=7")),
            n => n.unwrap_or(FILL_AHEAD),
        };
        let fill_ahead_after = match a.fill_ahead_after {
            Some(ms) if ms > 3_600_000 => {
                return err(format!("--fill-ahead-after {ms} is not in 0..=3600000 (ms)"));
            }
            Some(ms) => Duration::from_millis(ms),
            None if arch.asks_ahead_itself() => Duration::ZERO,
            None => FILL_AHEAD_AFTER,
        };
        let first_fill = match a.first_fill {
            Some(n) if !(4096..=1 << 20).contains(&n) => {
                return err(format!("--first-fill {n} is not in 4096..=1048576 (bytes)"));
            }
            n => n.unwrap_or(crate::fill_size::FIRST_FILL),
        };
        let disk_concurrency = match a.disk_concurrency.as_deref() {
            None | Some("auto") => DiskBound::Auto,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => DiskBound::Fixed(n),
                _ => return err(format!("--disk-concurrency '{s}' is not auto or 1..=1024")),
            },
        };
        let helpers = positive("helpers", a.helpers.unwrap_or(4))?;
        let metadata_helpers = MetadataHelpers::resolve(
            a.metadata_helpers.as_deref(),
            a.metadata_helpers_max,
            helpers,
        )?;
        let run_as = match &a.user {
            None => None,
            Some(user) => {
                let mut id = lookup_user(user).or_else(|e| err(format!("--user {user}: {e}")))?;
                if let Some(group) = &a.group {
                    id.gid =
                        lookup_group(group).or_else(|e| err(format!("--group {group}: {e}")))?;
                }
                Some(id)
            }
        };
        let (root, chroot, root_link) = match &a.chroot {
            None => {
                let given = std::path::absolute(&root_arg).unwrap_or_else(|_| root.clone());
                let link = (given != root).then_some(given);
                (root, None, link)
            }
            Some(dir) => {
                let (root, jail) = confine(root, dir, arch)?;
                (root, jail, None)
            }
        };
        if !a.debox && (a.debox_stall_ms.is_some() || a.debox_out.is_some()) {
            return err("--debox-stall-ms and --debox-out need --debox");
        }
        let debox = match a.debox_stall_ms.unwrap_or(1.0) {
            ms if !(0.0..1e7).contains(&ms) => {
                return err("--debox-stall-ms must be a number of milliseconds (0 or more)");
            }
            ms => a.debox.then(|| DeboxOptions {
                stall: Duration::from_secs_f64(ms / 1e3),
                out: a.debox_out.clone(),
            }),
        };
        if a.slow_log.is_none() && (a.slow_request_ms.is_some() || a.slow_sample.is_some()) {
            return err("--slow-request-ms and --slow-sample need --slow-log");
        }
        let slow_ms = a.slow_request_ms.unwrap_or(100.0);
        if !(0.0..1e9).contains(&slow_ms) {
            return err("--slow-request-ms must be a number of milliseconds (0 or more)");
        }
        let slow_log = a.slow_log.clone().map(|path| SlowLogOptions {
            path,
            threshold: Duration::from_secs_f64(slow_ms / 1e3),
            sample: a.slow_sample.unwrap_or(0),
        });
        Ok(Config {
            root,
            root_link,
            listen,
            server_header,
            arch,
            helpers,
            threads,
            queue: a.queue.unwrap_or(threads.saturating_mul(4)),
            processes: positive("processes", a.processes.unwrap_or(4))?,
            stages: StageLimits {
                queue: positive("stage-queue", a.stage_queue.unwrap_or(1024))?,
                threads_max: positive("stage-threads-max", a.stage_threads_max.unwrap_or(20))?,
                batch_max: positive("stage-batch-max", a.stage_batch_max.unwrap_or(16))?,
            },
            instances,
            pin: a.pin,
            opt: Optimizations {
                path_cache: !a.no_path_cache,
                header_cache: !a.no_header_cache,
                file_cache: !a.no_file_cache,
                zero_copy: !a.no_zero_copy,
                residency_test: !a.no_residency_test,
                read_path,
                direct_io_above: a
                    .direct_io_above
                    .unwrap_or_else(|| default_direct_io_above(memory::available())),
            },
            path_cache_entries: positive(
                "path-cache-entries",
                a.path_cache_entries.unwrap_or(32768),
            )?,
            file_cache_entries: positive(
                "file-cache-entries",
                a.file_cache_entries.unwrap_or(16384),
            )?,
            file_cache_bytes: a.file_cache_bytes.unwrap_or(32 << 20),
            small_file_bytes: a.small_file_bytes.unwrap_or(16384),
            page_yield_above: a.page_yield_above.unwrap_or(0),
            transfer_order,
            transfers_at_once,
            kernel_read_ahead_below,
            disk_charge_test,
            refault_test,
            keep_cached_large,
            share_large_reads,
            fill_blocks,
            fill_ahead,
            fill_ahead_after,
            fill_ahead_yields,
            first_fill,
            disk_concurrency,
            metadata_helpers,
            coalesce_resolves: !a.no_resolve_coalescing,
            revalidate_after: Duration::from_secs(1),
            live: Arc::new(Live::new(
                [
                    seconds("header-timeout", a.header_timeout.unwrap_or(10.0))?,
                    seconds("keepalive-timeout", a.keepalive_timeout.unwrap_or(15.0))?,
                    seconds("send-timeout", a.send_timeout.unwrap_or(30.0))?,
                    seconds("shutdown-timeout", a.shutdown_timeout.unwrap_or(10.0))?,
                ],
                a.max_discard_body.unwrap_or(65536),
            )),
            max_connections: positive("max-connections", a.max_connections.unwrap_or(10_000))?,
            limits,
            access_log,
            access_log_format,
            error_log,
            log_level,
            dotfiles: a.dotfiles,
            follow_outside_symlinks: a.follow_outside_symlinks,
            listing: a.listing,
            stats_path,
            stats_listen,
            debox,
            metrics_path,
            slow_log,
            worker_fds: a.worker_fd,
            response: ResponseOptions::resolve(&response::ResponseArgs {
                precompressed: a.precompressed.as_deref(),
                cache_control: &a.cache_control,
                add_header: &a.add_header,
                cors_origin: a.cors_origin.as_deref(),
                security_headers: a.security_headers,
                error_page: &a.error_page,
                spa_fallback: a.spa_fallback.as_deref(),
            })?,
            stats_fd: a.stats_fd,
            worker_index: a.worker_index.unwrap_or(0),
            run_as,
            chroot,
            allow_root: a.allow_root,
            max_connections_per_ip: match a.max_connections_per_ip {
                Some(0) => return err("--max-connections-per-ip must be at least 1"),
                n => n,
            },
            rate_limit_per_ip: match &a.rate_limit_per_ip {
                None => None,
                Some(r) => Some(parse_rate(r, a.rate_limit_burst)?),
            },
            tls,
            redirect_http,
        })
    }
}

/// `--tls-cert`, `--tls-key` (both or neither; the files themselves are read by
/// [`crate::tls`]) and `--redirect-http` (only with TLS), for an architecture that speaks TLS.
fn tls_options(
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
    redirect: &Option<String>,
    arch: Arch,
) -> Result<(Option<TlsFiles>, Option<std::net::SocketAddr>), ConfigError> {
    let absolute = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
    let tls = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(TlsFiles { cert: absolute(cert), key: absolute(key) }),
        (Some(_), None) => return err("--tls-cert needs --tls-key"),
        (None, Some(_)) => return err("--tls-key needs --tls-cert"),
    };
    if tls.is_some() && !arch.speaks_tls() {
        return err(format!(
            "--arch {} does not serve TLS (--tls-cert): use sped, amped, staged or uring",
            arch.name()
        ));
    }
    let redirect = match redirect.as_deref() {
        None => None,
        Some(_) if tls.is_none() => return err("--redirect-http needs --tls-cert and --tls-key"),
        Some(s) => match ListenAddr::parse(s) {
            Some(ListenAddr::Tcp(addr)) => Some(addr),
            _ => {
                return err(format!(
                    "--redirect-http '{s}' wants a TCP address (ADDR:PORT or :PORT)"
                ));
            }
        },
    };
    Ok((tls, redirect))
}

/// `:LINE:COLUMN` (1-based, columns in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> String {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!(":{line}:{column}")
}

/// `--chroot DIR`: the canonical DIR and ROOT as seen from inside it.
fn confine(
    root: PathBuf,
    dir: &std::path::Path,
    arch: Arch,
) -> Result<(PathBuf, Option<PathBuf>), ConfigError> {
    if arch == Arch::Mp {
        return err(
            "--chroot does not work with --arch mp (its workers are re-executed from the binary)",
        );
    }
    let jail =
        std::fs::canonicalize(dir).or_else(|e| err(format!("--chroot {}: {e}", dir.display())))?;
    let Ok(inside) = root.strip_prefix(&jail) else {
        return err(format!("ROOT {} is not inside --chroot {}", root.display(), jail.display()));
    };
    Ok((std::path::Path::new("/").join(inside), Some(jail)))
}

/// `R`, `R/s` or `R/m` requests, with a burst of `burst` (default: one second's worth, at
/// least 1).
fn parse_rate(text: &str, burst: Option<u32>) -> Result<Rate, ConfigError> {
    let bad = || err(format!("--rate-limit-per-ip '{text}': want R, R/s or R/m with R > 0"));
    let (number, per) = match text.split_once('/') {
        None => (text, 1.0),
        Some((n, "s")) => (n, 1.0),
        Some((n, "m")) => (n, 60.0),
        Some(_) => return bad(),
    };
    let Ok(count) = number.trim().parse::<f64>() else { return bad() };
    if !(count.is_finite() && count > 0.0) {
        return bad();
    }
    let per_second = count / per;
    let burst = match burst {
        Some(0) => return err("--rate-limit-burst must be at least 1"),
        Some(b) => f64::from(b),
        None => per_second.ceil().max(1.0),
    };
    Ok(Rate { per_second, burst })
}

/// An `on|off` option's value, `default` when it was not given.
fn on_off(name: &str, v: Option<&str>, default: bool) -> Result<bool, ConfigError> {
    match v {
        None => Ok(default),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(s) => err(format!("--{name} '{s}' is not on or off")),
    }
}

/// `--kernel-read-ahead`: `on` (every file), `off` (none) or a size (files smaller than it).
fn read_ahead_below(v: Option<&str>, default: bool) -> Result<u64, ConfigError> {
    match v {
        None => Ok(if default { u64::MAX } else { 0 }),
        Some("on") => Ok(u64::MAX),
        Some("off") => Ok(0),
        Some(s) => s.parse().or_else(|_| {
            err(format!("--kernel-read-ahead '{s}' is not on, off or a size in bytes"))
        }),
    }
}

fn positive(name: &str, v: usize) -> Result<usize, ConfigError> {
    at_least(name, v, 1)
}

fn at_least(name: &str, v: usize, min: usize) -> Result<usize, ConfigError> {
    if v < min { err(format!("--{name} must be at least {min}")) } else { Ok(v) }
}

fn seconds(name: &str, v: f64) -> Result<Duration, ConfigError> {
    if !(v.is_finite() && v > 0.0 && v < 1e7) {
        return err(format!("--{name} must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(argv: &[&str]) -> Result<Config, ConfigError> {
        let mut full = vec!["amped"];
        full.extend_from_slice(argv);
        Config::load(Args::try_parse_from(full).expect("clap accepts"))
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = parse(&["."]).unwrap();
        assert_eq!(c.listen, vec![ListenAddr::Tcp("127.0.0.1:8080".parse().unwrap())]);
        assert_eq!(c.server_header.as_deref(), Some("amped"));
        assert_eq!(c.arch, Arch::Amped);
        assert_eq!(c.helpers, 4);
        assert!(c.opt.path_cache && c.opt.header_cache && c.opt.file_cache && c.opt.zero_copy);
        assert_eq!(c.access_log, AccessLog::Off);
        assert_eq!(c.stages, StageLimits { queue: 1024, threads_max: 20, batch_max: 16 });
        assert_eq!(
            c.limits,
            Limits::default(),
            "8192-byte heads, 4096-byte lines, 64 header lines"
        );
    }

    #[test]
    fn debox_is_off_by_default_and_its_options_need_it() {
        assert_eq!(parse(&["."]).unwrap().debox, None);
        let on = parse(&[".", "--debox", "--debox-stall-ms", "0.5", "--debox-out", "p.json"]);
        let d = on.unwrap().debox.unwrap();
        assert_eq!(d.stall, Duration::from_micros(500));
        assert_eq!(d.out, Some(PathBuf::from("p.json")));
        assert_eq!(
            parse(&[".", "--debox"]).unwrap().debox.unwrap().stall,
            Duration::from_millis(1)
        );
        assert!(parse(&[".", "--debox-out", "p.json"]).unwrap_err().0.contains("need --debox"));
        assert!(parse(&[".", "--debox", "--debox-stall-ms=-1"]).is_err());
    }

    #[test]
    fn the_slow_log_is_off_by_default_and_its_options_need_it() {
        assert_eq!(parse(&["."]).unwrap().slow_log, None);
        let on =
            parse(&[".", "--slow-log", "s.log", "--slow-request-ms", "20", "--slow-sample", "8"]);
        let s = on.unwrap().slow_log.unwrap();
        assert_eq!((s.threshold, s.sample), (Duration::from_millis(20), 8));
        assert_eq!(
            parse(&[".", "--slow-log", "s"]).unwrap().slow_log.unwrap().threshold.as_millis(),
            100
        );
        assert!(parse(&[".", "--slow-sample", "2"]).unwrap_err().0.contains("need --slow-log"));
        assert!(parse(&[".", "--slow-log", "s", "--slow-request-ms=nan"]).is_err());
    }

    #[test]
    fn direct_reads_begin_at_a_32nd_of_memory_and_never_below_a_huge_page() {
        let mib = 1 << 20;
        assert_eq!(default_direct_io_above(Some(32 * mib)), 2 * mib);
        assert_eq!(default_direct_io_above(Some(128 * mib)), 4 * mib);
        assert_eq!(default_direct_io_above(Some(256 * mib)), 8 * mib);
        assert_eq!(default_direct_io_above(Some(1024 * mib)), 32 * mib);
        assert_eq!(default_direct_io_above(None), 8 * mib, "memory unknown");
        let set = parse(&[".", "--direct-io-above", "1048576"]).unwrap();
        assert_eq!(set.opt.direct_io_above, mib, "given, it is kept");
        assert!(parse(&["."]).unwrap().disk_charge_test, "direct reads watch the disk");
        assert!(!parse(&[".", "--disk-charge-test", "off"]).unwrap().disk_charge_test);
        assert!(parse(&["."]).unwrap().refault_test, "only refaults are pressure");
        assert!(!parse(&[".", "--refault-test", "off"]).unwrap().refault_test);
        assert!(parse(&[".", "--refault-test", "sometimes"]).is_err());
        assert!(parse(&["."]).unwrap().keep_cached_large);
        assert!(!parse(&[".", "--keep-cached-large", "off"]).unwrap().keep_cached_large);
        assert_eq!(parse(&["."]).unwrap().share_large_reads, 8, "shared from 8 at once");
        assert_eq!(parse(&[".", "--share-large-reads", "0"]).unwrap().share_large_reads, 0);
        let uring = parse(&[".", "--arch", "uring"]).unwrap();
        assert_eq!(
            uring.share_large_reads, 0,
            "uring's direct reads are larger than its shared ones"
        );
        assert_eq!(parse(&[".", "--share-large-reads", "4"]).unwrap().share_large_reads, 4);
        assert_eq!(parse(&["."]).unwrap().first_fill, 128 << 10, "a first trip of 128 KiB");
        assert_eq!(parse(&[".", "--first-fill", "1048576"]).unwrap().first_fill, 1 << 20);
        assert_eq!(parse(&["."]).unwrap().transfers_at_once, 0, "any number reads at once");
        assert_eq!(parse(&[".", "--transfers-at-once", "2"]).unwrap().transfers_at_once, 2);
        let e = parse(&[".", "--transfers-at-once", "5000"]).unwrap_err();
        assert!(e.to_string().contains("--transfers-at-once 5000"), "{e}");
        let bad = parse(&[".", "--disk-charge-test", "maybe"]).unwrap_err().to_string();
        assert!(bad.contains("--disk-charge-test"), "{bad}");
    }

    #[test]
    fn the_file_cache_leaves_descriptors_for_connections() {
        let mut c = parse(&["."]).unwrap();
        assert_eq!((c.path_cache_entries, c.file_cache_entries), (32768, 16384));
        assert_eq!(c.page_yield_above, 0, "the page-yield policy is off by default");
        let direct = default_direct_io_above(memory::available());
        assert_eq!(c.opt.direct_io_above, direct, "large cold files read around the cache");
        assert_eq!((c.transfer_order, c.fill_ahead), (TransferOrder::Oldest, 7));
        assert_eq!(c.disk_concurrency, DiskBound::Auto);
        assert_eq!(c.kernel_read_ahead_below, 0, "AMPED asks ahead itself unless told not to");
        assert_eq!(c.fill_ahead_after, Duration::ZERO, "from the first fill");
        let amped_on = parse(&[".", "--kernel-read-ahead", "on", "--fill-ahead-after", "2000"]);
        let amped_on = amped_on.unwrap();
        assert_eq!(amped_on.kernel_read_ahead_below, u64::MAX);
        let below = parse(&[".", "--kernel-read-ahead", "4194304"]).unwrap();
        assert_eq!(below.kernel_read_ahead_below, 4 << 20, "files under 4 MiB only");
        assert_eq!(amped_on.fill_ahead_after, Duration::from_secs(2));
        for arch in ["uring", "sped", "mt", "pool", "mp", "staged"] {
            let c = parse(&[".", "--arch", arch]).unwrap();
            let on = c.kernel_read_ahead_below == u64::MAX;
            assert_eq!(on, arch != "staged", "{arch}: the kernel reads ahead");
            assert_eq!(c.fill_ahead_after, Duration::from_secs(2), "{arch}");
            let off = parse(&[".", "--arch", arch, "--kernel-read-ahead", "off"]).unwrap();
            assert_eq!(off.kernel_read_ahead_below, 0, "{arch}");
        }
        assert!(!c.fill_blocks, "fills splice unless told to read whole blocks");
        assert!(c.fill_ahead_yields, "transfers off a block device yield to a disk with time");
        assert!(!parse(&[".", "--fill-ahead-yields", "off"]).unwrap().fill_ahead_yields);
        assert!(parse(&[".", "--fill-ahead-yields", "maybe"]).is_err());
        assert!(parse(&[".", "--fill-blocks", "on"]).unwrap().fill_blocks);
        let bound = |v: &str| parse(&[".", "--disk-concurrency", v]).unwrap().disk_concurrency;
        assert_eq!((bound("auto"), bound("3")), (DiskBound::Auto, DiskBound::Fixed(3)));
        assert_eq!(c.fit_descriptors(1 << 20), None, "plenty of descriptors: unchanged");
        assert_eq!(c.fit_descriptors(20_000), Some(20_000 - 10_000 - 64));
        let mut c = parse(&[".", "--max-connections", "100", "--instances", "2"]).unwrap();
        assert_eq!(c.fit_descriptors(1024), Some((1024 - 100 - 64) / 2));
        let mut c = parse(&["."]).unwrap();
        assert_eq!(c.fit_descriptors(1024), Some(1024 - 512 - 64), "half kept for connections");
        assert_eq!(c.fit_descriptors(10), Some(16), "never below a floor");
    }

    #[test]
    fn the_metadata_lane_adapts_by_default_and_auto_grows_to_a_maximum() {
        let c = parse(&["."]).unwrap();
        assert_eq!(c.metadata_helpers, MetadataHelpers::Auto { max: 16 }, "auto by default");
        let lane = |v: &[&str]| {
            let mut argv = vec!["."];
            argv.extend_from_slice(v);
            parse(&argv).unwrap().metadata_helpers
        };
        assert_eq!(lane(&["--metadata-helpers", "9"]), MetadataHelpers::Fixed(9));
        assert_eq!(lane(&["--metadata-helpers", "auto"]), MetadataHelpers::Auto { max: 16 });
        assert_eq!(
            lane(&["--helpers", "2", "--metadata-helpers", "auto"]),
            MetadataHelpers::Auto { max: 8 },
            "the default maximum is 4 × --helpers"
        );
        assert_eq!(
            lane(&["--metadata-helpers", "auto", "--metadata-helpers-max", "24"]),
            MetadataHelpers::Auto { max: 24 }
        );
        assert_eq!(
            lane(&["--metadata-helpers-max", "24"]),
            MetadataHelpers::Auto { max: 24 },
            "a maximum alone asks for auto"
        );
        assert_eq!(
            lane(&["--helpers", "600", "--metadata-helpers", "auto"]),
            MetadataHelpers::Auto { max: 2400 },
            "only a maximum given is held to 1024"
        );
    }

    #[test]
    fn bad_values_give_one_line_errors() {
        for (argv, needle) in [
            (vec!["--arch", "fork"], "unknown --arch"),
            (vec!["--listen", "nonsense"], "invalid --listen"),
            (vec!["--helpers", "0"], "--helpers must be at least 1"),
            (vec!["--header-timeout=-1"], "--header-timeout"),
            (vec!["/definitely/not/here"], "cannot serve"),
            (vec!["--arch", "mt", "--instances", "2"], "--instances applies"),
            (vec!["--arch", "staged", "--instances", "2"], "--instances applies"),
            (vec!["--stage-threads-max", "0"], "--stage-threads-max must be at least 1"),
            (vec!["--stage-queue", "0"], "--stage-queue must be at least 1"),
            (vec!["--stats-path", "stats"], "must start with '/'"),
            (vec!["--server-header", "a\u{7f}"], "--server-header"),
            (vec!["--max-headers", "0"], "--max-headers must be at least 1"),
            (vec!["--user", "no-such-user-amped"], "--user no-such-user-amped"),
            (vec!["--user", "root", "--group", "no-such-group-amped"], "--group no-such"),
            (vec!["--chroot", "/definitely/not/here"], "--chroot"),
            (vec!["--max-connections-per-ip", "0"], "--max-connections-per-ip must be"),
            (vec!["--rate-limit-per-ip", "ten"], "want R, R/s or R/m"),
            (vec!["--rate-limit-per-ip", "5/h"], "want R, R/s or R/m"),
            (vec!["--rate-limit-per-ip=-1"], "want R, R/s or R/m"),
            (vec!["--rate-limit-per-ip", "0/s"], "want R, R/s or R/m"),
            (vec!["--rate-limit-per-ip", "5", "--rate-limit-burst", "0"], "--rate-limit-burst"),
            (vec!["--chroot", "/tmp", "/"], "is not inside --chroot"),
            (vec!["--chroot", "/", "--arch", "mp"], "not work with --arch mp"),
            (vec!["--transfer-order", "newest"], "--transfer-order 'newest' is not one of"),
            (vec!["--fill-ahead", "8"], "--fill-ahead 8 is not in 0..=7"),
            (vec!["--kernel-read-ahead", "yes"], "'yes' is not on, off or a size in bytes"),
            (vec!["--share-large-reads", "1025"], "--share-large-reads 1025 is not in 0..=1024"),
            (vec!["--fill-blocks", "2"], "--fill-blocks '2' is not on or off"),
            (vec!["--fill-ahead-after", "3600001"], "--fill-ahead-after 3600001 is not in"),
            (vec!["--first-fill", "4095"], "--first-fill 4095 is not in 4096..=1048576"),
            (vec!["--first-fill", "2097152"], "--first-fill 2097152 is not in 4096..=1048576"),
            (vec!["--disk-concurrency", "0"], "--disk-concurrency '0' is not auto or 1..=1024"),
            (vec!["--disk-concurrency", "many"], "--disk-concurrency 'many' is not auto"),
            (vec!["--metadata-helpers", "0"], "--metadata-helpers '0' is not auto or 1..=1024"),
            (vec!["--metadata-helpers", "auto:8"], "--metadata-helpers 'auto:8' is not auto"),
            (
                vec!["--metadata-helpers", "auto", "--metadata-helpers-max", "3"],
                "--metadata-helpers-max 3 is not in --helpers (4)..=1024",
            ),
            (
                vec!["--metadata-helpers", "6", "--metadata-helpers-max", "8"],
                "--metadata-helpers-max needs --metadata-helpers auto",
            ),
        ] {
            let e = parse(&argv).unwrap_err().to_string();
            assert!(e.contains(needle), "{argv:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn the_sample_deployment_config_is_valid() {
        let dir = tempfile::tempdir().unwrap();
        let text = include_str!("../../../../docs/deploy/amped.toml");
        let mut args: Args = toml::from_str(text).expect("docs/deploy/amped.toml parses");
        args.root = Some(dir.path().to_path_buf());
        let c = Config::resolve(args).expect("and resolves");
        assert_eq!(c.listen.len(), 2);
        assert_eq!(c.access_log_format, AccessLogFormat::CombinedTime);
    }

    #[test]
    fn client_limits_are_off_by_default_and_parse() {
        let c = parse(&["."]).unwrap();
        assert_eq!((c.max_connections_per_ip, c.rate_limit_per_ip), (None, None));
        let c = parse(&["--max-connections-per-ip", "4", "--rate-limit-per-ip", "10/s"]).unwrap();
        assert_eq!(c.max_connections_per_ip, Some(4));
        assert_eq!(c.rate_limit_per_ip, Some(Rate { per_second: 10.0, burst: 10.0 }));
        let c = parse(&["--rate-limit-per-ip", "30/m", "--rate-limit-burst", "5"]).unwrap();
        assert_eq!(c.rate_limit_per_ip, Some(Rate { per_second: 0.5, burst: 5.0 }));
        let c = parse(&["--rate-limit-per-ip", "0.5"]).unwrap();
        assert_eq!(c.rate_limit_per_ip, Some(Rate { per_second: 0.5, burst: 1.0 }));
    }

    #[test]
    fn user_group_and_chroot_resolve() {
        let c = parse(&["--user", "0", "--group", "0", "--chroot", "/", "."]).unwrap();
        assert_eq!(c.run_as, Some(Identity { uid: 0, gid: 0 }));
        assert_eq!(c.chroot.as_deref(), Some(std::path::Path::new("/")));
        assert_eq!(c.root, std::fs::canonicalize(".").unwrap(), "inside / it is the same path");
        let c = parse(&["."]).unwrap();
        assert_eq!((c.run_as, c.chroot, c.allow_root), (None, None, false), "off by default");
        assert_eq!(c.root_link, None, "a plain directory is resolved once");
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("v1")).unwrap();
        std::os::unix::fs::symlink("v1", d.path().join("current")).unwrap();
        let c = parse(&[d.path().join("current").to_str().unwrap()]).unwrap();
        assert_eq!(c.root_link.as_deref(), Some(d.path().join("current").as_path()));
        assert_eq!(c.current_root().unwrap(), std::fs::canonicalize(d.path().join("v1")).unwrap());
    }

    #[test]
    fn tls_options_from_the_file_or_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("amped.toml");
        std::fs::write(
            &file,
            "tls_cert = \"/etc/amped/cert.pem\"\ntls_key = \"k.pem\"\nredirect_http = \":0\"\n",
        )
        .unwrap();
        let c = parse(&["--config", file.to_str().unwrap()]).unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(tls.cert, PathBuf::from("/etc/amped/cert.pem"));
        assert!(tls.key.is_absolute() && tls.key.ends_with("k.pem"), "made absolute for reloads");
        assert_eq!(c.redirect_http, Some("0.0.0.0:0".parse().unwrap()));
        let c = parse(&["--config", file.to_str().unwrap(), "--tls-key", "/other.pem"]).unwrap();
        assert_eq!(c.tls.unwrap().key, PathBuf::from("/other.pem"), "the command line wins");
        assert_eq!(parse(&["."]).unwrap().tls, None);
        let e = parse(&["--arch", "pool", "--tls-cert", "a", "--tls-key", "b"]).unwrap_err();
        assert!(e.0.contains("--arch pool does not serve TLS"), "{e}");
        let e = parse(&["--tls-cert", "a", "--tls-key", "b", "--redirect-http", "unix:/x"]);
        assert!(e.unwrap_err().0.contains("wants a TCP address"));
    }

    #[test]
    fn config_file_fills_gaps_and_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("amped.toml");
        std::fs::write(
            &file,
            "arch = \"sped\"\nhelpers = 7\nheader_timeout = 1.5\nno_path_cache = true\n",
        )
        .unwrap();
        let c = parse(&["--config", file.to_str().unwrap(), "--helpers", "2"]).unwrap();
        assert_eq!(c.arch, Arch::Sped);
        assert_eq!(c.helpers, 2);
        assert_eq!(c.header_timeout(), Duration::from_millis(1500));
        assert!(!c.opt.path_cache);
        std::fs::write(
            &file,
            "cache_control = [\"/assets/*=max-age=60\"]\nadd_header = [\"X-A: 1\"]\n\
             precompressed = \"gz\"\nsecurity_headers = true\n",
        )
        .unwrap();
        let c = parse(&["--config", file.to_str().unwrap(), "--add-header", "X-B: 2"]).unwrap();
        assert_eq!(c.response.cache_control, [("/assets/*".into(), "max-age=60".into())]);
        assert!(c.response.common_headers.starts_with(b"X-B: 2\r\nX-Content-Type-Options"));
        assert_eq!(c.response.precompressed, [amped_http::Encoding::Gzip]);
        std::fs::write(&file, "listen = [\":0\", \"unix:/tmp/a.sock\"]\n").unwrap();
        let c = parse(&["--config", file.to_str().unwrap()]).unwrap();
        assert_eq!(c.listen.len(), 2);
        std::fs::write(&file, "arch = \"\"\"ed\"\nhad\"\"\"\n").unwrap();
        let e = parse(&["--config", file.to_str().unwrap()]).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown --arch 'ed\"\\nhad' (choose sped, amped, mt, pool, mp, uring or staged)"
        );
        std::fs::write(&file, "bogus_key = 1\n").unwrap();
        let e = parse(&["--config", file.to_str().unwrap()]).unwrap_err().to_string();
        assert!(e.contains("invalid config file"), "{e}");
        assert!(e.contains("amped.toml:1:1: unknown field `bogus_key`"), "{e}");
        std::fs::write(&file, "arch = \"sped\"\nhelpers = \"many\"\n").unwrap();
        let e = parse(&["--config", file.to_str().unwrap()]).unwrap_err().to_string();
        assert!(e.contains("amped.toml:2:11: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
