//! Pathname translation: a normalised URL path → what to serve. This touches the file system
//! (`canonicalize`, `metadata`) and so may block on disk: it only ever runs inside a job
//! (inline in SPED, on a helper in AMPED), never directly in an event loop.
//!
//! Policy: the target was already normalised (no `..` can climb above the root); symlinks are
//! resolved and the result must still lie under the canonical root unless
//! `--follow-outside-symlinks`; a directory is served through its `index.html`, or a listing
//! with `--listing`; a directory named without its trailing slash is redirected; anything that
//! is not a regular file (FIFO, socket, device) is refused, so no open can hang.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The outcome of translating one URL path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Translation {
    /// Serve this regular file (canonical path).
    File(PathBuf),
    /// Redirect (301) to this URL path.
    Redirect(String),
    /// List this directory (canonical path).
    Listing(PathBuf),
    /// 404.
    NotFound,
    /// 403.
    Forbidden,
}

/// What the translation needs to know about the request and the policy.
pub struct TranslateRequest<'a> {
    /// Canonical document root.
    pub root: &'a Path,
    /// Relative path from the normalised target.
    pub rel: &'a Path,
    /// The target ended in `/`.
    pub trailing_slash: bool,
    /// The URL path, re-encoded (for redirects).
    pub url_path: &'a str,
    /// Allow symlinks leading outside the root.
    pub follow_outside: bool,
    /// Directory listings on.
    pub listing: bool,
}

/// Translates one request (blocking: runs in a job).
pub fn translate(req: &TranslateRequest<'_>) -> Translation {
    let joined = req.root.join(req.rel);
    let real = match canonical_inside(req, &joined) {
        Ok(p) => p,
        Err(t) => return t,
    };
    let meta = match std::fs::metadata(&real) {
        Ok(m) => m,
        Err(e) => return from_io(e.kind()),
    };
    if meta.is_dir() {
        if !req.trailing_slash {
            return Translation::Redirect(format!("{}/", req.url_path.trim_end_matches('/')));
        }
        let index = real.join("index.html");
        match canonical_inside(req, &index) {
            Ok(idx) if idx.is_file() => return Translation::File(idx),
            Ok(_) | Err(Translation::NotFound) => {}
            Err(other) => return other,
        }
        return if req.listing { Translation::Listing(real) } else { Translation::NotFound };
    }
    if !meta.is_file() {
        return Translation::Forbidden;
    }
    if req.trailing_slash {
        return Translation::NotFound;
    }
    Translation::File(real)
}

fn canonical_inside(req: &TranslateRequest<'_>, p: &Path) -> Result<PathBuf, Translation> {
    let real = std::fs::canonicalize(p).map_err(|e| from_io(e.kind()))?;
    if !req.follow_outside && !real.starts_with(req.root) {
        // A symlink leads out of the document root: indistinguishable from absent.
        return Err(Translation::NotFound);
    }
    Ok(real)
}

fn from_io(kind: ErrorKind) -> Translation {
    match kind {
        ErrorKind::PermissionDenied => Translation::Forbidden,
        _ => Translation::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(root: &Path, rel: &str, slash: bool, follow: bool) -> Translation {
        let url = format!("/{rel}");
        translate(&TranslateRequest {
            root,
            rel: Path::new(rel),
            trailing_slash: slash,
            url_path: &url,
            follow_outside: follow,
            listing: false,
        })
    }

    #[test]
    fn files_directories_redirects_and_symlinks() {
        let outer = tempfile::tempdir().unwrap();
        let root_dir = outer.path().join("root");
        std::fs::create_dir_all(root_dir.join("d")).unwrap();
        std::fs::create_dir_all(root_dir.join("e")).unwrap();
        std::fs::write(root_dir.join("d/index.html"), "i").unwrap();
        std::fs::write(root_dir.join("f.txt"), "f").unwrap();
        std::fs::write(outer.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), root_dir.join("out")).unwrap();
        std::os::unix::fs::symlink(root_dir.join("f.txt"), root_dir.join("in")).unwrap();
        let root = std::fs::canonicalize(&root_dir).unwrap();
        assert_eq!(run(&root, "f.txt", false, false), Translation::File(root.join("f.txt")));
        assert_eq!(run(&root, "f.txt", true, false), Translation::NotFound);
        assert_eq!(run(&root, "d", false, false), Translation::Redirect("/d/".into()));
        assert_eq!(run(&root, "d", true, false), Translation::File(root.join("d/index.html")));
        assert_eq!(run(&root, "e", true, false), Translation::NotFound);
        assert_eq!(run(&root, "nope", false, false), Translation::NotFound);
        assert_eq!(run(&root, "out", false, false), Translation::NotFound);
        assert!(matches!(run(&root, "out", false, true), Translation::File(_)));
        assert_eq!(run(&root, "in", false, false), Translation::File(root.join("f.txt")));
    }
}
