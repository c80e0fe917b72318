//! Right answers under exhaustion and change: the error table (pipeline/fs_error.rs) seen from
//! the wire, under every architecture.

use crate::common::*;
use std::time::Duration;

arch_tests! {
    /// Out of descriptors, an existing file or directory is answered 503 with Retry-After and
    /// the connection closed (never 404: a cache in front would remember the file as missing),
    /// with a line on stderr; and nothing negative is remembered: once descriptors are back
    /// the same URLs answer 200. Covers a first translation, a listing, and the re-open of a
    /// changed cached file (io_uring's ring `openat`).
    fn descriptor_exhaustion_is_503_and_not_cached(arch) {
        let s = Server::start(arch, &["--listing"], |root| {
            write(root, "warm.txt", "warm");
            write(root, "cold.txt", "cold");
            write(root, "changed.txt", "old");
            write(root, "dir/a.txt", "a");
        });
        s.get("/changed.txt").assert_status(200);
        write(&s.root, "changed.txt", "new content");
        std::thread::sleep(Duration::from_millis(1100)); // past the staleness bound
        for path in ["/cold.txt", "/dir/", "/changed.txt"] {
            // A connection already accepted (and its worker started), then no descriptor left.
            let mut c = s.conn();
            c.send(req("GET", "/warm.txt", ""));
            c.response().assert_status(200);
            let squeeze = DescriptorSqueeze::apply(&s);
            c.send(req("GET", path, ""));
            let r = c.response();
            assert_eq!(r.status, 503, "{path} out of descriptors: {r:?}");
            assert_eq!(r.header("retry-after"), Some("1"), "{path}");
            assert!(r.connection_has("close"), "{path}");
            c.assert_closed(Duration::from_secs(3));
            drop(squeeze);
        }
        assert_eq!(s.get("/cold.txt").assert_status(200).text(), "cold");
        assert!(s.get("/dir/").assert_status(200).text().contains("a.txt"));
        assert_eq!(s.get("/changed.txt").assert_status(200).text(), "new content");
        let log = s.stderr();
        assert!(log.contains("cold.txt") && log.contains("503"), "no error-log line: {log}");
    }
}
