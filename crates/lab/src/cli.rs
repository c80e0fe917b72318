//! The command line as typed (clap). Each experiment module resolves these raw options, with
//! its own full and `--quick` defaults, into the parameters it runs with; nothing else reads
//! them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Reproduces the Flash (1999) and New Flash / DeBox (2004) experiments, and a student
/// thread-pool experiment, against amped and real peers (nginx, Apache, lighttpd, h2o).
///
/// Each run writes bench/runs/<date>-<experiment>[-quick]/ with setup.json, raw results
/// (CSV and JSON), SVG figures and summary.md.
#[derive(Debug, Parser)]
#[command(name = "amplab", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// One subcommand per experiment.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// E1: bandwidth and connection rate vs file size on one cached file (Flash Figs 6/7).
    SingleFile(SingleFileArgs),
    /// E2: Owlnet-like and CS-like trace replay (or your own access log), throughput per server.
    Trace(TraceArgs),
    /// E3: amped with the 8 combinations of path / header / file cache (Flash Fig 11).
    Optimizations(OptimizationsArgs),
    /// E4: the DeBox disk-bound test: fixed rate, 1020 clients, 5 requests per connection.
    DiskBound(DiskBoundArgs),
    /// E5: capacity at infinite demand vs data-set size (DeBox Table 8, scaled).
    Capacity(CapacityArgs),
    /// E6: thread per connection (mt) vs a pool of 5 threads, measured with ab.
    PoolVsNopool(PoolArgs),
    /// E7: the DeBox Linux comparison (Table 10, Fig 12): Apache, staged (Haboob), sped (old
    /// Flash), amped (New Flash) and peers; throughput at three data-set sizes, latency, and
    /// staged's thread counts over time.
    LinuxComparison(LinuxComparisonArgs),
    /// Every experiment in turn, each into its own folder.
    All(AllArgs),
    /// A bounded reliability run per server: keep-alive and close clients, large files, slow
    /// readers, slowloris, malformed requests, files changed under load and reload signals;
    /// outcomes by kind, byte-exact checks, RSS and descriptors over time.
    Soak(SoakArgs),
    /// apt-get install the peers and tools (root): nginx-light, apache2-bin, lighttpd, h2o,
    /// apache2-utils (ab), wrk, util-linux (taskset), fonts-dejavu-core (PNG figures).
    InstallPeers(InstallArgs),
    /// Rebuild a run folder's figures and summary from its raw results (setup.json,
    /// results.json), and/or write the index page of every run (--index).
    Report(ReportArgs),
    /// Mount a directory through the emulated slow disk (a read-only FUSE passthrough that
    /// delays every request reaching it) and serve in the foreground until SIGTERM or unmount.
    #[command(hide = true)]
    Slowdisk(SlowdiskArgs),
}

/// Options every experiment takes.
#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Same code path with tiny data sets and seconds-long runs (used by the tests and CI).
    #[arg(long)]
    pub quick: bool,

    /// Servers to measure, comma-separated: amped architectures (sped, amped, mt, pool, mp,
    /// uring, staged) with options after colons (e.g. amped:instances=2, pool:threads=5,
    /// amped:no-path-cache), and peers (nginx, nginx-aio, nginx-direct, apache-event,
    /// apache-prefork-150, apache-prefork-300, lighttpd, h2o). Default: the experiment's list.
    #[arg(long, value_delimiter = ',')]
    pub servers: Option<Vec<String>>,

    /// Folder for this run (default bench/runs/<date>-<experiment>[-quick] under the repo).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where generated data sets live (reused across runs when the parameters match).
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/amplab")]
    pub data_dir: PathBuf,

    /// The amped binary (default: beside amplab's own executable).
    #[arg(long, value_name = "PATH")]
    pub amped: Option<PathBuf>,

    /// The ampload binary (default: beside amplab's own executable).
    #[arg(long, value_name = "PATH")]
    pub ampload: Option<PathBuf>,

    /// CPUs the servers are pinned to (taskset list).
    #[arg(long, default_value = "1", value_name = "CPUS")]
    pub server_cpus: String,

    /// CPUs the load generator is pinned to (taskset list).
    #[arg(long, default_value = "0", value_name = "CPUS")]
    pub client_cpus: String,

    /// Do not pin servers or load generators.
    #[arg(long)]
    pub no_pin: bool,

    /// Profile nobody: amped without its DeBox profile (it costs about 3 % of the server's
    /// CPU), and no peer profile from outside (/proc readings and a `perf trace` slice after
    /// each measured phase); the summaries then have no "who blocked where" table.
    #[arg(long)]
    pub no_profile: bool,

    /// Length of the `perf trace` slice that profiles a peer from outside, after its measured
    /// phase, with the same load (default 2 s; quick: 0.5 s). perf trace slows a server a lot,
    /// so it never runs while the experiment's numbers are measured.
    #[arg(long, value_name = "SECONDS")]
    pub profile_slice: Option<f64>,

    /// Seed for generated files and traces.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Rounds (server order rotates each round; results are medians over rounds).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: Option<u32>,

    /// Seconds measured per cell.
    #[arg(long, value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Seconds of unmeasured load before measuring.
    #[arg(long, value_parser = non_negative_secs)]
    pub warmup: Option<f64>,
}

/// The emulated slow disk (see the README's disk-emulation paragraph).
#[derive(Debug, Args, Clone)]
pub struct DiskArgs {
    /// Memory cgroup limit for the server, MiB (bounds its page cache too).
    #[arg(long, value_name = "MIB")]
    pub memory_mb: Option<u64>,

    /// blkio throttle (--disk-emulation blkio): reads per second on the data's disk.
    #[arg(long, value_name = "N", default_value_t = 300)]
    pub read_iops: u32,

    /// blkio throttle: also cap the bytes read per second on the data's disk, MB/s (10^6
    /// bytes), as a cloud volume caps its bandwidth beside its operations (a request of any
    /// size is one read to the reads/s cap; here its bytes count too). Default: 60 under
    /// --disk-emulation volume, no byte cap otherwise.
    #[arg(long, value_name = "MB_PER_S", value_parser = positive_mbps)]
    pub read_mbps: Option<f64>,

    /// Do not use cgroups even when root (no memory limit, no blkio throttle; unless
    /// --disk-emulation fuse is given, no slow disk either).
    #[arg(long)]
    pub no_cgroups: bool,

    /// How the data set leaves the page cache before each server: drop-caches (root: sync and
    /// /proc/sys/vm/drop_caches, everything) or fadvise (posix_fadvise DONTNEED on the data
    /// set's files only; with the FUSE disk, FUSE invalidations of its cache). Default:
    /// drop-caches for full runs as root, fadvise otherwise.
    #[arg(long, value_enum)]
    pub evict: Option<EvictArg>,

    /// Disk models to run, comma-separated; each is run and reported side by side: hdd (the
    /// FUSE latency disk: 5 ms + 40 MB/s, 1 arm), ssd (FUSE: 0.1 ms + 500 MB/s, 32 arms),
    /// iops (the blkio throttle, --read-iops), volume (the blkio throttle at --read-iops and
    /// --read-mbps, 60 MB/s unless given), none; fuse (FUSE with --seek-ms, --mbps, --arms,
    /// --meta-ms) and blkio (= iops). Default: fuse as root with /dev/fuse, else blkio as root,
    /// else none. The memory cgroup limit applies to every model but none.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "MODELS")]
    pub disk_emulation: Option<Vec<DiskEmulationArg>>,

    #[command(flatten)]
    pub model: SlowdiskModelArgs,
}

/// The `--disk-emulation` choices: named disk models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiskEmulationArg {
    /// The FUSE latency disk of a 2004 hard disk: 5 ms + 40 MB/s, one arm.
    Hdd,
    /// An SSD-like FUSE latency disk: 0.1 ms + 500 MB/s, 32 arms.
    Ssd,
    /// An IOPS-capped volume: the blkio throttle at --read-iops.
    Iops,
    /// A cloud block volume, which caps bytes as well as reads: the blkio throttle at
    /// --read-iops and --read-mbps (60 MB/s unless given). `iops` alone counts a request of
    /// any size as one read, so it rewards large requests more than a volume that counts a
    /// large request as several or caps its bandwidth does.
    Volume,
    /// The FUSE latency disk with --seek-ms, --mbps, --arms and --meta-ms.
    Fuse,
    /// The blkio throttle at --read-iops (the same as iops).
    Blkio,
    /// No slow disk and no memory limit.
    None,
}

impl DiskEmulationArg {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            DiskEmulationArg::Hdd => "hdd",
            DiskEmulationArg::Ssd => "ssd",
            DiskEmulationArg::Iops => "iops",
            DiskEmulationArg::Volume => "volume",
            DiskEmulationArg::Fuse => "fuse",
            DiskEmulationArg::Blkio => "blkio",
            DiskEmulationArg::None => "none",
        }
    }
}

impl DiskArgs {
    /// The models asked for, duplicates removed, in the order given (`None`: the default).
    pub fn models(&self) -> Option<Vec<DiskEmulationArg>> {
        let list = self.disk_emulation.as_ref()?;
        let mut out: Vec<DiskEmulationArg> = Vec::new();
        for m in list {
            if !out.contains(m) {
                out.push(*m);
            }
        }
        Some(out)
    }
}

/// The shape of the SPECweb99-like trace and data set (disk-bound and capacity).
#[derive(Debug, Args, Clone)]
pub struct TraceShapeArgs {
    /// Zipf exponent of the directory popularity (higher: a smaller hot set).
    #[arg(long, default_value_t = 1.0, value_parser = zipf_alpha, value_name = "ALPHA")]
    pub zipf: f64,

    /// Shares of requests to the four SPECweb99 classes (0.1-0.9 KB, 1-9 KB, 10-90 KB,
    /// 100-900 KB), comma-separated; they need not add up to 100.
    #[arg(long, value_name = "A,B,C,D", value_parser = parse_class_mix, default_value = "35,50,14,1")]
    pub class_mix: ClassMix,

    /// Share of requests (0 to 0.5) for large files: the set gains files of 10-100 MB
    /// (log-uniform; quick runs: 1-4 MiB), each request picking one uniformly.
    #[arg(long, value_name = "SHARE", value_parser = large_share)]
    pub large_files: Option<f64>,
}

impl TraceShapeArgs {
    /// The trace shape these options describe (the class mix as shares adding up to 1).
    pub fn shape(&self) -> crate::datasets::specweb::Shape {
        let total: f64 = self.class_mix.0.iter().sum();
        crate::datasets::specweb::Shape {
            zipf: self.zipf,
            class_mix: self.class_mix.0.map(|w| w / total),
            large_share: self.large_files.unwrap_or(0.0),
        }
    }
}

/// `--class-mix`: the four class weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassMix(pub [f64; 4]);

/// The FUSE slow disk's delay model.
#[derive(Debug, Args, Clone)]
pub struct SlowdiskModelArgs {
    /// Slow disk: positioning time of every read that reaches it, ms.
    #[arg(long, default_value_t = 5.0, value_name = "MS")]
    pub seek_ms: f64,

    /// Slow disk: transfer rate, MB/s (10^6 bytes per second); a read of N bytes costs
    /// seek-ms + N / mbps.
    #[arg(long, default_value_t = 40.0, value_name = "MB_PER_S")]
    pub mbps: f64,

    /// Slow disk: requests in service at once (1 = one disk arm: requests queue FIFO).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub arms: u32,

    /// Slow disk: cost of a lookup or getattr that reaches it (a cold inode or directory
    /// block), ms. Default: --seek-ms.
    #[arg(long, value_name = "MS")]
    pub meta_ms: Option<f64>,
}

impl SlowdiskModelArgs {
    /// The delay model these options describe (not yet validated).
    pub fn model(&self) -> crate::slowdisk::Model {
        crate::slowdisk::Model {
            seek_ms: self.seek_ms,
            mbps: self.mbps,
            meta_ms: self.meta_ms.unwrap_or(self.seek_ms),
            arms: self.arms,
        }
    }
}

/// `amplab slowdisk`.
#[derive(Debug, Args)]
pub struct SlowdiskArgs {
    /// Directory whose files are served (read-only).
    #[arg(long, value_name = "DIR")]
    pub source: PathBuf,

    /// Mount point (created if missing; a stale slow-disk mount there is unmounted first).
    #[arg(long, value_name = "DIR")]
    pub mount: PathBuf,

    #[command(flatten)]
    pub model: SlowdiskModelArgs,

    /// How long the kernel caches entries and attributes, s.
    #[arg(long, default_value_t = 3600.0, value_name = "S")]
    pub ttl_s: f64,

    /// Largest read request (and readahead window), e.g. 128K.
    #[arg(long, default_value = "128K", value_parser = parse_size, value_name = "SIZE")]
    pub max_read: u64,
}

impl SlowdiskArgs {
    /// The mount's options, validated.
    pub fn options(&self) -> Result<crate::slowdisk::Options, String> {
        let o = crate::slowdisk::Options {
            model: self.model.model(),
            ttl_s: self.ttl_s,
            max_read: u32::try_from(self.max_read).unwrap_or(u32::MAX),
        };
        o.validate()?;
        Ok(o)
    }
}

/// The `--evict` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EvictArg {
    DropCaches,
    Fadvise,
}

/// Which load generator drives the single-file experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GeneratorArg {
    Ampload,
    Wrk,
}

/// Which load generator drives pool-vs-nopool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AbGeneratorArg {
    /// ab if installed, else ampload --close.
    Auto,
    Ab,
    Ampload,
}

/// The connection modes of the single-file tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeArg {
    /// One request per connection (`Connection: close`), as the 1999 paper's HTTP/1.0 clients.
    Close,
    /// Persistent connections.
    Keepalive,
}

#[derive(Debug, Args)]
pub struct SingleFileArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// File sizes, comma-separated, with K/M suffixes (KiB/MiB), e.g. 0,1K,100K.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Option<Vec<u64>>,
    /// Connection modes to run.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub modes: Option<Vec<ModeArg>>,
    /// Concurrent connections of the closed-loop load generator.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: Option<u32>,
    /// Load generator.
    #[arg(long, value_enum, default_value = "ampload")]
    pub generator: GeneratorArg,
}

#[derive(Debug, Args)]
pub struct OptimizationsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// amped architecture whose caches are switched.
    #[arg(long, default_value = "amped")]
    pub arch: String,
    /// File sizes, comma-separated, with K/M suffixes.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    pub sizes: Option<Vec<u64>>,
    /// Connection modes to run (the paper measured connection rate: close).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub modes: Option<Vec<ModeArg>>,
    /// Concurrent connections of the closed-loop load generator.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: Option<u32>,
    /// Load generator.
    #[arg(long, value_enum, default_value = "ampload")]
    pub generator: GeneratorArg,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    /// Replay this Common Log Format access log (against a generated file set that matches
    /// it) instead of the Owlnet-like and CS-like synthetic traces.
    #[arg(long, value_name = "FILE")]
    pub clf: Option<PathBuf>,
    /// Concurrent connections (closed loop; with --rate, the connections the fixed rate is
    /// sent over).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: Option<u32>,
    /// Requests per persistent connection (1 = a connection per request).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub requests_per_conn: u32,
    /// Replay at this fixed rate, requests/s (open loop: latency from each request's intended
    /// send time), instead of as fast as the clients' answers come (closed loop).
    #[arg(long, value_parser = positive_secs, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
}

#[derive(Debug, Args)]
pub struct DiskBoundArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    /// Data-set size (e.g. 2G, 500M).
    #[arg(long, value_parser = parse_size)]
    pub dataset: Option<u64>,
    #[command(flatten)]
    pub shape: TraceShapeArgs,
    /// One fixed request rate (the same as --rates R).
    #[arg(long, value_parser = positive_secs, conflicts_with = "rates")]
    pub rate: Option<f64>,
    /// Fixed request rates, comma-separated, each run on every model. Default: per model,
    /// 4 rates (quick: 2) from 40 % to 90 % of the best peer's capacity there, measured
    /// first (closed loop).
    #[arg(long, value_delimiter = ',', value_parser = positive_secs, value_name = "R1,R2,...")]
    pub rates: Option<Vec<f64>>,
    /// Latency over time from a cold start: after the rate sweep, each server is started
    /// cold again at the highest rate and measured in consecutive windows of this many
    /// seconds through the warm-up and the measured time (default 5; quick: off; 0: off).
    #[arg(long, value_parser = non_negative_secs, value_name = "S")]
    pub window: Option<f64>,
    /// Simulated clients (the open loop's connection pool).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: Option<u32>,
    /// Requests per persistent connection.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub requests_per_conn: u32,
}

#[derive(Debug, Args)]
pub struct CapacityArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    #[command(flatten)]
    pub shape: TraceShapeArgs,
    /// Data-set sizes as multiples of the memory limit (the paper's 0.5/1.5/3.3 GB on 1 GB).
    #[arg(long, value_delimiter = ',')]
    pub scales: Option<Vec<f64>>,
    /// Concurrent connections (closed loop, infinite demand).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: Option<u32>,
    /// Requests per persistent connection.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub requests_per_conn: u32,
}

#[derive(Debug, Args)]
pub struct LinuxComparisonArgs {
    /// The capacity experiment's options: its load and data sets are this one's.
    #[command(flatten)]
    pub capacity: CapacityArgs,
    /// How often staged's stats endpoint is sampled for its thread counts, ms.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..))]
    pub sample_ms: u64,
}

#[derive(Debug, Args)]
pub struct PoolArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Concurrency levels (ab -c).
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Option<Vec<u32>>,
    /// Requests per cell on the 37-byte file (ab -n).
    #[arg(long)]
    pub small_requests: Option<u64>,
    /// Requests per cell on the 10 MB file (ab -n).
    #[arg(long)]
    pub large_requests: Option<u64>,
    /// Load generator: ab (as the seed experiment), or ampload --close.
    #[arg(long, value_enum, default_value = "auto")]
    pub generator: AbGeneratorArg,
}

#[derive(Debug, Args)]
pub struct AllArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub disk: DiskArgs,
    #[command(flatten)]
    pub shape: TraceShapeArgs,
}

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// --duration: seconds of load per server (default 120; quick 3). --rounds and --warmup
    /// are not used.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds without a byte before a request counts as a timeout (default 30; quick 10).
    #[arg(long, value_parser = positive_secs, value_name = "S")]
    pub io_timeout: Option<f64>,
    /// Seconds between reload signals to the server, the first after half that (0: none;
    /// default 30; quick: once, halfway).
    #[arg(long, value_parser = non_negative_secs, value_name = "S")]
    pub signal_every: Option<f64>,
    /// Staleness allowed, seconds: an answer showing a file's state from up to this long
    /// before the request is right (amped documents 1 s); older is counted as stale.
    #[arg(long, default_value_t = 1.0, value_parser = non_negative_secs, value_name = "S")]
    pub grace: f64,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run folder (or a folder of runs, like `amplab all --out DIR` writes).
    #[arg(required_unless_present = "index")]
    pub dir: Option<PathBuf>,

    /// Write INDEX.md in the runs folder: every run under it with its summary and figures.
    #[arg(long)]
    pub index: bool,

    /// The runs folder for --index (default: bench/runs of the repository).
    #[arg(long, value_name = "DIR")]
    pub runs: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Print the apt-get command instead of running it.
    #[arg(long)]
    pub dry_run: bool,
}

/// Parses `0`, `37`, `1K`, `100K`, `10M`, `2G` (binary multiples) into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * (mult as f64) < 1e15 => {
            Ok((v * mult as f64).round() as u64)
        }
        _ => Err(format!("{text:?} is not a size (like 0, 37, 1K, 100K, 10M, 2G)")),
    }
}

/// Parses `--class-mix`: four non-negative weights, not all zero.
pub fn parse_class_mix(text: &str) -> Result<ClassMix, String> {
    let bad = || format!("{text:?} is not four non-negative weights like 35,50,14,1");
    let v: Vec<f64> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let ok =
        v.len() == 4 && v.iter().all(|w| w.is_finite() && *w >= 0.0) && v.iter().sum::<f64>() > 0.0;
    if !ok {
        return Err(bad());
    }
    Ok(ClassMix([v[0], v[1], v[2], v[3]]))
}

fn zipf_alpha(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=5.0).contains(&v) => Ok(v),
        _ => Err(format!("{text:?} is not a Zipf exponent between 0 and 5")),
    }
}

fn large_share(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 0.5 => Ok(v),
        _ => Err(format!("{text:?} is not a share of requests above 0 and at most 0.5")),
    }
}

fn positive_secs(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

fn positive_mbps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e6 => Ok(v),
        _ => Err(format!("{text:?} is not a rate in MB/s (more than 0, at most 1000000)")),
    }
}

fn non_negative_secs(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a number of seconds")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("37"), Ok(37));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        for bad in ["", "x", "-1", "1T", "K"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_byte_cap_is_a_positive_rate() {
        let parse = |v: &str| {
            Cli::try_parse_from([
                "amplab",
                "disk-bound",
                "--disk-emulation",
                "iops",
                "--read-mbps",
                v,
            ])
        };
        let Command::DiskBound(a) = parse("12.5").unwrap().command else {
            panic!("not disk-bound")
        };
        assert_eq!(a.disk.read_mbps, Some(12.5));
        for bad in ["0", "-3", "x", "inf"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let none = Cli::try_parse_from(["amplab", "disk-bound"]).unwrap();
        let Command::DiskBound(a) = none.command else { panic!("not disk-bound") };
        assert_eq!(a.disk.read_mbps, None, "no byte cap unless asked");
    }

    #[test]
    fn parses_the_slow_disk_options() {
        let cli = Cli::try_parse_from([
            "amplab",
            "slowdisk",
            "--source",
            "/s",
            "--mount",
            "/m",
            "--seek-ms",
            "8",
            "--arms",
            "2",
            "--mbps",
            "20",
            "--max-read",
            "64K",
        ])
        .unwrap();
        let Command::Slowdisk(a) = cli.command else { panic!("not slowdisk") };
        let o = a.options().unwrap();
        assert_eq!((a.source.as_path(), a.mount.as_path()), (Path::new("/s"), Path::new("/m")));
        assert_eq!(
            o.model,
            crate::slowdisk::Model { seek_ms: 8.0, mbps: 20.0, meta_ms: 8.0, arms: 2 }
        );
        assert_eq!((o.max_read, o.ttl_s), (64 << 10, 3600.0));

        let d =
            Cli::try_parse_from(["amplab", "slowdisk", "--source", "/s", "--mount", "/m"]).unwrap();
        let Command::Slowdisk(a) = d.command else { panic!("not slowdisk") };
        assert_eq!(
            a.options().unwrap().model,
            crate::slowdisk::Model { seek_ms: 5.0, mbps: 40.0, meta_ms: 5.0, arms: 1 }
        );

        let bad = |args: &[&str]| {
            let mut v = vec!["amplab", "slowdisk", "--source", "/s", "--mount", "/m"];
            v.extend_from_slice(args);
            match Cli::try_parse_from(v) {
                Ok(Cli { command: Command::Slowdisk(a) }) => a.options().is_err(),
                _ => true,
            }
        };
        for args in [
            &["--arms", "0"][..],
            &["--mbps", "0"],
            &["--seek-ms", "-1"],
            &["--max-read", "1000"],
            &["--meta-ms", "x"],
        ] {
            assert!(bad(args), "{args:?}");
        }

        let e = Cli::try_parse_from([
            "amplab",
            "disk-bound",
            "--disk-emulation",
            "fuse",
            "--seek-ms",
            "10",
            "--meta-ms",
            "1",
        ])
        .unwrap();
        let Command::DiskBound(a) = e.command else { panic!("not disk-bound") };
        assert_eq!(a.disk.models(), Some(vec![DiskEmulationArg::Fuse]));
        assert_eq!(
            a.disk.model.model(),
            crate::slowdisk::Model { seek_ms: 10.0, mbps: 40.0, meta_ms: 1.0, arms: 1 }
        );
        assert!(Cli::try_parse_from(["amplab", "trace", "--disk-emulation", "dm-delay"]).is_err());
    }

    #[test]
    fn parses_disk_models_rates_and_the_trace_shape() {
        let cli = Cli::try_parse_from([
            "amplab",
            "disk-bound",
            "--disk-emulation",
            "hdd,ssd,iops,none,hdd",
            "--rates",
            "100,250.5",
            "--window",
            "5",
            "--zipf",
            "1.3",
            "--class-mix",
            "10, 60,25,5",
            "--large-files",
            "0.004",
        ])
        .unwrap();
        let Command::DiskBound(a) = cli.command else { panic!("not disk-bound") };
        use DiskEmulationArg::*;
        assert_eq!(a.disk.models(), Some(vec![Hdd, Ssd, Iops, None]), "duplicates dropped");
        assert_eq!(a.rates, Some(vec![100.0, 250.5]));
        assert_eq!(a.window, Some(5.0));
        let shape = a.shape.shape();
        assert_eq!(
            (shape.zipf, shape.class_mix, shape.large_share),
            (1.3, [0.1, 0.6, 0.25, 0.05], 0.004)
        );
        let d = Cli::try_parse_from(["amplab", "capacity"]).unwrap();
        let Command::Capacity(c) = d.command else { panic!("not capacity") };
        assert_eq!(c.disk.models(), Option::None);
        assert_eq!(c.shape.shape(), crate::datasets::specweb::Shape::default());
        for bad in [
            &["disk-bound", "--disk-emulation", "floppy"][..],
            &["disk-bound", "--class-mix", "1,2,3"],
            &["disk-bound", "--class-mix", "0,0,0,0"],
            &["disk-bound", "--class-mix", "1,-2,3,4"],
            &["disk-bound", "--zipf", "-1"],
            &["disk-bound", "--large-files", "0"],
            &["capacity", "--large-files", "0.6"],
            &["disk-bound", "--rates", "100,0"],
            &["disk-bound", "--rate", "100", "--rates", "200"],
        ] {
            let mut v = vec!["amplab"];
            v.extend_from_slice(bad);
            assert!(Cli::try_parse_from(v).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_slow_disk_subcommand_is_hidden() {
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        assert!(!help.contains("slowdisk"), "{help}");
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
