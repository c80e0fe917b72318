//! The command line as the user typed it ("low-level" arguments, ripgrep's term): every
//! option is optional here so a TOML file can fill what the command line leaves out.

use clap::Parser;
use serde::{Deserialize, Deserializer};
use std::path::PathBuf;

/// amped: a Flash-style static web server (SPED, AMPED, MT, pool, MP, io_uring, staged).
#[derive(Parser, Debug, Default, Clone, Deserialize)]
#[command(name = "amped", version, about, long_about = None)]
#[serde(deny_unknown_fields, default)]
pub struct Args {
    /// Directory to serve (default: the current directory).
    pub root: Option<PathBuf>,
    /// Address to listen on; repeat for several: ADDR:PORT, [V6]:PORT, :PORT or PORT (every
    /// IPv4 interface), unix:PATH [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    #[serde(deserialize_with = "one_or_many")]
    pub listen: Vec<String>,
    /// Read options from a TOML file (keys: the long option names in snake_case); the
    /// command line wins.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Concurrency architecture: sped, amped, mt, pool, mp, uring, staged [default: amped].
    #[arg(long)]
    pub arch: Option<String>,
    /// AMPED helper threads per lane (metadata, reads) doing the blocking disk work [default: 4].
    #[arg(long, value_name = "N")]
    pub helpers: Option<usize>,
    /// Worker threads of the `pool` architecture [default: 16].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Accepted connections waiting for a `pool` thread; beyond that, new connections are
    /// answered 503 [default: 4 × threads].
    #[arg(long, value_name = "N")]
    pub queue: Option<usize>,
    /// Worker processes of the `mp` architecture [default: 4].
    #[arg(long, value_name = "N")]
    pub processes: Option<usize>,
    /// `staged`: jobs each stage queue holds; a request finding it full is answered 503
    /// [default: 1024].
    #[arg(long, value_name = "N")]
    pub stage_queue: Option<usize>,
    /// `staged`: most threads the controller gives one stage (each starts with one)
    /// [default: 20].
    #[arg(long, value_name = "N")]
    pub stage_threads_max: Option<usize>,
    /// `staged`: most jobs a stage thread takes per turn (the batching controller's ceiling)
    /// [default: 16].
    #[arg(long, value_name = "N")]
    pub stage_batch_max: Option<usize>,
    /// Independent event loops on one port (SO_REUSEPORT), for sped/amped/uring [default: 1].
    #[arg(long, value_name = "N")]
    pub instances: Option<usize>,
    /// Pin each event loop (or process) to its own CPU.
    #[arg(long)]
    pub pin: bool,
    /// Turn off the pathname-translation cache (Flash §5.2).
    #[arg(long)]
    pub no_path_cache: bool,
    /// Turn off the response-header cache (Flash §5.3).
    #[arg(long)]
    pub no_header_cache: bool,
    /// Turn off the file cache of open descriptors and small bodies (Flash §5.4).
    #[arg(long)]
    pub no_file_cache: bool,
    /// Send bodies with read+write instead of sendfile.
    #[arg(long)]
    pub no_zero_copy: bool,
    /// Skip the page-cache residency test (Flash §5.7): the event loop may then block on disk.
    #[arg(long)]
    pub no_residency_test: bool,
    /// How a chunk the residency test finds cold reaches the socket: `pipe` (a helper splices
    /// it into a pipe that holds its pages until the loop splices them out), `read-ahead`
    /// (a helper reads it, then the loop sendfiles it) or `copy` (a helper reads it into a
    /// buffer the loop writes to the socket: one copy, no page held) [default: pipe].
    #[arg(long, value_name = "PATH")]
    pub read_path: Option<String>,
    /// While memory is short (a smaller file was found cold within the last second), cold
    /// chunks of files of at least this many bytes on a block device are read by a helper with
    /// `O_DIRECT` into a huge page and written to the socket from it: up to 2 MiB per disk
    /// request, nothing read ahead, the page cache left to smaller files; 0 = never
    /// [default: a 32nd of the memory cgroup's limit, or of the machine's memory, at least
    /// 2 MiB; 8 MiB where neither is known].
    #[arg(long, value_name = "BYTES")]
    pub direct_io_above: Option<u64>,
    /// Whether direct reads (`--direct-io-above`) wait for the disk to show that its requests,
    /// not its bytes, run out first: `on` watches the block device's own read counts while
    /// cold reads wait for it, and while its bytes per second stay level and its requests
    /// vary (a volume whose bandwidth binds) large files go through the page cache, where a
    /// second request for them finds them; `off` reads them around it whenever memory is short
    /// [default: on].
    #[arg(long, value_name = "on|off")]
    pub disk_charge_test: Option<String>,
    /// Whether only a refault is evidence of memory pressure for the page policy (direct reads,
    /// page yielding): `on`, a file found cold that had been in the page cache before (sent to
    /// its end, or its small body read) and was evicted since; `off`, any file found cold, also
    /// one read for the first time [default: on].
    #[arg(long, value_name = "on|off")]
    pub refault_test: Option<String>,
    /// Whether a large file at least half in the page cache has its cold chunks read through
    /// it, not around it (`--direct-io-above`), so that a large file asked for often enough to
    /// stay cached stays whole [default: on].
    #[arg(long, value_name = "on|off")]
    pub keep_cached_large: Option<String>,
    /// A large file that at least this many responses are reading from the disk at once has
    /// its cold chunks read through the page cache, not around it (`--direct-io-above`), so the
    /// transfers share its pages instead of each reading the whole file (0: never) [default: 8;
    /// 0 under --arch uring].
    #[arg(long, value_name = "N")]
    pub share_large_reads: Option<u32>,
    /// The order in which the read lane serves chunks of transfers under way: `oldest` (the
    /// response that began first goes first) or `fair` (each transfer's next chunk queues
    /// behind the others': a nearly finished response is not kept behind a long one, but long
    /// ones take longer) [default: oldest].
    #[arg(long, value_name = "ORDER")]
    pub transfer_order: Option<String>,
    /// At most this many transfers under way read from the disk at once, the others waiting
    /// in --transfer-order (AMPED's read lane; 0: any number) [default: 0].
    #[arg(long, value_name = "N")]
    pub transfers_at_once: Option<usize>,
    /// Whether the kernel reads ahead of what a cold chunk's read asks for: `on`, or `off`
    /// (`posix_fadvise(RANDOM)` on every file served from its descriptor: the disk reads only
    /// the fills and ask-ahead the server issues, so no page is read ahead and reclaimed
    /// unused under memory pressure), or a size in bytes: files smaller than it keep the
    /// kernel's read-ahead and larger ones are read as with `off` [default: off under --arch
    /// amped, whose fills ask ahead themselves (--fill-ahead-after 0), and under staged; on
    /// otherwise].
    #[arg(long, value_name = "on|off|BYTES")]
    pub kernel_read_ahead: Option<String>,
    /// Whether a pipe fill moves the file's pages through a huge-page mapping of it
    /// (`vmsplice`) instead of `splice`: a fault reads the whole 2 MiB block around it, which a
    /// file system with large folios reads as one request where a splice's read and advice
    /// take two to four, and starts no read-ahead beyond it [default: off].
    #[arg(long, value_name = "on|off")]
    pub fill_blocks: Option<String>,
    /// A pipe fill asks the disk for up to this many further 128 KiB pieces at once instead of
    /// one after another (0-7): a large transfer then holds a deeper share of a busy disk's
    /// queue, at the cost of requests waiting behind it [default: 7].
    #[arg(long, value_name = "PIECES")]
    pub fill_ahead: Option<u64>,
    /// Only transfers that began at least this many milliseconds ago ask ahead: the few
    /// longest transfers get the deeper share of the disk, new and short responses do not
    /// queue behind it (0: every fill) [default: 0 under --arch amped, 2000 otherwise].
    #[arg(long, value_name = "MS")]
    pub fill_ahead_after: Option<u64>,
    /// Whether a transfer off a block device (FUSE, NFS) holds back its ask-ahead while the
    /// disk has time to spare and is slow, where its pieces would only go ahead of the requests
    /// arriving next; it asks ahead while nearly every read finds a queue, or while new
    /// responses' reads take at most 2 ms a 128 KiB piece. On a block device the advice
    /// merges into one large request and always goes [default: on].
    #[arg(long, value_name = "on|off")]
    pub fill_ahead_yields: Option<String>,
    /// What a cold response's first trip through the disk reads, in bytes (4096-1048576);
    /// each later trip doubles, up to a pipe's capacity, and a rest of at most twice this goes
    /// in one trip [default: 131072].
    #[arg(long, value_name = "BYTES")]
    pub first_fill: Option<u64>,
    /// Cold reads at the disk at once: `auto` starts at --helpers and doubles, up to
    /// 4 × --helpers, when a doubling moves at least 10 % more while reads wait (a disk
    /// serving many reads at once), or a fixed number [default: auto].
    #[arg(long, value_name = "auto|N")]
    pub disk_concurrency: Option<String>,
    /// AMPED's metadata lane (translate, open, stat, small bodies): `N` threads, or `auto`,
    /// which starts at --helpers and adds a thread while jobs wait in it, up to
    /// --metadata-helpers-max while its resolves are quick (under 4 ms on average); threads
    /// added that sit idle for 3 s leave [default: auto].
    #[arg(long, value_name = "auto|N")]
    pub metadata_helpers: Option<String>,
    /// With `--metadata-helpers auto`: the most threads the metadata lane may grow to
    /// [default: 4 × --helpers].
    #[arg(long, value_name = "N")]
    pub metadata_helpers_max: Option<usize>,
    /// Queue every resolve on its own: by default a request for a URL path whose resolve is
    /// already in the metadata lane waits for that one and runs right after it.
    #[arg(long)]
    pub no_resolve_coalescing: bool,
    /// Pathname-cache capacity in entries [default: 32768].
    #[arg(long, value_name = "N")]
    pub path_cache_entries: Option<usize>,
    /// File-cache capacity in open descriptors [default: 16384; fewer if the descriptor limit
    /// would not leave room for --max-connections].
    #[arg(long, value_name = "N")]
    pub file_cache_entries: Option<usize>,
    /// File-cache budget for bodies kept in memory, in bytes [default: 32 MiB].
    #[arg(long, value_name = "BYTES")]
    pub file_cache_bytes: Option<u64>,
    /// Files up to this size are kept in memory and sent with the header in one writev
    /// [default: 16384].
    #[arg(long, value_name = "BYTES")]
    pub small_file_bytes: Option<u64>,
    /// Under memory pressure (page-cache misses on smaller files in the last second), files
    /// larger than this drop their pages from the page cache once sent; 0 = never (off by
    /// default: see docs/BENCHMARKS.md §3) [default: 0].
    #[arg(long, value_name = "BYTES")]
    pub page_yield_above: Option<u64>,
    /// Seconds a client may take to send a request head [default: 10].
    #[arg(long, value_name = "SECS")]
    pub header_timeout: Option<f64>,
    /// Seconds an idle keep-alive connection is kept [default: 15].
    #[arg(long, value_name = "SECS")]
    pub keepalive_timeout: Option<f64>,
    /// Seconds a response may make no progress before the connection is dropped [default: 30].
    #[arg(long, value_name = "SECS")]
    pub send_timeout: Option<f64>,
    /// Seconds graceful shutdown waits for responses in flight [default: 10].
    #[arg(long, value_name = "SECS")]
    pub shutdown_timeout: Option<f64>,
    /// Maximum simultaneous connections (per event loop / process) [default: 10000].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Largest request head in bytes (431 beyond) [default: 8192].
    #[arg(long, value_name = "N")]
    pub max_head_bytes: Option<usize>,
    /// Most header lines in a request head (431 beyond) [default: 64].
    #[arg(long, value_name = "N")]
    pub max_headers: Option<usize>,
    /// Longest request line in bytes (414 beyond) [default: 4096].
    #[arg(long, value_name = "N")]
    pub max_uri_bytes: Option<usize>,
    /// Largest request body read and discarded on GET/HEAD (413 beyond) [default: 65536].
    #[arg(long, value_name = "N")]
    pub max_discard_body: Option<u64>,
    /// Access log in Combined Log Format: a file path, `-` for stdout, or `off` [default: off].
    #[arg(long, value_name = "PATH|-|off")]
    pub access_log: Option<String>,
    /// Access-log line format: combined, or combined+time (adds the request time in
    /// seconds) [default: combined].
    #[arg(long, value_name = "FORMAT")]
    pub access_log_format: Option<String>,
    /// Error log: a file path, `-` for stderr, or `off` [default: -].
    #[arg(long, value_name = "PATH|-|off")]
    pub error_log: Option<String>,
    /// Least important error-log lines kept: error, warn, notice, info, debug [default: notice].
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// The `Server` response header: a product name, or `off` to send none [default: amped].
    #[arg(long, value_name = "NAME|off")]
    pub server_header: Option<String>,
    /// Serve files and directories whose names start with a dot.
    #[arg(long)]
    pub dotfiles: bool,
    /// Follow symlinks that lead outside ROOT (refused by default).
    #[arg(long)]
    pub follow_outside_symlinks: bool,
    /// Answer directories without index.html with an HTML listing.
    #[arg(long)]
    pub listing: bool,
    /// URL path that answers with the server's counters as JSON (off by default).
    #[arg(long, value_name = "URLPATH")]
    pub stats_path: Option<String>,
    /// Serve pre-compressed variants (`file.br`, `file.zst`, `file.gz` beside `file`) to
    /// clients whose Accept-Encoding takes them; the list gives the order of preference
    /// (e.g. `br,zst,gz`) [default: off].
    #[arg(long, value_name = "LIST")]
    pub precompressed: Option<String>,
    /// Cache-Control for files whose URL path matches GLOB (`*` any run of characters, `?` one
    /// character; first matching rule wins), e.g. '/assets/*=max-age=31536000, immutable'.
    /// Repeatable.
    #[arg(long, value_name = "GLOB=VALUE")]
    pub cache_control: Vec<String>,
    /// A header added to every response, e.g. 'Strict-Transport-Security: max-age=63072000'.
    /// Repeatable.
    #[arg(long, value_name = "NAME: VALUE")]
    pub add_header: Vec<String>,
    /// Allow cross-origin requests from ORIGIN (or `*`): Access-Control-Allow-Origin on every
    /// response, and CORS preflight OPTIONS answered 204 [default: off].
    #[arg(long, value_name = "*|ORIGIN")]
    pub cors_origin: Option<String>,
    /// Add X-Content-Type-Options: nosniff, Referrer-Policy: strict-origin-when-cross-origin
    /// and X-Frame-Options: SAMEORIGIN to every response.
    #[arg(long)]
    pub security_headers: bool,
    /// Serve the file at URL path /PATH (with status STATUS: 403, 404 or 500) instead of the
    /// built-in error page, e.g. '404=/404.html'. Repeatable.
    #[arg(long, value_name = "STATUS=/PATH")]
    pub error_page: Vec<String>,
    /// Answer GET/HEAD of paths with no file behind them with this file and 200 (single-page
    /// applications), e.g. /index.html [default: off].
    #[arg(long, value_name = "/PATH")]
    pub spa_fallback: Option<String>,
    /// Serve the counters as JSON on this address of their own, e.g. 127.0.0.1:9090
    /// (off by default).
    #[arg(long, value_name = "ADDR:PORT")]
    pub stats_listen: Option<String>,
    /// At most N connections open from one client address; beyond, requests are answered 429
    /// and the connection closed [default: off].
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<u32>,
    /// At most R requests a second from one client address (`R`, `R/s` or `R/m`), answered 429
    /// with Retry-After beyond [default: off].
    #[arg(long, value_name = "R[/s|/m]")]
    pub rate_limit_per_ip: Option<String>,
    /// Requests one address may send at once under --rate-limit-per-ip [default: R per second,
    /// at least 1].
    #[arg(long, value_name = "N", requires = "rate_limit_per_ip")]
    pub rate_limit_burst: Option<u32>,
    /// Once the listener is bound (as root, e.g. on port 80), switch to this user (name or uid)
    /// before serving.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// The group to switch to with --user [default: the user's primary group].
    #[arg(long, value_name = "GROUP", requires = "user")]
    pub group: Option<String>,
    /// Confine the server to DIR (chroot) before switching user; ROOT must lie inside DIR.
    /// Needs root; not with --arch mp (its workers are re-executed).
    #[arg(long, value_name = "DIR")]
    pub chroot: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first) on every --listen address;
    /// needs --tls-key. Re-read on SIGHUP. Under sped, amped, staged and uring.
    #[arg(long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Re-read on SIGHUP.
    #[arg(long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// With --tls-cert: also listen for plain HTTP on this address and answer every request
    /// with a 301 to the same host, path and query over https (e.g. :80).
    #[arg(long, value_name = "ADDR")]
    pub redirect_http: Option<String>,
    /// Serve as root without the warning (e.g. in a container where root is unprivileged).
    #[arg(long)]
    pub allow_root: bool,
    /// Profile every system call (DeBox, docs/DEBOX.md): per thread role and call site,
    /// wall time, sleeps, faults; loop stalls. Served at `--stats-path` + `?debox`.
    #[arg(long)]
    pub debox: bool,
    /// With --debox: an event-loop call taking this long or longer is recorded as a loop stall
    /// [default: 1].
    #[arg(long, value_name = "MS")]
    pub debox_stall_ms: Option<f64>,
    /// With --debox: write the profile (JSON) to this file at exit (an `mp` worker appends
    /// `.PID`).
    #[arg(long, value_name = "PATH")]
    pub debox_out: Option<PathBuf>,
    /// URL path that answers with Prometheus text metrics: latency histograms (per request
    /// and per step), helper queue depth, residency misses, loop stalls, connections, bytes
    /// sent, disk reads (off by default).
    #[arg(long, value_name = "URLPATH")]
    pub metrics_path: Option<String>,
    /// Per-request timelines: requests slower than --slow-request-ms (and one in
    /// --slow-sample of the others) are written here, one JSON line each (off by default).
    #[arg(long, value_name = "PATH")]
    pub slow_log: Option<PathBuf>,
    /// With --slow-log: a request taking this long or longer is logged [default: 100].
    #[arg(long, value_name = "MS")]
    pub slow_request_ms: Option<f64>,
    /// With --slow-log: also log one in N of the other requests; 0 = none [default: 0].
    #[arg(long, value_name = "N")]
    pub slow_sample: Option<u64>,
    /// Internal: run as an `mp` worker process serving the inherited listeners (FD,FD…).
    #[arg(long, hide = true, value_delimiter = ',')]
    #[serde(skip)]
    pub worker_fd: Vec<i32>,
    /// Internal: the `mp` workers' shared counters (an inherited memory file).
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub stats_fd: Option<i32>,
    /// Internal: which `mp` worker this is (its slot in the shared counters).
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub worker_index: Option<usize>,
}

impl Args {
    /// Fills every option the command line left unset from `file` (the command line wins).
    pub fn merge_file(mut self, file: Args) -> Args {
        macro_rules! take {
            ($($f:ident),*) => { $( if self.$f.is_none() { self.$f = file.$f; } )* };
        }
        macro_rules! flag {
            ($($f:ident),*) => { $( self.$f |= file.$f; )* };
        }
        if self.listen.is_empty() {
            self.listen = file.listen;
        }
        take!(
            root,
            server_header,
            arch,
            helpers,
            threads,
            queue,
            processes,
            stage_queue,
            stage_threads_max,
            stage_batch_max,
            instances,
            path_cache_entries,
            file_cache_entries,
            file_cache_bytes,
            small_file_bytes,
            page_yield_above,
            read_path,
            direct_io_above,
            disk_charge_test,
            refault_test,
            keep_cached_large,
            share_large_reads,
            transfer_order,
            transfers_at_once,
            kernel_read_ahead,
            fill_blocks,
            fill_ahead,
            fill_ahead_after,
            fill_ahead_yields,
            first_fill,
            disk_concurrency,
            metadata_helpers,
            metadata_helpers_max,
            header_timeout,
            keepalive_timeout,
            send_timeout,
            shutdown_timeout,
            max_connections,
            max_head_bytes,
            max_headers,
            max_uri_bytes,
            max_discard_body,
            access_log,
            access_log_format,
            error_log,
            log_level,
            stats_path,
            precompressed,
            cors_origin,
            spa_fallback,
            stats_listen,
            user,
            group,
            chroot,
            tls_cert,
            tls_key,
            redirect_http,
            max_connections_per_ip,
            rate_limit_per_ip,
            rate_limit_burst,
            debox_stall_ms,
            debox_out,
            metrics_path,
            slow_log,
            slow_request_ms,
            slow_sample
        );
        macro_rules! list {
            ($($f:ident),*) => { $( if self.$f.is_empty() { self.$f = file.$f; } )* };
        }
        list!(cache_control, add_header, error_page);
        flag!(
            pin,
            no_path_cache,
            no_header_cache,
            no_file_cache,
            no_zero_copy,
            no_residency_test,
            no_resolve_coalescing,
            dotfiles,
            follow_outside_symlinks,
            listing,
            security_headers,
            allow_root,
            debox
        );
        self
    }
}

/// `listen = "a"` or `listen = ["a", "b"]` in the TOML file.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}
