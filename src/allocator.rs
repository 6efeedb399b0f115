//! The allocator's one setting: at most one glibc arena per core.
//!
//! glibc gives each thread that allocates an arena of its own, up to eight
//! per core, and keeps what is freed in an arena for that arena alone. A
//! service whose threads each build and drop large buffers at times (the
//! load, the indexer's batches, searches on the blocking pool) so holds the
//! sum of every arena's high-water mark: at 100,000 memories, 335 MiB
//! resident once indexed against 262 MiB with one arena per core, with the
//! same throughput (`engram-bench retrieve --memories 100000`).
//!
//! Setting it needs `unsafe`: glibc's `mallopt` has no safe binding.

/// Caps glibc's arenas at one per core. Call it first thing in `main`,
/// before any thread starts. Elsewhere than glibc it does nothing.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_arenas() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets one of the allocator's tunables; it
    // takes no pointers and has no precondition. A refused value (0 is
    // returned) leaves glibc's default, which is still correct.
    #[expect(unsafe_code, reason = "glibc's mallopt has no safe binding")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

/// Caps glibc's arenas at one per core: nothing to do without glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}
