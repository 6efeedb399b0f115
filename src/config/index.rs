//! `index`: how the vector search's index is kept.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `index.approximate_above`'s default: below it a namespace's scan is
/// exact and fast (see `docs/benchmarks.md`, "Search at scale").
pub const DEFAULT_APPROXIMATE_ABOVE: usize = 50_000;

/// The vector search's index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// A namespace of more embedded rows than this (its whole texts, or
    /// its passages, counted apart) is searched through an approximate
    /// index; at this many or fewer, by the exact scan.
    pub approximate_above: usize,
    /// A namespace no read touched for this many minutes is dropped from
    /// memory, and loaded again from the embedding cache by its next
    /// read; `None`: kept (the default).
    pub idle_minutes: Option<u64>,
    /// The most the index keeps in memory, in MiB: beyond it the least
    /// recently read namespaces are dropped first; `None`: no ceiling.
    pub max_memory_mb: Option<u64>,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            approximate_above: DEFAULT_APPROXIMATE_ABOVE,
            idle_minutes: None,
            max_memory_mb: None,
        }
    }
}

impl IndexConfig {
    /// What the index keeps resident.
    pub fn residency(&self) -> Residency {
        Residency {
            idle: self
                .idle_minutes
                .map(|minutes| Duration::from_secs(minutes.saturating_mul(60))),
            max_bytes: self
                .max_memory_mb
                .map(|mb| usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)),
        }
    }
}

/// When the index drops a namespace from memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// After this long without a read; `None`: never for idleness.
    pub idle: Option<Duration>,
    /// Above this many bytes, the least recently read first; `None`: no
    /// ceiling.
    pub max_bytes: Option<usize>,
}

impl Residency {
    /// Whether any namespace is ever dropped.
    pub fn evicts(&self) -> bool {
        self.idle.is_some() || self.max_bytes.is_some()
    }
}
