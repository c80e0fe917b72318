//! The malformed and oversize requests the soak sends, with what a server must do with each:
//! `Refuse` cases are invalid by RFC 9110/9112 (an error status or a close is right, a 2xx is
//! not); `AnyAnswer` cases are oversize (a server may serve them within its own limits or
//! refuse them: 414, 431) or have a valid head and a broken or endless body, which a server may
//! answer before reading (405 for a POST to a file, or 200) — only hanging is wrong there.

/// What a server must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Refuse,
    AnyAnswer,
}

/// One case.
pub struct Case {
    pub name: &'static str,
    pub bytes: fn() -> Vec<u8>,
    pub rule: Rule,
    /// Half-close after sending (a body that ends early).
    pub half_close: bool,
}

fn v(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// Every case, sent in turn.
pub const CASES: &[Case] = &[
    Case { name: "no-target", bytes: || v("GET\r\n\r\n"), rule: Rule::Refuse, half_close: false },
    Case {
        name: "control-byte-in-method",
        bytes: || v("G\x01T /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "space-before-colon",
        bytes: || v("GET /s/small-1.bin HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n"),
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "http11-without-host",
        bytes: || v("GET /s/small-1.bin HTTP/1.1\r\n\r\n"),
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "uri-20k",
        bytes: || v(&format!("GET /{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "a".repeat(20_000))),
        rule: Rule::AnyAnswer,
        half_close: false,
    },
    Case {
        name: "header-field-70k",
        bytes: || {
            v(&format!(
                "GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
                "b".repeat(70_000)
            ))
        },
        rule: Rule::AnyAnswer,
        half_close: false,
    },
    Case {
        name: "head-6000-lines",
        bytes: || {
            let lines: String = (0..6000).map(|i| format!("X-N{i}: v\r\n")).collect();
            v(&format!("GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n{lines}\r\n"))
        },
        rule: Rule::AnyAnswer,
        half_close: false,
    },
    Case {
        name: "content-length-not-a-number",
        bytes: || {
            v("GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n")
        },
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "content-length-negative",
        bytes: || v("GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n"),
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "two-content-lengths",
        bytes: || {
            v(
                "GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            )
        },
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "unknown-transfer-coding",
        bytes: || {
            v("GET /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n")
        },
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "binary-junk",
        bytes: || {
            let mut rng = amped_workload::rng::SplitMix64::new(99);
            let mut b = vec![0u8; 2048];
            rng.fill(&mut b);
            b
        },
        rule: Rule::Refuse,
        half_close: false,
    },
    Case {
        name: "bad-chunk-size",
        bytes: || {
            v(
                "POST /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            )
        },
        rule: Rule::AnyAnswer,
        half_close: false,
    },
    Case {
        name: "chunked-body-cut-off",
        bytes: || {
            v(
                "POST /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n100\r\nshort",
            )
        },
        rule: Rule::AnyAnswer,
        half_close: true,
    },
    Case {
        name: "body-10g-cut-off",
        bytes: || {
            let mut b = v(
                "POST /s/small-1.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000000\r\n\r\n",
            );
            b.extend(std::iter::repeat_n(b'x', 64 << 10));
            b
        },
        rule: Rule::AnyAnswer,
        half_close: true,
    },
];
