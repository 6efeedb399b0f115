//! Retrieval: the memories that matter now, ranked, explained, and as text
//! to inject, within a time budget.
//!
//! This module is the orchestrator. After the per-turn cache, each stage
//! takes what the one before returned: [`plan`] the texts to search for
//! (the query, HyDE hypotheses from the window, or the latest user message;
//! optionally expanded), embed them in one call, [`search`] the index
//! (vector and lexical, fused, each memory lifted by its [`conversation`])
//! and, when the closest two are near-tied, again with the query moved
//! toward the best match beside it ([`feedback`]),
//! optionally expand by the vocabulary of the best matches and search
//! again, [`rank`], follow [`hops`] along `related` edges, and [`inject`];
//! the [`Outcome`] is assembled once, at the end.
//!
//! A retrieval never fails for an upstream's fault: when the retrieval
//! model or the embedder is slow or down, or the index is still being
//! built, the answer says so in `degraded` and serves what it still can
//! honestly (with HyDE down, the latest user message is searched for).

pub mod access;
mod assemble;
pub mod cache;
pub mod conversation;
pub mod expand;
mod feedback;
pub mod fusion;
pub mod hops;
pub mod hyde;
pub mod hyde_reply;
pub mod inject;
pub mod outcome;
pub mod plan;
pub mod rank;
pub mod request;
pub mod search;
pub mod session;
pub mod similar;
pub mod stats;
pub mod suggestions;
pub mod time_words;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Instant as Deadline;

use crate::blocking;
use crate::causes::error_chain;
use crate::config;
use crate::embed::{self, Embedder};
use crate::index::{Index, lexical};
use crate::llm::Llm;
use crate::memory::{MemoryId, Namespace};
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::store::{IndexStage, ListFilter, Store};
use crate::upstream;
use access::AccessCounts;
use assemble::{Found, assemble, millis, nothing};
use cache::{TurnCache, TurnKey};
use expand::Expansion;
use plan::Plan;
use rank::Boost;
use search::Candidate;
use stats::RetrievalStats;

pub use outcome::{Degraded, FoundBy, Mode, Outcome, Reason, RetrievedMemory, Scores, Timings};
pub use request::{Filters, Input, Request};

/// How long a retrieval waits for writes to its namespaces to reach the
/// index, alongside its own embedding call.
const INDEX_CATCH_UP: Duration = Duration::from_millis(250);
/// The longest backlog of vectors (store-wide: the indexer takes them
/// oldest first) a retrieval waits for: about what the local model embeds
/// within [`INDEX_CATCH_UP`]. Behind a longer one, waiting would only delay
/// the answer; the words of every write are in at once anyway.
const CATCH_UP_BACKLOG: usize = 32;
/// Slack past the budget before the whole retrieval is cut off: each stage
/// keeps to the deadline itself, and this only catches the unexpected.
const CUTOFF_GRACE: Duration = Duration::from_millis(50);
/// The most memories a filter-only retrieval ranks.
const MAX_FILTERED: usize = 100_000;

/// What the retriever needs; built once at start.
pub struct Parts {
    pub store: Store,
    pub index: Arc<Index>,
    pub embedder: Embedder,
    pub llm: Option<Llm>,
    pub index_ready: Readiness,
    pub access: AccessCounts,
    /// The service's settings: its time budget, cache and the words'
    /// weight (a request's own settings come with it, as its `tuning`).
    pub settings: config::Retrieval,
    pub metrics: Metrics,
}

/// What a search found, and the memory its queries were moved toward for
/// it, if they were ([`feedback`]).
struct Searched {
    candidates: Vec<Candidate>,
    moved_toward: Option<MemoryId>,
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
    /// The whole retrieval's time budget.
    budget: Duration,
    /// How the search weighs words, conversations and passages, and how
    /// far the query moves toward its best match for a second search.
    matching: config::MatchSettings,
    /// How much a changed or provisional memory's relevance is lowered.
    standing: rank::Standing,
    /// How much the time a question names counts.
    time_weight: f64,
    cache: TurnCache<Outcome>,
    sessions: session::Sessions,
    stats: RetrievalStats,
    metrics: Metrics,
}

impl Retriever {
    pub fn new(parts: Parts) -> Self {
        let settings = parts.settings;
        Self {
            inner: Arc::new(Inner {
                cache: TurnCache::new(
                    Duration::from_secs(settings.cache_ttl_s),
                    settings.cache_capacity,
                    settings.cache_max_bytes,
                ),
                store: parts.store,
                index: parts.index,
                embedder: parts.embedder,
                llm: parts.llm,
                index_ready: parts.index_ready,
                access: parts.access,
                budget: Duration::from_millis(settings.budget_ms),
                matching: settings.match_settings(),
                standing: rank::Standing {
                    changed: settings.changed_factor,
                    review: settings.review_factor,
                    provisional: settings.provisional_factor,
                },
                time_weight: settings.time_weight,
                sessions: session::Sessions::default(),
                stats: RetrievalStats::default(),
                metrics: parts.metrics,
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
        let turn = request.session_turn();
        let mut outcome = self.run_uncounted(request, started).await;
        if let Some(turn) = turn {
            self.inner.sessions.inject(&turn, &mut outcome);
        }
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
            request: request.fingerprint(),
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
            return nothing(&request, Degraded::IndexNotReady, started);
        }

        let deadline = Deadline::from_std(started + inner.budget);
        let cutoff = deadline + CUTOFF_GRACE;
        let Ok(mut outcome) =
            tokio::time::timeout_at(cutoff, self.pipeline(&request, deadline)).await
        else {
            return nothing(&request, Degraded::BudgetExhausted, started);
        };
        outcome.timings_ms.total = millis(started.elapsed());
        if outcome.degraded.is_none() && !outcome.index_catching_up {
            // Only complete answers are reused: a degraded one would hide
            // the upstream's recovery from the rest of the turn, and one
            // the index had not caught up with the vectors that come next.
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
        if let Input::Filters = request.input {
            // Ranks up to every memory of the pair: CPU work, like the
            // ranking after a search.
            let request = request.clone();
            return self
                .on_blocking_pool(move |retriever| retriever.filter_only(&request))
                .await;
        }
        let plan = plan::make(
            request,
            inner.llm.as_ref(),
            inner.budget,
            deadline,
            &inner.metrics,
        )
        .await;
        self.search(request, plan, deadline).await
    }

    /// Embeds the plan's texts (and the context boost) in one call, finds
    /// the candidates, ranks them, follows hops and renders the answer.
    async fn search(&self, request: &Request, mut plan: Plan, deadline: Deadline) -> Outcome {
        let inner = &self.inner;
        let namespaces = request.pair.namespaces();
        let mut timings = Timings {
            hyde: millis(plan.model_time),
            ..Timings::default()
        };
        let texts = plan.texts();
        let mut all_texts = texts.clone();
        all_texts.extend(request.context_boost.iter().cloned());

        let embed_started = Instant::now();
        let (embedded, caught_up) = self.embed(all_texts, deadline, &namespaces).await;
        timings.embed = millis(embed_started.elapsed());
        let mut vectors = match embedded {
            Ok(vectors) => vectors,
            Err(reason) => {
                let found = Found::default();
                return assemble(request, plan, found, caught_up, Some(reason), timings);
            }
        };
        let context = request
            .context_boost
            .is_some()
            .then(|| vectors.pop())
            .flatten();

        let search_started = Instant::now();
        let hypotheses = plan.hypotheses.len();
        let terms = lexical::query_terms(&texts.join(" "));
        let mut searched = self
            .candidates(request, vectors.clone(), hypotheses, terms)
            .await;
        if request.expand_query
            && inner.llm.is_none()
            && plan.searches_the_query()
            && let Some((expansion, more, found)) = self
                .expand_by_vocabulary(request, &texts, &searched.candidates, &vectors, deadline)
                .await
        {
            vectors = more;
            searched = found;
            plan.expansion = Some(expansion);
        }
        plan.moved_toward = searched.moved_toward;
        // Ranking, hops and the injection text are CPU work that grows with
        // `top_k` and `token_budget` (megabytes of text to count at the
        // limits): off the async workers, so that health checks and other
        // requests are never starved by a few large retrievals.
        let request = request.clone();
        self.on_blocking_pool(move |retriever| {
            let found = retriever.rank_and_hop(
                &request,
                searched.candidates,
                &vectors,
                context.as_deref(),
                search_started,
                &mut timings,
            );
            assemble(&request, plan, found, caught_up, None, timings)
        })
        .await
    }

    /// The candidates of a search over the index's current snapshot; with
    /// feedback on and the closest two near-tied, those of a second search
    /// over the same snapshot for the queries and, beside them, the
    /// queries moved toward the first one's best match (whose id comes
    /// back with the candidates): each memory keeps the closer of its two
    /// similarities. The second search has the first one's words, so it
    /// takes the first one's lexical hits and judges their similarity to
    /// the new vectors rather than searching the words again; and where an
    /// approximate index narrowed the first search, it judges the rows the
    /// first rescored rather than probing the lists again: the moved
    /// queries lie beside the first ones, and their neighbours among those
    /// rows cost a dot product each.
    async fn candidates(
        &self,
        request: &Request,
        vectors: Vec<Vec<f32>>,
        hypotheses: usize,
        terms: Vec<lexical::Term>,
    ) -> Searched {
        let inner = &self.inner;
        // A namespace dropped from memory is loaded back first.
        let snapshot = inner.index.resident(&request.pair.namespaces()).await;
        let query = |vectors, moved_from, earlier| search::Query {
            vectors,
            hypotheses,
            moved_from,
            terms: terms.clone(),
            earlier,
        };
        let (first, earlier) = search::candidates(
            Arc::clone(&snapshot),
            &inner.store,
            request,
            query(vectors.clone(), Vec::new(), None),
            inner.matching,
        )
        .await;
        let unmoved = |candidates| Searched {
            candidates,
            moved_toward: None,
        };
        #[expect(clippy::cast_possible_truncation, reason = "a weight, 0..1")]
        let feedback = inner.matching.feedback_weight as f32;
        if feedback == 0.0
            || !feedback::near_tie(first.iter().map(|candidate| candidate.similarity))
        {
            return unmoved(first);
        }
        let best = first.first().and_then(|best| {
            let memory = &best.memory;
            let vector = earlier
                .probed
                .as_ref()
                .and_then(|probed| snapshot.probed_vector(probed, memory.id))
                .or_else(|| snapshot.vector(&memory.namespace, memory.id))?;
            Some((memory.id, vector))
        });
        let Some((best_id, best_vector)) = best else {
            return unmoved(first);
        };
        let (moved_from, moved): (Vec<usize>, Vec<Vec<f32>>) =
            feedback::moved(&vectors, &best_vector, feedback)
                .into_iter()
                .unzip();
        if moved.is_empty() {
            return unmoved(first);
        }
        let both = vectors.into_iter().chain(moved).collect();
        let (candidates, _) = search::candidates(
            snapshot,
            &inner.store,
            request,
            query(both, moved_from, Some(earlier)),
            inner.matching,
        )
        .await;
        Searched {
            candidates,
            moved_toward: Some(best_id),
        }
    }

    /// Without a retrieval model, `expand_query` adds the words the best
    /// `candidates` share and searches again: the expansion, all the query
    /// vectors and the new candidates, or `None` when it adds nothing (or
    /// cannot be embedded).
    async fn expand_by_vocabulary(
        &self,
        request: &Request,
        texts: &[String],
        candidates: &[Candidate],
        vectors: &[Vec<f32>],
        deadline: Deadline,
    ) -> Option<(Expansion, Vec<Vec<f32>>, Searched)> {
        let top: Vec<&str> = candidates
            .iter()
            .take(3)
            .map(|candidate| candidate.memory.content.as_str())
            .collect();
        let expansion = expand::from_vocabulary(&texts[0], &top);
        if expansion.added_terms.is_empty() {
            return None;
        }
        let namespaces = request.pair.namespaces();
        let (more, _) = self
            .embed(vec![expansion.expanded.clone()], deadline, &namespaces)
            .await;
        let mut vectors = vectors.to_vec();
        vectors.extend(more.ok()?);
        let terms = lexical::query_terms(&format!("{} {}", texts.join(" "), expansion.expanded));
        let searched = self.candidates(request, vectors.clone(), 0, terms).await;
        Some((expansion, vectors, searched))
    }

    /// Runs CPU-bound `work` on the blocking pool ([`blocking::run`]).
    async fn on_blocking_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> T + Send + 'static,
    ) -> T {
        let retriever = self.clone();
        blocking::run(move || work(&retriever)).await
    }

    /// Ranks the candidates and follows hops from the best `top_k`.
    fn rank_and_hop(
        &self,
        request: &Request,
        candidates: Vec<Candidate>,
        vectors: &[Vec<f32>],
        context: Option<&[f32]>,
        search_started: Instant,
        timings: &mut Timings,
    ) -> Found {
        let inner = &self.inner;
        let tuning = &request.tuning;
        let namespaces = request.pair.namespaces();
        let context_vectors = match context {
            Some(_) => {
                let ids = candidates
                    .iter()
                    .map(|candidate| candidate.memory.id)
                    .collect();
                inner.index.snapshot().vectors_of(&namespaces, &ids)
            }
            None => HashMap::new(),
        };
        let boost = context.map(|context| Boost {
            context,
            vectors: &context_vectors,
        });
        let mut ranked = rank::rank(
            candidates,
            &tuning.weights,
            tuning.min_relevance,
            &inner.access,
            boost.as_ref(),
            inner.standing,
            rank::When {
                at: request.moment(),
                named: request.time.as_ref(),
                weight: inner.time_weight,
            },
        );
        let total_matches = ranked.len();
        ranked.truncate(tuning.top_k);
        timings.search = millis(search_started.elapsed());

        let hops_started = Instant::now();
        if tuning.hop_depth > 0 && !ranked.is_empty() {
            let seeds: Vec<_> = ranked
                .iter()
                .map(|ranked| (ranked.memory.id, ranked.relevance))
                .collect();
            let hopped = hops::follow(&inner.store, &seeds, tuning.hop_depth, |memory| {
                request.pair.contains(&memory.namespace)
                    && request.filters.admit(memory)
                    && request.observed_by_then(memory)
                    && !request.exclude_ids.contains(&memory.id)
            });
            let ids = hopped.iter().map(|hop| hop.memory.id).collect();
            let stored = inner.index.snapshot().vectors_of(&namespaces, &ids);
            let boost = context.map(|context| Boost {
                context,
                vectors: &stored,
            });
            ranked.extend(
                hops::ranked(
                    hopped,
                    &stored,
                    vectors,
                    &inner.access,
                    boost.as_ref(),
                    inner.standing,
                    request.moment(),
                )
                .into_iter()
                .filter(|ranked| ranked.relevance >= tuning.min_relevance),
            );
            rank::by_relevance(&mut ranked);
        }
        timings.hops = millis(hops_started.elapsed());
        Found {
            ranked,
            total_matches,
        }
    }

    /// One embedding call for `texts`, within the budget, while waiting
    /// (briefly) for recent writes to `namespaces` to reach the index;
    /// also whether they did, vectors included.
    async fn embed(
        &self,
        texts: Vec<String>,
        deadline: Deadline,
        namespaces: &[Namespace],
    ) -> (Result<Vec<Vec<f32>>, Degraded>, bool) {
        let inner = &self.inner;
        let expected = texts.len();
        let embedding = tokio::time::timeout_at(deadline, inner.embedder.embed(texts));
        let (embedding, caught_up) = tokio::join!(embedding, self.catch_up(namespaces));
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

    /// Waits (briefly) for writes to `namespaces` to reach the index: for
    /// their words, which take moments, and for their vectors when the
    /// backlog is short enough for them to come within the wait. Whether
    /// every write is in, vectors included: when not, a memory found by
    /// its words alone meanwhile says so in its reason.
    async fn catch_up(&self, namespaces: &[Namespace]) -> bool {
        let store = &self.inner.store;
        let started = Instant::now();
        let words = store
            .wait_until_indexed(namespaces, IndexStage::Words, INDEX_CATCH_UP)
            .await;
        if !words {
            return false;
        }
        if store.pending_change_count(IndexStage::Vectors) > CATCH_UP_BACKLOG {
            return !store.has_pending_in(namespaces, IndexStage::Vectors);
        }
        let left = INDEX_CATCH_UP.saturating_sub(started.elapsed());
        store
            .wait_until_indexed(namespaces, IndexStage::Vectors, left)
            .await
    }

    /// Ranks the current memories the filters admit without a query.
    fn filter_only(&self, request: &Request) -> Outcome {
        let inner = &self.inner;
        let started = Instant::now();
        let listing = ListFilter {
            namespaces: request.pair.namespaces(),
            scope: request.filters.scope,
            category: None,
            ..ListFilter::default()
        };
        let page = inner.store.list(&listing, MAX_FILTERED, None, |_| true);
        let admitted = page
            .memories
            .into_iter()
            .filter_map(|head| match request.as_of {
                None => Some(head),
                Some(_) => request.version_of(&inner.store, head.id),
            })
            .filter(|memory| {
                request.filters.admit(memory) && !request.exclude_ids.contains(&memory.id)
            });
        let mut ranked = rank::without_query(
            admitted,
            &request.tuning.weights,
            request.tuning.min_relevance,
            &inner.access,
            inner.standing,
            request.moment(),
        );
        let total_matches = ranked.len();
        ranked.truncate(request.tuning.top_k);
        let timings = Timings {
            search: millis(started.elapsed()),
            ..Timings::default()
        };
        let found = Found {
            ranked,
            total_matches,
        };
        assemble(request, Plan::of(Mode::Filter), found, true, None, timings)
    }
}
