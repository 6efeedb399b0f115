//! The indexer: the one task that keeps the index in step with the store.
//!
//! A change enters the index in two steps, each acknowledged on its own.
//! Its words go first: whenever the store records changes, the indexer
//! takes in their words (a deleted memory leaves both sides) in one cheap
//! snapshot swap, even while an embedding call is in flight, so a write is
//! findable by its words within moments at any backlog. Its vector
//! follows: the indexer takes the pending changes oldest first, in
//! batches, finds each changed memory's vector (in the embedding cache,
//! else from the embedder, all of a batch in one call on the embedder's
//! backlog threads, so a retrieval's own query embedding never waits
//! behind it, unless a reader waits for that batch), applies the batch as
//! one snapshot swap, and only then acknowledges it as fully applied. With
//! passages on (`retrieval.passage_weight` above 0), a memory's vectors
//! are its whole text's and each of its passages' ([`passages`]), found
//! and embedded the same way.
//!
//! A batch is gathered ([`Gathering`]): once a change is pending the
//! indexer waits up to [`GATHER`] for more, unless a full batch is already
//! there or a retrieval waits for the vectors, so a trickle of writes is
//! embedded in batches rather than one text per call, and a read right
//! after a write does not wait for the gathering. At start every loaded
//! memory is pending, so the start-up build and later updates are the same
//! code, but for one thing: the first pass leaves large namespaces as one
//! run each and groups them for their approximate index once, at its end
//! ([`Grouping`]). Readiness is declared once the first pass (vectors
//! included) is done. A batch the embedder cannot serve stays pending and
//! is retried with backoff; its words are in meanwhile, and nothing else
//! waits for it.

mod gathering;
mod load;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::embed::cache::ContentKey;
use crate::embed::shared_cache::VectorCache;
use crate::embed::{self, Embedder, Priority};
use crate::index::{Change, Entry, Grouping, Index, LoadRequest, Vectors, lexical, passages};
use crate::memory::Memory;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::store::{IndexStage, PendingChange, Store};
pub use gathering::{Gathering, Next};

/// Changes per batch: one snapshot swap. A swap copies the chunks it adds
/// to (up to 1,024 rows each), so a long backlog (a start, an import) goes
/// in batches that fill whole chunks: with batches of 128, each chunk was
/// copied eight times as it filled, and a start took twice as long.
pub const BATCH_SIZE: usize = 1024;
/// Changes per embedding call, within a batch: what one request to an
/// embedding API carries.
pub const EMBED_BATCH: usize = 128;
/// The longest a pending change waits for others to share its batch: a
/// few milliseconds, against the ~10 ms one text alone costs the local
/// model, while its words are searchable already.
pub const GATHER: Duration = Duration::from_millis(5);
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
    /// The data directory's file (what it held at start is taken out as
    /// it is used, so what is left once every loaded memory is in is
    /// stale), or the table replicas share.
    cache: VectorCache,
    /// Entries in the cache file at start, to judge when to compact it.
    stored_at_start: usize,
    readiness: Readiness,
    stats: Arc<IndexerStats>,
    metrics: Metrics,
    /// Whether memories are embedded passage by passage too.
    passages: bool,
}

/// What the indexer works with.
pub struct IndexerDeps {
    pub store: Store,
    pub index: Arc<Index>,
    pub embedder: Embedder,
    /// The embedding cache: the file and its contents as read at start,
    /// or the table replicas share.
    pub cache: VectorCache,
    /// Set once the start-up pass is done.
    pub readiness: Readiness,
    pub metrics: Metrics,
    /// Whether memories are embedded passage by passage too.
    pub passages: bool,
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
            cache,
            readiness,
            metrics,
            passages,
        } = deps;
        let stats = Arc::new(IndexerStats::default());
        let stored_at_start = match &cache {
            VectorCache::Local { stored, .. } => stored.len(),
            VectorCache::Shared { .. } => 0,
        };
        let indexer = Self {
            store,
            index,
            embedder,
            cache,
            stored_at_start,
            readiness,
            stats: stats.clone(),
            metrics,
            passages,
        };
        (stats, tokio::spawn(indexer.run(stop)))
    }

    /// Runs until `stop` is cancelled (between batches).
    async fn run(mut self, stop: CancellationToken) {
        let started = Instant::now();
        let mut backoff = MIN_BACKOFF;
        let mut starting = true;
        let mut loads = self.index.load_requests();
        loop {
            // The start-up pass, which nobody searches, groups large
            // namespaces once at its end rather than as they grow.
            let grouping = if starting {
                Grouping::Deferred
            } else {
                Grouping::AsTheyGrow
            };
            let failed = match self.pass(&stop, &mut loads, grouping).await {
                Ok(()) => false,
                Err(err) => {
                    self.stats.failed_batches.fetch_add(1, Ordering::Relaxed);
                    self.metrics.embedding_error(&err);
                    tracing::warn!(
                        error = %crate::causes::error_chain(&err),
                        retry_in_ms = backoff.as_millis(),
                        pending = self.store.pending_change_count(IndexStage::Vectors),
                        "could not embed changed memories; they stay pending, found by their words"
                    );
                    true
                }
            };
            if starting {
                starting = false;
                let index = self.index.clone();
                crate::blocking::run(move || index.group()).await;
                self.declare_ready(started.elapsed());
            }
            if !failed && self.store.pending_change_count(IndexStage::Vectors) == 0 {
                self.settle_cache();
            }
            // Until the next change, or the retry; words keep coming in.
            let wait = async {
                if failed {
                    self.taking_in_words(tokio::time::sleep(backoff)).await;
                } else {
                    self.store.changed().await;
                }
            };
            tokio::select! {
                () = wait => {}
                Some(request) = next_load(&mut loads) => {
                    self.load(request).await;
                    continue;
                }
                () = stop.cancelled() => return,
            }
            backoff = if failed {
                (backoff * 2).min(MAX_BACKOFF)
            } else {
                MIN_BACKOFF
            };
        }
    }

    /// Takes in every pending change: words first, then vectors, batch by
    /// batch, each batch gathered and applied as `grouping` says.
    async fn pass(
        &mut self,
        stop: &CancellationToken,
        loads: &mut Option<mpsc::UnboundedReceiver<LoadRequest>>,
        grouping: Grouping,
    ) -> Result<(), embed::Error> {
        let mut gathering = Gathering::default();
        while !stop.is_cancelled() {
            while let Some(request) = loads.as_mut().and_then(|loads| loads.try_recv().ok()) {
                self.load(request).await;
            }
            self.take_in_words().await;
            let pending = self.store.oldest_pending(BATCH_SIZE);
            let hurry = self.store.vectors_awaited();
            match gathering.next(&pending, Instant::now(), hurry) {
                Next::Idle => break,
                Next::Embed(batch) => self.apply_batch(batch, hurry, grouping).await?,
                // Words of what arrives meanwhile go in at the loop's top.
                Next::Until(deadline) => tokio::select! {
                    () = tokio::time::sleep_until(deadline.into()) => {}
                    () = self.store.changed() => {}
                    Some(request) = next_load(loads) => self.load(request).await,
                },
            }
        }
        Ok(())
    }

    /// The words step, on the blocking pool: it computes terms and builds
    /// chunks, CPU work that grows with the backlog (every loaded memory
    /// at start).
    async fn take_in_words(&self) {
        let (store, index) = (self.store.clone(), self.index.clone());
        crate::blocking::run(move || take_in_words(&store, &index)).await;
    }

    /// Awaits `work`, taking in the words of the changes recorded
    /// meanwhile.
    async fn taking_in_words<T>(&self, work: impl Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                biased;
                output = &mut work => return output,
                () = self.store.changed() => self.take_in_words().await,
            }
        }
    }

    /// Finds the batch's vectors, [`EMBED_BATCH`] changes an embedding
    /// call, and applies it in one swap, grouped as `grouping` says;
    /// `hurry`: a reader waits for them, so they are embedded at a query's
    /// priority rather than the backlog's.
    async fn apply_batch(
        &mut self,
        batch: &[PendingChange],
        hurry: bool,
        grouping: Grouping,
    ) -> Result<(), embed::Error> {
        let mut changes = Vec::with_capacity(batch.len());
        for part in batch.chunks(EMBED_BATCH) {
            self.find_vectors(part, hurry, &mut changes).await?;
        }
        finish_batch(&self.store, &self.index, batch, changes, grouping);
        Ok(())
    }

    /// The changes that bring `part`'s vectors in (from the cache, or
    /// embedded in one call), added to `changes`.
    async fn find_vectors(
        &mut self,
        part: &[PendingChange],
        hurry: bool,
        changes: &mut Vec<(PendingChange, Change)>,
    ) -> Result<(), embed::Error> {
        let present: Vec<_> = part
            .iter()
            .filter_map(|change| match self.store.get(change.id) {
                Some(memory) => Some((change, memory)),
                None => {
                    changes.push((*change, Change::Remove(change.id)));
                    None
                }
            })
            .collect();
        let (texts, keys) = self.keyed_texts(present.iter().map(|(_, memory)| memory));
        let mut found = self.cache.take(&keys).await;
        found.retain(|_, vector| Some(vector.len()) == self.embedder.dimensions());
        self.stats
            .cache_hits
            .fetch_add(found.len() as u64, Ordering::Relaxed);
        let mut asked = HashSet::new();
        let missing: Vec<(ContentKey, String)> = keys
            .iter()
            .zip(texts.iter().flatten())
            .filter(|(key, _)| !found.contains_key(key) && asked.insert(**key))
            .map(|(key, text)| (*key, (*text).to_owned()))
            .collect();
        if !missing.is_empty() {
            let priority = if hurry {
                Priority::Query
            } else {
                Priority::Backlog
            };
            let to_embed = missing.iter().map(|(_, text)| text.clone()).collect();
            let vectors = self
                .taking_in_words(self.embedder.embed_as(to_embed, priority))
                .await?;
            self.stats
                .embedded
                .fetch_add(vectors.len() as u64, Ordering::Relaxed);
            let entries: Vec<(ContentKey, &[f32])> = missing
                .iter()
                .zip(&vectors)
                .map(|((key, _), vector)| (*key, vector.as_slice()))
                .collect();
            self.cache.put(&entries).await;
            found.extend(missing.into_iter().map(|(key, _)| key).zip(vectors));
        }
        let mut keys = keys.into_iter();
        for ((change, memory), texts) in present.iter().zip(&texts) {
            let mut vectors = keys
                .by_ref()
                .take(texts.len())
                .map(|key| found.get(&key).cloned().unwrap_or_default());
            let whole = vectors.next().unwrap_or_default();
            let vectors = Vectors {
                whole,
                passages: vectors.collect(),
            };
            changes.push((**change, Change::Upsert(entry_of(memory), vectors)));
        }
        Ok(())
    }

    /// Each memory's texts (its whole content, then its passages) and, in
    /// the same order flattened, their embedding cache keys.
    fn keyed_texts<'a>(
        &self,
        memories: impl Iterator<Item = &'a Arc<Memory>>,
    ) -> (Vec<Vec<&'a str>>, Vec<ContentKey>) {
        let texts: Vec<Vec<&str>> = memories.map(|memory| self.texts_of(memory)).collect();
        let keys = texts
            .iter()
            .flatten()
            .map(|text| ContentKey::of(text))
            .collect();
        (texts, keys)
    }

    /// What `memory` is embedded as: its content, then its passages if
    /// they are on.
    fn texts_of<'a>(&self, memory: &'a Memory) -> Vec<&'a str> {
        let mut texts = vec![memory.content.as_str()];
        if self.passages {
            texts.extend(passages::passages(&memory.content));
        }
        texts
    }

    fn declare_ready(&self, took: Duration) {
        let millis = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.stats
            .startup_ms
            .store(millis.max(1), Ordering::Relaxed);
        self.readiness.set_ready();
        tracing::info!(
            memories = self.index.snapshot().len(),
            pending = self.store.pending_change_count(IndexStage::Vectors),
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
        let VectorCache::Local { file, stored, used } = &mut self.cache else {
            return;
        };
        if self.stored_at_start == 0 {
            return;
        }
        let stale = std::mem::take(stored).len() - std::mem::take(used).len();
        // The live vectors are read from the index: with a namespace out
        // of memory, its vectors would be taken for stale.
        let all_resident = self.index.cold_sizes().is_empty();
        if all_resident && stale * 4 >= self.stored_at_start {
            let snapshot = self.index.snapshot();
            let mut live: HashMap<ContentKey, Vec<f32>> = snapshot
                .entries()
                .filter_map(|(id, vector)| {
                    let memory = self.store.get(id)?;
                    Some((ContentKey::of(&memory.content), vector))
                })
                .collect();
            // A memory's passage rows are in the order of its passages.
            let mut rows = snapshot.passage_entries().peekable();
            while let Some((id, vector)) = rows.next() {
                let mut vectors = vec![vector];
                while let Some((_, vector)) = rows.next_if(|(next, _)| *next == id) {
                    vectors.push(vector);
                }
                if let Some(memory) = self.store.get(id) {
                    let texts = passages::passages(&memory.content);
                    if texts.len() == vectors.len() {
                        live.extend(texts.into_iter().map(ContentKey::of).zip(vectors));
                    }
                }
            }
            tracing::info!(stale, live = live.len(), "compacting the embedding cache");
            file.rewrite(live.iter().map(|(key, vector)| (*key, vector.as_slice())));
        }
        self.stored_at_start = 0;
    }
}

/// The next namespace a reader waits to have loaded back; never, for an
/// index that does not evict.
async fn next_load(
    loads: &mut Option<mpsc::UnboundedReceiver<LoadRequest>>,
) -> Option<LoadRequest> {
    match loads {
        Some(loads) => loads.recv().await,
        None => std::future::pending().await,
    }
}

/// The words step: takes in the words of every change whose words are not
/// in yet, and takes deleted memories off both sides (a delete has no
/// vector to wait for, so it is fully applied here), in one snapshot swap.
fn take_in_words(store: &Store, index: &Index) {
    let fresh = store.pending_words();
    if fresh.is_empty() {
        return;
    }
    let mut deletes = Vec::new();
    let changes = fresh
        .iter()
        .map(|change| match store.get(change.id) {
            Some(memory) => Change::Words(entry_of(&memory)),
            None => {
                deletes.push(*change);
                Change::Remove(change.id)
            }
        })
        .collect();
    index.apply(changes);
    store.acknowledge_words(&fresh);
    store.acknowledge(&deletes);
}

/// Applies a batch's `changes` (each with the pending change it answers),
/// grouping large namespaces as `grouping` says, and acknowledges the
/// batch. A memory deleted while its vector was computed is gone from
/// both sides already (its delete's words step): its vector must not
/// bring it back, so a change no longer the latest of its memory is left
/// out.
fn finish_batch(
    store: &Store,
    index: &Index,
    batch: &[PendingChange],
    changes: Vec<(PendingChange, Change)>,
    grouping: Grouping,
) {
    let current = changes
        .into_iter()
        .filter(|(change, _)| store.is_latest(change))
        .map(|(_, change)| change)
        .collect();
    index.apply_grouping(current, grouping);
    store.acknowledge(batch);
}

/// A memory's entry: where it lives, its category and its words.
fn entry_of(memory: &Memory) -> Entry {
    Entry {
        id: memory.id,
        namespace: memory.namespace.clone(),
        category: memory.category,
        terms: lexical::terms(&memory.content),
    }
}

#[cfg(test)]
mod tests;
