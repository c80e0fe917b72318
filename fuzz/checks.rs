//! The properties the fuzz targets check, one function per target, each panicking when its
//! property fails. Shared by the libFuzzer targets (`fuzz_targets/*.rs`, nightly, `cargo fuzz
//! run`) and by `crates/server/tests/fuzz_replay.rs`, which replays the committed corpora and
//! runs a short mutation loop on stable with every `cargo test`.

#![allow(dead_code)] // each fuzz target uses one of these

use amped_http::{
    ChunkedDiscard, Limits, RangeOutcome, if_range_allows, is_not_modified, make_etag,
    normalize_target, parse_range, parse_request,
};
use std::path::{Component, Path};
use std::time::{Duration, SystemTime};

/// Request heads: `parse_request` under two sets of limits never panics, never claims more
/// bytes than it was given or than the limit, never admits both Content-Length and
/// Transfer-Encoding, and maps every refusal to one of its statuses; the chunked-body reader
/// agrees with itself whether the bytes come at once or in two pieces.
pub fn request_parser(data: &[u8]) {
    let small = Limits { max_head_bytes: 256, max_uri_bytes: 64, max_headers: 4 };
    for limits in [Limits::default(), small] {
        match parse_request(data, &limits) {
            Ok(Some(head)) => {
                assert!(head.head_len <= data.len() && head.head_len <= limits.max_head_bytes);
                assert!(!(head.chunked && head.content_length.is_some()), "TE and CL both kept");
            }
            Ok(None) => assert!(data.len() < limits.max_head_bytes, "incomplete past the limit"),
            Err(e) => {
                let code = e.status().as_u16();
                assert!(matches!(code, 400 | 414 | 431 | 501 | 505), "status {code}");
            }
        }
    }
    let whole = ChunkedDiscard::new(1 << 12).feed(data);
    if let Ok((used, _)) = whole {
        assert!(used <= data.len());
    }
    let cut = data.len() / 2;
    let mut reader = ChunkedDiscard::new(1 << 12);
    let split = reader.feed(&data[..cut]).and_then(|(used, done)| {
        if done || used < cut {
            return Ok((used, done));
        }
        reader.feed(&data[cut..]).map(|(more, done)| (used + more, done))
    });
    assert_eq!(whole, split, "the chunked reader depends on how bytes arrive");
}

/// Request targets: whatever the bytes, a normalised target is a relative path of plain
/// segments, so `root.join(path)` never leaves the root; re-encoding it and normalising again
/// gives the same segments.
pub fn target_path(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let Ok(target) = normalize_target(&raw) else { return };
    let rel = target.to_rel_path();
    assert!(rel.components().all(|c| matches!(c, Component::Normal(_))), "{rel:?} from {raw:?}");
    for segment in &target.segments {
        assert!(!segment.is_empty() && segment != "." && segment != "..", "{segment:?}");
        assert!(!segment.contains(['/', '\\', '\0']), "{segment:?}");
    }
    let root = Path::new("/srv/www");
    let joined = root.join(&rel);
    assert!(joined.starts_with(root), "{joined:?} left the root, from {raw:?}");
    let again = normalize_target(&target.to_url_path()).expect("a re-encoded target parses");
    assert_eq!(again.segments, target.segments, "re-encoding changed {raw:?}");
}

/// Range and conditional headers: the first 8 bytes are a representation length, the rest a
/// header value. A satisfiable range always lies inside the representation; the conditional
/// checks never panic, and a strong ETag always matches itself.
pub fn range_conditional(data: &[u8]) {
    let (len_bytes, rest) = data.split_at(data.len().min(8));
    let mut le = [0u8; 8];
    le[..len_bytes.len()].copy_from_slice(len_bytes);
    let len = u64::from_le_bytes(le) >> (le[7] % 64);
    let header = String::from_utf8_lossy(rest);
    match parse_range(&header, len) {
        RangeOutcome::Partial { start, end_inclusive } => {
            assert!(start <= end_inclusive && end_inclusive < len, "{header:?} of {len}");
        }
        RangeOutcome::Full | RangeOutcome::Unsatisfiable => {}
    }
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(len % (1 << 40));
    let etag = make_etag(len, len / 3, mtime);
    let _ = is_not_modified(Some(&header), Some(&header), &etag, mtime);
    let _ = is_not_modified(None, Some(&header), &etag, mtime);
    let _ = if_range_allows(&header, &etag, mtime);
    assert!(is_not_modified(Some(&etag), None, &etag, mtime), "{etag} does not match itself");
    assert!(if_range_allows(&etag, &etag, mtime), "{etag} does not allow its own range");
}

/// The config file: any text either fails to parse or resolves, and every error is one line
/// (user and group lookups are left out: they read the system's user database).
pub fn config_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(mut args) = toml::from_str::<amped::config::Args>(&text) else { return };
    args.user = None;
    args.group = None;
    match amped::config::Config::resolve(args) {
        Ok(cfg) => assert!(cfg.instances >= 1 && cfg.limits.max_headers >= 1),
        Err(e) => assert!(!e.to_string().contains('\n'), "multi-line error: {e}"),
    }
}
