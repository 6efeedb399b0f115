//! Readiness: whether the start-up work (loading the store, building the
//! vector index) is done. The indexer sets it once; `/readyz`, `/stats` and
//! retrieval read it. It sits at the bottom of the module graph so the
//! components that set and read it need nothing above them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared flag, false until start-up is done; cheap to clone.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Marks start-up done; the first call logs the transition.
    pub fn set_ready(&self) {
        if !self.0.swap(true, Ordering::AcqRel) {
            tracing::info!("engram is ready: /readyz answers 200");
        }
    }
}
