//! A real client: curl fetches a binary file, a range, and two files over one connection.

use crate::common::*;
use std::path::Path;
use std::process::Command;

const LEN: usize = 1 << 20;

fn fill(root: &Path) {
    write(root, "one.bin", pseudo_random(LEN, 11));
    write(root, "two.bin", pseudo_random(LEN / 2, 12));
}

/// Run curl with `args` (always `-sS --max-time 10`); returns stdout.
fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

arch_tests! {
    /// curl gets a 200 and identical bytes for a 1 MiB binary file.
    fn curl_binary_file(arch) {
        let s = Server::start(arch, &[], fill);
        let out = s.tmp.path().join("out.bin");
        let url = format!("http://{}/one.bin", s.addr);
        let code = curl(&["-o", out.to_str().unwrap(), "-w", "%{http_code}", &url]);
        assert_eq!(code, "200");
        assert!(std::fs::read(&out).unwrap() == pseudo_random(LEN, 11), "curl got different bytes");
    }

    /// curl --range gets a 206 and exactly those bytes.
    fn curl_range(arch) {
        let s = Server::start(arch, &[], fill);
        let out = s.tmp.path().join("part.bin");
        let url = format!("http://{}/one.bin", s.addr);
        let code = curl(&["--range", "1000-1999", "-o", out.to_str().unwrap(), "-w", "%{http_code}", &url]);
        assert_eq!(code, "206");
        assert!(std::fs::read(&out).unwrap() == pseudo_random(LEN, 11)[1000..2000], "wrong range bytes");
    }

    /// curl fetching two URLs reuses one keep-alive connection; HEAD via -I shows the length.
    fn curl_keepalive_and_head(arch) {
        let s = Server::start(arch, &[], fill);
        let (o1, o2) = (s.tmp.path().join("1.bin"), s.tmp.path().join("2.bin"));
        let base = format!("http://{}", s.addr);
        let report = curl(&[
            "-o", o1.to_str().unwrap(), "-o", o2.to_str().unwrap(),
            "-w", "%{http_code} %{num_connects}\n",
            &format!("{base}/one.bin"), &format!("{base}/two.bin"),
        ]);
        assert_eq!(report, "200 1\n200 0\n", "second transfer did not reuse the connection");
        assert!(std::fs::read(&o1).unwrap() == pseudo_random(LEN, 11));
        assert!(std::fs::read(&o2).unwrap() == pseudo_random(LEN / 2, 12));
        let head = curl(&["-I", &format!("{base}/two.bin")]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains(&format!("content-length: {}\r\n", LEN / 2)), "{head}");
    }
}
