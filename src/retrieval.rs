//! Retrieval: the memories that matter now, ranked, explained, and as text
//! to inject, within a time budget.
//!
//! The pipeline: the per-turn cache; then the texts to search for (the
//! query, HyDE hypotheses from the window, or the latest user message),
//! optionally expanded; one embedding call for all of them; one scan of the
//! index; heads of chains standing in for matched old versions; weighted
//! ranking; hops along `related` edges; the injection text.
//!
//! A retrieval never fails for an upstream's fault: when the retrieval
//! model or the embedder is slow or down, or the index is still being
//! built, the answer says so in `degraded` and serves what it still can
//! honestly (with HyDE down, the latest user message is searched for).

pub mod access;
pub mod cache;
pub mod expand;
pub mod fusion;
pub mod hops;
pub mod hyde;
pub mod hyde_reply;
pub mod inject;
pub mod rank;
pub mod similar;
pub mod stats;
pub mod suggestions;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde::Serialize;
use tokio::time::Instant as Deadline;
use utoipa::ToSchema;

use crate::blocking;
use crate::config::{self, Weights};
use crate::embed::{self, Embedder};
use crate::error::error_chain;
use crate::index::{Hit, Index, cosine, lexical};
use crate::llm::Llm;
use crate::memory::{Category, Memory, MemoryId, MemoryView, Namespace, Relationship, Scope};
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::store::{ListFilter, Reach, Store};
use crate::upstream;
use crate::window::{self, Line};
use access::AccessCounts;
use cache::{TurnCache, TurnKey};
use hops::Direction;
use rank::Scores;
use stats::RetrievalStats;

/// How many more candidates than `top_k` the vector search hands to
/// ranking: recency, importance and access can lift a memory that is not
/// among the closest few.
const CANDIDATE_FACTOR: usize = 4;
const MIN_CANDIDATES: usize = 32;
/// The least cosine similarity at which the vector search counts as having
/// found a memory (unrelated sentences score about 0 to 0.1 with MiniLM).
const MIN_VECTOR_EVIDENCE: f32 = 0.1;
/// The most a `context_boost` lifts a memory's relevance (at similarity 1).
const CONTEXT_LIFT: f64 = 0.1;
/// How long a retrieval waits for writes to its namespaces to reach the
/// index, alongside its own embedding call.
const INDEX_CATCH_UP: Duration = Duration::from_millis(250);
/// The share of the budget HyDE may not use, so that when it times out
/// the fallback search still fits.
const FALLBACK_RESERVE_DIVISOR: u32 = 4;
/// Slack past the budget before the whole retrieval is cut off: each stage
/// keeps to the deadline itself, and this only catches the unexpected.
const CUTOFF_GRACE: Duration = Duration::from_millis(50);
/// The most memories a filter-only retrieval ranks.
const MAX_FILTERED: usize = 100_000;

/// A parsed, validated retrieval.
#[derive(Clone, Debug)]
pub struct Request {
    pub turn_id: String,
    /// The namespaces searched: the pair's, or one of them (see `Reach`).
    pub pair: Reach,
    pub input: Input,
    /// The configured settings with the request's overrides, checked.
    pub settings: config::Retrieval,
    pub filters: Filters,
    pub exclude_ids: HashSet<MemoryId>,
    pub use_cache: bool,
    pub expand_query: bool,
    /// Text whose similarity lifts related memories.
    pub context_boost: Option<String>,
}

/// What to search for.
#[derive(Clone, Debug)]
pub enum Input {
    /// Search for this text directly.
    Query(String),
    /// A conversation window: HyDE when a retrieval model is configured,
    /// else its latest user message. It holds at least one user line.
    Window(Vec<Line>),
    /// No text: rank what the filters admit by recency, importance and use.
    Filters,
}

/// Which memories may be returned at all.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub scope: Option<Scope>,
    /// Any of these; `None` means every category.
    pub categories: Option<Vec<Category>>,
}

impl Filters {
    fn admit(&self, memory: &Memory) -> bool {
        self.scope
            .is_none_or(|scope| memory.namespace.scope() == scope)
            && self.admit_category(memory.category)
    }

    fn admit_category(&self, category: Category) -> bool {
        self.categories
            .as_ref()
            .is_none_or(|categories| categories.contains(&category))
    }
}

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
        }
    }

    fn of_hyde(failure: &hyde::Failure) -> Self {
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
    /// the current version, stands in.
    Query {
        found_by: FoundBy,
        #[serde(skip_serializing_if = "Option::is_none")]
        matched_version: Option<MemoryId>,
    },
    /// It matched HyDE hypothesis number `hypothesis` (0-based).
    Hypothesis {
        hypothesis: usize,
        found_by: FoundBy,
        #[serde(skip_serializing_if = "Option::is_none")]
        matched_version: Option<MemoryId>,
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
    fn set_found_by(&mut self, by: FoundBy) {
        if let Self::Query { found_by, .. } | Self::Hypothesis { found_by, .. } = self {
            *found_by = by;
        }
    }
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
    /// Whether the memory is in `injection` (it may not fit the budget).
    pub injected: bool,
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
    /// How many memories qualified (filters, `min_relevance`) among those
    /// ranked, before `top_k` cut them; hops not included.
    pub total_matches: usize,
    /// Whether writes to these namespaces were still on their way into the
    /// index (so the newest memories may be missing).
    pub index_catching_up: bool,
    /// Most relevant first.
    pub memories: Vec<RetrievedMemory>,
    /// The memories as markdown to put in the agent's context, within
    /// `token_budget` (o200k_base tokens); empty when nothing fits.
    pub injection: String,
    pub timings_ms: Timings,
}

impl Outcome {
    fn empty(request: &Request, mode: Mode) -> Self {
        Self {
            turn_id: request.turn_id.clone(),
            cached: false,
            mode,
            degraded: None,
            query: None,
            hypotheses: Vec::new(),
            expanded_query: None,
            added_terms: Vec::new(),
            total_matches: 0,
            index_catching_up: false,
            memories: Vec::new(),
            injection: String::new(),
            timings_ms: Timings::default(),
        }
    }
}

/// What the retriever needs; built once at start.
pub struct Parts {
    pub store: Store,
    pub index: Arc<Index>,
    pub embedder: Embedder,
    pub llm: Option<Llm>,
    pub index_ready: Readiness,
    pub access: AccessCounts,
    pub budget: Duration,
    pub cache_ttl: Duration,
    pub cache_capacity: usize,
    pub cache_max_bytes: usize,
    /// The lexical ranking's share of the fusion, 0..1 (0: vector only).
    pub lexical_weight: f64,
    pub metrics: Metrics,
}

/// Runs retrievals; cheap to clone.
#[derive(Clone)]
pub struct Retriever {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    index: Arc<Index>,
    embedder: Embedder,
    llm: Option<Llm>,
    index_ready: Readiness,
    access: AccessCounts,
    budget: Duration,
    cache: TurnCache<Outcome>,
    stats: RetrievalStats,
    metrics: Metrics,
    lexical_weight: f64,
}

/// A memory found by the vector search, the lexical search, or both.
struct Candidate {
    memory: Arc<Memory>,
    /// Best cosine similarity among its matching versions.
    similarity: f32,
    /// BM25 score relative to the best of this retrieval, 0..1.
    lexical: f32,
    /// The fused match score, 0..1.
    fused: f64,
    dense: Option<fusion::Dense>,
    lexical_match: Option<fusion::Lexical>,
    reason: Reason,
}

/// A candidate on its way to the result.
struct Ranked {
    memory: Arc<Memory>,
    scores: Scores,
    relevance: f64,
    reason: Reason,
}

impl Retriever {
    pub fn new(parts: Parts) -> Self {
        Self {
            inner: Arc::new(Inner {
                cache: TurnCache::new(parts.cache_ttl, parts.cache_capacity, parts.cache_max_bytes),
                store: parts.store,
                index: parts.index,
                embedder: parts.embedder,
                llm: parts.llm,
                index_ready: parts.index_ready,
                access: parts.access,
                budget: parts.budget,
                stats: RetrievalStats::default(),
                metrics: parts.metrics,
                lexical_weight: parts.lexical_weight,
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn index(&self) -> &Index {
        &self.inner.index
    }

    pub fn llm(&self) -> Option<&Llm> {
        self.inner.llm.as_ref()
    }

    pub fn stats(&self) -> &RetrievalStats {
        &self.inner.stats
    }

    pub fn access_counts(&self) -> &AccessCounts {
        &self.inner.access
    }

    /// The key of the embedding model behind the index.
    pub fn model_key(&self) -> String {
        self.inner.embedder.model_key()
    }

    pub fn embedder(&self) -> &Embedder {
        &self.inner.embedder
    }

    /// Retrieves for `request` within the configured budget.
    pub async fn run(&self, request: Request) -> Outcome {
        let started = Instant::now();
        let outcome = self.run_uncounted(request, started).await;
        let timings = outcome.timings_ms;
        for (stage, millis) in [
            ("hyde", timings.hyde),
            ("embed", timings.embed),
            ("search", timings.search),
            ("hops", timings.hops),
        ] {
            self.inner.metrics.retrieval_stage(stage, millis);
        }
        self.inner.stats.record(
            started.elapsed(),
            outcome.cached,
            outcome.degraded.map(Degraded::as_str),
        );
        outcome
    }

    async fn run_uncounted(&self, request: Request, started: Instant) -> Outcome {
        let inner = &self.inner;
        let key = TurnKey {
            repo: request.pair.repo().cloned(),
            user: request.pair.user().cloned(),
            turn_id: request.turn_id.clone(),
        };
        let generations = inner.store.generations(&request.pair);
        if request.use_cache
            && let Some(mut hit) = inner.cache.get(&key, generations)
        {
            hit.cached = true;
            hit.timings_ms = Timings {
                total: millis(started.elapsed()),
                ..Timings::default()
            };
            return hit;
        }
        if !inner.index_ready.is_ready() && !matches!(request.input, Input::Filters) {
            let mut outcome = Outcome::empty(&request, Mode::Query);
            outcome.degraded = Some(Degraded::IndexNotReady);
            outcome.timings_ms.total = millis(started.elapsed());
            return outcome;
        }

        let deadline = Deadline::from_std(started + inner.budget);
        let cutoff = deadline + CUTOFF_GRACE;
        let mut outcome =
            match tokio::time::timeout_at(cutoff, self.pipeline(&request, deadline)).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    let mut outcome = Outcome::empty(&request, Mode::Query);
                    outcome.degraded = Some(Degraded::BudgetExhausted);
                    outcome
                }
            };
        outcome.timings_ms.total = millis(started.elapsed());
        if let Some(reason) = outcome.degraded {
            tracing::info!(degraded = reason.as_str(), "retrieval degraded");
        } else {
            // Only complete answers are reused: a degraded one would hide
            // the upstream's recovery from the rest of the turn.
            inner.cache.put(key, outcome.clone(), generations);
        }
        inner
            .access
            .record(outcome.memories.iter().map(|m| m.memory.id));
        outcome
    }

    /// The stages after the cache, each taking what is left of the budget.
    async fn pipeline(&self, request: &Request, deadline: Deadline) -> Outcome {
        let inner = &self.inner;
        let window = match &request.input {
            Input::Filters => {
                // Ranks up to every memory of the pair: CPU work, like the
                // ranking after a search.
                let request = request.clone();
                return self
                    .on_blocking_pool(move |retriever| retriever.filter_only(&request))
                    .await;
            }
            Input::Query(query) => {
                let mut outcome = Outcome::empty(request, Mode::Query);
                outcome.query = Some(query.clone());
                return self
                    .search(request, outcome, vec![query.clone()], deadline)
                    .await;
            }
            Input::Window(window) => window,
        };
        let latest = window::latest_user_text(window)
            .unwrap_or_default()
            .to_owned();
        let Some(llm) = &inner.llm else {
            let mut outcome = Outcome::empty(request, Mode::Query);
            outcome.query = Some(latest.clone());
            return self.search(request, outcome, vec![latest], deadline).await;
        };
        let mut outcome = Outcome::empty(request, Mode::Hyde);
        let hyde_started = Instant::now();
        let reserve = inner.budget / FALLBACK_RESERVE_DIVISOR;
        let timeout = deadline
            .saturating_duration_since(Deadline::now())
            .saturating_sub(reserve);
        let hypotheses =
            hyde::hypotheses(llm, window, request.settings.hypothesis_count, timeout).await;
        outcome.timings_ms.hyde = millis(hyde_started.elapsed());
        match hypotheses {
            Ok(hypotheses) => {
                outcome.hypotheses = hypotheses.clone();
                self.search(request, outcome, hypotheses, deadline).await
            }
            Err(failure) => {
                if let hyde::Failure::Upstream(err) = &failure {
                    inner.metrics.upstream_error("chat", err);
                }
                tracing::warn!(error = %error_chain(&failure), "HyDE failed; searching for the latest user message");
                outcome.degraded = Some(Degraded::of_hyde(&failure));
                outcome.query = Some(latest.clone());
                self.search(request, outcome, vec![latest], deadline).await
            }
        }
    }

    /// Embeds `texts` (with the expansion and context boost) in one call,
    /// searches, ranks, hops and renders the injection.
    async fn search(
        &self,
        request: &Request,
        mut outcome: Outcome,
        mut texts: Vec<String>,
        deadline: Deadline,
    ) -> Outcome {
        let inner = &self.inner;
        let namespaces = request.pair.namespaces();
        if request.expand_query
            && let Some(llm) = &inner.llm
            && outcome.mode == Mode::Query
        {
            let started = Instant::now();
            // Like HyDE, expansion leaves the search its share of the budget.
            let timeout = deadline
                .saturating_duration_since(Deadline::now())
                .saturating_sub(inner.budget / FALLBACK_RESERVE_DIVISOR);
            match expand::with_model(llm, &texts[0], timeout).await {
                Ok(Some(expansion)) => {
                    outcome.expanded_query = Some(expansion.expanded.clone());
                    outcome.added_terms = expansion.added_terms;
                    texts.push(expansion.expanded);
                }
                Ok(None) => {}
                Err(err) => {
                    inner.metrics.upstream_error("chat", &err);
                    tracing::warn!(error = %error_chain(&err), "query expansion failed; searching for the query as it is");
                    outcome.degraded = Some(match err {
                        upstream::Error::Timeout { .. } => Degraded::ExpansionTimeout,
                        _ => Degraded::ExpansionFailed,
                    });
                }
            }
            outcome.timings_ms.hyde += millis(started.elapsed());
        }
        let query_count = texts.len();
        let mut all_texts = texts.clone();
        all_texts.extend(request.context_boost.iter().cloned());

        let embed_started = Instant::now();
        let embedded = self.embed(all_texts, deadline, &namespaces);
        let (vectors, caught_up) = embedded.await;
        outcome.timings_ms.embed = millis(embed_started.elapsed());
        outcome.index_catching_up = !caught_up;
        let mut vectors = match vectors {
            Ok(vectors) => vectors,
            Err(reason) => {
                outcome.degraded = Some(reason);
                return outcome;
            }
        };
        let context = (request.context_boost.is_some())
            .then(|| vectors.pop())
            .flatten();
        debug_assert_eq!(vectors.len(), query_count);

        let search_started = Instant::now();
        let hypotheses = outcome.hypotheses.len();
        let terms = lexical::query_terms(&texts.join(" "));
        let mut candidates = self
            .candidates(request, vectors.clone(), hypotheses, terms)
            .await;
        if request.expand_query && inner.llm.is_none() && outcome.mode == Mode::Query {
            let top: Vec<&str> = candidates
                .iter()
                .take(3)
                .map(|candidate| candidate.memory.content.as_str())
                .collect();
            let expansion = expand::from_vocabulary(&texts[0], &top);
            if !expansion.added_terms.is_empty() {
                let (more, _) = self
                    .embed(vec![expansion.expanded.clone()], deadline, &namespaces)
                    .await;
                if let Ok(more) = more {
                    vectors.extend(more);
                    let terms = lexical::query_terms(&format!(
                        "{} {}",
                        texts.join(" "),
                        expansion.expanded
                    ));
                    candidates = self
                        .candidates(request, vectors.clone(), hypotheses, terms)
                        .await;
                    outcome.expanded_query = Some(expansion.expanded);
                    outcome.added_terms = expansion.added_terms;
                }
            }
        }
        // Ranking, hops and the injection text are CPU work that grows with
        // `top_k` and `token_budget` (megabytes of text to count at the
        // limits): off the async workers, so that health checks and other
        // requests are never starved by a few large retrievals.
        let request = request.clone();
        self.on_blocking_pool(move |retriever| {
            retriever.rank_and_render(
                &request,
                outcome,
                candidates,
                &vectors,
                context.as_deref(),
                search_started,
            )
        })
        .await
    }

    /// Runs CPU-bound `work` on the blocking pool ([`blocking::run`]).
    async fn on_blocking_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> T + Send + 'static,
    ) -> T {
        let retriever = self.clone();
        blocking::run(move || work(&retriever)).await
    }

    /// Ranks the candidates, follows hops from the best and renders the
    /// injection into `outcome`.
    fn rank_and_render(
        &self,
        request: &Request,
        mut outcome: Outcome,
        candidates: Vec<Candidate>,
        vectors: &[Vec<f32>],
        context: Option<&[f32]>,
        search_started: Instant,
    ) -> Outcome {
        let mut ranked = self.rank(request, candidates, context);
        outcome.total_matches = ranked.len();
        ranked.truncate(request.settings.top_k);
        outcome.timings_ms.search = millis(search_started.elapsed());

        let hops_started = Instant::now();
        let hopped = self.hops(request, &ranked, vectors, context);
        ranked.extend(hopped);
        ranked.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then_with(|| a.memory.id.cmp(&b.memory.id))
        });
        outcome.timings_ms.hops = millis(hops_started.elapsed());
        finish(&mut outcome, ranked, request.settings.token_budget);
        outcome
    }

    /// One embedding call for `texts`, within the budget, while waiting
    /// (briefly) for recent writes to `namespaces` to reach the index.
    async fn embed(
        &self,
        texts: Vec<String>,
        deadline: Deadline,
        namespaces: &[Namespace],
    ) -> (Result<Vec<Vec<f32>>, Degraded>, bool) {
        let inner = &self.inner;
        let expected = texts.len();
        let embedding = tokio::time::timeout_at(deadline, inner.embedder.embed(texts));
        let catch_up = inner.store.wait_until_indexed(namespaces, INDEX_CATCH_UP);
        let (embedding, caught_up) = tokio::join!(embedding, catch_up);
        let vectors = match embedding {
            Ok(Ok(vectors)) if vectors.len() == expected => Ok(vectors),
            Ok(Ok(_)) => Err(Degraded::EmbeddingFailed),
            Ok(Err(err)) => {
                inner.metrics.embedding_error(&err);
                if let embed::Error::OpenAi(upstream::Error::Timeout { .. }) = err {
                    Err(Degraded::EmbeddingTimeout)
                } else {
                    tracing::warn!(error = %error_chain(&err), "embedding for a retrieval failed");
                    Err(Degraded::EmbeddingFailed)
                }
            }
            Err(_) => {
                inner.metrics.upstream_failure("embeddings", "timeout");
                Err(Degraded::EmbeddingTimeout)
            }
        };
        (vectors, caught_up)
    }

    /// The vector search and the lexical (BM25) search over the request's
    /// namespaces, fused ([`fusion`]), with heads standing in for matched
    /// old versions; best first. The first `hypotheses` vectors are HyDE
    /// hypotheses, the rest queries. With a lexical weight of 0 the lexical
    /// search does not run.
    async fn candidates(
        &self,
        request: &Request,
        vectors: Vec<Vec<f32>>,
        hypotheses: usize,
        terms: Vec<lexical::Term>,
    ) -> Vec<Candidate> {
        let inner = &self.inner;
        let snapshot = inner.index.snapshot();
        let namespaces = request.pair.namespaces();
        let limit = (request.settings.top_k * CANDIDATE_FACTOR).max(MIN_CANDIDATES);
        let filters = request.filters.clone();
        let lexical_limit = if inner.lexical_weight > 0.0 { limit } else { 0 };
        let small = snapshot.is_small_search(&namespaces, vectors.len());
        let scan = move || {
            let admit = |_: MemoryId, category: Category| filters.admit_category(category);
            (
                snapshot.search(&namespaces, &vectors, limit, admit),
                snapshot.lexical_search(&namespaces, &terms, &vectors, lexical_limit, admit),
            )
        };
        // A small scan costs less than a hand-off's two thread wake-ups.
        let (dense, sparse) = if small {
            scan()
        } else {
            blocking::run(scan).await
        };

        let mut by_head: HashMap<MemoryId, Candidate> = HashMap::new();
        let best_lexical = sparse.first().map_or(1.0, |hit| hit.score);
        // A memory barely like the query is no evidence, however it ranks:
        // in a small store every memory is in the vector list.
        let dense: Vec<&Hit> = dense
            .iter()
            .filter(|hit| hit.similarity >= MIN_VECTOR_EVIDENCE)
            .collect();
        let best_similarity = dense.first().map_or(1.0, |hit| hit.similarity);
        let hits = dense
            .into_iter()
            .enumerate()
            .map(|(rank, hit)| (hit.id, Some((rank, hit)), None))
            .chain(
                sparse
                    .iter()
                    .enumerate()
                    .map(|(rank, hit)| (hit.id, None, Some((rank, hit)))),
            );
        for (id, dense_hit, lexical_hit) in hits {
            let Some(head) = inner.store.head_of(id) else {
                continue; // deleted since the snapshot was taken
            };
            if request.exclude_ids.contains(&head.id) || !request.filters.admit(&head) {
                continue;
            }
            let matched_version = (head.id != id).then_some(id);
            let candidate = by_head.entry(head.id).or_insert_with(|| Candidate {
                memory: head,
                similarity: 0.0,
                lexical: 0.0,
                fused: 0.0,
                dense: None,
                lexical_match: None,
                reason: Reason::Query {
                    found_by: FoundBy::Lexical,
                    matched_version,
                },
            });
            if let Some((rank, hit)) = dense_hit
                && candidate.dense.is_none_or(|best| rank < best.rank)
            {
                candidate.dense = Some(fusion::Dense { rank });
                candidate.similarity = hit.similarity;
                candidate.reason = if hit.query < hypotheses {
                    Reason::Hypothesis {
                        hypothesis: hit.query,
                        found_by: FoundBy::Vector,
                        matched_version,
                    }
                } else {
                    Reason::Query {
                        found_by: FoundBy::Vector,
                        matched_version,
                    }
                };
            }
            if let Some((rank, hit)) = lexical_hit
                && candidate.lexical_match.is_none_or(|best| rank < best.rank)
            {
                candidate.lexical_match = Some(fusion::Lexical {
                    rank,
                    coverage: hit.coverage,
                    matched_idf: hit.matched_idf,
                });
                candidate.lexical = hit.score / best_lexical;
                if candidate.dense.is_none() {
                    // Found by its words alone: still say how close it is
                    // in meaning.
                    candidate.similarity = candidate.similarity.max(hit.similarity);
                }
            }
        }
        let mut candidates: Vec<Candidate> = by_head
            .into_values()
            .map(|mut candidate| {
                candidate.fused = fusion::fuse(
                    candidate.similarity / best_similarity,
                    candidate.lexical_match,
                    inner.lexical_weight,
                );
                let found_by = match (candidate.dense, candidate.lexical_match) {
                    (Some(_), Some(_)) => FoundBy::Both,
                    (Some(_), None) => FoundBy::Vector,
                    _ => FoundBy::Lexical,
                };
                candidate.reason.set_found_by(found_by);
                candidate
            })
            .collect();
        candidates.sort_by(|a, b| {
            b.fused
                .total_cmp(&a.fused)
                .then_with(|| b.similarity.total_cmp(&a.similarity))
                .then_with(|| a.memory.id.cmp(&b.memory.id))
        });
        candidates
    }

    /// Weighted relevance (plus the context lift), `min_relevance`, best
    /// first.
    fn rank(
        &self,
        request: &Request,
        candidates: Vec<Candidate>,
        context: Option<&[f32]>,
    ) -> Vec<Ranked> {
        let inner = &self.inner;
        let context_vectors = match context {
            Some(_) => {
                let ids = candidates
                    .iter()
                    .map(|candidate| candidate.memory.id)
                    .collect();
                inner
                    .index
                    .snapshot()
                    .vectors_of(&request.pair.namespaces(), &ids)
            }
            None => HashMap::new(),
        };
        let now = Utc::now();
        let mut ranked: Vec<Ranked> = candidates
            .into_iter()
            .map(|candidate| {
                let memory = candidate.memory;
                let mut scores = Scores::of(
                    &memory,
                    candidate.similarity,
                    inner.access.get(memory.id),
                    now,
                );
                scores.lexical = f64::from(candidate.lexical);
                scores.matched = candidate.fused;
                let mut relevance = scores.relevance(&request.settings.weights);
                if let (Some(context), Some(vector)) = (context, context_vectors.get(&memory.id)) {
                    let boost = f64::from(cosine(context, vector)).clamp(0.0, 1.0);
                    scores.context_boost = Some(boost);
                    relevance = (relevance + CONTEXT_LIFT * boost).min(1.0);
                }
                Ranked {
                    memory,
                    scores,
                    relevance,
                    reason: candidate.reason,
                }
            })
            .filter(|ranked| ranked.relevance >= request.settings.min_relevance)
            .collect();
        ranked.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then_with(|| a.memory.id.cmp(&b.memory.id))
        });
        ranked
    }

    /// The memories `hop_depth` edges away from `seeds`, scored.
    fn hops(
        &self,
        request: &Request,
        seeds: &[Ranked],
        vectors: &[Vec<f32>],
        context: Option<&[f32]>,
    ) -> Vec<Ranked> {
        if request.settings.hop_depth == 0 || seeds.is_empty() {
            return Vec::new();
        }
        let inner = &self.inner;
        let seed_ids: Vec<(MemoryId, f64)> = seeds
            .iter()
            .map(|ranked| (ranked.memory.id, ranked.relevance))
            .collect();
        let hopped = hops::follow(
            &inner.store,
            &seed_ids,
            request.settings.hop_depth,
            |memory| {
                request.pair.contains(&memory.namespace)
                    && request.filters.admit(memory)
                    && !request.exclude_ids.contains(&memory.id)
            },
        );
        let ids = hopped.iter().map(|hop| hop.memory.id).collect();
        let stored = inner
            .index
            .snapshot()
            .vectors_of(&request.pair.namespaces(), &ids);
        let now = Utc::now();
        hopped
            .into_iter()
            .map(|hop| {
                let vector = stored.get(&hop.memory.id);
                let similarity = vector
                    .map(|vector| {
                        vectors
                            .iter()
                            .map(|query| cosine(query, vector))
                            .fold(0.0f32, f32::max)
                    })
                    .unwrap_or_default();
                let mut scores = Scores::of(
                    &hop.memory,
                    similarity,
                    inner.access.get(hop.memory.id),
                    now,
                );
                if let (Some(context), Some(vector)) = (context, vector) {
                    scores.context_boost = Some(f64::from(cosine(context, vector)).clamp(0.0, 1.0));
                }
                Ranked {
                    memory: hop.memory,
                    scores,
                    relevance: hop.relevance,
                    reason: Reason::Hop {
                        from: hop.from,
                        relationship: hop.relationship,
                        direction: hop.direction,
                    },
                }
            })
            .filter(|ranked| ranked.relevance >= request.settings.min_relevance)
            .collect()
    }

    /// Ranks the current memories the filters admit without a query.
    fn filter_only(&self, request: &Request) -> Outcome {
        let inner = &self.inner;
        let mut outcome = Outcome::empty(request, Mode::Filter);
        let started = Instant::now();
        let listing = ListFilter {
            namespaces: request.pair.namespaces().to_vec(),
            scope: request.filters.scope,
            category: None,
            text: None,
        };
        let weights = Weights {
            similarity: 0.0,
            ..request.settings.weights
        };
        let now = Utc::now();
        let page = inner.store.list(&listing, MAX_FILTERED, None, |_| true);
        let mut ranked: Vec<Ranked> = page
            .memories
            .into_iter()
            .filter(|memory| {
                request.filters.admit(memory)
                    && !request.exclude_ids.contains(&memory.id)
                    && inner.store.is_current(memory.id)
            })
            .map(|memory| {
                let scores = Scores::of(&memory, 0.0, inner.access.get(memory.id), now);
                let relevance = scores.relevance(&weights);
                Ranked {
                    memory,
                    scores,
                    relevance,
                    reason: Reason::Filter,
                }
            })
            .filter(|ranked| ranked.relevance >= request.settings.min_relevance)
            .collect();
        ranked.sort_by(|a, b| {
            b.relevance
                .total_cmp(&a.relevance)
                .then_with(|| b.memory.created_at.cmp(&a.memory.created_at))
        });
        outcome.total_matches = ranked.len();
        ranked.truncate(request.settings.top_k);
        outcome.timings_ms.search = millis(started.elapsed());
        finish(&mut outcome, ranked, request.settings.token_budget);
        outcome
    }
}

/// Renders the injection and the per-memory view.
fn finish(outcome: &mut Outcome, ranked: Vec<Ranked>, token_budget: usize) {
    let memories: Vec<&Memory> = ranked.iter().map(|r| r.memory.as_ref()).collect();
    let (injection, injected) = inject::render(&memories, token_budget);
    outcome.injection = injection;
    outcome.memories = ranked
        .into_iter()
        .zip(injected)
        .map(|(ranked, injected)| RetrievedMemory {
            memory: MemoryView::from(ranked.memory.as_ref()),
            relevance: ranked.relevance,
            scores: ranked.scores,
            reason: ranked.reason,
            injected,
        })
        .collect();
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
