//! Giving freed heap memory back to the kernel. The C allocator keeps freed blocks for reuse
//! and returns memory only from the top of its heap, so after a burst of connections that
//! each held a buffer the process stays as large as at the peak. `malloc_trim(0)` also
//! releases whole free pages in the middle of the heap (`madvise(MADV_DONTNEED)`).

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
    fn trim_after_freeing_releases_memory() {
        let blocks: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8; 8192]).collect();
        let keep: Vec<Vec<u8>> = (0..2000).map(|_| vec![1u8; 64]).collect();
        drop(blocks);
        assert!(super::trim_heap(), "16 MB freed, nothing released");
        drop(keep);
    }
}
