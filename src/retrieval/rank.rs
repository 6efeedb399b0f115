//! Weighted relevance: how well a memory matches, how recent, how important
//! and how often used it is, each 0..1, combined by weights normalised by
//! their sum (so the result is 0..1 too).

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::config::Weights;
use crate::memory::Memory;

/// Age at which recency reaches 0; it falls linearly until then.
const RECENCY_HORIZON_DAYS: f64 = 365.0;
/// The importance of a memory that does not state one: neutral.
pub const DEFAULT_IMPORTANCE: f64 = 0.5;
/// Retrievals at which the access score saturates: log10(n + 1) / 3 is 1
/// at 999.
const ACCESS_LOG_SCALE: f64 = 3.0;

/// The per-factor scores behind a relevance, for introspection.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, ToSchema)]
pub struct Scores {
    /// How well it matches, 0..1: the fusion of its meaning (cosine
    /// relative to the best) and its words (the share of the query's
    /// information they hold), 1 for the best cosine with every query word
    /// (plain cosine similarity for hops). The `similarity` weight applies
    /// to this score.
    #[serde(rename = "match")]
    pub matched: f64,
    /// Cosine similarity to the query (its best text), clamped to 0..1,
    /// whichever search found the memory.
    pub similarity: f64,
    /// BM25 score relative to the best lexical match of this retrieval, 0..1.
    pub lexical: f64,
    /// 1 when new, falling linearly to 0 at one year old.
    pub recency: f64,
    /// The memory's `importance`, or 0.5 when it has none.
    pub importance: f64,
    /// How often the memory was retrieved before: log10(n + 1) / 3, at most 1.
    pub access: f64,
    /// With a `context_boost`: cosine similarity to it, 0..1; it adds up to
    /// 0.1 to the relevance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_boost: Option<f64>,
}

impl Scores {
    pub fn of(memory: &Memory, similarity: f32, access_count: u64, now: DateTime<Utc>) -> Self {
        #[expect(
            clippy::cast_precision_loss,
            reason = "ages in seconds and access counts stay far below 2^52"
        )]
        let (age_days, accesses) = (
            (now - memory.created_at).num_seconds() as f64 / 86_400.0,
            access_count as f64,
        );
        let similarity = f64::from(similarity).clamp(0.0, 1.0);
        Self {
            matched: similarity,
            similarity,
            lexical: 0.0,
            recency: (1.0 - age_days / RECENCY_HORIZON_DAYS).clamp(0.0, 1.0),
            importance: memory.importance.unwrap_or(DEFAULT_IMPORTANCE),
            access: ((accesses + 1.0).log10() / ACCESS_LOG_SCALE).min(1.0),
            context_boost: None,
        }
    }

    /// The weighted mean of the scores, 0..1. `weights` are checked (0..1,
    /// not all zero) where they enter; a retrieval without a query drops the
    /// similarity weight, and with nothing left, recency alone ranks.
    pub fn relevance(&self, weights: &Weights) -> f64 {
        let total = weights.similarity + weights.recency + weights.importance + weights.access;
        if total == 0.0 {
            return self.recency;
        }
        let sum = weights.similarity * self.matched
            + weights.recency * self.recency
            + weights.importance * self.importance
            + weights.access * self.access;
        (sum / total).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::memory::{Category, Namespace};

    fn memory(age: Duration, importance: Option<f64>) -> Memory {
        let mut memory = Memory::example(
            Namespace::Repo("r".parse().unwrap()),
            Category::Patterns,
            "x",
        );
        memory.created_at -= age;
        memory.updated_at = memory.created_at;
        memory.importance = importance;
        memory
    }

    #[test]
    fn each_factor_follows_its_formula() {
        let now = Utc::now();
        let half_year = memory(Duration::days(73), Some(0.9));
        let scores = Scores::of(&half_year, 0.8, 9, now);
        assert!((scores.similarity - 0.8).abs() < 1e-6);
        assert!((scores.recency - 0.8).abs() < 1e-3);
        assert!((scores.importance - 0.9).abs() < 1e-12);
        assert!((scores.access - 1.0 / 3.0).abs() < 1e-12);

        let ancient = Scores::of(&memory(Duration::days(800), None), -0.3, 5000, now);
        assert_eq!(ancient.similarity, 0.0);
        assert_eq!(ancient.recency, 0.0);
        assert_eq!(ancient.importance, DEFAULT_IMPORTANCE);
        assert_eq!(ancient.access, 1.0);
    }

    #[test]
    fn relevance_is_the_weighted_mean() {
        let scores = Scores {
            matched: 1.0,
            similarity: 1.0,
            lexical: 0.0,
            recency: 0.5,
            importance: 0.0,
            access: 0.0,
            context_boost: None,
        };
        let weights = Weights {
            similarity: 0.5,
            recency: 0.5,
            importance: 0.0,
            access: 0.0,
        };
        assert!((scores.relevance(&weights) - 0.75).abs() < 1e-12);
        let similarity_only = Weights {
            similarity: 0.2,
            recency: 0.0,
            importance: 0.0,
            access: 0.0,
        };
        assert!((scores.relevance(&similarity_only) - 1.0).abs() < 1e-12);
    }
}
