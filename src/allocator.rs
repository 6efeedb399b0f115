//! The process's allocator: mimalloc, without transparent huge pages.
//!
//! Many threads allocate at once under concurrent retrievals, and glibc's
//! malloc serialises them on its arenas' locks (more arenas would only
//! keep more freed memory). mimalloc keeps a heap per thread, so the
//! allocator stops being a shared point of contention, and the embedder's
//! large, short-lived tensors are reused rather than returned and faulted
//! back in.
//!
//! mimalloc asks the kernel for transparent huge pages on the memory it
//! reserves, so a few live objects can keep a whole 2 MiB page resident
//! and the process holds far more than it uses. Turning them off is
//! process-wide and covers memory mapped before `main`, which mimalloc's
//! own option would come too late for. The measurements behind both
//! choices are in `docs/benchmarks.md` ("glibc's malloc against
//! mimalloc").

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for the process. Call it first thing
/// in `main`. Where the kernel refuses, memory is only held longer, which
/// is not worth failing for.
pub fn configure() {
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}
