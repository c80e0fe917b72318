//! Syscall layer.
