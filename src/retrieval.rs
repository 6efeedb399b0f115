//! Retrieval: the memories that matter now, ranked, explained, and as text
//! to inject, within a time budget.
//!
//! A retrieval never fails for an upstream's fault: when the embedder is
//! slow or down, or the index is still being built, the answer is complete
//! and honest about it (`degraded`, no memories) rather than an error.
//! Superseded memories are never returned as current: a match on an old
//! version brings back the head of its chain.

pub mod inject;
pub mod rank;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde::Serialize;
use utoipa::ToSchema;

use crate::config::Weights;
use crate::embed::{self, Embedder, openai};
use crate::error::error_chain;
use crate::index::{Hit, Index};
use crate::memory::{Category, Memory, MemoryId, Scope};
use crate::routes::memories::MemoryView;
use crate::state::Readiness;
use crate::store::{NamespacePair, Store};
use rank::Scores;

/// How many more candidates than `top_k` the vector search hands to
/// ranking: recency, importance and access can lift a memory that is not
/// among the closest few.
const CANDIDATE_FACTOR: usize = 4;
const MIN_CANDIDATES: usize = 32;

/// A parsed, validated retrieval.
#[derive(Clone, Debug)]
pub struct Request {
    pub turn_id: String,
    pub pair: NamespacePair,
    /// The text embedded and searched for.
    pub query: String,
    pub top_k: usize,
    pub token_budget: usize,
    pub min_relevance: f64,
    pub weights: Weights,
    pub filters: Filters,
    pub exclude_ids: HashSet<MemoryId>,
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
            && self
                .categories
                .as_ref()
                .is_none_or(|categories| categories.contains(&memory.category))
    }
}

/// How the query was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The request's `query`, or the latest user message, embedded directly.
    Query,
}

/// Why a retrieval returned less than it would have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Degraded {
    /// The start-up index build is still running.
    IndexNotReady,
    /// The embedder did not answer within its timeout or the budget.
    EmbeddingTimeout,
    /// The embedder answered with an error.
    EmbeddingFailed,
    /// The memory asked about is not in the index yet: it was just
    /// written, or the embedder is down.
    MemoryNotIndexed,
}

/// Why a memory is in the result.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// It matched the query. When `matched_version` is set, an older
    /// version of it matched, and this, the current version, stands in.
    Query {
        #[serde(skip_serializing_if = "Option::is_none")]
        matched_version: Option<MemoryId>,
    },
}

/// A retrieved memory with why it is there and how it scored.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct RetrievedMemory {
    #[serde(flatten)]
    pub memory: MemoryView,
    /// The weighted relevance, 0..1; results are sorted by it.
    pub relevance: f64,
    pub scores: Scores,
    pub reason: Reason,
    /// Whether the memory is in `injection` (it may not fit the budget).
    pub injected: bool,
}

/// Where the time went, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, ToSchema)]
pub struct Timings {
    pub embed: f64,
    pub search: f64,
    pub total: f64,
}

/// The outcome of a retrieval.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Outcome {
    pub turn_id: String,
    /// Whether this is a stored answer for the same turn.
    pub cached: bool,
    pub mode: Mode,
    /// Set when an upstream or the index could not serve this retrieval.
    pub degraded: Option<Degraded>,
    /// The text that was embedded and searched for.
    pub query: String,
    /// Most relevant first.
    pub memories: Vec<RetrievedMemory>,
    /// The memories as markdown to put in the agent's context, within
    /// `token_budget` (o200k_base tokens); empty when nothing fits.
    pub injection: String,
    pub timings_ms: Timings,
}

/// Runs retrievals; cheap to clone.
#[derive(Clone)]
pub struct Retriever {
    store: Store,
    index: Arc<Index>,
    embedder: Embedder,
    index_ready: Readiness,
    budget: Duration,
}

impl Retriever {
    pub fn new(
        store: Store,
        index: Arc<Index>,
        embedder: Embedder,
        index_ready: Readiness,
        budget: Duration,
    ) -> Self {
        Self {
            store,
            index,
            embedder,
            index_ready,
            budget,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The key of the embedding model behind the index.
    pub fn model_key(&self) -> String {
        self.embedder.model_key()
    }

    /// Retrieves for `request`, within the configured budget.
    pub async fn run(&self, request: Request) -> Outcome {
        let started = Instant::now();
        let mut outcome = Outcome {
            turn_id: request.turn_id.clone(),
            cached: false,
            mode: Mode::Query,
            degraded: None,
            query: request.query.clone(),
            memories: Vec::new(),
            injection: String::new(),
            timings_ms: Timings::default(),
        };
        if !self.index_ready.is_ready() {
            outcome.degraded = Some(Degraded::IndexNotReady);
            outcome.timings_ms.total = millis(started.elapsed());
            return outcome;
        }

        // The query embedding is the one upstream call; it may take what is
        // left of the budget, and no more.
        let embedding = tokio::time::timeout(
            self.budget.saturating_sub(started.elapsed()),
            self.embedder.embed(vec![request.query.clone()]),
        )
        .await;
        outcome.timings_ms.embed = millis(started.elapsed());
        let query_vector = match embedding {
            Ok(Ok(mut vectors)) if vectors.len() == 1 => vectors.remove(0),
            Ok(Err(embed::Error::OpenAi(openai::Error::Timeout(_)))) | Err(_) => {
                return degrade(outcome, Degraded::EmbeddingTimeout, started);
            }
            Ok(result) => {
                if let Err(err) = result {
                    tracing::warn!(error = %error_chain(&err), "embedding the query failed");
                }
                return degrade(outcome, Degraded::EmbeddingFailed, started);
            }
        };

        let search_started = Instant::now();
        let ranked = self.search_and_rank(&request, query_vector).await;
        outcome.timings_ms.search = millis(search_started.elapsed());

        let heads: Vec<&Memory> = ranked.iter().map(|(memory, ..)| memory.as_ref()).collect();
        let (injection, injected) = inject::render(&heads, request.token_budget);
        outcome.injection = injection;
        outcome.memories = ranked
            .iter()
            .zip(injected)
            .map(
                |((memory, scores, relevance, reason), injected)| RetrievedMemory {
                    memory: MemoryView::from(memory.as_ref()),
                    relevance: *relevance,
                    scores: *scores,
                    reason: reason.clone(),
                    injected,
                },
            )
            .collect();
        outcome.timings_ms.total = millis(started.elapsed());
        outcome
    }

    /// The memories nearest to `memory` in its own namespace, current
    /// versions only, leaving out its own chain.
    pub async fn similar(
        &self,
        memory: &Memory,
        limit: usize,
    ) -> Result<Vec<(Arc<Memory>, f32)>, Degraded> {
        if !self.index_ready.is_ready() {
            return Err(Degraded::IndexNotReady);
        }
        let snapshot = self.index.snapshot();
        let vector = snapshot
            .vector(&memory.namespace, memory.id)
            .ok_or(Degraded::MemoryNotIndexed)?
            .to_vec();
        let chain: HashSet<MemoryId> = self.store.chain(memory.id).iter().map(|m| m.id).collect();
        let namespace = memory.namespace.clone();
        // Versions of one chain collapse into its head, so ask for spares.
        let candidates = limit * CANDIDATE_FACTOR + chain.len();
        let hits = {
            let chain = chain.clone();
            tokio::task::spawn_blocking(move || {
                snapshot.search(&[namespace], &[vector], candidates, |id, _| {
                    !chain.contains(&id)
                })
            })
            .await
            .unwrap_or_default()
        };
        let mut seen = HashSet::new();
        let mut similar = Vec::new();
        for hit in hits {
            let Some(head) = self.store.head_of(hit.id) else {
                continue;
            };
            if !chain.contains(&head.id) && seen.insert(head.id) {
                similar.push((head, hit.similarity));
            }
        }
        similar.truncate(limit);
        Ok(similar)
    }

    /// The vector search, then heads for superseded matches, filters,
    /// weighted ranking, `min_relevance` and `top_k`.
    async fn search_and_rank(
        &self,
        request: &Request,
        query_vector: Vec<f32>,
    ) -> Vec<(Arc<Memory>, Scores, f64, Reason)> {
        let snapshot = self.index.snapshot();
        let namespaces = [
            request.pair.owner(Scope::Repo),
            request.pair.owner(Scope::User),
        ];
        let limit = (request.top_k * CANDIDATE_FACTOR).max(MIN_CANDIDATES);
        let hits: Vec<Hit> = {
            let filters = request.filters.clone();
            tokio::task::spawn_blocking(move || {
                snapshot.search(&namespaces, &[query_vector], limit, |_, category| {
                    filters
                        .categories
                        .as_ref()
                        .is_none_or(|categories| categories.contains(&category))
                })
            })
            .await
            .unwrap_or_default()
        };

        // Several versions of one chain may match: the head stands in for
        // them with the best similarity among them.
        let mut by_head: HashMap<MemoryId, (Arc<Memory>, f32, Option<MemoryId>)> = HashMap::new();
        for hit in hits {
            let Some(head) = self.store.head_of(hit.id) else {
                continue; // deleted since the snapshot was taken
            };
            if request.exclude_ids.contains(&head.id) || !request.filters.admit(&head) {
                continue;
            }
            let matched_version = (head.id != hit.id).then_some(hit.id);
            let slot = by_head
                .entry(head.id)
                .or_insert((head, hit.similarity, matched_version));
            if hit.similarity > slot.1 {
                slot.1 = hit.similarity;
                slot.2 = matched_version;
            }
        }

        let now = Utc::now();
        let mut ranked: Vec<_> = by_head
            .into_values()
            .map(|(memory, similarity, matched_version)| {
                let scores = Scores::of(&memory, similarity, 0, now);
                let relevance = scores.relevance(&request.weights);
                (memory, scores, relevance, Reason::Query { matched_version })
            })
            .filter(|(_, _, relevance, _)| *relevance >= request.min_relevance)
            .collect();
        ranked.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.id.cmp(&b.0.id)));
        ranked.truncate(request.top_k);
        ranked
    }
}

fn degrade(mut outcome: Outcome, reason: Degraded, started: Instant) -> Outcome {
    tracing::info!(degraded = ?reason, "retrieval degraded");
    outcome.degraded = Some(reason);
    outcome.timings_ms.total = millis(started.elapsed());
    outcome
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
