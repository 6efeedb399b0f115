//! The ranking stage, and weighted relevance: how well a memory matches,
//! how recent, how important and how often used it is, each 0..1, combined
//! by weights normalised by their sum (so the result is 0..1 too), plus a
//! small lift for memories like the request's `context_boost`. The
//! signals and their weights are declared in [`crate::config::signals`];
//! the weighted mean expands that list here.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::config::Weights;
use crate::config::signals::with_relevance_signals;
use crate::index::cosine;
use crate::memory::{Confidence, Lifecycle, Memory, MemoryId, Validity};

use super::access::AccessCounts;
use super::outcome::{Reason, Scores};
use super::search::Candidate;
use super::time_words::{TimeInQuestion, TimeOrder, TimeWindow};

/// Expands the list of signals into the weighted mean over a memory's
/// scores, each weight applied to its signal's score.
macro_rules! relevance {
    ($($(#[doc = $doc:literal])* $name:ident = $default:literal => $score:ident;)+) => {
        impl Scores {
            /// The weighted mean of the scores, 0..1. `weights` are checked
            /// (0..1, not all zero) where they enter; a retrieval without a
            /// query drops the similarity weight, and with nothing left,
            /// recency alone ranks.
            pub fn relevance(&self, weights: &Weights) -> f64 {
                let applied = [$((weights.$name, self.$score),)+];
                let total: f64 = applied.iter().map(|(weight, _)| weight).sum();
                if total == 0.0 {
                    return self.recency;
                }
                let sum: f64 = applied.iter().map(|(weight, score)| weight * score).sum();
                (sum / total).clamp(0.0, 1.0)
            }
        }
    };
}

with_relevance_signals!(relevance);

/// Age at which recency reaches 0; it falls linearly until then.
const RECENCY_HORIZON_DAYS: f64 = 365.0;
/// The importance of a memory that does not state one: neutral.
pub const DEFAULT_IMPORTANCE: f64 = 0.5;
/// Retrievals at which the access score saturates: log10(n + 1) / 3 is 1
/// at 999.
const ACCESS_LOG_SCALE: f64 = 3.0;
/// The most a `context_boost` lifts a memory's relevance (at similarity 1).
const CONTEXT_LIFT: f64 = 0.1;

/// A memory on its way to the result.
pub struct Ranked {
    pub memory: Arc<Memory>,
    pub scores: Scores,
    pub relevance: f64,
    pub reason: Reason,
}

/// The request's `context_boost`, embedded, and the stored vectors of the
/// memories it may lift.
pub struct Boost<'a> {
    pub context: &'a [f32],
    pub vectors: &'a HashMap<MemoryId, Vec<f32>>,
}

impl Boost<'_> {
    /// The context's cosine with the memory, 0..1, if its vector is known.
    pub fn of(&self, id: MemoryId) -> Option<f64> {
        self.vectors
            .get(&id)
            .map(|vector| f64::from(cosine(self.context, vector)).clamp(0.0, 1.0))
    }
}

/// When a retrieval is measured: the moment recency counts from, and the
/// time its question names with how much that counts.
#[derive(Clone, Copy)]
pub struct When<'a> {
    pub at: DateTime<Utc>,
    pub named: Option<&'a TimeInQuestion>,
    /// `retrieval.time_weight`.
    pub weight: f64,
}

/// The candidates with their weighted relevance (plus the context lift
/// and the time the question names), those at `min_relevance` or above,
/// best first.
pub fn rank(
    candidates: Vec<Candidate>,
    weights: &Weights,
    min_relevance: f64,
    access: &AccessCounts,
    boost: Option<&Boost<'_>>,
    standing: Standing,
    when: When<'_>,
) -> Vec<Ranked> {
    let time = when.named.filter(|_| when.weight > 0.0).map(|named| {
        let observed = candidates
            .iter()
            .map(|candidate| candidate.memory.observed());
        TimeLift::new(named, observed)
    });
    let mut ranked: Vec<Ranked> = candidates
        .into_iter()
        .map(|candidate| {
            let memory = candidate.memory;
            let mut reason = candidate.reason;
            let mut scores = Scores::of(
                &memory,
                candidate.similarity,
                access.get(memory.id),
                when.at,
            );
            scores.lexical = f64::from(candidate.lexical);
            scores.conversation = candidate.conversation;
            scores.matched = candidate.fused;
            let mut relevance = scores.relevance(weights);
            if let Some(lift) = boost.and_then(|boost| boost.of(memory.id)) {
                scores.context_boost = Some(lift);
                relevance = (relevance + CONTEXT_LIFT * lift).min(1.0);
            }
            if let Some(time) = &time {
                let score = time.score(&memory);
                scores.time = Some(score);
                relevance = (relevance + when.weight * score) / (1.0 + when.weight);
                if let Some(window) = time.window_holding(&memory) {
                    reason.set_time_window(window);
                }
            }
            let relevance = standing.apply(&memory, &mut scores, relevance);
            Ranked {
                memory,
                scores,
                relevance,
                reason,
            }
        })
        .filter(|ranked| ranked.relevance >= min_relevance)
        .collect();
    by_relevance(&mut ranked);
    ranked
}

/// `memories` (what the filters admit, without a query) by the weighted
/// relevance of all but similarity, those at `min_relevance` or above,
/// best first; ties newest first. Recency is measured at `at`.
pub fn without_query(
    memories: impl Iterator<Item = Arc<Memory>>,
    weights: &Weights,
    min_relevance: f64,
    access: &AccessCounts,
    standing: Standing,
    at: DateTime<Utc>,
) -> Vec<Ranked> {
    let weights = Weights {
        similarity: 0.0,
        ..*weights
    };
    let mut ranked: Vec<Ranked> = memories
        .map(|memory| {
            let mut scores = Scores::of(&memory, 0.0, access.get(memory.id), at);
            let relevance = scores.relevance(&weights);
            let relevance = standing.apply(&memory, &mut scores, relevance);
            Ranked {
                memory,
                scores,
                relevance,
                reason: Reason::Filter,
            }
        })
        .filter(|ranked| ranked.relevance >= min_relevance)
        .collect();
    ranked.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| b.memory.observed().cmp(&a.memory.observed()))
    });
    ranked
}

/// Most relevant first; ties in a fixed order (by id).
pub fn by_relevance(ranked: &mut [Ranked]) {
    ranked.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| a.memory.id.cmp(&b.memory.id))
    });
}

impl Scores {
    /// A memory's scores, its recency measured at `at` from when it was
    /// observed.
    pub fn of(memory: &Memory, similarity: f32, access_count: u64, at: DateTime<Utc>) -> Self {
        #[expect(
            clippy::cast_precision_loss,
            reason = "ages in seconds and access counts stay far below 2^52"
        )]
        let (age_days, accesses) = (
            (at - memory.observed()).num_seconds() as f64 / 86_400.0,
            access_count as f64,
        );
        let similarity = f64::from(similarity).clamp(0.0, 1.0);
        Self {
            matched: similarity,
            similarity,
            lexical: 0.0,
            conversation: None,
            recency: (1.0 - age_days / RECENCY_HORIZON_DAYS).clamp(0.0, 1.0),
            importance: memory.importance.unwrap_or(DEFAULT_IMPORTANCE),
            access: ((accesses + 1.0).log10() / ACCESS_LOG_SCALE).min(1.0),
            context_boost: None,
            time: None,
            standing: None,
        }
    }
}

/// How the time a question names lifts the candidates: those observed in
/// the span it names, and by how early or late among the candidates they
/// were observed when it asks for the first or the latest.
struct TimeLift<'a> {
    window: Option<&'a TimeWindow>,
    order: Option<TimeOrder>,
    /// The earliest and latest moments the candidates were observed.
    span: (DateTime<Utc>, DateTime<Utc>),
}

impl<'a> TimeLift<'a> {
    /// The lift of `named` over candidates observed at `observed`.
    fn new(
        named: &'a TimeInQuestion,
        observed: impl Iterator<Item = DateTime<Utc>> + Clone,
    ) -> Self {
        let earliest = observed.clone().min().unwrap_or_default();
        let latest = observed.max().unwrap_or_default();
        Self {
            window: named.window.as_ref(),
            order: named.order,
            span: (earliest, latest),
        }
    }

    /// The span named, if `memory` was observed in it.
    fn window_holding(&self, memory: &Memory) -> Option<&'a TimeWindow> {
        let observed = memory.observed();
        self.window
            .filter(|window| window.start <= observed && observed < window.end)
    }

    /// 0..1: in the span (1) or not (0), times how far toward the end
    /// the question asks for it lies among the candidates.
    fn score(&self, memory: &Memory) -> f64 {
        if self.window.is_some() && self.window_holding(memory).is_none() {
            return 0.0;
        }
        let (earliest, latest) = self.span;
        #[expect(
            clippy::cast_precision_loss,
            reason = "spans in seconds stay far below 2^52"
        )]
        let lateness = if latest > earliest {
            (memory.observed() - earliest).num_seconds() as f64
                / (latest - earliest).num_seconds() as f64
        } else {
            1.0
        };
        match self.order {
            None => 1.0,
            Some(TimeOrder::Latest) => lateness,
            Some(TimeOrder::Earliest) => 1.0 - lateness,
        }
    }
}

/// How much a memory's standing lowers its relevance: the code it
/// describes changed since it was written, a memory it is linked to
/// changed (it is under review), or nobody confirmed it yet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    pub changed: f64,
    pub review: f64,
    pub provisional: f64,
}

impl Standing {
    /// The factor for `lifecycle`, when below 1.
    fn factor(self, lifecycle: &Lifecycle) -> Option<f64> {
        let mut factor = 1.0;
        if lifecycle.validity == Validity::Changed {
            factor *= self.changed;
        }
        if lifecycle.needs_review {
            factor *= self.review;
        }
        if lifecycle.confidence == Confidence::Provisional {
            factor *= self.provisional;
        }
        (factor < 1.0).then_some(factor)
    }

    /// Applies the factor of `memory`'s standing to `relevance`, noting it
    /// in `scores`.
    pub(super) fn apply(self, memory: &Memory, scores: &mut Scores, relevance: f64) -> f64 {
        scores.standing = self.factor(&memory.lifecycle);
        relevance * scores.standing.unwrap_or(1.0)
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
            conversation: None,
            recency: 0.5,
            importance: 0.0,
            access: 0.0,
            context_boost: None,
            time: None,
            standing: None,
        };
        let weights = Weights {
            similarity: 0.5,
            recency: 0.5,
            ..Weights::ZERO
        };
        assert!((scores.relevance(&weights) - 0.75).abs() < 1e-12);
        let similarity_only = Weights {
            similarity: 0.2,
            ..Weights::ZERO
        };
        assert!((scores.relevance(&similarity_only) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn time_lifts_what_was_observed_in_the_span_named_and_in_the_order_asked() {
        let now = Utc::now();
        let observed_days_ago = |days| {
            let mut memory = memory(Duration::days(0), None);
            memory.observed_at = Some(now - Duration::days(days));
            memory
        };
        let (old, middle, new) = (
            observed_days_ago(30),
            observed_days_ago(10),
            observed_days_ago(2),
        );
        let observed = [&old, &middle, &new].map(Memory::observed);
        let window = TimeWindow {
            start: now - Duration::days(14),
            end: now - Duration::days(7),
            phrase: "last week".to_owned(),
        };
        let in_span = TimeInQuestion {
            window: Some(window.clone()),
            order: None,
        };
        let lift = TimeLift::new(&in_span, observed.into_iter());
        assert_eq!(
            [&old, &middle, &new].map(|memory| lift.score(memory)),
            [0.0, 1.0, 0.0]
        );
        assert_eq!(lift.window_holding(&middle), Some(&window));
        assert_eq!(lift.window_holding(&new), None);

        let first = TimeInQuestion {
            window: None,
            order: Some(TimeOrder::Earliest),
        };
        let lift = TimeLift::new(&first, observed.into_iter());
        let scores = [&old, &middle, &new].map(|memory| lift.score(memory));
        assert!(
            (scores[0] - 1.0).abs() < 1e-9 && scores[2].abs() < 1e-9,
            "{scores:?}"
        );
        assert!(scores[1] > scores[2] && scores[1] < scores[0], "{scores:?}");
        let latest = TimeInQuestion {
            window: None,
            order: Some(TimeOrder::Latest),
        };
        let lift = TimeLift::new(&latest, observed.into_iter());
        assert!((lift.score(&new) - 1.0).abs() < 1e-9);
        assert_eq!(lift.window_holding(&new), None);
    }
}
