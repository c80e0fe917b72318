//! Pure HTTP/1.1 codec for amped (no I/O, no threads, no unsafe).
//!
//! Everything a server needs to understand a request and describe a response, as functions of
//! bytes and values, so it can be tested without sockets:
//!
//! - `parse` / `headers` / `request` / `error`: one request head from a byte buffer, with size
//!   limits and the RFC 9112 framing rules; every rejection maps to one status.
//! - `target`: request-target → a relative path that cannot leave the document root.
//! - `range`, `conditional`: Range, If-None-Match / If-Modified-Since, If-Range, ETags.
//! - `accept`: Accept-Encoding q-values and the choice of a pre-compressed variant.
//! - `field`: validation of configured header fields, and the URL-path globs of header rules.
//! - `status`, `response`, `date`, `mime`: the status table, response-head encoding into a
//!   reusable buffer, the cached Date value and Content-Type guessing.
//!
//! A request's way through the codec:
//!
//! ```
//! use amped_http::*;
//!
//! let buf = b"GET /docs/../index.html HTTP/1.1\r\nHost: example.com\r\nRange: bytes=0-9\r\n\r\n";
//! let head = parse_request(buf, &Limits::default()).unwrap().expect("complete head");
//! assert_eq!((head.method, head.version, head.keep_alive), (Method::Get, Version::Http11, true));
//!
//! let path = normalize_target(&head.target).unwrap();
//! assert_eq!(path.to_rel_path(), std::path::Path::new("index.html"));
//!
//! let len = 1000;
//! let RangeOutcome::Partial { start, end_inclusive } = parse_range(head.range.as_deref().unwrap(), len)
//! else { unreachable!() };
//!
//! let mut out = Vec::new();
//! HeadWriter::new(&mut out, StatusCode::PARTIAL_CONTENT)
//!     .header("Content-Type", content_type_for(&path.to_rel_path()).as_bytes())
//!     .header("Content-Range", format!("bytes {start}-{end_inclusive}/{len}").as_bytes())
//!     .header_u64("Content-Length", end_inclusive - start + 1)
//!     .finish();
//! assert!(out.starts_with(b"HTTP/1.1 206 Partial Content\r\nContent-Type: text/html; charset=utf-8\r\n"));
//! assert!(out.ends_with(b"Content-Range: bytes 0-9/1000\r\nContent-Length: 10\r\n\r\n"));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod accept;
mod chunked;
mod conditional;
mod date;
mod error;
mod field;
mod headers;
mod mime;
mod parse;
mod range;
mod request;
mod response;
mod status;
mod target;

pub use accept::{AcceptEncoding, Encoding, EncodingSet};
pub use chunked::{ChunkedDiscard, ChunkedError};
pub use conditional::{if_range_allows, is_not_modified, make_etag};
pub use date::{fmt_http_date, http_date_now};
pub use error::HttpError;
pub use field::{glob_matches, is_field_name, is_field_value};
pub use mime::content_type_for;
pub use parse::parse_request;
pub use range::{RangeOutcome, parse_range};
pub use request::{Limits, Method, RequestHead, Version};
pub use response::{HeadWriter, error_body, html_escape};
pub use status::StatusCode;
pub use target::{TargetError, TargetPath, normalize_target};
