//! Consolidation: a pass over a namespace's current memories that finds
//! near-duplicates and contradictions.

pub mod disagree;
