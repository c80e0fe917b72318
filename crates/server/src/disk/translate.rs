//! Pathname translation: a normalised URL path → what to serve. This touches the file system
//! (`canonicalize`, `metadata`) and so may block on disk: it only ever runs inside a job
//! (inline in SPED, on a helper in AMPED), never directly in an event loop.
//!
//! Policy: the target was already normalised (no `..` can climb above the root); symlinks are
//! resolved and the result must still lie under the canonical root unless
//! `--follow-outside-symlinks`; a directory is served through its `index.html`, or a listing
//! with `--listing`; a directory named without its trailing slash is redirected; anything that
//! is not a regular file (FIFO, socket, device) is refused, so no open can hang. With
//! `--precompressed`, the variants beside a file (`app.js.br` …) are looked for here too, under
//! the same rules (regular files, inside the root), so finding them never blocks an event loop
//! and the path cache remembers them with the translation.

use super::fs_error::{FsFailure, judge};
use amped_http::{Encoding, EncodingSet};
use std::path::{Path, PathBuf};

/// The outcome of translating one URL path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Translation {
    /// Serve this regular file (canonical path), which has these pre-compressed variants
    /// beside it ([`Encoding::variant_of`](amped_http::Encoding::variant_of)).
    File(PathBuf, EncodingSet),
    /// Redirect (301) to this URL path.
    Redirect(String),
    /// List this directory (canonical path).
    Listing(PathBuf),
    /// 404.
    NotFound,
    /// 403.
    Forbidden,
    /// The file system could not answer (descriptors or memory exhausted: 503; an I/O error:
    /// 500). Never cached: it says nothing lasting about the path.
    Failed(FsFailure),
}

impl Translation {
    /// True when the translation may be kept in the path cache.
    pub fn is_cacheable(&self) -> bool {
        !matches!(self, Translation::Failed(_))
    }
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
    /// Pre-compressed variants to look for (empty: none).
    pub precompressed: &'a [Encoding],
}

/// Translates one request (blocking: runs in a job).
pub fn translate(req: &TranslateRequest<'_>) -> Translation {
    let joined = req.root.join(req.rel);
    let real = match canonical_inside(req, &joined) {
        Ok(p) => p,
        Err(t) => return t,
    };
    let meta = match amped_sys::files::stat(&real) {
        Ok(m) => m,
        Err(e) => return from_io(&e, &real),
    };
    if meta.is_dir() {
        if !req.trailing_slash {
            return Translation::Redirect(format!("{}/", req.url_path.trim_end_matches('/')));
        }
        let index = real.join("index.html");
        match canonical_inside(req, &index) {
            Ok(idx) if idx.is_file() => return file(req, idx),
            Ok(_) | Err(Translation::NotFound) => {}
            Err(other) => return other,
        }
        return if req.listing { Translation::Listing(real) } else { Translation::NotFound };
    }
    if !meta.is_file() {
        crate::errlog::info!("{}: not a regular file (403)", real.display());
        return Translation::Forbidden;
    }
    if req.trailing_slash {
        return Translation::NotFound;
    }
    file(req, real)
}

/// A file to serve, with the variants found beside it.
fn file(req: &TranslateRequest<'_>, real: PathBuf) -> Translation {
    let mut variants = EncodingSet::EMPTY;
    for &e in req.precompressed {
        let found = canonical_inside(req, &e.variant_of(&real))
            .is_ok_and(|v| amped_sys::files::stat(&v).is_ok_and(|m| m.is_file()));
        if found {
            variants.insert(e);
        }
    }
    Translation::File(real, variants)
}

fn canonical_inside(req: &TranslateRequest<'_>, p: &Path) -> Result<PathBuf, Translation> {
    let real = amped_sys::files::canonicalize(p).map_err(|e| from_io(&e, p))?;
    if !req.follow_outside && !real.starts_with(req.root) {
        // A symlink leads out of the document root: indistinguishable from absent.
        return Err(Translation::NotFound);
    }
    Ok(real)
}

/// The translation of a file-system error, by the one table in [`super::fs_error`].
pub fn from_io(e: &std::io::Error, path: &Path) -> Translation {
    match judge(e, path) {
        FsFailure::NotFound => Translation::NotFound,
        FsFailure::Forbidden => Translation::Forbidden,
        other => Translation::Failed(other),
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
            precompressed: &[],
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
        assert_eq!(
            run(&root, "f.txt", false, false),
            Translation::File(root.join("f.txt"), EncodingSet::EMPTY)
        );
        assert_eq!(run(&root, "f.txt", true, false), Translation::NotFound);
        assert_eq!(run(&root, "d", false, false), Translation::Redirect("/d/".into()));
        assert_eq!(
            run(&root, "d", true, false),
            Translation::File(root.join("d/index.html"), EncodingSet::EMPTY)
        );
        assert_eq!(run(&root, "e", true, false), Translation::NotFound);
        assert_eq!(run(&root, "nope", false, false), Translation::NotFound);
        assert_eq!(run(&root, "out", false, false), Translation::NotFound);
        assert!(matches!(run(&root, "out", false, true), Translation::File(..)));
        assert_eq!(
            run(&root, "in", false, false),
            Translation::File(root.join("f.txt"), EncodingSet::EMPTY)
        );
    }

    #[test]
    fn variants_beside_a_file_are_found_inside_the_root_only() {
        let outer = tempfile::tempdir().unwrap();
        let root_dir = outer.path().join("root");
        std::fs::create_dir_all(root_dir.join("d/index.html.gz")).unwrap(); // a directory
        std::fs::write(root_dir.join("d/index.html"), "i").unwrap();
        for f in ["app.js", "app.js.br", "app.js.gz"] {
            std::fs::write(root_dir.join(f), "x").unwrap();
        }
        std::fs::write(outer.path().join("secret.zst"), "s").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret.zst"), root_dir.join("app.js.zst"))
            .unwrap();
        let root = std::fs::canonicalize(&root_dir).unwrap();
        let all = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip];
        let run = |rel: &str, slash: bool, pre: &[Encoding]| {
            translate(&TranslateRequest {
                root: &root,
                rel: Path::new(rel),
                trailing_slash: slash,
                url_path: rel,
                follow_outside: false,
                listing: false,
                precompressed: pre,
            })
        };
        let Translation::File(p, v) = run("app.js", false, &all) else { panic!("a file") };
        assert_eq!(p, root.join("app.js"));
        assert!(v.contains(Encoding::Brotli) && v.contains(Encoding::Gzip));
        assert!(!v.contains(Encoding::Zstd), "a variant leading out of the root is ignored");
        let Translation::File(_, v) = run("app.js", false, &[Encoding::Gzip]) else { panic!() };
        assert!(v.contains(Encoding::Gzip) && !v.contains(Encoding::Brotli), "only those asked");
        let Translation::File(_, v) = run("d", true, &all) else { panic!("index file") };
        assert!(v.is_empty(), "a directory is no variant");
    }
}
