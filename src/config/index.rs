//! `index`: how the vector search's index is kept.

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
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            approximate_above: DEFAULT_APPROXIMATE_ABOVE,
        }
    }
}
