//! Accept-Encoding (RFC 9110 §12.5.3): which content codings a client takes and how much it
//! prefers each (q-values), and the choice between a file and its pre-compressed variants.
//!
//! Policy, where the RFC leaves room:
//! - no Accept-Encoding field, or an empty one: the plain file (most clients that send none,
//!   like `curl` without `--compressed`, could not decode a body);
//! - a coding is acceptable when listed (or matched by `*`) with q > 0; `q=0` excludes it;
//! - `identity` is acceptable unless excluded by `identity;q=0` or by `*;q=0` without an
//!   `identity` entry; unlisted, it ranks below every listed coding;
//! - the highest q wins; on a tie a compressed variant beats identity, and among variants the
//!   server's order (`--precompressed br,zst,gz`) decides;
//! - when nothing acceptable exists (identity excluded, no variant taken) the plain file is
//!   sent anyway, which the RFC allows and every browser copes with.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A content coding amped can serve from a pre-compressed file beside the original.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Encoding {
    /// Brotli: `file.br`.
    Brotli,
    /// Zstandard: `file.zst`.
    Zstd,
    /// gzip: `file.gz`.
    Gzip,
}

impl Encoding {
    /// Every coding, in amped's default order of preference.
    pub const ALL: [Encoding; 3] = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip];

    /// The content-coding token, as sent in `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
            Encoding::Gzip => "gzip",
        }
    }

    /// The file-name suffix of the pre-compressed variant (`app.js` → `app.js.br`).
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Brotli => ".br",
            Encoding::Zstd => ".zst",
            Encoding::Gzip => ".gz",
        }
    }

    /// Where the variant of `file` in this coding lives: the same name plus [`Self::suffix`].
    pub fn variant_of(self, file: &Path) -> PathBuf {
        let mut name = OsString::from(file.as_os_str());
        name.push(self.suffix());
        PathBuf::from(name)
    }

    /// The file a variant in this coding belongs to (`app.js.br` → `app.js`).
    pub fn original_of(self, variant: &Path) -> PathBuf {
        let bytes = variant.as_os_str().as_bytes();
        let name = bytes.strip_suffix(self.suffix().as_bytes()).unwrap_or(bytes);
        PathBuf::from(OsStr::from_bytes(name))
    }

    /// A user's name for a coding: the token or the file suffix (`br`, `zstd`/`zst`,
    /// `gzip`/`gz`), case-insensitive.
    pub fn from_name(name: &str) -> Option<Encoding> {
        let n = name.trim().to_ascii_lowercase();
        match n.as_str() {
            "br" => Some(Encoding::Brotli),
            "zstd" | "zst" => Some(Encoding::Zstd),
            "gzip" | "gz" => Some(Encoding::Gzip),
            _ => None,
        }
    }

    /// The coding named by an Accept-Encoding token (`x-gzip` is gzip, RFC 9110 §8.4.1.3).
    fn from_token(token: &str) -> Option<Encoding> {
        let is = |t: &str| token.eq_ignore_ascii_case(t);
        if is("br") {
            Some(Encoding::Brotli)
        } else if is("zstd") {
            Some(Encoding::Zstd)
        } else if is("gzip") || is("x-gzip") {
            Some(Encoding::Gzip)
        } else {
            None
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A set of codings, e.g. the variants found beside a file.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Hash)]
pub struct EncodingSet(u8);

impl EncodingSet {
    /// The empty set.
    pub const EMPTY: EncodingSet = EncodingSet(0);

    /// Adds `e`.
    pub fn insert(&mut self, e: Encoding) {
        self.0 |= 1 << e.index();
    }

    /// Whether `e` is in the set.
    pub fn contains(self, e: Encoding) -> bool {
        self.0 & (1 << e.index()) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// q-values are kept in thousandths (RFC 9110 §12.4.2 allows three decimals).
type Q = u16;

/// A parsed Accept-Encoding field.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct AcceptEncoding {
    /// Explicit q of each [`Encoding`] (by index), if listed.
    codings: [Option<Q>; 3],
    identity: Option<Q>,
    star: Option<Q>,
    /// Whether any element was listed at all (absent and empty fields take nothing).
    listed: bool,
}

impl AcceptEncoding {
    /// Parses the field value (`None`: the request had no Accept-Encoding). Malformed
    /// elements (bad q-value) are ignored; the first occurrence of a coding counts.
    pub fn parse(value: Option<&str>) -> AcceptEncoding {
        let mut a = AcceptEncoding::default();
        for element in value.unwrap_or("").split(',') {
            let mut parts = element.split(';');
            let token = parts.next().unwrap_or("").trim();
            if token.is_empty() {
                continue;
            }
            let Some(q) = q_of_params(parts) else { continue };
            a.listed = true;
            let slot = if token == "*" {
                &mut a.star
            } else if token.eq_ignore_ascii_case("identity") {
                &mut a.identity
            } else if let Some(e) = Encoding::from_token(token) {
                &mut a.codings[e.index()]
            } else {
                continue;
            };
            slot.get_or_insert(q);
        }
        a
    }

    /// The q-value the client gives `e` (0: not acceptable).
    fn q(&self, e: Encoding) -> Q {
        self.codings[e.index()].or(self.star).unwrap_or(0)
    }

    /// The q-value of the plain file; an unlisted identity ranks below every listed coding.
    fn identity_q(&self) -> Q {
        self.identity.or(self.star).unwrap_or(1)
    }

    /// The variant to send: the best coding in `present` the client accepts, tried in the
    /// server's `preference` order on equal q, or `None` for the plain file.
    pub fn choose(&self, preference: &[Encoding], present: EncodingSet) -> Option<Encoding> {
        if !self.listed {
            return None;
        }
        let mut best: Option<(Encoding, Q)> = None;
        for &e in preference.iter().filter(|&&e| present.contains(e)) {
            let q = self.q(e);
            if q > 0 && best.is_none_or(|(_, b)| q > b) {
                best = Some((e, q));
            }
        }
        best.filter(|&(_, q)| q >= self.identity_q()).map(|(e, _)| e)
    }
}

/// The q parameter of one element: 1000 when absent, `None` when malformed.
fn q_of_params<'a>(params: impl Iterator<Item = &'a str>) -> Option<Q> {
    let mut q = 1000;
    for p in params {
        let (name, value) = p.split_once('=')?;
        if name.trim().eq_ignore_ascii_case("q") {
            q = parse_qvalue(value.trim())?;
        }
    }
    Some(q)
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths.
fn parse_qvalue(s: &str) -> Option<Q> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = frac.bytes().chain(std::iter::repeat(b'0')).take(3);
    let frac_val = thousandths.fold(0, |acc, d| acc * 10 + Q::from(d - b'0'));
    match int {
        "0" => Some(frac_val),
        "1" if frac_val == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    fn set(es: &[Encoding]) -> EncodingSet {
        let mut s = EncodingSet::EMPTY;
        es.iter().for_each(|&e| s.insert(e));
        s
    }

    #[test]
    fn a_variant_is_its_file_plus_the_coding_suffix() {
        let file = Path::new("/r/app.js");
        assert_eq!(Zstd.variant_of(file), Path::new("/r/app.js.zst"));
        assert_eq!(Brotli.original_of(Path::new("/r/app.js.br")), file);
        assert_eq!(Gzip.original_of(file), file, "not a variant: unchanged");
    }

    #[test]
    fn chooses_by_q_value_then_server_order() {
        let all = set(&[Brotli, Zstd, Gzip]);
        let cases: &[(Option<&str>, EncodingSet, Option<Encoding>)] = &[
            (None, all, None),
            (Some(""), all, None),
            (Some("gzip"), all, Some(Gzip)),
            (Some("x-gzip"), all, Some(Gzip)),
            (Some("GZIP, BR"), all, Some(Brotli)),
            (Some("gzip, deflate, br, zstd"), all, Some(Brotli)),
            (Some("gzip, deflate, br, zstd"), set(&[Zstd, Gzip]), Some(Zstd)),
            (Some("gzip;q=1, br;q=0.5"), all, Some(Gzip)),
            (Some("br;q=0, gzip"), all, Some(Gzip)),
            (Some("br;q=0, gzip;q=0"), all, None),
            (Some("br"), set(&[Gzip]), None),
            (Some("*"), set(&[Gzip]), Some(Gzip)),
            (Some("*;q=0.5, br;q=0"), set(&[Brotli, Gzip]), Some(Gzip)),
            (Some("*;q=0"), all, None),
            (Some("gzip;q=0.5, identity"), all, None),
            (Some("gzip;q=0.5, identity;q=0.5"), all, Some(Gzip)),
            (Some("gzip;q=0.4, *;q=0.5"), set(&[Gzip]), None),
            (Some("identity;q=0, gzip;q=0.1"), all, Some(Gzip)),
            (Some("identity"), all, None),
            (Some("gzip;q=0.001"), all, Some(Gzip)),
            (Some("gzip;q=1.5"), all, None),
            (Some("gzip;q=abc"), all, None),
            (Some("gzip;q=0.0001"), all, None),
            (Some("gzip ; q=0.8 , br ; q=0.9"), all, Some(Brotli)),
            (Some("gzip, gzip;q=0"), all, Some(Gzip)),
            (Some("compress, deflate"), all, None),
            (Some(" , ,gzip"), all, Some(Gzip)),
            (Some("gzip"), EncodingSet::EMPTY, None),
        ];
        for (value, present, want) in cases {
            let got = AcceptEncoding::parse(*value).choose(&Encoding::ALL, *present);
            assert_eq!(got, *want, "Accept-Encoding: {value:?}, present {present:?}");
        }
    }

    #[test]
    fn server_order_breaks_ties() {
        let a = AcceptEncoding::parse(Some("br, gzip, zstd"));
        let all = set(&[Brotli, Zstd, Gzip]);
        assert_eq!(a.choose(&[Gzip, Brotli], all), Some(Gzip));
        assert_eq!(a.choose(&[Zstd], all), Some(Zstd));
        assert_eq!(a.choose(&[], all), None);
    }

    proptest::proptest! {
        /// Whatever the field says, the choice is a present variant the client listed (by
        /// name or `*`) with a q above zero, and parsing never panics.
        #[test]
        fn never_a_variant_the_client_excluded_or_the_server_lacks(
            value in "[a-z*;=., 0-9-]{0,40}",
            bits in 0u8..8,
        ) {
            let present = EncodingSet(bits);
            let a = AcceptEncoding::parse(Some(&value));
            if let Some(e) = a.choose(&Encoding::ALL, present) {
                proptest::prop_assert!(present.contains(e));
                proptest::prop_assert!(a.q(e) > 0, "{value:?} chose {e:?}");
            }
        }
    }

    #[test]
    fn qvalues() {
        let cases = [
            ("1", Some(1000)),
            ("1.", Some(1000)),
            ("1.000", Some(1000)),
            ("1.001", None),
            ("0", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.123", Some(123)),
            ("0.1234", None),
            ("2", None),
            ("", None),
            ("-0", None),
            ("0.x", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_qvalue(s), want, "{s:?}");
        }
    }

    #[test]
    fn names_and_suffixes() {
        for (name, want) in [
            ("br", Some(Brotli)),
            ("ZST", Some(Zstd)),
            ("zstd", Some(Zstd)),
            ("gz", Some(Gzip)),
            ("gzip", Some(Gzip)),
            ("deflate", None),
        ] {
            assert_eq!(Encoding::from_name(name), want, "{name}");
        }
        assert_eq!(Zstd.token(), "zstd");
        assert_eq!(Zstd.suffix(), ".zst");
    }
}
