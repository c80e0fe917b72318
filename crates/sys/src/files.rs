//! Opening the files amped serves.

use std::fs::File;
use std::io;
use std::path::Path;

/// Opens `path` read-only and close-on-exec, with `O_NONBLOCK`: should the path have been
/// swapped for a FIFO since it was translated, the open must not wait for a writer. The flag
/// has no effect on reads of regular files.
pub fn open_for_serving(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd =
        rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_files_and_fifos_without_waiting() {
        let dir = std::env::temp_dir().join(format!("amped-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"abc").unwrap();
        assert_eq!(open_for_serving(&dir.join("f")).unwrap().metadata().unwrap().len(), 3);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let fifo = open_for_serving(&dir.join("fifo")).unwrap(); // returns at once
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&fifo.metadata().unwrap().file_type()));
        assert!(open_for_serving(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
