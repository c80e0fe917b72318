//! Giving freed heap memory back to the kernel. The C allocator keeps freed blocks for reuse
//! and returns memory only from the top of its heap, so after a burst of connections that
//! each held a buffer the process stays as large as at the peak. `malloc_trim(0)` also
//! releases whole free pages in the middle of the heap (`madvise(MADV_DONTNEED)`).

/// Serves every allocation of `bytes` or more with its own mapping, unmapped when freed, and
/// stops the allocator from raising that bound by itself. By default glibc raises it to the
/// size of the largest mapped block freed so far (up to 32 MiB), after which blocks of that size
/// come from the heap of the thread that asked and stay there when freed: a server that
/// renders an occasional multi-megabyte page on several helper threads keeps one such page
/// per thread for good. Call once at start-up.
pub fn map_large_blocks(bytes: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets the allocator's tunable; any value is accepted or refused
        // with 0, and it may be called while other threads allocate.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = bytes;
        false
    }
}

/// Returns free heap pages to the kernel; true if any were released. A walk over the heap:
/// call it after large frees, not per request.
pub fn trim_heap() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes the allocator's own locks and touches only free memory;
        // it is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_env = "gnu")]
    fn the_allocator_takes_a_fixed_mapping_bound() {
        assert!(super::map_large_blocks(1 << 20));
        let big = vec![7u8; 4 << 20];
        assert_eq!(big[(4 << 20) - 1], 7);
    }

    #[test]
    fn trim_after_freeing_releases_memory() {
        let blocks: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8; 8192]).collect();
        let keep: Vec<Vec<u8>> = (0..2000).map(|_| vec![1u8; 64]).collect();
        drop(blocks);
        assert!(super::trim_heap(), "16 MB freed, nothing released");
        drop(keep);
    }
}
