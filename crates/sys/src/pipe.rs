//! A kernel pipe used as a page holder between the disk and a socket: `splice` moves page
//! *references* from a file's page cache into the pipe (blocking only on the disk, which a
//! helper does) and from the pipe into a socket (never blocking, which the event loop does).
//!
//! Why a pipe and not a read-ahead: pages a helper merely reads into the page cache can be
//! reclaimed again before the event loop's `sendfile` reaches them when memory is tight (New
//! Flash's race), and then they are read from the disk twice. Pages held by a pipe are
//! referenced, so reclaim cannot take them, and nothing is copied on the way.

use crate::debox::{About, Call, around};
use rustix::pipe::{PipeFlags, SpliceFlags};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// What a page pipe asks to hold: `fs.pipe-max-size`'s default, 1 MiB (the most an
/// unprivileged process may ask for unless the administrator raised it).
pub const WANT: usize = 1 << 20;

/// A non-blocking pipe and how many bytes it holds.
#[derive(Debug)]
pub struct PagePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    held: usize,
}

impl PagePipe {
    /// A pipe that holds up to `want` bytes if the kernel grants it (`F_SETPIPE_SZ`; an
    /// unprivileged user past `fs.pipe-user-pages-soft` keeps the default 64 KiB).
    pub fn new(want: usize) -> io::Result<PagePipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let capacity = match rustix::pipe::fcntl_setpipe_size(&write, want) {
            Ok(n) => n,
            Err(_) => rustix::pipe::fcntl_getpipe_size(&write)?,
        };
        Ok(PagePipe { read, write, capacity, held: 0 })
    }

    /// Bytes the pipe can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes in the pipe, not yet sent.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Moves up to `len` bytes of `file` at `offset` into the pipe, waiting for the disk as long
    /// as it takes (run it where blocking is allowed). Stops early at the end of the file or
    /// when the pipe is full. Returns the bytes moved (0: the file ended at `offset`, or the
    /// pipe had no room). Splicing from a file waits for the disk even on a non-blocking pipe
    /// (Linux ≥ 4.17).
    #[track_caller]
    pub fn fill(&mut self, file: &File, offset: u64, len: usize) -> io::Result<usize> {
        let mut pos = offset;
        let want = len.min(self.capacity - self.held);
        let mut moved = 0;
        while moved < want {
            let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
            let pos = &mut pos;
            match around(Call::SpliceIn, About::Fd(file.as_fd()), || {
                rustix::pipe::splice(file, Some(pos), &self.write, None, want - moved, flags)
            }) {
                Ok(0) => break,
                Ok(n) => {
                    moved += n;
                    self.held += n;
                }
                Err(rustix::io::Errno::AGAIN) if moved > 0 => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(moved)
    }

    /// As [`fill`](Self::fill), through a read-only mapping of the file marked for huge pages
    /// and random access, whose pages `vmsplice` faults in and moves into the pipe (references,
    /// as `splice` does; nothing is copied). A fault in such a mapping reads the whole 2 MiB
    /// block around it, as one folio where the file system has large folios (ext4 since Linux
    /// 6.16, XFS): a block device then gets one request per block where `splice` and
    /// `WILLNEED` advice make one per 512 KiB-1 MiB. And unlike a read, a fault through the
    /// mapping starts no read-ahead of the kernel's own beyond the block. The kernel's error
    /// (e.g. `ENODEV`: the file cannot be mapped; `EFAULT`: it is shorter than the range) comes
    /// back only when nothing was moved. Stops at the end of the file, as [`fill`](Self::fill).
    #[track_caller]
    pub fn fill_mapped(&mut self, file: &File, offset: u64, len: usize) -> io::Result<usize> {
        use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap, munmap};
        // Never past the end of the file as it is now: the last page of a mapping holds zeros
        // after it, and a page wholly after it cannot be faulted in.
        let left = crate::files::fstat(file)?.len().saturating_sub(offset);
        let want =
            len.min(self.capacity - self.held).min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let page = rustix::param::page_size() as u64;
        let skip = (offset % page) as usize;
        let map_len = skip + want;
        around(Call::VmspliceIn, About::Fd(file.as_fd()), || -> io::Result<usize> {
            let null = std::ptr::null_mut();
            let (prot, flags) = (ProtFlags::READ, MapFlags::SHARED);
            // SAFETY: a new read-only mapping at an address the kernel picks, so it replaces
            // nothing; only the kernel reads it (below), and it is unmapped before returning.
            let at = unsafe { mmap(null, map_len, prot, flags, file, offset - skip as u64)? };
            // SAFETY (both): `at..at + map_len` is exactly the mapping made above. Random
            // access: a fault reads its block and no read-ahead window after it; huge pages:
            // refused where transparent huge pages are off, and then pages come one by one.
            let _ = unsafe { madvise(at, map_len, Advice::Random) };
            let _ = unsafe { madvise(at, map_len, Advice::LinuxHugepage) };
            let mut moved = 0;
            let result = loop {
                if moved == want {
                    break Ok(moved);
                }
                // SAFETY: the slice lies inside the mapping made above, alive until munmap
                // below; `vmsplice` only reads it (faulting its pages in) and takes references
                // to its pages, which outlive the mapping.
                let chunk = unsafe {
                    std::slice::from_raw_parts(at.cast::<u8>().add(skip + moved), want - moved)
                };
                let iov = [rustix::pipe::IoSliceRaw::from_slice(chunk)];
                let flags = SpliceFlags::NONBLOCK;
                // SAFETY: `iov` describes readable memory of the live mapping (above).
                match unsafe { rustix::pipe::vmsplice(&self.write, &iov, flags) } {
                    Ok(0) => break Ok(moved),
                    Ok(n) => moved += n,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) if moved > 0 => break Ok(moved),
                    Err(e) => break Err(e.into()),
                }
            };
            // SAFETY: unmaps exactly the mapping made above; the pipe holds page references,
            // not addresses in it.
            let _ = unsafe { munmap(at, map_len) };
            self.held += moved;
            result
        })
    }

    /// Moves up to `len` held bytes into `sock` without blocking (`WouldBlock` when the socket
    /// is full); `more` tells the socket further data follows (`SPLICE_F_MORE`).
    #[track_caller]
    pub fn drain_to(&mut self, sock: impl AsFd, len: usize, more: bool) -> io::Result<usize> {
        let mut flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
        if more {
            flags |= SpliceFlags::MORE;
        }
        let (sock, len) = (sock.as_fd(), len.min(self.held));
        let n = around(Call::SpliceOut, About::Fd(sock), || {
            rustix::pipe::splice(&self.read, None, sock, None, len, flags)
        })?;
        self.held -= n;
        Ok(n)
    }

    /// Throws away whatever the pipe holds (a response abandoned half-way), so the pipe can
    /// be used again. Returns false if it could not be emptied (then drop it instead).
    pub fn discard(&mut self) -> bool {
        let mut scratch = [0u8; 16 << 10];
        while self.held > 0 {
            match rustix::io::read(&self.read, &mut scratch) {
                Ok(0) => return false,
                Ok(n) => self.held -= n.min(self.held),
                Err(_) => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    fn temp_file(bytes: &[u8]) -> (std::path::PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("amped-pipe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("f{}", bytes.len()));
        std::fs::write(&path, bytes).unwrap();
        let f = File::open(&path).unwrap();
        (path, f)
    }

    type Fill = fn(&mut PagePipe, &File, u64, usize) -> io::Result<usize>;

    #[test]
    fn fills_from_a_file_and_drains_into_a_socket_in_order() {
        stream_through(PagePipe::fill, 300_000);
    }

    #[test]
    fn a_mapped_fill_streams_the_same_bytes_and_stops_at_the_end() {
        // Past one 2 MiB block, with a short last page: what the mapping holds after the end
        // of the file must not be sent.
        stream_through(PagePipe::fill_mapped, (5 << 20) + 1234);
    }

    #[test]
    fn a_mapped_fill_starts_anywhere_and_takes_evicted_pages() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let (path, file) = temp_file(&data);
        crate::residency::evict(&file).unwrap();
        let mut pipe = PagePipe::new(256 << 10).unwrap();
        let at = 2_100_001; // not on a page
        let moved = pipe.fill_mapped(&file, at as u64, 100_000).unwrap();
        assert_eq!((moved, pipe.held()), (100_000, 100_000));
        let mut rd = File::from(pipe.read.try_clone().unwrap());
        let mut buf = vec![0u8; moved];
        rd.read_exact(&mut buf).unwrap();
        assert!(buf == data[at..at + moved], "the bytes at the offset");
        pipe.held = 0;
        let end = data.len() as u64;
        assert_eq!(pipe.fill_mapped(&file, end - 10, 100).unwrap(), 10, "up to the end");
        assert_eq!(pipe.fill_mapped(&file, end, 100).unwrap(), 0, "nothing after it");
        std::fs::remove_file(path).unwrap();
    }

    /// Sends a file of `len` bytes through a pipe filled by `fill` into a socket and checks
    /// the bytes that arrive.
    fn stream_through(fill: Fill, len: u32) {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let (path, file) = temp_file(&data);
        let mut pipe = PagePipe::new(256 << 10).unwrap();
        assert!(pipe.capacity() >= 64 << 10);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut client = client;
            client.read_to_end(&mut got).unwrap();
            got
        });
        let mut sent = 0u64;
        while sent < data.len() as u64 {
            let moved = fill(&mut pipe, &file, sent, data.len() - sent as usize).unwrap();
            assert!(moved > 0);
            assert_eq!(pipe.held(), moved);
            while pipe.held() > 0 {
                match pipe.drain_to(&server, pipe.held(), true) {
                    Ok(n) => sent += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(1))
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert_eq!(fill(&mut pipe, &file, data.len() as u64, 10).unwrap(), 0, "end of file");
        drop(server);
        assert_eq!(reader.join().unwrap(), data);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn fill_waits_for_evicted_pages_stops_at_capacity_and_discard_empties() {
        let data = vec![5u8; 200_000];
        let (path, file) = temp_file(&data);
        crate::residency::evict(&file).unwrap();
        let mut pipe = PagePipe::new(64 << 10).unwrap();
        let cap = pipe.capacity();
        assert_eq!(pipe.fill(&file, 0, data.len()).unwrap(), cap);
        assert_eq!(pipe.fill(&file, cap as u64, 10).unwrap(), 0, "full pipe takes nothing");
        assert!(pipe.discard());
        assert_eq!(pipe.held(), 0);
        assert_eq!(pipe.fill(&file, 0, 100).unwrap(), 100);
        let mut rd = File::from(pipe.read.try_clone().unwrap());
        let mut buf = [0u8; 100];
        rd.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [5u8; 100]);
        std::fs::remove_file(path).unwrap();
    }
}
