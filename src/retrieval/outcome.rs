//! What a retrieval answers: the wire types of `POST /retrieve` (the
//! outcome, each memory with its scores and reason, the degradations and
//! the timings), assembled once, at the end of a retrieval, from what the
//! stages returned.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::memory::{MemoryId, MemoryView, Relationship};
use crate::upstream;

use super::hyde;
use super::time_words::TimeWindow;

/// How the texts searched for were made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The request's `query`, or the window's latest user message.
    Query,
    /// Hypothetical memories written by the retrieval model from the window.
    Hyde,
    /// No text: the filters' memories ranked by recency, importance and use.
    Filter,
}

/// Why a result is less than it would have been.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Degraded {
    /// The start-up index build is still running.
    IndexNotReady,
    /// The retrieval model did not answer in time; the latest user message
    /// was searched for instead.
    HydeTimeout,
    /// The retrieval model answered with an error; the latest user message
    /// was searched for instead.
    HydeFailed,
    /// The retrieval model's reply held no hypothesis; the latest user
    /// message was searched for instead.
    HydeUnusable,
    /// With `expand_query`: the retrieval model did not expand the query in
    /// its share of the budget; the query was searched for unexpanded.
    ExpansionTimeout,
    /// With `expand_query`: the retrieval model answered with an error;
    /// the query was searched for unexpanded.
    ExpansionFailed,
    /// The embedder did not answer within its timeout or the budget.
    EmbeddingTimeout,
    /// The embedder answered with an error.
    EmbeddingFailed,
    /// The whole retrieval ran out of its time budget.
    BudgetExhausted,
    /// The memory asked about is not in the index yet: it was just
    /// written, or the embedder is down.
    MemoryNotIndexed,
    /// No retrieval model is configured.
    LlmNotConfigured,
    /// The retrieval model's daily token budget
    /// (`retrieval.daily_token_budget`) is spent: HyDE and expansion were
    /// skipped and the plain query (or the latest user message) was
    /// searched for, until the budget renews at midnight UTC.
    DailyTokenBudgetExhausted,
}

impl Degraded {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IndexNotReady => "index_not_ready",
            Self::HydeTimeout => "hyde_timeout",
            Self::HydeFailed => "hyde_failed",
            Self::HydeUnusable => "hyde_unusable",
            Self::ExpansionTimeout => "expansion_timeout",
            Self::ExpansionFailed => "expansion_failed",
            Self::EmbeddingTimeout => "embedding_timeout",
            Self::EmbeddingFailed => "embedding_failed",
            Self::BudgetExhausted => "budget_exhausted",
            Self::MemoryNotIndexed => "memory_not_indexed",
            Self::LlmNotConfigured => "llm_not_configured",
            Self::DailyTokenBudgetExhausted => "daily_token_budget_exhausted",
        }
    }

    pub(super) fn of_hyde(failure: &hyde::Failure) -> Self {
        match failure {
            hyde::Failure::Upstream(upstream::Error::Timeout { .. }) => Self::HydeTimeout,
            hyde::Failure::Upstream(_) => Self::HydeFailed,
            hyde::Failure::Unusable => Self::HydeUnusable,
        }
    }
}

/// Why a memory is in the result.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// It matched the query (or the latest user message). When
    /// `matched_version` is set, an older version of it matched and this,
    /// the current version, stands in. `vector_pending` (present only
    /// when true): it was found by its words alone while its vector was
    /// still being computed, so its similarity is 0 for want of a vector,
    /// not measured. `passage` (present only when true): one of its
    /// sentences, not its whole text, gave its similarity (at
    /// `retrieval.passage_weight`). `feedback` (present only when true):
    /// its similarity is to the query moved toward the best match (the
    /// outcome's `moved_toward`), which found it closer than the query
    /// itself did. `time_window` (present only then): the question named
    /// a time and it was observed in it.
    Query {
        found_by: FoundBy,
        #[serde(skip_serializing_if = "Option::is_none")]
        matched_version: Option<MemoryId>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        vector_pending: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        passage: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        feedback: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        time_window: Option<TimeWindowView>,
    },
    /// It matched HyDE hypothesis number `hypothesis` (0-based);
    /// `matched_version`, `vector_pending`, `passage`, `feedback` and
    /// `time_window` as for `query`.
    Hypothesis {
        hypothesis: usize,
        found_by: FoundBy,
        #[serde(skip_serializing_if = "Option::is_none")]
        matched_version: Option<MemoryId>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        vector_pending: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        passage: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        feedback: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        time_window: Option<TimeWindowView>,
    },
    /// A `related` edge links it with `from`, a memory in the result.
    Hop {
        from: MemoryId,
        relationship: Relationship,
        direction: Direction,
    },
    /// It passed the filters of a retrieval without a query.
    Filter,
}

/// Which search found a memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// The vector (embedding) search.
    Vector,
    /// The lexical (BM25) search.
    Lexical,
    Both,
}

impl Reason {
    /// Which search found it, and whether its vector is still pending
    /// (meaningful only when the words alone found it).
    pub(super) fn set_found_by(&mut self, by: FoundBy, pending: bool) {
        if let Self::Query {
            found_by,
            vector_pending,
            ..
        }
        | Self::Hypothesis {
            found_by,
            vector_pending,
            ..
        } = self
        {
            *found_by = by;
            *vector_pending = pending && by == FoundBy::Lexical;
        }
    }

    /// Notes that the memory was observed in the time the question named.
    pub(super) fn set_time_window(&mut self, window: &TimeWindow) {
        if let Self::Query { time_window, .. } | Self::Hypothesis { time_window, .. } = self {
            *time_window = Some(TimeWindowView {
                phrase: window.phrase.clone(),
                from: window.start,
                until: window.end,
            });
        }
    }
}

/// The time a question named, as the words it was read from and the span
/// they were resolved to, `[from, until)`.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct TimeWindowView {
    /// The words, as written ("last week").
    pub phrase: String,
    pub from: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// A retrieved memory with why it is there and how it scored.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RetrievedMemory {
    #[serde(flatten)]
    pub memory: MemoryView,
    /// The weighted relevance, 0..1; results are sorted by it. A hop's is
    /// 0.8 × the relevance of the memory it came from.
    pub relevance: f64,
    pub scores: Scores,
    pub reason: Reason,
    /// Whether the memory is in `injection`.
    pub injected: bool,
    /// Why it is not in `injection`, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_injected: Option<NotInjected>,
}

/// Why a returned memory is not in the injection text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotInjected {
    /// It did not fit the token budget (`token_budget`; for a session,
    /// `inject.prompt_tokens` or `inject.session_start_tokens` too).
    OverBudget,
    /// A retrieval for a session's prompt: its relevance is below
    /// `inject.min_relevance`.
    BelowMinRelevance,
    /// A retrieval for a session: it was injected at an earlier turn of
    /// the same session (the brief included), so it is in the agent's
    /// context already.
    EarlierInSession,
}

/// Where the time went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, ToSchema)]
pub struct Timings {
    pub hyde: f64,
    pub embed: f64,
    pub search: f64,
    pub hops: f64,
    pub total: f64,
}

/// The outcome of a retrieval.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Outcome {
    pub turn_id: String,
    /// Whether this is the stored answer for the same turn (no model or
    /// embedding call was made).
    pub cached: bool,
    pub mode: Mode,
    /// Set when an upstream, the budget or the index limited this answer.
    pub degraded: Option<Degraded>,
    /// The text searched for in `query` mode (the request's, or the latest
    /// user message when HyDE was unavailable).
    pub query: Option<String>,
    /// The HyDE hypotheses searched for, in order.
    pub hypotheses: Vec<String>,
    /// With `expand_query`: the query with its added terms.
    pub expanded_query: Option<String>,
    pub added_terms: Vec<String>,
    /// The best match of a first search: the query was moved toward it
    /// (`retrieval.feedback_weight`) and searched for again beside the
    /// query itself; a memory the moved query found closer says
    /// `feedback` in its reason. Absent when feedback is off, when the
    /// first search's closest two memories were not near-tied (a clear
    /// winner), or when it found nothing with a vector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_toward: Option<MemoryId>,
    /// How many memories qualified (filters, `min_relevance`) among those
    /// ranked, before `top_k` cut them; hops not included.
    pub total_matches: usize,
    /// Whether writes to these namespaces were still on their way into the
    /// index: their vectors, at least (so the newest memories may be
    /// missing from a search by meaning; one found by its words meanwhile
    /// says `vector_pending` in its reason).
    pub index_catching_up: bool,
    /// Most relevant first.
    pub memories: Vec<RetrievedMemory>,
    /// The memories as markdown to put in the agent's context, within
    /// `token_budget` (o200k_base tokens); empty when nothing fits.
    pub injection: String,
    pub timings_ms: Timings,
}

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
    /// How well the words of its conversation (the memories sharing its
    /// session) match, relative to the best conversation of this
    /// retrieval, 0..1; `retrieval.conversation_weight` of it is part of
    /// `match`. Absent for a memory without a session, and for hops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<f64>,
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
    /// When the question names a time: 1 for a memory observed in the
    /// span it names (or, for "first" or "latest", by how early or late
    /// among the candidates it was observed), 0 for one observed outside
    /// it; `retrieval.time_weight` of it is averaged into the relevance.
    /// Absent when the question names no time, and for hops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<f64>,
    /// What its standing multiplied its relevance by, when below 1: the
    /// code it describes changed (`retrieval.changed_factor`), it is
    /// under review (`retrieval.review_factor`), or it is provisional
    /// (`retrieval.provisional_factor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standing: Option<f64>,
}

/// Which way the followed edge points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The memory it came from links to it.
    Outgoing,
    /// It links to the memory it came from.
    Incoming,
}
