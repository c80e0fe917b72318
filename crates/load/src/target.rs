//! The server under test: parsing `http://host[:port][/path]` URLs and joining workload paths
//! onto the base URL.
//!
//! ampload drives exactly one server per run, so every URL of a workload must name the same
//! `host:port` as the base URL. Request targets are checked to be plain printable ASCII so that
//! nothing a workload file says can change the shape of the request line we send.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// A parsed `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Host as written (an IPv6 literal keeps its brackets), used in the `Host` header.
    pub host: String,
    /// TCP port (80 when the URL names none).
    pub port: u16,
    /// Whether the URL spelled the port out; decides the `Host` header's form.
    pub explicit_port: bool,
    /// Request target: path plus query, always starting with `/`, fragment removed.
    pub path: String,
}

/// Why a URL or path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// Not `http://…` (https and others are not supported: no TLS here).
    Scheme(String),
    /// No `scheme://` at all (`localhost:8080/x`).
    NoScheme(String),
    /// Nothing between `http://` and the path.
    NoHost,
    /// The port is not a number in 1..=65535.
    Port(String),
    /// `user@host` forms are not supported.
    UserInfo,
    /// The path or host holds spaces, control characters or non-ASCII bytes.
    BadChar,
    /// A path that does not start with `/`.
    NotAPath(String),
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Scheme(s) => {
                write!(f, "unsupported URL scheme {s:?} (only http:// is supported)")
            }
            UrlError::NoScheme(t) => write!(f, "no scheme: write http://{t}"),
            UrlError::NoHost => write!(f, "URL has no host"),
            UrlError::Port(p) => write!(f, "invalid port {p:?}"),
            UrlError::UserInfo => write!(f, "user@host URLs are not supported"),
            UrlError::BadChar => {
                write!(
                    f,
                    "URL holds a space, control character or non-ASCII byte (percent-encode it)"
                )
            }
            UrlError::NotAPath(p) => {
                write!(f, "{p:?} is neither an http:// URL nor a path starting with /")
            }
        }
    }
}

/// A request target or host is safe to put in a request line: printable ASCII, no spaces.
fn is_clean(s: &str) -> bool {
    s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

impl Url {
    /// Parses an absolute `http://host[:port][/path][?query][#fragment]` URL.
    pub fn parse(text: &str) -> Result<Url, UrlError> {
        let rest = match text.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => return Err(UrlError::Scheme(scheme.to_string())),
            None => return Err(UrlError::NoScheme(text.to_string())),
        };
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(split);
        if authority.contains('@') {
            return Err(UrlError::UserInfo);
        }
        if !is_clean(authority) || !is_clean(target) {
            return Err(UrlError::BadChar);
        }
        let (host, port) = split_authority(authority)?;
        let path = match target {
            "" => "/".to_string(),
            t if t.starts_with('?') => format!("/{t}"),
            t => t.to_string(),
        };
        Ok(Url {
            host: host.to_string(),
            port: port.unwrap_or(80),
            explicit_port: port.is_some(),
            path,
        })
    }

    /// The value of the `Host` header for this URL.
    pub fn host_header(&self) -> String {
        if self.explicit_port { format!("{}:{}", self.host, self.port) } else { self.host.clone() }
    }

    /// Whether `other` names the same server (host and port).
    pub fn same_server(&self, other: &Url) -> bool {
        self.host.eq_ignore_ascii_case(&other.host) && self.port == other.port
    }

    /// Resolves the host once, preferring IPv4 (loopback benchmarks usually listen there).
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (host, self.port).to_socket_addrs()?.collect();
        addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).copied().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "host resolved to no address")
        })
    }

    /// Joins a workload path onto this base URL: the base's path (without its trailing `/`
    /// and query) is a prefix, so base `http://h/site/` + `/a.html` is `/site/a.html`.
    pub fn join(&self, path: &str) -> Result<String, UrlError> {
        if !path.starts_with('/') {
            return Err(UrlError::NotAPath(path.to_string()));
        }
        if !is_clean(path) {
            return Err(UrlError::BadChar);
        }
        let base = self.path.split_once('?').map_or(self.path.as_str(), |(p, _)| p);
        Ok(format!("{}{}", base.trim_end_matches('/'), path))
    }
}

/// Splits `host[:port]` (with `[v6]` literals) into host and optional port.
fn split_authority(authority: &str) -> Result<(&str, Option<u16>), UrlError> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (host, after) = authority.split_at(end + 1);
                (host, after.strip_prefix(':'))
            }
            None => return Err(UrlError::NoHost),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(UrlError::NoHost);
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(UrlError::Port(p.to_string())),
        },
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let cases: &[(&str, &str, u16, &str, &str)] = &[
            (
                "http://127.0.0.1:8080/index.html",
                "127.0.0.1",
                8080,
                "/index.html",
                "127.0.0.1:8080",
            ),
            ("http://localhost", "localhost", 80, "/", "localhost"),
            ("HTTP://example.com/a?b=c#frag", "example.com", 80, "/a?b=c", "example.com"),
            ("http://h:81?x", "h", 81, "/?x", "h:81"),
            ("http://[::1]:9000/x", "[::1]", 9000, "/x", "[::1]:9000"),
        ];
        for &(text, host, port, path, header) in cases {
            let url = Url::parse(text).unwrap();
            assert_eq!(
                (url.host.as_str(), url.port, url.path.as_str()),
                (host, port, path),
                "{text}"
            );
            assert_eq!(url.host_header(), header, "{text}");
        }
    }

    #[test]
    fn refuses_bad_urls() {
        let cases: &[(&str, UrlError)] = &[
            ("https://h/", UrlError::Scheme("https".into())),
            ("h:80/x", UrlError::NoScheme("h:80/x".into())),
            ("http:///x", UrlError::NoHost),
            ("http://h:0/", UrlError::Port("0".into())),
            ("http://h:99999/", UrlError::Port("99999".into())),
            ("http://h:x/", UrlError::Port("x".into())),
            ("http://u@h/", UrlError::UserInfo),
            ("http://h/a b", UrlError::BadChar),
            ("http://h/\u{e9}", UrlError::BadChar),
        ];
        for (text, want) in cases {
            assert_eq!(Url::parse(text).unwrap_err(), *want, "{text}");
        }
    }

    #[test]
    fn joins_paths_onto_the_base() {
        let root = Url::parse("http://h/").unwrap();
        assert_eq!(root.join("/a.html").unwrap(), "/a.html");
        let site = Url::parse("http://h/site/?q=1").unwrap();
        assert_eq!(site.join("/a.html").unwrap(), "/site/a.html");
        assert_eq!(root.join("a.html").unwrap_err(), UrlError::NotAPath("a.html".into()));
        assert_eq!(root.join("/a\tb").unwrap_err(), UrlError::BadChar);
    }

    #[test]
    fn same_server_compares_host_and_port() {
        let a = Url::parse("http://Host:81/x").unwrap();
        assert!(a.same_server(&Url::parse("http://host:81/y").unwrap()));
        assert!(!a.same_server(&Url::parse("http://host/y").unwrap()));
    }
}
