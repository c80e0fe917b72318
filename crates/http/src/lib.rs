//! Pure HTTP/1.1 codec for amped (no I/O, no threads, no unsafe).
//!
//! Everything a server needs to understand a request and describe a response, as functions of
//! bytes and values, so it can be tested without sockets:
//!
//! - `parse` / `headers` / `request` / `error`: one request head from a byte buffer, with size
//!   limits and the RFC 9112 framing rules; every rejection maps to one status.
//! - `target`: request-target → a relative path that cannot leave the document root.
//! - `range`, `conditional`: Range, If-None-Match / If-Modified-Since, If-Range, ETags.
//! - `status`, `response`, `date`, `mime`: the status table, response-head encoding into a
//!   reusable buffer, the cached Date value and Content-Type guessing.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod conditional;
mod date;
mod error;
mod headers;
mod mime;
mod parse;
mod range;
mod request;
mod response;
mod status;
mod target;

pub use conditional::{if_range_allows, is_not_modified, make_etag};
pub use date::{fmt_http_date, http_date_now};
pub use error::HttpError;
pub use mime::content_type_for;
pub use parse::parse_request;
pub use range::{RangeOutcome, parse_range};
pub use request::{Limits, Method, RequestHead, Version};
pub use response::{HeadWriter, error_body, html_escape};
pub use status::StatusCode;
pub use target::{TargetError, TargetPath, normalize_target};
