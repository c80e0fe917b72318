//! Pure HTTP/1.1 codec for amped (no I/O, no threads, no unsafe).
#![forbid(unsafe_code)]
