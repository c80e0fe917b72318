//! Shared helpers for the quick-run tests: locating (or building) amped and ampload, running
//! amplab into a temporary folder, and reading its outputs back.

#![allow(dead_code)]

#[path = "../../src/svg/check.rs"]
mod check;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// amped and ampload beside amplab (target/<profile>/), built once if missing.
pub fn binaries() -> &'static (PathBuf, PathBuf) {
    static BINS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BINS.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_BIN_EXE_amplab")).parent().expect("target dir").to_path_buf();
        let (amped, ampload) = (dir.join("amped"), dir.join("ampload"));
        if !(amped.is_file() && ampload.is_file()) {
            let release = dir.file_name().is_some_and(|n| n == "release");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", "amped", "-p", "ampload"]);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("cargo build");
            assert!(status.success(), "cargo build -p amped -p ampload failed");
        }
        (amped, ampload)
    })
}

/// `amplab <args> --out OUT --data-dir DATA --amped .. --ampload ..`, with this build's
/// binaries.
pub fn amplab_command(args: &[&str], out: &Path, data: &Path) -> Command {
    let (amped, ampload) = binaries();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amplab"));
    cmd.args(args)
        .arg("--out")
        .arg(out)
        .arg("--data-dir")
        .arg(data)
        .arg("--amped")
        .arg(amped)
        .arg("--ampload")
        .arg(ampload);
    cmd
}

/// A finished amplab run.
pub struct Run {
    pub out: PathBuf,
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    _tmp: tempfile::TempDir,
}

/// Runs `amplab <args> --quick --out TMP/out --data-dir TMP/data --amped .. --ampload ..`.
pub fn amplab(args: &[&str]) -> Run {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let data = tmp.path().join("data");
    let result = amplab_command(args, &out, &data).arg("--quick").output().expect("run amplab");
    Run {
        out,
        stdout: String::from_utf8_lossy(&result.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        code: result.status.code(),
        _tmp: tmp,
    }
}

impl Run {
    /// Panics with amplab's stderr unless it succeeded and wrote its folder.
    pub fn assert_ok(&self) {
        assert_eq!(self.code, Some(0), "amplab failed:\n{}", self.stderr);
        assert!(self.out.is_dir(), "no output folder");
        assert_eq!(self.stdout.trim(), self.out.display().to_string());
        for f in ["setup.json", "summary.md", "results.csv", "results.json"] {
            assert!(self.out.join(f).is_file(), "{f} missing");
        }
        assert!(!self.out.join("tmp").exists(), "tmp/ left behind");
    }

    /// A file of the output folder.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// A JSON file, parsed.
    pub fn json(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// results.csv as (header, rows of cells by column name).
    pub fn csv(&self, name: &str) -> Vec<std::collections::BTreeMap<String, String>> {
        let text = self.read(name);
        let mut lines = text.lines();
        let header: Vec<String> =
            lines.next().expect("header").split(',').map(str::to_string).collect();
        lines
            .map(|l| {
                let cells = split_csv(l);
                assert_eq!(cells.len(), header.len(), "{name}: {l}");
                header.iter().cloned().zip(cells).collect()
            })
            .collect()
    }

    /// The series names of an SVG figure (parsed as XML).
    pub fn svg_series(&self, name: &str) -> Vec<String> {
        let text = self.read(name);
        let doc =
            roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{name} is not XML: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        assert!(texts.iter().any(|t| t.contains("(")), "{name}: no axis label with units");
        assert!(
            doc.descendants().any(|n| n.attribute("class") == Some("legend")),
            "{name}: no legend"
        );
        assert!(
            doc.descendants().any(|n| n.attribute("class") == Some("title")),
            "{name}: no title"
        );
        // Every series has a legend entry inside the canvas, and its own colour.
        check::check_figure(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// `amplab report` on this run's folder: rebuilds its figures and summary from its raw
    /// results; returns the summary before and after.
    pub fn report(&self) -> (String, String) {
        let before = self.read("summary.md");
        self.run_report();
        (before, self.read("summary.md"))
    }
}

impl Run {
    /// Runs `amplab report` on the folder; panics with its stderr if it fails.
    fn run_report(&self) {
        let out = Command::new(env!("CARGO_BIN_EXE_amplab"))
            .arg("report")
            .arg(&self.out)
            .output()
            .unwrap();
        assert!(out.status.success(), "amplab report: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The top-level files of the output folder, by name, with their bytes.
    pub fn files(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(&self.out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
            })
            .collect()
    }

    /// Deletes every figure (SVG and PNG) and summary.md, runs `amplab report` on the folder,
    /// and checks that it wrote back exactly the files the experiment had written, byte for
    /// byte, and touched nothing else.
    pub fn assert_report_rebuilds(&self) {
        let before = self.files();
        let derived =
            |name: &str| name.ends_with(".svg") || name.ends_with(".png") || name == "summary.md";
        assert!(before.keys().any(|n| n.ends_with(".svg")), "no figure to rebuild");
        for name in before.keys().filter(|n| derived(n)) {
            std::fs::remove_file(self.out.join(name)).unwrap();
        }
        self.run_report();
        let after = self.files();
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "amplab report wrote other files"
        );
        for (name, bytes) in &before {
            if bytes != &after[name] {
                let (a, b) =
                    (String::from_utf8_lossy(bytes), String::from_utf8_lossy(&after[name]));
                let line = a.lines().zip(b.lines()).find(|(x, y)| x != y);
                panic!("{name} differs after amplab report; first differing line: {line:?}");
            }
        }
    }
}

/// Splits one CSV line with RFC 4180 quotes.
fn split_csv(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    cells.push(cur);
    cells
}

/// A number cell.
pub fn f(row: &std::collections::BTreeMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("{col} = {:?} is not a number", row[col]))
}
