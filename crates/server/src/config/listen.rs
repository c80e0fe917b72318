//! `--listen` values: where the server accepts connections.
//!
//! | value | meaning |
//! |---|---|
//! | `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080` | that address (a name: its first address) |
//! | `:8080`, `8080` | every IPv4 interface, port 8080 (`0.0.0.0:8080`) |
//! | `:0`, `0`, `127.0.0.1:0` | a free port chosen by the kernel (the first stdout line says which) |
//! | `unix:/run/amped.sock` | a Unix stream socket at that path (replaced if it exists as a socket) |

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// One address to listen on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix stream socket path.
    Unix(PathBuf),
}

impl ListenAddr {
    /// Parses one `--listen` value; `None` if it is none of the accepted forms.
    pub fn parse(s: &str) -> Option<ListenAddr> {
        if let Some(path) = s.strip_prefix("unix:") {
            return (!path.is_empty()).then(|| ListenAddr::Unix(PathBuf::from(path)));
        }
        let port = s.strip_prefix(':').unwrap_or(s);
        if let Ok(port) = port.parse::<u16>() {
            return Some(ListenAddr::Tcp(SocketAddr::from(([0, 0, 0, 0], port))));
        }
        s.to_socket_addrs().ok()?.next().map(ListenAddr::Tcp)
    }
}

impl fmt::Display for ListenAddr {
    /// As a URL prefix a user can paste: `http://127.0.0.1:8080/` or `unix:/run/amped.sock`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "http://{a}/"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms_and_unix_sockets() {
        let tcp = |s: &str| ListenAddr::Tcp(s.parse().unwrap());
        assert_eq!(ListenAddr::parse(":8080"), Some(tcp("0.0.0.0:8080")));
        assert_eq!(ListenAddr::parse("8080"), Some(tcp("0.0.0.0:8080")));
        assert_eq!(ListenAddr::parse(":0"), Some(tcp("0.0.0.0:0")));
        assert_eq!(ListenAddr::parse("127.0.0.1:0"), Some(tcp("127.0.0.1:0")));
        assert_eq!(ListenAddr::parse("[::1]:81"), Some(tcp("[::1]:81")));
        assert_eq!(
            ListenAddr::parse("unix:/run/a.sock"),
            Some(ListenAddr::Unix("/run/a.sock".into()))
        );
        for bad in ["", "unix:", "nonsense", ":99999", "1.2.3.4"] {
            assert_eq!(ListenAddr::parse(bad), None, "{bad:?}");
        }
        assert_eq!(tcp("[::1]:81").to_string(), "http://[::1]:81/");
    }
}
