//! The one table from file-system errors to answers. Every `io::Error` met while translating a
//! path, opening a file, reading a small body or listing a directory goes through
//! [`classify`]; nothing else in the server decides which status an errno deserves.
//!
//! | error | answer | cached as a negative? | error log ([`crate::errlog`]) |
//! |---|---|---|---|
//! | `ENOENT`, `ENOTDIR`, `ENAMETOOLONG`, `ELOOP` | 404 | yes (1 s, like any translation) | no |
//! | `EACCES`, `EPERM`, not a regular file | 403 | yes | warn, with the path |
//! | `EMFILE`, `ENFILE`, `ENOMEM`, `EAGAIN`, `ENOBUFS` | 503 + `Retry-After: 1`, close | **never** | warn, with the path |
//! | `EIO` and anything else | 500, close | **never** | error, with the path |
//!
//! `ELOOP` (a symlink cycle) is a link that leads nowhere, like a dangling one, hence 404. The
//! policy refusals decided elsewhere are: dotfiles → 404 (unless `--dotfiles`), a symlink leading
//! outside the root → 404 (unless `--follow-outside-symlinks`), a FIFO, socket or device → 403.
//!
//! Why exhaustion must not look like absence: a 404 is cacheable (RFC 9111 §4.2.2), so a CDN or
//! browser in front would remember an existing file as missing. A 503 with `Retry-After` says
//! "try again", and closing the connection hands one descriptor back at once.

use amped_http::StatusCode;
use std::io;

/// What a file-system error means for the request that met it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsFailure {
    /// The name leads nowhere: 404.
    NotFound,
    /// The file exists but may not be served: 403.
    Forbidden,
    /// The server ran out of a resource (descriptors, memory): 503, try again.
    Exhausted,
    /// An I/O error or anything unexpected: 500.
    Internal,
}

/// The table: which [`FsFailure`] an error is.
pub fn classify(e: &io::Error) -> FsFailure {
    if let Some(code) = e.raw_os_error() {
        return match code {
            libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG | libc::ELOOP => FsFailure::NotFound,
            libc::EACCES | libc::EPERM => FsFailure::Forbidden,
            libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN | libc::ENOBUFS => {
                FsFailure::Exhausted
            }
            _ => FsFailure::Internal,
        };
    }
    // Errors the server makes itself ("not a regular file") carry a kind, not an errno.
    match e.kind() {
        io::ErrorKind::NotFound => FsFailure::NotFound,
        io::ErrorKind::PermissionDenied => FsFailure::Forbidden,
        io::ErrorKind::OutOfMemory => FsFailure::Exhausted,
        _ => FsFailure::Internal,
    }
}

impl FsFailure {
    /// The status this failure is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            FsFailure::NotFound => StatusCode::NOT_FOUND,
            FsFailure::Forbidden => StatusCode::FORBIDDEN,
            FsFailure::Exhausted => StatusCode::SERVICE_UNAVAILABLE,
            FsFailure::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// True when the answer says something lasting about the file, so a cache may keep it;
    /// false for a passing condition of the server (exhaustion, I/O errors).
    pub fn is_lasting(self) -> bool {
        matches!(self, FsFailure::NotFound | FsFailure::Forbidden)
    }

    /// Extra header lines of the answer.
    pub fn extra_headers(self) -> &'static [u8] {
        match self {
            FsFailure::Exhausted => b"Retry-After: 1\r\n",
            _ => b"",
        }
    }
}

/// Classifies `e` met on `what` (a path, for the log) and writes the error-log line the table
/// asks for. Returns the failure.
pub fn judge(e: &io::Error, what: &std::path::Path) -> FsFailure {
    let f = classify(e);
    let (path, why, status) = (what.display(), crate::errlog::reason(e), f.status().as_u16());
    match f {
        FsFailure::NotFound => {}
        FsFailure::Forbidden | FsFailure::Exhausted => {
            crate::errlog::warn!("{path}: {why} ({status})");
        }
        FsFailure::Internal => crate::errlog::error!("{path}: {why} ({status})"),
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_errno_has_one_answer() {
        let cases = [
            (libc::ENOENT, 404, true),
            (libc::ENOTDIR, 404, true),
            (libc::ENAMETOOLONG, 404, true),
            (libc::ELOOP, 404, true),
            (libc::EACCES, 403, true),
            (libc::EPERM, 403, true),
            (libc::EMFILE, 503, false),
            (libc::ENFILE, 503, false),
            (libc::ENOMEM, 503, false),
            (libc::EAGAIN, 503, false),
            (libc::EIO, 500, false),
            (libc::EBADF, 500, false),
            (libc::EOVERFLOW, 500, false),
        ];
        for (errno, status, lasting) in cases {
            let f = classify(&io::Error::from_raw_os_error(errno));
            assert_eq!(f.status().as_u16(), status, "errno {errno}");
            assert_eq!(f.is_lasting(), lasting, "errno {errno}");
            assert_eq!(f == FsFailure::Exhausted, !f.extra_headers().is_empty(), "errno {errno}");
        }
    }

    #[test]
    fn errors_without_an_errno_map_by_kind() {
        let made = |k| io::Error::new(k, "made here");
        assert_eq!(classify(&made(io::ErrorKind::PermissionDenied)), FsFailure::Forbidden);
        assert_eq!(classify(&made(io::ErrorKind::NotFound)), FsFailure::NotFound);
        assert_eq!(classify(&made(io::ErrorKind::OutOfMemory)), FsFailure::Exhausted);
        assert_eq!(
            classify(&io::Error::other("open finished without a descriptor")),
            FsFailure::Internal
        );
    }
}
