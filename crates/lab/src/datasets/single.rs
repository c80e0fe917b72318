//! Single-file data sets: one docroot holding one file per requested size (E1, E3), and the
//! student experiment's 37-byte page and 10 MB image (E6).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Noise, make_dir};

/// A docroot with one file per size.
#[derive(Clone, Debug)]
pub struct SingleFiles {
    pub root: PathBuf,
    /// (size in bytes, URL path), in the order given.
    pub files: Vec<(u64, String)>,
}

/// URL path of the file of `size` bytes.
pub fn path_for(size: u64) -> String {
    format!("/file-{size}.bin")
}

/// Creates `parent/single-s<seed>/` with a file for each size (rewritten each time: small).
pub fn generate(parent: &Path, sizes: &[u64], seed: u64) -> io::Result<SingleFiles> {
    let root = parent.join(format!("single-s{seed}"));
    make_dir(&root)?;
    let noise = Noise::new(seed);
    let mut rng = super::rng(seed);
    let mut files = Vec::new();
    for &size in sizes {
        let path = path_for(size);
        noise.write_file(&root.join(&path[1..]), size, &mut rng)?;
        files.push((size, path));
    }
    Ok(SingleFiles { root, files })
}

/// The seed experiment's files: `/foo.html` (37 bytes) and `/ten_meg.png` (`large` bytes).
pub fn generate_student(
    parent: &Path,
    large: u64,
    seed: u64,
) -> io::Result<(PathBuf, [(String, u64); 2])> {
    let root = parent.join(format!("student-s{seed}"));
    make_dir(&root)?;
    let page: &[u8; 37] = b"<html><body>Hello, you</body></html>\n";
    std::fs::write(root.join("foo.html"), page)?;
    std::fs::set_permissions(root.join("foo.html"), std::fs::Permissions::from_mode(0o644))?;
    let noise = Noise::new(seed);
    noise.write_file(&root.join("ten_meg.png"), large, &mut super::rng(seed))?;
    Ok((root, [("/foo.html".to_string(), 37), ("/ten_meg.png".to_string(), large)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_each_size() {
        let dir = tempfile::tempdir().unwrap();
        let set = generate(dir.path(), &[0, 1024, 3000], 5).unwrap();
        for (size, path) in &set.files {
            let meta = std::fs::metadata(set.root.join(&path[1..])).unwrap();
            assert_eq!(meta.len(), *size);
        }
        let again = generate(dir.path(), &[3000], 5).unwrap();
        let a = std::fs::read(again.root.join("file-3000.bin")).unwrap();
        let (root, files) = generate_student(dir.path(), 100_000, 5).unwrap();
        assert_eq!(std::fs::metadata(root.join("foo.html")).unwrap().len(), 37);
        assert_eq!(files[1].1, 100_000);
        assert_eq!(a.len(), 3000);
    }
}
