//! The indexer: the one task that keeps the vector index in step with the
//! store.
//!
//! It takes the store's pending changes in batches, finds each changed
//! memory's vector (in the embedding cache, else from the embedder, all of a
//! batch in one call), applies the batch to the index as one snapshot swap,
//! and only then acknowledges it. At start every loaded memory is pending,
//! so the start-up build and later updates are the same code; readiness is
//! declared once the first pass is done. A batch the embedder cannot serve
//! stays pending and is retried with backoff; nothing else waits for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::embed::cache::{ContentKey, EmbeddingCache, StoredVectors};
use crate::embed::{self, Embedder};
use crate::index::{Change, Entry, Index, lexical};
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::store::{PendingChange, Store};

/// Changes per batch: one embedding call, one snapshot swap.
const BATCH_SIZE: usize = 128;
const MIN_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the indexer has done, for `/stats`.
#[derive(Default)]
pub struct IndexerStats {
    /// Texts sent to the embedder.
    pub embedded: AtomicU64,
    /// Vectors found in the on-disk cache instead.
    pub cache_hits: AtomicU64,
    /// Batches the embedder failed (each retried later).
    pub failed_batches: AtomicU64,
    /// How long the start-up pass took, in ms (0 until it is done).
    pub startup_ms: AtomicU64,
}

/// A snapshot of [`IndexerStats`].
#[derive(Clone, Copy, Debug)]
pub struct IndexerView {
    pub embedded: u64,
    pub cache_hits: u64,
    pub failed_batches: u64,
    /// `None` until the start-up pass is done.
    pub startup_ms: Option<u64>,
}

impl IndexerStats {
    pub fn view(&self) -> IndexerView {
        let startup_ms = self.startup_ms.load(Ordering::Relaxed);
        IndexerView {
            embedded: self.embedded.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            failed_batches: self.failed_batches.load(Ordering::Relaxed),
            startup_ms: (startup_ms > 0).then_some(startup_ms),
        }
    }
}

pub struct Indexer {
    store: Store,
    index: Arc<Index>,
    embedder: Embedder,
    cache: EmbeddingCache,
    /// The cache's contents as read at start, until a pass has taken in
    /// every loaded memory; what is left then is stale.
    stored: StoredVectors,
    /// Entries in the cache file at start, to judge when to compact it.
    stored_at_start: usize,
    readiness: Readiness,
    stats: Arc<IndexerStats>,
    metrics: Metrics,
}

/// What the indexer works with.
pub struct IndexerDeps {
    pub store: Store,
    pub index: Arc<Index>,
    pub embedder: Embedder,
    /// The embedding cache, and its contents as read at start.
    pub cache: (EmbeddingCache, StoredVectors),
    /// Set once the start-up pass is done.
    pub readiness: Readiness,
    pub metrics: Metrics,
}

impl Indexer {
    /// Starts the indexer, which runs until `stop` is cancelled: its
    /// counters, and its task for the caller to join.
    pub fn spawn(
        deps: IndexerDeps,
        stop: CancellationToken,
    ) -> (Arc<IndexerStats>, JoinHandle<()>) {
        let IndexerDeps {
            store,
            index,
            embedder,
            cache: (cache, stored),
            readiness,
            metrics,
        } = deps;
        let stats = Arc::new(IndexerStats::default());
        let indexer = Self {
            store,
            index,
            embedder,
            cache,
            stored_at_start: stored.len(),
            stored,
            readiness,
            stats: stats.clone(),
            metrics,
        };
        (stats, tokio::spawn(indexer.run(stop)))
    }

    /// Runs until `stop` is cancelled (between batches).
    async fn run(mut self, stop: CancellationToken) {
        let started = Instant::now();
        let mut backoff = MIN_BACKOFF;
        let mut starting = true;
        loop {
            let failed = match self.pass(&stop).await {
                Ok(()) => false,
                Err(err) => {
                    self.stats.failed_batches.fetch_add(1, Ordering::Relaxed);
                    self.metrics.embedding_error(&err);
                    tracing::warn!(
                        error = %crate::causes::error_chain(&err),
                        retry_in_ms = backoff.as_millis(),
                        pending = self.store.pending_change_count(),
                        "could not embed changed memories; they stay pending"
                    );
                    true
                }
            };
            if starting {
                starting = false;
                self.declare_ready(started.elapsed());
            }
            if !failed && self.store.pending_change_count() == 0 {
                self.settle_cache();
            }
            let wait = async {
                if failed {
                    tokio::time::sleep(backoff).await;
                } else {
                    self.store.changed().await;
                }
            };
            tokio::select! {
                () = wait => {}
                () = stop.cancelled() => return,
            }
            backoff = if failed {
                (backoff * 2).min(MAX_BACKOFF)
            } else {
                MIN_BACKOFF
            };
        }
    }

    /// Processes every pending change, batch by batch.
    async fn pass(&mut self, stop: &CancellationToken) -> Result<(), embed::Error> {
        let pending = self.store.pending_changes();
        for batch in pending.chunks(BATCH_SIZE) {
            if stop.is_cancelled() {
                break;
            }
            self.apply_batch(batch).await?;
        }
        Ok(())
    }

    async fn apply_batch(&mut self, batch: &[PendingChange]) -> Result<(), embed::Error> {
        let mut changes = Vec::with_capacity(batch.len());
        let mut to_embed = Vec::new();
        for change in batch {
            let Some(memory) = self.store.get(change.id) else {
                changes.push(Change::Remove(change.id));
                continue;
            };
            let key = ContentKey::of(&memory.content);
            let entry = Entry {
                id: memory.id,
                namespace: memory.namespace.clone(),
                category: memory.category,
                vector: Vec::new(),
                terms: lexical::terms(&memory.content),
            };
            match self.stored.remove(&key) {
                Some(vector) if Some(vector.len()) == self.embedder.dimensions() => {
                    self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                    changes.push(Change::Upsert(Entry { vector, ..entry }));
                }
                _ => to_embed.push((key, entry, memory.content.clone())),
            }
        }
        if !to_embed.is_empty() {
            let texts = to_embed.iter().map(|(_, _, text)| text.clone()).collect();
            let vectors = self.embedder.embed(texts).await?;
            self.stats
                .embedded
                .fetch_add(vectors.len() as u64, Ordering::Relaxed);
            self.cache.append(
                to_embed
                    .iter()
                    .zip(&vectors)
                    .map(|((key, _, _), vector)| (*key, vector.as_slice())),
            );
            for ((_, entry, _), vector) in to_embed.into_iter().zip(vectors) {
                changes.push(Change::Upsert(Entry { vector, ..entry }));
            }
        }
        self.index.apply(changes);
        self.store.acknowledge(batch);
        Ok(())
    }

    fn declare_ready(&self, took: Duration) {
        let millis = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.stats
            .startup_ms
            .store(millis.max(1), Ordering::Relaxed);
        self.readiness.set_ready();
        tracing::info!(
            memories = self.index.snapshot().len(),
            pending = self.store.pending_change_count(),
            embedded = self.stats.embedded.load(Ordering::Relaxed),
            cache_hits = self.stats.cache_hits.load(Ordering::Relaxed),
            duration_ms = millis,
            "vector index built"
        );
    }

    /// Once every loaded memory is indexed, what the start-up cache still
    /// holds belongs to memories that are gone or changed. When that is a
    /// quarter of the file or more, rewrite the file with the live vectors.
    fn settle_cache(&mut self) {
        if self.stored_at_start == 0 {
            return;
        }
        let stale = std::mem::take(&mut self.stored).len();
        if stale * 4 >= self.stored_at_start {
            let snapshot = self.index.snapshot();
            let live: HashMap<ContentKey, &[f32]> = snapshot
                .entries()
                .filter_map(|(id, vector)| {
                    let memory = self.store.get(id)?;
                    Some((ContentKey::of(&memory.content), vector))
                })
                .collect();
            tracing::info!(stale, live = live.len(), "compacting the embedding cache");
            self.cache.rewrite(live);
        }
        self.stored_at_start = 0;
    }
}
