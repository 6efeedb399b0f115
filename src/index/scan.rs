//! The approximate pass of a search over many chunks, shared with spare
//! cores when the process has them.
//!
//! A scan is bound by memory bandwidth, which one core cannot use up; so a
//! scan of [`MIN_SHARED_CHUNKS`] chunks or more asks the blocking pool for
//! helpers, one per core that no other search is using at the moment
//! (searches in flight are counted process-wide). Chunks are claimed one
//! at a time from a shared counter by the caller and the helpers alike, so
//! a helper that starts late (the cores are busy elsewhere) takes less or
//! nothing, and the caller never waits for work nobody has started: a
//! loaded server scans exactly as it would alone. Helpers see only codes
//! and send back each chunk's rows within the caller's cutoff (read as
//! each chunk starts); the caller filters and keeps the best, so what
//! callers pass need not cross threads.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, mpsc};

use super::chunk::Chunk;
use super::quantized::{Near, Query};

/// The fewest chunks worth sharing: below it, waking a helper costs about
/// as much as it saves.
pub const MIN_SHARED_CHUNKS: usize = 16;

/// Searches running now, in this process.
static SEARCHES: AtomicUsize = AtomicUsize::new(0);

/// Counts a search as running while it lives.
struct Running;

impl Running {
    fn start() -> (Self, usize) {
        let running = SEARCHES.fetch_add(1, Ordering::AcqRel) + 1;
        (Self, running)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        SEARCHES.fetch_sub(1, Ordering::AcqRel);
    }
}

fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Scans `chunks` with `queries` and calls `visit` with each chunk's index
/// and its rows within `cutoff` bits of their closest query, in no
/// particular order, every chunk once. The caller may lower `cutoff` as
/// it goes (in `visit`); a chunk is scanned with the cutoff of the moment
/// it starts, so it may hand back rows the cutoff has since left out.
pub fn approximate(
    chunks: &[Arc<Chunk>],
    queries: &Arc<Vec<Query>>,
    cutoff: &Arc<AtomicU16>,
    mut visit: impl FnMut(usize, Vec<Near>),
) {
    let (_running, running) = Running::start();
    let runtime = tokio::runtime::Handle::try_current();
    let helpers = helpers_for(chunks.len(), running);
    let (Ok(runtime), true) = (runtime, helpers > 0) else {
        for (index, chunk) in chunks.iter().enumerate() {
            visit(index, chunk.approximate(queries, cutoff));
        }
        return;
    };
    let next = Arc::new(AtomicUsize::new(0));
    let shared: Arc<[Arc<Chunk>]> = chunks.into();
    let (sender, results) = mpsc::channel::<(usize, Vec<Near>)>();
    for _ in 0..helpers {
        let (next, shared, queries, cutoff, sender) = (
            next.clone(),
            shared.clone(),
            queries.clone(),
            cutoff.clone(),
            sender.clone(),
        );
        runtime.spawn_blocking(move || {
            loop {
                let index = next.fetch_add(1, Ordering::AcqRel);
                let Some(chunk) = shared.get(index) else {
                    return;
                };
                if sender
                    .send((index, chunk.approximate(&queries, &cutoff)))
                    .is_err()
                {
                    return;
                }
            }
        });
    }
    // Only helpers hold senders now: once they are all done (or gone),
    // `recv` says so instead of waiting.
    drop(sender);
    let mut seen = vec![false; chunks.len()];
    let mut left = chunks.len();
    loop {
        let index = next.fetch_add(1, Ordering::AcqRel);
        let Some(chunk) = chunks.get(index) else {
            break;
        };
        visit(index, chunk.approximate(queries, cutoff));
        seen[index] = true;
        left -= 1;
    }
    // What is left was claimed by helpers that are running now.
    while left > 0 {
        let Ok((index, near)) = results.recv() else {
            break;
        };
        visit(index, near);
        seen[index] = true;
        left -= 1;
    }
    // A helper that died mid-chunk: its chunks are scanned here.
    for (index, chunk) in chunks.iter().enumerate() {
        if !seen[index] {
            visit(index, chunk.approximate(queries, cutoff));
        }
    }
}

/// Helpers to ask for: one per core no other search holds, when the scan
/// is long enough to share.
fn helpers_for(chunks: usize, running: usize) -> usize {
    if chunks < MIN_SHARED_CHUNKS {
        return 0;
    }
    cores()
        .saturating_sub(running)
        .min(chunks / MIN_SHARED_CHUNKS - 1)
}
