//! The response options, resolved: pre-compressed variants, Cache-Control rules, extra
//! headers (custom, CORS, security), custom error pages and the SPA fallback.
//!
//! Every configured header is checked here, once, at start-up (a name must be a token, a value
//! visible text without CR/LF), and the headers every response carries are encoded into one
//! byte string then, so the pipeline only copies bytes.

use super::{ConfigError, err};
use amped_http::{Encoding, is_field_name, is_field_value, normalize_target};

/// The security headers `--security-headers` adds to every response.
pub const SECURITY_HEADERS: [(&str, &str); 3] = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "strict-origin-when-cross-origin"),
    ("X-Frame-Options", "SAMEORIGIN"),
];

/// Header fields amped sets itself, which `--add-header` may not repeat (a second
/// Content-Length or Content-Type would make the response ambiguous).
const RESERVED: [&str; 14] = [
    "Server",
    "Content-Length",
    "Content-Type",
    "Content-Encoding",
    "Content-Range",
    "Transfer-Encoding",
    "Connection",
    "Date",
    "ETag",
    "Last-Modified",
    "Accept-Ranges",
    "Vary",
    "Cache-Control",
    "Access-Control-Allow-Origin",
];

/// Status codes that may have a custom page: those amped answers to a request it could parse
/// and whose target it could normalise (others are decided before there is a path to serve).
pub const ERROR_PAGE_STATUSES: [u16; 3] = [403, 404, 500];

/// Resolved response options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseOptions {
    /// Pre-compressed variants to look for, in order of preference (empty: off).
    pub precompressed: Vec<Encoding>,
    /// `(URL-path glob, Cache-Control value)`, first match wins.
    pub cache_control: Vec<(String, String)>,
    /// Header lines every response carries (custom, CORS origin, security), CRLF-terminated.
    pub common_headers: Vec<u8>,
    /// The CORS origin (`*` or one origin); preflights are answered when set.
    pub cors_origin: Option<String>,
    /// `(status, URL path of its page)`.
    pub error_pages: Vec<(u16, String)>,
    /// URL path answered (200) for GET/HEAD of a path with no file behind it.
    pub spa_fallback: Option<String>,
}

/// The raw option values, as the command line and config file gave them.
pub struct ResponseArgs<'a> {
    /// `--precompressed br,zst,gz`.
    pub precompressed: Option<&'a str>,
    /// `--cache-control GLOB=VALUE`, repeated.
    pub cache_control: &'a [String],
    /// `--add-header 'Name: value'`, repeated.
    pub add_header: &'a [String],
    /// `--cors-origin`.
    pub cors_origin: Option<&'a str>,
    /// `--security-headers`.
    pub security_headers: bool,
    /// `--error-page STATUS=/PATH`, repeated.
    pub error_page: &'a [String],
    /// `--spa-fallback /PATH`.
    pub spa_fallback: Option<&'a str>,
}

impl ResponseOptions {
    /// Validates and resolves the response options.
    pub fn resolve(a: &ResponseArgs<'_>) -> Result<ResponseOptions, ConfigError> {
        let mut common = Vec::new();
        for h in a.add_header {
            let (name, value) = custom_header(h)?;
            push_line(&mut common, name, value);
        }
        if let Some(origin) = a.cors_origin {
            if !is_field_value(origin) || origin.contains(',') {
                return err(format!(
                    "--cors-origin '{}' must be '*' or one origin",
                    origin.escape_debug()
                ));
            }
            push_line(&mut common, "Access-Control-Allow-Origin", origin);
        }
        if a.security_headers {
            for (name, value) in SECURITY_HEADERS {
                push_line(&mut common, name, value);
            }
        }
        Ok(ResponseOptions {
            precompressed: a.precompressed.map_or(Ok(Vec::new()), encodings)?,
            cache_control: a
                .cache_control
                .iter()
                .map(|r| cache_rule(r))
                .collect::<Result<_, _>>()?,
            common_headers: common,
            cors_origin: a.cors_origin.map(str::to_owned),
            error_pages: a.error_page.iter().map(|p| error_page(p)).collect::<Result<_, _>>()?,
            spa_fallback: a.spa_fallback.map(|p| url_path("--spa-fallback", p)).transpose()?,
        })
    }

    /// The Cache-Control value for a URL path, from the first rule whose glob matches.
    pub fn cache_control_for(&self, url_path: &str) -> Option<(usize, &str)> {
        self.cache_control
            .iter()
            .enumerate()
            .find(|(_, (glob, _))| amped_http::glob_matches(glob, url_path))
            .map(|(i, (_, value))| (i, value.as_str()))
    }

    /// The URL path of the custom page for `status`, if one is configured.
    pub fn error_page(&self, status: u16) -> Option<&str> {
        self.error_pages.iter().find(|(s, _)| *s == status).map(|(_, p)| p.as_str())
    }
}

fn push_line(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `br,zst,gz` → the codings in that order.
fn encodings(list: &str) -> Result<Vec<Encoding>, ConfigError> {
    let mut out = Vec::new();
    for name in list.split(',') {
        let Some(e) = Encoding::from_name(name) else {
            return err(format!(
                "--precompressed: unknown encoding '{}' (use br, zst, gz)",
                name.trim()
            ));
        };
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Ok(out)
}

/// `Name: value` of `--add-header`.
fn custom_header(h: &str) -> Result<(&str, &str), ConfigError> {
    let Some((name, value)) = h.split_once(':') else {
        return err(format!("--add-header '{}' must be 'Name: value'", h.escape_debug()));
    };
    let (name, value) = (name.trim(), value.trim_matches([' ', '\t']));
    if !is_field_name(name) || !is_field_value(value) {
        return err(format!(
            "--add-header '{}': invalid header name or value (no control characters)",
            h.escape_debug()
        ));
    }
    if let Some(r) = RESERVED.iter().find(|r| r.eq_ignore_ascii_case(name)) {
        return err(format!("--add-header cannot set {r}, which amped sets itself"));
    }
    Ok((name, value))
}

/// `GLOB=VALUE` of `--cache-control`.
fn cache_rule(rule: &str) -> Result<(String, String), ConfigError> {
    let Some((glob, value)) = rule.split_once('=') else {
        return err(format!("--cache-control '{}' must be 'GLOB=VALUE'", rule.escape_debug()));
    };
    let (glob, value) = (glob.trim(), value.trim());
    if !(glob.starts_with('/') || glob.starts_with('*')) || glob.chars().any(char::is_control) {
        return err(format!(
            "--cache-control: glob '{}' must start with '/' or '*'",
            glob.escape_debug()
        ));
    }
    if !is_field_value(value) {
        return err(format!(
            "--cache-control '{}': invalid value (no control characters)",
            rule.escape_debug()
        ));
    }
    Ok((glob.to_owned(), value.to_owned()))
}

/// `STATUS=/PATH` of `--error-page`.
fn error_page(spec: &str) -> Result<(u16, String), ConfigError> {
    let bad = || {
        err(format!(
            "--error-page '{}' must be STATUS=/PATH with STATUS one of 403, 404, 500",
            spec.escape_debug()
        ))
    };
    let Some((status, path)) = spec.split_once('=') else { return bad() };
    let Ok(status) = status.trim().parse::<u16>() else { return bad() };
    if !ERROR_PAGE_STATUSES.contains(&status) {
        return bad();
    }
    Ok((status, url_path("--error-page", path.trim())?))
}

/// A URL path naming a file under the root.
fn url_path(option: &str, p: &str) -> Result<String, ConfigError> {
    let ok = p.starts_with('/')
        && !p.ends_with('/')
        && normalize_target(p).is_ok_and(|t| !t.has_dot_segment() && t.to_url_path() == p);
    if ok {
        Ok(p.to_owned())
    } else {
        err(format!("{option}: '{}' must be a plain URL path like /404.html", p.escape_debug()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(
        cache_control: &'a [String],
        add_header: &'a [String],
        error_page: &'a [String],
    ) -> ResponseArgs<'a> {
        ResponseArgs {
            precompressed: None,
            cache_control,
            add_header,
            cors_origin: None,
            security_headers: false,
            error_page,
            spa_fallback: None,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn resolves_headers_rules_and_pages() {
        let cc = strings(&["/assets/*=public, max-age=31536000, immutable", "*.html=no-cache"]);
        let ah = strings(&["X-Served-By: amped", "Strict-Transport-Security:max-age=63072000"]);
        let ep = strings(&["404=/404.html", "500=/errors/500.html"]);
        let mut a = args(&cc, &ah, &ep);
        a.precompressed = Some("gz, br,gzip");
        a.cors_origin = Some("*");
        a.security_headers = true;
        a.spa_fallback = Some("/index.html");
        let r = ResponseOptions::resolve(&a).unwrap();
        assert_eq!(r.precompressed, vec![Encoding::Gzip, Encoding::Brotli]);
        let common = String::from_utf8(r.common_headers.clone()).unwrap();
        assert_eq!(
            common,
            "X-Served-By: amped\r\nStrict-Transport-Security: max-age=63072000\r\n\
             Access-Control-Allow-Origin: *\r\nX-Content-Type-Options: nosniff\r\n\
             Referrer-Policy: strict-origin-when-cross-origin\r\nX-Frame-Options: SAMEORIGIN\r\n"
        );
        assert_eq!(
            r.cache_control_for("/assets/js/app.js"),
            Some((0, "public, max-age=31536000, immutable"))
        );
        assert_eq!(r.cache_control_for("/docs/index.html"), Some((1, "no-cache")));
        assert_eq!(r.cache_control_for("/docs/"), None);
        assert_eq!(r.error_page(404), Some("/404.html"));
        assert_eq!(r.error_page(403), None);
        assert_eq!(r.spa_fallback.as_deref(), Some("/index.html"));
    }

    /// `(--cache-control values, --add-header values, --error-page values, expected message)`.
    type Case =
        (&'static [&'static str], &'static [&'static str], &'static [&'static str], &'static str);

    #[test]
    fn bad_values_are_refused() {
        let cases: [Case; 12] = [
            (&["/a/*=x\r\nSet-Cookie: a=b"], &[], &[], "invalid value"),
            (&["/a/*"], &[], &[], "GLOB=VALUE"),
            (&["a/*=x"], &[], &[], "must start with"),
            (&[], &["X-A: b\r\nX-Injected: 1"], &[], "invalid header"),
            (&[], &["X-A\nB: c"], &[], "invalid header"),
            (&[], &["no colon"], &[], "Name: value"),
            (&[], &["X-Empty:"], &[], "invalid header"),
            (&[], &["content-length: 5"], &[], "Content-Length"),
            (&[], &[], &["418=/tea.html"], "403, 404, 500"),
            (&[], &[], &["404=404.html"], "plain URL path"),
            (&[], &[], &["404=/a/../b.html"], "plain URL path"),
            (&[], &[], &["404"], "STATUS=/PATH"),
        ];
        for (cc, ah, ep, needle) in cases {
            let (cc, ah, ep) = (strings(cc), strings(ah), strings(ep));
            let e = ResponseOptions::resolve(&args(&cc, &ah, &ep)).unwrap_err().to_string();
            assert!(e.contains(needle), "{cc:?} {ah:?} {ep:?}: {e}");
            assert!(!e.contains('\n') && !e.contains('\r'), "one line: {e:?}");
        }
        let none: Vec<String> = Vec::new();
        let mut a = args(&none, &none, &none);
        a.precompressed = Some("br,deflate");
        assert!(ResponseOptions::resolve(&a).unwrap_err().to_string().contains("deflate"));
        a.precompressed = None;
        a.cors_origin = Some("https://a.example\r\nX: y");
        assert!(ResponseOptions::resolve(&a).is_err());
        a.cors_origin = None;
        a.spa_fallback = Some("/app/");
        assert!(ResponseOptions::resolve(&a).is_err());
    }
}
