//! Answers for requests whose own target yields no file: the SPA fallback (`--spa-fallback`:
//! 200 with the application's entry page for any GET/HEAD of a path with nothing behind it)
//! and custom error pages (`--error-page`). Both are served like any file — path cache, file
//! cache, a job when the file system must be asked — so substituting never blocks the loop.
//!
//! Each request substitutes at most twice, always forward: its route → the fallback file →
//! (fallback missing) the 404 page → (page missing) the built-in page. No configuration can
//! make it loop, and a missing or unreadable page costs the client nothing but the styling.

use super::{ConnState, Pipeline, Request, Response, Step};
use crate::cache::FileEntry;
use amped_http::{Method, StatusCode, normalize_target};
use std::sync::Arc;

/// What answers a request instead of its own target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Substitute {
    /// Nothing: the request is served from its own target.
    None,
    /// The SPA fallback file, answered 200.
    SpaFallback,
    /// The custom page for this status.
    ErrorPage(StatusCode),
}

impl Substitute {
    /// Whether the request is being answered from another target than its own.
    pub(super) fn is_active(self) -> bool {
        self != Substitute::None
    }
}

impl Pipeline {
    /// Answers `req` with `status` — through the SPA fallback or a custom page when one is
    /// configured and not already being tried, else with the built-in page.
    pub(super) fn fail(&self, c: &mut ConnState, mut req: Request, status: StatusCode) -> Step {
        let opts = &self.cfg.response;
        let (status, spa) = match req.substitute {
            Substitute::ErrorPage(original) => {
                return Step::Respond(self.error_with(&req, original, b"", c.closing));
            }
            // The fallback file is missing: the route was not found after all.
            Substitute::SpaFallback => (StatusCode::NOT_FOUND, None),
            Substitute::None => (status, self.spa_route(&req, status)),
        };
        let next = spa.or_else(|| {
            let page = opts.error_page(status.as_u16())?;
            Some((Substitute::ErrorPage(status), page))
        });
        // The paths were validated at start-up; normalising cannot fail here.
        match next.and_then(|(sub, path)| Some((sub, normalize_target(path).ok()?))) {
            Some((sub, target)) => {
                req.substitute = sub;
                req.target = Some(target);
                req.encoding = None;
                req.vary = false;
                self.lookup(c, req)
            }
            None => Step::Respond(self.error_with(&req, status, b"", c.closing)),
        }
    }

    /// The SPA fallback for a request that found no file, if it applies: a GET or HEAD, a 404.
    fn spa_route<'a>(&'a self, req: &Request, status: StatusCode) -> Option<(Substitute, &'a str)> {
        let fallback = self.cfg.response.spa_fallback.as_deref()?;
        let route = status == StatusCode::NOT_FOUND
            && matches!(req.head.method, Method::Get | Method::Head);
        route.then_some((Substitute::SpaFallback, fallback))
    }

    /// The response for `req` from the file `f` it resolved to: a custom error page keeps its
    /// status, anything else is served as the file it is (conditionals, ranges).
    pub(super) fn serve_file(&self, req: &Request, f: Arc<FileEntry>) -> Response {
        match req.substitute {
            Substitute::ErrorPage(status) => self.respond_error_page(req, f, status),
            Substitute::None | Substitute::SpaFallback => self.respond_file(req, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Body, JobDone, Pipeline, Step};
    use crate::config::Args;
    use crate::pipeline::ConnState;

    /// Drives `step` to a response, running jobs inline (as SPED does).
    fn respond(p: &Pipeline, c: &mut ConnState, mut step: Step) -> super::Response {
        for _ in 0..4 {
            match step {
                Step::Respond(r) => return r,
                Step::Block(job) => step = p.resume(c, p.run_job(job)),
                other => panic!("unexpected step {other:?}"),
            }
        }
        panic!("no response after four jobs")
    }

    /// A job that fails (a helper panicked) is answered with the 500 page, connection closed.
    #[test]
    fn a_failed_job_gets_the_500_page_and_closes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("500.html"), "<p>sorry</p>").unwrap();
        let p = Pipeline::for_tests(Args {
            root: Some(dir.path().to_path_buf()),
            error_page: vec!["500=/500.html".into()],
            ..Default::default()
        });
        let mut c = ConnState::new("127.0.0.1:9".parse().unwrap());
        c.received(b"GET /anything HTTP/1.1\r\nHost: t\r\n\r\n");
        let Step::Block(_job) = p.next(&mut c, false) else { panic!("a path-cache miss blocks") };
        let step = p.resume(&mut c, JobDone::Failed);
        let r = respond(&p, &mut c, step);
        let head = String::from_utf8(r.head.clone()).unwrap();
        assert!(head.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
        let Body::Memory(bytes, range) = &r.body else {
            panic!("the page in memory: {:?}", r.body)
        };
        assert_eq!(&bytes[range.clone()], b"<p>sorry</p>");
        assert!(r.close);
        assert!(matches!(p.next(&mut c, false), Step::Close));
    }
}
