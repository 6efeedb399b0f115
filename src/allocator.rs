//! The process's allocator: mimalloc, without transparent huge pages.
//!
//! Under the 32-client retrieval load glibc's malloc took about 15 % of
//! the process's CPU time, with its arenas capped at one per core to bound
//! what each one keeps, and threads queued on the arenas' locks. mimalloc
//! keeps a heap per thread; with it the CPU time of one retrieval at
//! 100,000 memories fell by about a quarter (`engram-bench retrieve
//! --memories 100000`), and the embedder's batches run as fast as before.
//!
//! mimalloc asks the kernel for transparent huge pages on the memory it
//! reserves, so a few live objects keep a whole 2 MiB page resident: with
//! them that run held 303–309 MiB once indexed and 620–680 MiB after its
//! retrievals, against 254–271 and 305–332 without. The switch is
//! process-wide and covers memory mapped before `main`, which mimalloc's
//! own option would come too late for.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for the process. Call it first thing
/// in `main`. Where the kernel refuses, memory is only held longer, which
/// is not worth failing for.
pub fn configure() {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
