//! One GET of a running amped's stats endpoint on loopback, and the JSON of the answer: what
//! the stage sampler, the DeBox probe and the counters probe each read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The raw answer to `GET path` from the server on `port` (connect within 2 s, the answer
/// within `wait`); `None` if it did not come in time.
pub fn get(port: u16, path: &str, wait: Duration) -> Option<Vec<u8>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    Some(raw)
}

/// The JSON body of a raw HTTP answer; `None` if it has none.
pub fn json_body(raw: &[u8]) -> Option<serde_json::Value> {
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    serde_json::from_slice(&raw[at + 4..]).ok()
}
