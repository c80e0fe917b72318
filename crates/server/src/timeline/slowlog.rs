//! The slow-request log file: lines handed to a thread of its own (the loop never waits on
//! the file), appended and flushed as soon as nothing else is queued, so `tail -f` sees each
//! slow request at once.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

/// A handle to the writer thread.
pub struct SlowLog {
    tx: Sender<String>,
}

impl SlowLog {
    /// Opens `path` for appending and starts the writer.
    pub fn open(path: &Path) -> io::Result<(SlowLog, JoinHandle<()>)> {
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot open slow log {}: {e}", path.display()))
        })?;
        let (tx, rx) = channel();
        let t =
            std::thread::Builder::new().name("slow-log".into()).spawn(move || drain(rx, file))?;
        Ok((SlowLog { tx }, t))
    }

    /// Queues one line (ending in a newline).
    pub fn write(&self, line: String) {
        let _ = self.tx.send(line);
    }
}

fn drain(rx: Receiver<String>, file: File) {
    let mut out = io::BufWriter::new(file);
    while let Ok(line) = rx.recv() {
        let _ = out.write_all(line.as_bytes());
        while let Ok(more) = rx.try_recv() {
            let _ = out.write_all(more.as_bytes());
        }
        let _ = out.flush();
    }
}
