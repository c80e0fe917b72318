//! The shared request pipeline: parse → caches (a translation or an open file missing: a
//! [`Job`] from [`crate::disk`]) → respond.
//!
//! Every architecture drives the same [`Pipeline`]. It never blocks by itself: given a
//! connection's state it returns a [`Step`] — a response to send, a [`Job`] that may block on
//! the disk (the architecture decides who runs it: inline, a helper, io_uring), a request for
//! more bytes, or "close". After a job, [`Pipeline::resume`] continues where it stopped.
//! This is the seam that lets the architectures be compared on their concurrency model alone,
//! as the Flash paper compared Flash, Flash-SPED, Flash-MT and Flash-MP built from one code base.

pub mod conn;
mod cors;
mod fallback;
mod hooks;
mod redirect;
mod respond;
#[cfg(test)]
mod seam_tests;

use crate::access_log::AccessLogger;
use crate::cache::{Caches, FileEntry, FileLookup, PathLookup, lock};
use crate::client_limits::ClientLimits;
use crate::config::Config;
use crate::stats::{Stats, bump};
use crate::timeline::Timeline;
use amped_http::{
    AcceptEncoding, Encoding, EncodingSet, Method, RequestHead, StatusCode, TargetPath, Version,
};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Longest raw request line kept for the access log of a refused request.
const RAW_LINE_MAX: usize = 2048;

use crate::disk::fs_error;
use crate::disk::translate::Translation;
pub use crate::disk::{Job, JobDone, Resolved};
pub use conn::ConnState;
use fallback::Substitute;
use std::path::{Path, PathBuf};

/// What the architecture should do next for a connection.
#[derive(Debug)]
pub enum Step {
    /// Send this response, then call [`Pipeline::next`] again (unless it says close).
    Respond(Response),
    /// Run this job (it may block on disk), then call [`Pipeline::resume`] with its result.
    Block(Job),
    /// Read more bytes from the client, then call [`Pipeline::next`] again.
    NeedMore,
    /// Close the connection.
    Close,
}

/// A response: an encoded head and a body to transmit after it.
#[derive(Debug)]
pub struct Response {
    /// Status line and header fields, CRLF-terminated.
    pub head: Vec<u8>,
    /// The body.
    pub body: Body,
    /// Close the connection once this response is sent.
    pub close: bool,
    /// Status code (for logs and tests).
    pub status: u16,
    /// Access-log record, when the access log is on.
    pub log: Option<Box<crate::access_log::LogRecord>>,
    /// Where the request's time went (`--slow-log` only).
    pub timeline: Option<Box<Timeline>>,
}

/// Where a response body comes from.
#[derive(Debug)]
pub enum Body {
    /// No body (HEAD, 304, empty file).
    None,
    /// Bytes in memory (small cached files, generated pages).
    Memory(Arc<[u8]>, Range<usize>),
    /// A range of an open file, sent with sendfile after a residency test.
    File {
        /// The open file.
        file: Arc<FileEntry>,
        /// First byte.
        offset: u64,
        /// Number of bytes.
        len: u64,
    },
}

impl Body {
    /// Body length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Body::None => 0,
            Body::Memory(_, r) => r.len() as u64,
            Body::File { len, .. } => *len,
        }
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A parsed request on its way through the pipeline.
#[derive(Debug)]
pub struct Request {
    head: RequestHead,
    peer: SocketAddr,
    received: SystemTime,
    started: Instant,
    keep_alive: bool,
    /// The normalised target being served (the fallback's or error page's when substituted).
    target: Option<TargetPath>,
    /// The pre-compressed variant being sent, if any.
    encoding: Option<Encoding>,
    /// The URL has pre-compressed variants, so the answer varies with Accept-Encoding.
    vary: bool,
    /// What answers the request instead of its own target, if anything.
    substitute: Substitute,
    /// For a request refused before it was parsed: its raw first line, for the logs.
    raw_line: Option<String>,
    /// Its timeline until the response takes it (`--slow-log` only).
    timeline: RefCell<Option<Box<Timeline>>>,
}

/// The request pipeline of one server instance: configuration, caches, counters, access log.
pub struct Pipeline {
    /// Resolved configuration (drivers read it through the settings in `hooks.rs`).
    cfg: Arc<Config>,
    /// Flash's caches.
    caches: Caches<Translation>,
    /// Counters (drivers count through the hooks in `hooks.rs`).
    stats: Arc<Stats>,
    log: AccessLogger,
    /// `--max-connections-per-ip`, `--rate-limit-per-ip` (`None` when both are off).
    limits: Option<Arc<ClientLimits>>,
    /// A `--redirect-http` listener's: every request is redirected to https on this port.
    redirect_https: Option<u16>,
}

impl Pipeline {
    /// For in-process tests: the pipeline `args` configure, with fresh counters and no access
    /// log.
    #[cfg(test)]
    pub(crate) fn for_tests(args: crate::config::Args) -> Self {
        let cfg = Config::resolve(args).expect("a valid test configuration");
        Pipeline::new(Arc::new(cfg), Default::default(), AccessLogger::off())
    }

    /// A pipeline with empty caches (and per-client limits of its own).
    pub fn new(cfg: Arc<Config>, stats: Arc<Stats>, log: AccessLogger) -> Self {
        let limits = ClientLimits::from_config(&cfg, &stats);
        Pipeline::sharing(cfg, stats, log, limits)
    }

    /// A pipeline with empty caches, counting clients in `limits` (shared by the instances of
    /// one server).
    pub fn sharing(
        cfg: Arc<Config>,
        stats: Arc<Stats>,
        log: AccessLogger,
        limits: Option<Arc<ClientLimits>>,
    ) -> Self {
        let caches = Caches::new(&cfg);
        Pipeline { cfg, caches, stats, log, limits, redirect_https: None }
    }

    /// Consumes buffered input and decides what happens next. `draining` is set during a
    /// graceful shutdown: requests are still answered, but with `Connection: close`.
    pub fn next(&self, c: &mut ConnState, draining: bool) -> Step {
        if c.closing {
            return Step::Close;
        }
        if let Some(limits) = &self.limits
            && matches!(c.admission, conn::Admission::Unchecked)
        {
            c.admission = match limits.open_connection(c.peer.ip()) {
                Ok(slot) => conn::Admission::Counted { _slot: slot },
                Err(_) => conn::Admission::Refused,
            };
        }
        if c.chunked.is_some() && !self.discard_chunked(c) {
            return if c.closing { Step::Close } else { Step::NeedMore };
        }
        if c.discard > 0 {
            let n = c.discard.min(c.inbuf.len() as u64);
            c.inbuf.drain(..n as usize);
            c.discard -= n;
            if c.discard > 0 {
                return Step::NeedMore;
            }
        }
        if c.inbuf.is_empty() {
            return if draining && c.served > 0 { Step::Close } else { Step::NeedMore };
        }
        let parse_from = crate::timeline::on().then(Instant::now);
        match amped_http::parse_request(&c.inbuf, &self.cfg.limits) {
            Ok(None) => Step::NeedMore,
            Err(e) => {
                c.closing = true;
                c.served += 1;
                let req = Request::refused(c.peer, &c.inbuf);
                crate::errlog::info!(
                    "{}: refused with {} ({e}): \"{}\"",
                    c.peer,
                    e.status().as_u16(),
                    req.raw_line.as_deref().unwrap_or("")
                );
                Step::Respond(self.error_with(&req, e.status(), b"", true))
            }
            Ok(Some(head)) => {
                c.inbuf.drain(..head.head_len);
                c.served += 1;
                let keep_alive = head.keep_alive && !draining;
                let timeline = parse_from.map(|t| {
                    let line = format!("{} {}", head.method_raw, head.target);
                    Timeline::begin(c.first_byte.take(), t, c.peer, line)
                });
                let req = Request::new(head, c.peer, keep_alive);
                req.timeline.replace(timeline);
                if let Some(limits) = &self.limits
                    && let Some(retry_after) = over_limit(limits, c)
                {
                    bump(self.stats.client_limit_refusals());
                    c.closing = true;
                    let extra = format!("Retry-After: {retry_after}\r\n");
                    let status = StatusCode::TOO_MANY_REQUESTS;
                    return Step::Respond(self.error_with(&req, status, extra.as_bytes(), true));
                }
                self.dispatch(c, req)
            }
        }
    }

    /// Continues the request that was waiting for `done`.
    pub fn resume(&self, c: &mut ConnState, done: JobDone) -> Step {
        let Some(mut req) = c.pending.take().map(|boxed| *boxed) else {
            return Step::Close; // no request was waiting: an architecture bug, fail safe
        };
        let r = match done {
            JobDone::Resolved(r) => {
                if let Some(times) = &r.times {
                    req.with_timeline(|t| t.resolved(times.ran_from, r.at, times.open));
                }
                r
            }
            JobDone::Refused => {
                c.closing = true;
                return Step::Respond(self.error_with(
                    &req,
                    StatusCode::SERVICE_UNAVAILABLE,
                    b"Retry-After: 1\r\n",
                    true,
                ));
            }
            JobDone::ReadAhead | JobDone::Filled(..) | JobDone::Copied(..) | JobDone::Failed => {
                c.closing = true;
                req.keep_alive = false;
                return self.fail(c, req, StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        if r.translated_now
            && r.translation.is_cacheable()
            && let Some(paths) = &self.caches.paths
        {
            lock(paths).put(r.url_path.clone(), r.translation.clone(), r.at);
        }
        match (r.translation, r.file, r.listing) {
            (Translation::File(path, variants), Some(Ok(entry)), _) => {
                let mut entry = Arc::new(entry);
                if let Some(files) = &self.caches.files {
                    entry = lock(files).put(entry, r.at);
                }
                if !variants.is_empty() {
                    // Translated just now: the job opened the file itself, but this client
                    // may take one of the variants it found.
                    let chosen = self.choose_variant(&mut req, &path, variants);
                    if chosen != path {
                        return self.after_translation(
                            c,
                            req,
                            Translation::File(chosen, EncodingSet::EMPTY),
                        );
                    }
                }
                Step::Respond(self.serve_file(&req, entry))
            }
            (Translation::File(path, _), Some(Err(e)), _) => {
                if let Some(encoding) = req.encoding.take() {
                    // The variant went away since the translation was cached: send the file.
                    let original = encoding.original_of(&path);
                    return self.after_translation(
                        c,
                        req,
                        Translation::File(original, EncodingSet::EMPTY),
                    );
                }
                let failure = fs_error::judge(&e, &path);
                self.failure(c, req, failure)
            }
            (Translation::Listing(_), _, Some(_)) if req.substitute.is_active() => {
                self.fail(c, req, StatusCode::NOT_FOUND)
            }
            (Translation::Listing(dir), _, Some(Err(e))) => {
                let failure = fs_error::judge(&e, &dir);
                self.failure(c, req, failure)
            }
            (Translation::Listing(_), _, Some(Ok(page))) => Step::Respond(self.generated(
                &req,
                StatusCode::OK,
                b"",
                "text/html; charset=utf-8",
                page,
                false,
            )),
            (t, _, _) => self.after_translation(c, req, t),
        }
    }

    /// The 408 sent to a client that did not finish its request head in time; `partial` is
    /// what arrived of it (its first line is logged).
    pub fn timeout_response(&self, peer: SocketAddr, partial: &[u8]) -> Response {
        let req = Request::refused(peer, partial);
        crate::errlog::info!(
            "{peer}: request head not complete after {:?} (408): \"{}\"",
            self.cfg.header_timeout(),
            req.raw_line.as_deref().unwrap_or("")
        );
        self.error_with(&req, StatusCode::REQUEST_TIMEOUT, b"", true)
    }

    /// The 503 (with `Retry-After: 1`, then close) for a connection the server has no room
    /// for, e.g. when the pool's queue is full.
    pub fn overload_response(&self, peer: SocketAddr) -> Response {
        self.error_with(
            &Request::unparsed(peer),
            StatusCode::SERVICE_UNAVAILABLE,
            b"Retry-After: 1\r\n",
            true,
        )
    }

    /// Called by the architecture when a response has been sent (or abandoned after
    /// `body_sent` bytes): writes the access-log line. A file body cut short (the file shrank
    /// under the send, or the client went away) has its file checked, see
    /// [`Pipeline::forget_if_changed`].
    pub fn complete(&self, resp: &Response, body_sent: u64) {
        if let Some(rec) = &resp.log {
            self.log.log(rec, body_sent);
        }
        if let Some(t) = &resp.timeline {
            crate::timeline::finish(t, resp.status, body_sent);
        }
        if let Body::File { file, len, .. } = &resp.body
            && body_sent < *len
        {
            self.forget_if_changed(file);
        }
    }

    /// After a file response ended short: if the file is no longer the version its cache
    /// entry describes (truncated or rewritten within the revalidation second, so the send
    /// ran out of bytes before the length the head promised), the entry is dropped, so the
    /// next request re-opens the file and is answered with its new version and length rather
    /// than cut short again. One `fstat`, only on this path; the header cache needs nothing,
    /// being keyed by the file's version.
    fn forget_if_changed(&self, file: &Arc<FileEntry>) {
        if let Some(files) = &self.caches.files
            && !file.unchanged()
            && lock(files).forget(file)
        {
            crate::errlog::info!(
                "{}: changed while being sent; its file-cache entry is dropped",
                file.path.display()
            );
        }
    }

    fn dispatch(&self, c: &mut ConnState, mut req: Request) -> Step {
        let h = &req.head;
        if h.chunked {
            // Read and thrown away like a Content-Length body (headers.rs admits only a lone
            // `chunked`, never with Content-Length). What already arrived is checked now, so
            // a body that is malformed or too large from its first bytes is answered 400/413.
            c.chunked = Some(amped_http::ChunkedDiscard::new(self.cfg.max_discard_body()));
            if let Err(status) = self.feed_chunked(c) {
                let code = status.as_u16();
                crate::errlog::info!("{}: refused with {code} (chunked body)", req.peer);
                c.closing = true;
                return Step::Respond(self.error_with(&req, status, b"", true));
            }
        }
        if let Some(n) = h.content_length {
            if n > self.cfg.max_discard_body() {
                crate::errlog::info!("{}: refused with 413 (a {n}-byte body)", req.peer);
                c.closing = true;
                return Step::Respond(self.error_with(
                    &req,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    b"",
                    true,
                ));
            }
            c.discard = n;
            let now = n.min(c.inbuf.len() as u64);
            c.inbuf.drain(..now as usize);
            c.discard -= now;
        }
        if let Some(port) = self.redirect_https {
            return self.https_redirect(&req, port);
        }
        match h.method {
            Method::Get | Method::Head => {}
            Method::Unknown => return Step::Respond(self.error(&req, StatusCode::NOT_IMPLEMENTED)),
            Method::Options if self.is_preflight(&req) => {
                return Step::Respond(self.preflight(&req));
            }
            _ => {
                return Step::Respond(self.error_with(
                    &req,
                    StatusCode::METHOD_NOT_ALLOWED,
                    b"Allow: GET, HEAD\r\n",
                    false,
                ));
            }
        }
        if let Some(sp) = &self.cfg.stats_path
            && h.target.split('?').next() == Some(sp.as_str())
        {
            let json = match h.target.split_once('?') {
                Some((_, "debox")) => crate::debox::report::endpoint(),
                _ => self.stats.to_json(),
            }
            .into_bytes();
            return Step::Respond(self.generated(
                &req,
                StatusCode::OK,
                b"Cache-Control: no-store\r\n",
                "application/json",
                json,
                false,
            ));
        }
        if let Some(mp) = &self.cfg.metrics_path
            && h.target.split('?').next() == Some(mp.as_str())
        {
            let text = crate::metrics::render(&self.stats).into_bytes();
            return Step::Respond(self.generated(
                &req,
                StatusCode::OK,
                b"Cache-Control: no-store\r\n",
                "text/plain; version=0.0.4; charset=utf-8",
                text,
                false,
            ));
        }
        let target = match amped_http::normalize_target(&h.target) {
            Ok(t) => t,
            Err(_) => return Step::Respond(self.error(&req, StatusCode::BAD_REQUEST)),
        };
        if !self.cfg.dotfiles && target.has_dot_segment() {
            return self.fail(c, req, StatusCode::NOT_FOUND);
        }
        req.target = Some(target);
        self.lookup(c, req)
    }

    /// Serves `req.target`: through the path cache, or a job that translates it.
    fn lookup(&self, c: &mut ConnState, req: Request) -> Step {
        let target = req.target.as_ref().expect("looked-up requests have a target");
        let url_path = target.to_url_path();
        let now = Instant::now();
        let lookup = match &self.caches.paths {
            Some(p) => lock(p).get(&url_path, now),
            None => PathLookup::Miss,
        };
        let translation = match lookup {
            PathLookup::Fresh(t) => Some(t),
            // A direct mapping: the cached open file can vouch for the translation — unless
            // variants are on, whose appearance only a translation notices, or the root is a
            // link, where it leads is checked by a job.
            PathLookup::Stale(Translation::File(p, v))
                if self.cfg.response.precompressed.is_empty()
                    && self.cfg.root_link.is_none()
                    && p == self.cfg.root.join(target.to_rel_path()) =>
            {
                self.revalidated_file(&p, now).map(|_| {
                    if let Some(paths) = &self.caches.paths {
                        lock(paths).touch(&url_path, now);
                    }
                    Translation::File(p, v)
                })
            }
            _ => None,
        };
        match translation {
            Some(t) => {
                bump(self.stats.path_cache_hits());
                req.with_timeline(|tl| tl.step("path_cache", Duration::ZERO, Some("hit")));
                self.after_translation(c, req, t)
            }
            None => {
                if self.caches.paths.is_some() {
                    bump(self.stats.path_cache_misses());
                    req.with_timeline(|t| t.step("path_cache", Duration::ZERO, Some("miss")));
                }
                self.park(c, req, url_path, None)
            }
        }
    }

    /// The cached open file for `path` if it is fresh, or stale but unchanged (checked with
    /// `fstat` on its descriptor, which never waits for the disk).
    fn revalidated_file(&self, path: &std::path::Path, now: Instant) -> Option<Arc<FileEntry>> {
        let files = self.caches.files.as_ref()?;
        let mut cache = lock(files);
        match cache.get(path, now) {
            FileLookup::Fresh(entry) => Some(entry),
            FileLookup::Stale(entry) if entry.unchanged() => {
                cache.touch(path, now);
                Some(entry)
            }
            FileLookup::Stale(_) | FileLookup::Miss => None,
        }
    }

    /// The file to open for `path`: the variant this client prefers among `variants` (noted
    /// in `req`, with the need for `Vary`), or `path` itself.
    fn choose_variant(&self, req: &mut Request, path: &Path, variants: EncodingSet) -> PathBuf {
        if variants.is_empty() {
            return path.to_path_buf();
        }
        req.vary = true;
        let accept = AcceptEncoding::parse(req.head.accept_encoding.as_deref());
        req.encoding = accept.choose(&self.cfg.response.precompressed, variants);
        match req.encoding {
            Some(e) => e.variant_of(path),
            None => path.to_path_buf(),
        }
    }

    fn after_translation(&self, c: &mut ConnState, mut req: Request, t: Translation) -> Step {
        match t {
            Translation::File(path, variants) => {
                let path = self.choose_variant(&mut req, &path, variants);
                if self.caches.files.is_some() {
                    if let Some(entry) = self.revalidated_file(&path, Instant::now()) {
                        bump(self.stats.file_cache_hits());
                        return Step::Respond(self.serve_file(&req, entry));
                    }
                    bump(self.stats.file_cache_misses());
                }
                let url_path = req.target.as_ref().map(|t| t.to_url_path()).unwrap_or_default();
                self.park(c, req, url_path, Some(Translation::File(path, EncodingSet::EMPTY)))
            }
            Translation::Listing(_) | Translation::Redirect(_) if req.substitute.is_active() => {
                // A fallback or error page must name a file.
                self.fail(c, req, StatusCode::NOT_FOUND)
            }
            Translation::Listing(_) => {
                let url_path = req.target.as_ref().map(|t| t.to_url_path()).unwrap_or_default();
                self.park(c, req, url_path, Some(t))
            }
            Translation::Redirect(location) => {
                // The query string goes along (`/dir?x=1` → `/dir/?x=1`); it is not part of
                // the cached translation.
                let query = req.head.target.find('?').map_or("", |i| &req.head.target[i..]);
                let extra = format!("Location: {location}{query}\r\n");
                Step::Respond(self.error_with(
                    &req,
                    StatusCode::MOVED_PERMANENTLY,
                    extra.as_bytes(),
                    false,
                ))
            }
            Translation::NotFound => self.fail(c, req, StatusCode::NOT_FOUND),
            Translation::Forbidden => self.fail(c, req, StatusCode::FORBIDDEN),
            Translation::Failed(f) => self.failure(c, req, f),
        }
    }

    fn park(
        &self,
        c: &mut ConnState,
        req: Request,
        url_path: String,
        known: Option<Translation>,
    ) -> Step {
        let target = req.target.as_ref().expect("parked requests have a target");
        let job = Job::Resolve {
            url_path,
            rel: target.to_rel_path(),
            trailing_slash: target.trailing_slash,
            known,
        };
        req.with_timeline(Timeline::job_submitted);
        c.pending = Some(Box::new(req));
        Step::Block(job)
    }

    /// Counts a job for a cold body chunk when it is submitted (the path it took is counted
    /// when it has run: [`Pipeline::run_job`]).
    pub fn count_cold_chunk(&self) {
        bump(self.stats.readahead_jobs());
    }

    /// Counts a cold chunk io_uring read around the page cache itself.
    pub fn count_direct_read(&self) {
        bump(self.stats.direct_reads());
    }

    /// Feeds buffered bytes to the chunked body being discarded; true once it has ended (the
    /// next request may follow). A body that turns out malformed or too large after its
    /// request was answered closes the connection.
    fn discard_chunked(&self, c: &mut ConnState) -> bool {
        match self.feed_chunked(c) {
            Ok(done) => done,
            Err(_) => {
                c.closing = true;
                false
            }
        }
    }

    fn feed_chunked(&self, c: &mut ConnState) -> Result<bool, StatusCode> {
        let Some(body) = &mut c.chunked else { return Ok(true) };
        match body.feed(&c.inbuf) {
            Ok((used, done)) => {
                c.inbuf.drain(..used);
                if done {
                    c.chunked = None;
                }
                Ok(done)
            }
            Err(amped_http::ChunkedError::TooLarge) => Err(StatusCode::PAYLOAD_TOO_LARGE),
            Err(amped_http::ChunkedError::Malformed(_)) => Err(StatusCode::BAD_REQUEST),
        }
    }

    /// Runs a job on the calling thread (blocking), not knowing the disk's pace.
    pub fn run_job(&self, job: Job) -> JobDone {
        self.run_job_paced(job, false)
    }

    /// Runs a job on the calling thread (blocking); `new_reads_first`: the driver's lane sees
    /// the disk with time to spare and slow ([`Job::run`]).
    pub fn run_job_paced(&self, job: Job, new_reads_first: bool) -> JobDone {
        let direct = matches!(job, Job::Copy { direct: true, .. });
        let done = job.run(&self.cfg, &self.caches.pages, new_reads_first);
        // The path a cold chunk took, known only now: a direct trip finds its page when its
        // read starts, or becomes a pipe fill.
        match &done {
            JobDone::Filled(..) => {
                bump(self.stats.pipe_fills());
                if direct {
                    bump(self.stats.direct_budget_full());
                }
            }
            JobDone::Copied(Ok(c)) => {
                bump(self.stats.copy_fills());
                if c.in_huge_page() {
                    bump(self.stats.direct_reads());
                }
            }
            _ => {}
        }
        done
    }
}

/// Seconds the client should wait when `c`'s request is over a per-client limit.
fn over_limit(limits: &ClientLimits, c: &ConnState) -> Option<u64> {
    if matches!(c.admission, conn::Admission::Refused) {
        return Some(1);
    }
    limits.take_request(c.peer.ip(), Instant::now()).err()
}

impl Request {
    /// A stand-in for a request refused before it could be parsed, keeping its raw first
    /// line (from `inbuf`, as much as arrived, at most [`RAW_LINE_MAX`] bytes) for the logs.
    fn refused(peer: SocketAddr, inbuf: &[u8]) -> Request {
        let mut req = Request::unparsed(peer);
        let start = inbuf.iter().position(|b| !matches!(b, b'\r' | b'\n')).unwrap_or(inbuf.len());
        let rest = &inbuf[start..];
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
        // A HEAD gets its error answer without a body (RFC 9110 §9.3.2), whatever went wrong.
        if line.starts_with(b"HEAD ") {
            req.head.method = Method::Head;
        }
        if !line.is_empty() {
            let cut = &line[..line.len().min(RAW_LINE_MAX)];
            let mut text = String::from_utf8_lossy(cut).into_owned();
            if cut.len() < line.len() {
                text.push_str("...");
            }
            req.raw_line = Some(text);
        }
        req
    }

    /// Adds to the request's timeline, if it has one.
    fn with_timeline(&self, f: impl FnOnce(&mut Timeline)) {
        if let Some(t) = self.timeline.borrow_mut().as_mut() {
            f(t);
        }
    }

    /// A stand-in for a request that could not be parsed (for error responses and logs).
    fn unparsed(peer: SocketAddr) -> Request {
        let head = RequestHead {
            method: Method::Unknown,
            method_raw: "-".into(),
            target: "-".into(),
            version: Version::Http11,
            head_len: 0,
            host: None,
            keep_alive: false,
            content_length: None,
            chunked: false,
            if_none_match: None,
            if_modified_since: None,
            range: None,
            if_range: None,
            user_agent: None,
            referer: None,
            accept_encoding: None,
            origin: None,
            access_control_request_method: None,
            access_control_request_headers: None,
        };
        Request::new(head, peer, false)
    }

    /// A request just parsed, served from its own target.
    fn new(head: RequestHead, peer: SocketAddr, keep_alive: bool) -> Request {
        Request {
            head,
            peer,
            received: SystemTime::now(),
            started: Instant::now(),
            keep_alive,
            target: None,
            encoding: None,
            vary: false,
            substitute: Substitute::None,
            raw_line: None,
            timeline: RefCell::new(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::fs_error::FsFailure;

    /// A translation that failed for a passing reason (exhaustion, I/O error) is answered but
    /// never kept in the path cache; a lasting one (404) is.
    #[test]
    fn passing_failures_are_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let args = crate::config::Args { root: Some(dir.path().into()), ..Default::default() };
        let cfg = Arc::new(Config::resolve(args).unwrap());
        let p = Pipeline::new(cfg, Default::default(), AccessLogger::off());
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let answer = |translation: Translation, url: &str| {
            let mut c = ConnState::new(peer);
            c.inbuf.extend_from_slice(format!("GET {url} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let Step::Block(_) = p.next(&mut c, false) else { panic!("{url}: no job") };
            let resolved = Resolved {
                url_path: url.into(),
                translation,
                translated_now: true,
                file: None,
                listing: None,
                at: Instant::now(),
                times: None,
            };
            match p.resume(&mut c, JobDone::Resolved(resolved)) {
                Step::Respond(r) => r,
                other => panic!("{url}: {other:?}"),
            }
        };
        let busy = answer(Translation::Failed(FsFailure::Exhausted), "/busy");
        assert_eq!(busy.status, 503);
        assert!(busy.close);
        assert_eq!(answer(Translation::Failed(FsFailure::Internal), "/broken").status, 500);
        assert_eq!(answer(Translation::NotFound, "/gone").status, 404);
        let mut paths = lock(p.caches.paths.as_ref().unwrap());
        let now = Instant::now();
        assert!(matches!(paths.get("/busy", now), PathLookup::Miss), "exhaustion was cached");
        assert!(matches!(paths.get("/broken", now), PathLookup::Miss), "an I/O error was cached");
        assert!(matches!(paths.get("/gone", now), PathLookup::Fresh(Translation::NotFound)));
    }
}
