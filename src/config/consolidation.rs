//! `consolidation`: how often the pass over each namespace runs and the
//! similarities it judges by, measured on the paraphrase set
//! (`engram-bench paraphrase`, `docs/benchmarks.md`).

use serde::{Deserialize, Serialize};

/// The consolidation pass (`POST /consolidate`, and on a schedule).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Consolidation {
    /// Hours between two scheduled passes over every namespace; 0 turns
    /// the schedule off (`POST /consolidate` still runs one).
    pub interval_hours: u64,
    /// Cosine similarity at or above which two current memories of a
    /// namespace say the same thing and are reduced to one.
    pub duplicate_threshold: f64,
    /// Cosine similarity at or above which (and below
    /// `duplicate_threshold`) two memories are about one subject, and
    /// are checked for a contradiction.
    pub subject_threshold: f64,
}

impl Default for Consolidation {
    fn default() -> Self {
        Self {
            interval_hours: 24,
            // Both measured with the embedded model on the paraphrase set
            // (`engram-bench paraphrase`): the best F1 that merges no pair
            // that is not a paraphrase, and the lowest that flags no pair
            // that agrees.
            duplicate_threshold: 0.84,
            subject_threshold: 0.5,
        }
    }
}
