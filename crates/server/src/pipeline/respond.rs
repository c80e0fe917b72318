//! Building responses: a file (200, 206, 304, 416 after the conditional and range logic), an
//! error page, a redirect, a listing, the stats document. Pure apart from reading the clock
//! and the header cache; no I/O.

use super::{Body, Request, Response};
use crate::access_log::LogRecord;
use crate::cache::header::{HeadContext, etag, file_header_lines};
use crate::cache::{FileEntry, lock};
use amped_http::{HeadWriter, Method, RangeOutcome, StatusCode, Version};
use std::sync::Arc;

impl super::Pipeline {
    /// The response for `req` served from `f`.
    pub(super) fn respond_file(&self, req: &Request, f: Arc<FileEntry>) -> Response {
        let h = &req.head;
        let lines = self.header_lines(&f, self.head_context(req));
        let etag_needed = h.if_none_match.is_some() || h.if_range.is_some();
        let etag = if etag_needed { etag(&f, req.encoding) } else { String::new() };
        if (h.if_none_match.is_some() || h.if_modified_since.is_some())
            && amped_http::is_not_modified(
                h.if_none_match.as_deref(),
                h.if_modified_since.as_deref(),
                &etag,
                f.mtime,
            )
        {
            let mut head = Vec::with_capacity(256);
            let mut w = HeadWriter::new(&mut head, StatusCode::NOT_MODIFIED);
            w.date().raw(&lines);
            connection_header(&mut w, req);
            w.finish();
            return self.response(req, StatusCode::NOT_MODIFIED, head, Body::None);
        }
        let mut range = match &h.range {
            Some(r) => amped_http::parse_range(r, f.size),
            None => RangeOutcome::Full,
        };
        if let Some(ir) = &h.if_range
            && !amped_http::if_range_allows(ir, &etag, f.mtime)
        {
            range = RangeOutcome::Full;
        }
        let (status, start, len) = match range {
            RangeOutcome::Full => (StatusCode::OK, 0, f.size),
            RangeOutcome::Partial { start, end_inclusive } => {
                (StatusCode::PARTIAL_CONTENT, start, end_inclusive - start + 1)
            }
            RangeOutcome::Unsatisfiable => {
                // The size is the variant's: say which variant it is of.
                let vary = if req.vary { "Vary: Accept-Encoding\r\n" } else { "" };
                let extra = format!("Content-Range: bytes */{}\r\n{vary}", f.size);
                return self.error_with(
                    req,
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    extra.as_bytes(),
                    false,
                );
            }
        };
        let mut head = Vec::with_capacity(lines.len() + 128);
        let mut w = HeadWriter::new(&mut head, status);
        w.date().raw(&lines).header_u64("Content-Length", len);
        if status == StatusCode::PARTIAL_CONTENT {
            let cr = format!("bytes {}-{}/{}", start, start + len - 1, f.size);
            w.header("Content-Range", cr.as_bytes());
        }
        connection_header(&mut w, req);
        w.finish();
        let body = if h.method == Method::Head || len == 0 {
            Body::None
        } else if let Some(mem) = &f.body {
            Body::Memory(mem.clone(), start as usize..(start + len) as usize)
        } else {
            Body::File { file: f, offset: start, len }
        };
        self.response(req, status, head, body)
    }

    /// A custom error page: the file `f` with `status`, whole, never a 304 or a range (those
    /// describe the page, not the missing resource), without validators or cache rules.
    pub(super) fn respond_error_page(
        &self,
        req: &Request,
        f: Arc<FileEntry>,
        status: StatusCode,
    ) -> Response {
        let mut head = Vec::with_capacity(256);
        let mut w = HeadWriter::new(&mut head, status);
        self.page_fields(&mut w, &amped_http::content_type_for(&f.path), f.size);
        connection_header(&mut w, req);
        w.finish();
        let body = if req.head.method == Method::Head || f.size == 0 {
            Body::None
        } else if let Some(mem) = &f.body {
            Body::Memory(mem.clone(), 0..mem.len())
        } else {
            let len = f.size;
            Body::File { file: f, offset: 0, len }
        };
        self.response(req, status, head, body)
    }

    /// What besides the file shapes its header lines for this request.
    fn head_context(&self, req: &Request) -> HeadContext {
        let rules = &self.cfg.response;
        let cache_rule = match &req.target {
            Some(t) if !rules.cache_control.is_empty() => {
                rules.cache_control_for(&t.to_url_path()).map(|(i, _)| i)
            }
            _ => None,
        };
        HeadContext { encoding: req.encoding, vary: req.vary, cache_rule }
    }

    /// Header lines for `f` in `ctx`, from the header cache when it is on.
    fn header_lines(&self, f: &FileEntry, ctx: HeadContext) -> Arc<[u8]> {
        let opts = &self.cfg.response;
        let Some(cache) = &self.caches.headers else {
            return file_header_lines(f, ctx, opts, self.cfg.server_header.as_deref()).into();
        };
        let mut c = lock(cache);
        if let Some(lines) = c.get(f, ctx) {
            crate::stats::bump(self.stats.header_cache_hits());
            return lines;
        }
        let lines: Arc<[u8]> =
            file_header_lines(f, ctx, opts, self.cfg.server_header.as_deref()).into();
        c.put(f, ctx, lines.clone());
        lines
    }

    /// An HTML error page.
    pub(super) fn error(&self, req: &Request, status: StatusCode) -> Response {
        self.error_with(req, status, b"", false)
    }

    /// The answer to a file-system failure ([`crate::disk::fs_error`]): a lasting one (404, 403) like
    /// any such status (custom error pages, SPA fallback); a passing one (exhaustion, I/O
    /// error) with the built-in page and its headers, closing the connection, which gives a
    /// descriptor back.
    pub(super) fn failure(
        &self,
        c: &mut super::ConnState,
        req: Request,
        f: crate::disk::fs_error::FsFailure,
    ) -> super::Step {
        if f.is_lasting() {
            return self.fail(c, req, f.status());
        }
        c.closing = true;
        super::Step::Respond(self.error_with(&req, f.status(), f.extra_headers(), true))
    }

    /// An error page with extra header lines; `close` forces `Connection: close`.
    pub(super) fn error_with(
        &self,
        req: &Request,
        status: StatusCode,
        extra: &[u8],
        close: bool,
    ) -> Response {
        let page = amped_http::error_body(status);
        self.generated(req, status, extra, "text/html; charset=utf-8", page, close)
    }

    /// A response whose body the server made (error page, listing, stats, redirect page).
    pub(super) fn generated(
        &self,
        req: &Request,
        status: StatusCode,
        extra: &[u8],
        content_type: &str,
        page: Vec<u8>,
        close: bool,
    ) -> Response {
        let mut head = Vec::with_capacity(256);
        let mut w = HeadWriter::new(&mut head, status);
        self.page_fields(&mut w, content_type, page.len() as u64);
        w.raw(extra);
        let close = close || !req.keep_alive;
        if close {
            w.header("Connection", b"close");
        } else if req.head.version == Version::Http10 {
            w.header("Connection", b"keep-alive");
        }
        w.finish();
        let body = if req.head.method == Method::Head || page.is_empty() {
            Body::None
        } else {
            let len = page.len();
            Body::Memory(page.into(), 0..len)
        };
        let mut resp = self.response(req, status, head, body);
        resp.close = close;
        resp
    }

    /// The fields of a page that is no file's representation (generated, or a custom error
    /// page): date, server, type, length and the configured headers.
    fn page_fields(&self, w: &mut HeadWriter<'_>, content_type: &str, len: u64) {
        w.date();
        if let Some(name) = &self.cfg.server_header {
            w.header("Server", name.as_bytes());
        }
        w.header("Content-Type", content_type.as_bytes())
            .header_u64("Content-Length", len)
            .raw(&self.cfg.response.common_headers);
    }

    pub(super) fn response(
        &self,
        req: &Request,
        status: StatusCode,
        head: Vec<u8>,
        body: Body,
    ) -> Response {
        crate::stats::bump(self.stats.requests());
        let log = self.log.enabled().then(|| {
            Box::new(LogRecord {
                peer: req.peer.ip(),
                time: req.received,
                started: req.started,
                request_line: req.raw_line.clone().unwrap_or_else(|| {
                    format!(
                        "{} {} {}",
                        req.head.method_raw,
                        req.head.target,
                        req.head.version.as_str()
                    )
                }),
                status: status.as_u16(),
                referer: req.head.referer.clone(),
                user_agent: req.head.user_agent.clone(),
            })
        });
        let timeline = req.timeline.borrow_mut().take();
        Response { head, body, close: !req.keep_alive, status: status.as_u16(), log, timeline }
    }
}

pub(super) fn connection_header(w: &mut HeadWriter<'_>, req: &Request) {
    if !req.keep_alive {
        w.header("Connection", b"close");
    } else if req.head.version == Version::Http10 {
        w.header("Connection", b"keep-alive");
    }
}
