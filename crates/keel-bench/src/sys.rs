//! Facts about the running process and machine, for reports.

/// Peak resident set size of this process in bytes (VmHWM), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Total physical memory in bytes, if known.
pub fn total_ram_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Bytes process `pid` (this process if `None`) caused to be written to
/// storage so far: `write_bytes` of `/proc/PID/io` (Linux with task I/O
/// accounting; `None` elsewhere, or if the process is not ours to read).
pub fn process_write_bytes(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/io"),
        None => "/proc/self/io".to_string(),
    };
    let s = std::fs::read_to_string(path).ok()?;
    let line = s.lines().find(|l| l.starts_with("write_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Peak resident set size of process `pid` in bytes (VmHWM), if known.
pub fn peak_rss_bytes_of(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Give the memory the allocator holds free back to the kernel (glibc's
/// `malloc_trim`; nothing elsewhere). Loading leaves megabytes free in
/// each thread's malloc arena (the loaders' rows and index entries), which
/// glibc keeps, and which would otherwise count in the next run's RSS as
/// if the engine used it.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only returns free memory to the kernel; it has no
    // preconditions and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Start this process's peak resident set size afresh (Linux: `5` to
/// `/proc/self/clear_refs`), so that a run's peak is its own and not an
/// earlier run's in the same process. False if the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
