//! The syscall layer of amped: the only crate that talks to the kernel directly.
//!
//! Everything here is a thin, typed wrapper over one mechanism the architectures need:
//! [`epoll`] readiness polling, [`listen`]ing sockets (with `SO_REUSEPORT`), [`transmit`]
//! (writev, sendfile, `MSG_MORE`), [`pipe`]s that hold file pages between disk and socket, the page-cache [`residency`] test that lets the AMPED main
//! loop avoid ever blocking on the disk, process [`limits`] (descriptors, CPU pinning), returning freed heap [`memory`], the
//! worker [`process`]es of `mp`, ignored [`signals`], counters [`shared`] between processes, switching to an unprivileged user ([`privileges`]), and an io_uring [`uring`] whose operations own the memory the
//! kernel works on. [`direct`] reads around the page cache into huge-page memory; [`block_stat`] reads a block device's read counters. [`files`] wraps the file-system calls of the request path, and [`debox`]
//! measures every call of this crate when `--debox` is on.
//! `unsafe` appears only where a syscall has no safe binding, each with a `// SAFETY:` line.
#![deny(missing_docs)]

pub mod block_stat;
pub mod debox;
pub mod direct;
pub mod epoll;
pub mod files;
pub mod limits;
pub mod listen;
pub mod memory;
pub mod pipe;
pub mod privileges;
pub mod process;
pub mod residency;
pub mod shared;
pub mod signals;
pub mod transmit;
pub mod uring;
