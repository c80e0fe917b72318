//! Memory that a big generated page borrows is given back: a listing of a directory of
//! 50 000 files (a ~4 MB page), fetched again and again, leaves the server about as large as
//! before. Without that the allocator kept one page's worth per helper thread that rendered
//! it (measured: 83 MB after six listings of 100 000 files, against 5 MB at start).

use crate::common::*;
use crate::uring_specific::rss_bytes;

const FILES: usize = 50_000;

#[test]
fn repeated_big_listings_do_not_grow_the_server() {
    for arch in ["amped", "mt"] {
        let s = Server::start(&["--arch", arch], &["--listing"], |root| {
            let dir = root.join("many");
            std::fs::create_dir(&dir).unwrap();
            for i in 0..FILES {
                std::fs::File::create(dir.join(format!("entry-{i:06}-with-a-longer-name.txt")))
                    .unwrap();
            }
        });
        let before = rss_bytes(s.pid());
        for _ in 0..8 {
            let r = s.get("/many/");
            r.assert_status(200);
            let items = r.body.windows(4).filter(|w| w == b"<li>").count();
            assert_eq!(items, FILES + 1, "{arch}: every entry and ../ listed");
        }
        let after = rss_bytes(s.pid());
        assert!(
            after < before + (16 << 20),
            "{arch}: {} MB before, {} MB after eight listings",
            before >> 20,
            after >> 20
        );
    }
}
