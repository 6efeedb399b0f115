//! The index: an immutable snapshot of every indexed memory's words and
//! embedding, swapped whole behind an `ArcSwap`.
//!
//! Readers load the current snapshot without locking and never see half an
//! update. [`Index::apply`] is the only writer; it is serialized, builds the
//! next snapshot from the current one and swaps it in. Vectors are normalised
//! at insert, so cosine similarity is a dot product.
//!
//! A memory enters in two steps. Its words come first ([`Change::Words`]):
//! cheap to compute, so a write is findable by its words (and passes the
//! filters) at once, however long the embedder's backlog. Its vector
//! follows ([`Change::Upsert`]), moving it from the words-only side to the
//! embedded side. Each id lives on one side at most: the vector search
//! sees only the embedded side, the lexical search both, and a removal
//! takes an id off whichever side holds it.
//!
//! Snapshots share structure: each namespace holds its entries in chunks
//! behind `Arc`s, and an update copies only the chunks it touches, so a
//! write into a namespace of 100,000 memories does not copy them all.
//!
//! Beside the vectors, each chunk keeps BM25 postings of its entries'
//! words ([`lexical`]), for [`Snapshot::lexical_search`].
//!
//! Vectors are stored in half precision (`f16`, half the bytes of `f32`;
//! a unit vector moves by at most 2⁻¹¹, so a similarity by at most that
//! much). The vector search scans one-bit codes of the vectors
//! ([`quantized`], 64 bytes a row at 384 dimensions), sharing a long scan
//! with idle cores ([`scan`]), and rescores a pool of the best estimates
//! with the stored vectors: results carry the stored vectors'
//! similarities, in their order, and are those of a full scan unless the
//! codes ranked a true result outside the pool (measured, not bounded:
//! `engram-bench retrieve` reports recall@10; see `docs/benchmarks.md`).

pub mod indexer;
pub mod lexical;
mod pool;
pub mod quantized;
mod scan;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicU16, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::ArcSwap;
use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::memory::{Category, MemoryId, Namespace};

/// Entries per chunk: small enough that copying one on update is cheap,
/// large enough that a scan is mostly straight-line arithmetic.
const CHUNK_CAPACITY: usize = 1024;

/// The fewest and the most candidates of the one-bit scan rescored.
const MIN_POOL: usize = 256;
const MAX_POOL: usize = 512;

/// How many candidates of the one-bit scan are rescored with the stored
/// vectors, for a search of `limit` over `rows` entries: the codes'
/// estimates are coarse, and the rows whose estimates crowd out a true
/// result grow with the rows scanned, so the pool is 1 % of them, between
/// [`MIN_POOL`] and [`MAX_POOL`], and at least 4 × `limit`. Rescoring one
/// costs a 384-float dot product from wherever the row is stored, so a
/// pool wider than needed is what a small namespace's search pays most.
fn rescore_pool(limit: usize, rows: usize) -> usize {
    (rows / 100)
        .clamp(MIN_POOL, MAX_POOL)
        .max(limit.saturating_mul(4))
}

/// Below this many entries × queries a search is a few tens of
/// microseconds of work: cheaper done in place than handed to another
/// thread (see [`Snapshot::is_small_search`]).
const SMALL_SEARCH: usize = 16 * 1024;

/// A memory's place in the index, without its vector.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: MemoryId,
    pub namespace: Namespace,
    pub category: Category,
    /// Its words, for lexical search.
    pub terms: lexical::Terms,
}

/// One change to the index; each replaces whatever the index held of the
/// same id, on either side.
#[derive(Clone, Debug)]
pub enum Change {
    /// The entry with its vector (any length-`dimensions` vector; it is
    /// normalised on insert): both searches find it.
    Upsert(Entry, Vec<f32>),
    /// The entry's words alone, while its vector is on its way: the
    /// lexical search and the filters find it, the vector search does not.
    Words(Entry),
    Remove(MemoryId),
}

impl Change {
    fn id(&self) -> MemoryId {
        match self {
            Self::Upsert(entry, _) | Self::Words(entry) => entry.id,
            Self::Remove(id) => *id,
        }
    }
}

/// A scored search result: the best similarity any query gave the memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub id: MemoryId,
    /// Cosine similarity, -1..1.
    pub similarity: f32,
    /// Which of the queries gave the best similarity.
    pub query: usize,
}

/// Which side of the index holds an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Embedded,
    WordsOnly,
}

/// The index. Cheap to share behind an `Arc`.
pub struct Index {
    /// The vectors' length and their codes' rotation: set at
    /// construction, or by the first vector applied when the embedder's
    /// length is learned from its first reply.
    coder: OnceLock<Arc<quantized::Coder>>,
    snapshot: ArcSwap<Snapshot>,
    /// Where each indexed id lives; only the (serialized) writer reads it.
    writer: Mutex<HashMap<MemoryId, (Namespace, Side)>>,
}

impl Index {
    /// An index of vectors of `dimensions` floats; `None`: of the length of
    /// the first vector applied.
    pub fn new(dimensions: impl Into<Option<usize>>) -> Self {
        let known = OnceLock::new();
        if let Some(dimensions) = dimensions.into() {
            known
                .set(Arc::new(quantized::Coder::new(dimensions)))
                .expect("a fresh OnceLock is empty");
        }
        Self {
            coder: known,
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            writer: Mutex::new(HashMap::new()),
        }
    }

    pub fn dimensions(&self) -> Option<usize> {
        self.coder.get().map(|coder| coder.dimensions())
    }

    /// The current snapshot; it stays valid (and unchanged) while held.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Applies `changes` in order and swaps the result in as one snapshot.
    ///
    /// # Panics
    /// If an upserted vector does not have the index's dimensions: the
    /// indexer checks every vector before it gets here.
    pub fn apply(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        // Poisoned only if a writer panicked; the location map is updated
        // together with the snapshot swap, so it is still consistent.
        let mut locations = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let first_length = changes.iter().find_map(|change| match change {
            Change::Upsert(_, vector) => Some(vector.len()),
            Change::Words(_) | Change::Remove(_) => None,
        });
        // Unknown only while nothing was ever embedded, so 0 matters nowhere.
        let coder = match first_length {
            Some(length) => self
                .coder
                .get_or_init(|| Arc::new(quantized::Coder::new(length)))
                .clone(),
            None => self.coder.get().cloned().unwrap_or_default(),
        };
        let dimensions = coder.dimensions();
        let mut embedded = Edits::default();
        let mut words_only = Edits::default();
        for change in changes {
            let id = change.id();
            if let Some((namespace, side)) = locations.remove(&id) {
                match side {
                    Side::Embedded => embedded.remove(namespace, id),
                    Side::WordsOnly => words_only.remove(namespace, id),
                }
            }
            let (side, entry, vector) = match change {
                Change::Upsert(entry, mut vector) => {
                    assert_eq!(
                        vector.len(),
                        dimensions,
                        "the indexer checks dimensions before applying"
                    );
                    normalise(&mut vector);
                    (Side::Embedded, entry, vector)
                }
                Change::Words(entry) => (Side::WordsOnly, entry, Vec::new()),
                Change::Remove(_) => continue,
            };
            locations.insert(id, (entry.namespace.clone(), side));
            match side {
                Side::Embedded => embedded.add(entry, vector),
                Side::WordsOnly => words_only.add(entry, vector),
            }
        }

        let current = self.snapshot.load();
        self.snapshot.store(Arc::new(Snapshot {
            embedded: current.embedded.updated(&coder, embedded),
            words_only: current
                .words_only
                .updated(&quantized::Coder::default(), words_only),
            coder,
        }));
    }
}

/// What one [`Index::apply`] does to one side of the index.
#[derive(Default)]
struct Edits {
    removals: HashMap<Namespace, HashSet<MemoryId>>,
    /// Entries with their vectors (empty on the words-only side).
    additions: HashMap<Namespace, Vec<(Entry, Vec<f32>)>>,
}

impl Edits {
    fn remove(&mut self, namespace: Namespace, id: MemoryId) {
        match self.additions.get_mut(&namespace) {
            // Added earlier in this same batch: drop it there.
            Some(pending) if pending.iter().any(|(entry, _)| entry.id == id) => {
                pending.retain(|(entry, _)| entry.id != id);
            }
            _ => {
                self.removals.entry(namespace).or_default().insert(id);
            }
        }
    }

    fn add(&mut self, entry: Entry, vector: Vec<f32>) {
        self.additions
            .entry(entry.namespace.clone())
            .or_default()
            .push((entry, vector));
    }
}

/// One side of the index: its entries by namespace.
#[derive(Clone, Default)]
struct Namespaces(HashMap<Namespace, Arc<NamespaceIndex>>);

impl Namespaces {
    /// These namespaces with `edits` applied; untouched namespaces are
    /// shared, not copied.
    fn updated(&self, coder: &quantized::Coder, mut edits: Edits) -> Self {
        let mut namespaces = self.0.clone();
        let touched: HashSet<Namespace> = edits
            .removals
            .keys()
            .chain(edits.additions.keys())
            .cloned()
            .collect();
        for namespace in touched {
            let existing = namespaces.remove(&namespace);
            let next = NamespaceIndex::updated(
                existing.as_deref(),
                coder,
                edits.removals.get(&namespace),
                edits.additions.remove(&namespace).unwrap_or_default(),
            );
            if next.len() > 0 {
                namespaces.insert(namespace, Arc::new(next));
            }
        }
        Self(namespaces)
    }

    fn len(&self) -> usize {
        self.0.values().map(|index| index.len()).sum()
    }

    /// The chunks of `namespaces`.
    fn chunks_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<Chunk>> {
        namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
            .flat_map(|index| index.chunks.iter())
    }
}

/// A lexical search result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LexicalHit {
    pub id: MemoryId,
    /// BM25.
    pub score: f32,
    /// The share of the query's summed idf its words match, 0..1.
    pub coverage: f32,
    /// The summed idf of the query words it holds: how much its match
    /// narrows this store down, in nats.
    pub matched_idf: f32,
    /// How many of the query's distinct terms it holds.
    pub matched_terms: u32,
    /// Cosine similarity to the closest of the queries' vectors (0 without
    /// them, or without its own vector), so that a memory only the words
    /// found still says how close in meaning it is.
    pub similarity: f32,
    /// Whether its vector is still on its way: its words are indexed, its
    /// vector not yet, so `similarity` is 0 for want of one.
    pub vector_pending: bool,
}

/// The bytes a snapshot's columns hold, by part: their capacities, not
/// the allocator's overhead. For the bench's memory figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The vectors, in half precision.
    pub vectors: usize,
    /// Their one-bit codes.
    pub codes: usize,
    /// Ids, categories and lengths.
    pub columns: usize,
    /// The BM25 postings: their tables and lists.
    pub postings: usize,
}

/// One immutable state of the index.
#[derive(Default)]
pub struct Snapshot {
    /// Memories with their vectors.
    embedded: Namespaces,
    /// Memories whose words are indexed and whose vectors are not yet.
    words_only: Namespaces,
    /// The vectors' length and their codes' rotation.
    coder: Arc<quantized::Coder>,
}

impl Snapshot {
    /// Entries with their vectors, across every namespace.
    pub fn len(&self) -> usize {
        self.embedded.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the columns of both sides hold, in bytes.
    pub fn footprint(&self) -> Footprint {
        let mut total = Footprint::default();
        for chunk in [&self.embedded, &self.words_only]
            .into_iter()
            .flat_map(|side| side.0.values())
            .flat_map(|index| index.chunks.iter())
        {
            total.vectors += chunk.vectors.capacity() * size_of::<f16>();
            total.codes += chunk.codes.bytes();
            total.columns += chunk.ids.capacity() * size_of::<MemoryId>()
                + chunk.categories.capacity() * size_of::<Category>()
                + chunk.lengths.capacity() * size_of::<u32>();
            // A table slot is its key, its list's header and a control byte.
            total.postings += chunk.postings.capacity()
                * (size_of::<lexical::Term>() + size_of::<Vec<Posting>>() + 1)
                + chunk
                    .postings
                    .values()
                    .map(|list| list.capacity() * size_of::<Posting>())
                    .sum::<usize>();
        }
        total
    }

    /// Entries whose words are indexed and whose vectors are not yet.
    pub fn words_only(&self) -> usize {
        self.words_only.len()
    }

    /// Entries with their vectors, per namespace.
    pub fn namespace_sizes(&self) -> impl Iterator<Item = (&Namespace, usize)> {
        self.embedded
            .0
            .iter()
            .map(|(namespace, index)| (namespace, index.len()))
    }

    /// Every embedded entry's id and (normalised, stored) vector.
    pub fn entries(&self) -> impl Iterator<Item = (MemoryId, Vec<f32>)> {
        let dimensions = self.dimensions();
        self.embedded
            .0
            .values()
            .flat_map(|index| index.chunks.iter())
            .flat_map(move |chunk| {
                (0..chunk.ids.len())
                    .map(move |slot| (chunk.ids[slot], chunk.vector(slot, dimensions)))
            })
    }

    /// The stored vectors of those of `ids` that live in `namespaces`, in
    /// one pass over the ids (not the vectors).
    pub fn vectors_of(
        &self,
        namespaces: &[Namespace],
        ids: &HashSet<MemoryId>,
    ) -> HashMap<MemoryId, Vec<f32>> {
        let mut found = HashMap::with_capacity(ids.len());
        if ids.is_empty() {
            return found;
        }
        for chunk in self.embedded.chunks_of(namespaces) {
            for (slot, id) in chunk.ids.iter().enumerate() {
                if ids.contains(id) {
                    found.insert(*id, chunk.vector(slot, self.dimensions()));
                }
            }
        }
        found
    }

    /// The stored (normalised) vector of `id` in `namespace`.
    pub fn vector(&self, namespace: &Namespace, id: MemoryId) -> Option<Vec<f32>> {
        let index = self.embedded.0.get(namespace)?;
        index.chunks.iter().find_map(|chunk| {
            let slot = chunk.ids.iter().position(|&candidate| candidate == id)?;
            Some(chunk.vector(slot, self.dimensions()))
        })
    }

    /// The length of the vectors.
    fn dimensions(&self) -> usize {
        self.coder.dimensions()
    }

    /// The `limit` entries of `namespaces` most similar to any of `queries`,
    /// best first, among those `accept` lets through. Each memory appears
    /// once, with its best similarity (to its stored vector) and the query
    /// that gave it.
    ///
    /// Queries are normalised here; a query of the wrong length matches
    /// nothing. The scan compares one-bit codes ([`quantized`]); the pool
    /// of the best estimates ([`rescore_pool`]) is rescored with the
    /// stored vectors, so results are in the order of [`Self::exact_search`]
    /// and are its results unless the codes left one out of the pool.
    pub fn search(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Vec<Hit> {
        let rows = self
            .chunks_of(namespaces)
            .map(|chunk| chunk.ids.len())
            .sum();
        self.search_in_pool(
            namespaces,
            queries,
            limit,
            rescore_pool(limit, rows),
            accept,
        )
    }

    /// [`Self::search`], rescoring the `pool` best estimates (at least
    /// `limit`): for measuring recall against the pool's size.
    pub fn search_in_pool(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        pool: usize,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Vec<Hit> {
        let queries = self.normalised(queries);
        if queries.is_empty() || limit == 0 {
            return Vec::new();
        }
        let coded: Arc<Vec<quantized::Query>> = Arc::new(
            queries
                .iter()
                .map(|query| quantized::Query::new(&self.coder, query))
                .collect(),
        );
        let chunks: Vec<Arc<Chunk>> = self.chunks_of(namespaces).cloned().collect();
        let mut best_codes = pool::Pool::new(pool.max(limit), self.coder.bits());
        let cutoff = Arc::new(AtomicU16::new(best_codes.cutoff()));
        scan::approximate(&chunks, &coded, &cutoff, |index, near| {
            let chunk = &chunks[index];
            let index = u32::try_from(index).expect("far fewer chunks than 2^32");
            for row in near {
                let slot = usize::from(row.slot);
                if row.differing <= best_codes.cutoff()
                    && accept(chunk.ids[slot], chunk.categories[slot])
                {
                    let candidate = pool::Candidate {
                        chunk: index,
                        slot: row.slot,
                    };
                    best_codes.offer(row.differing, candidate);
                }
            }
            cutoff.store(best_codes.cutoff(), AtomicOrdering::Relaxed);
        });
        let place = |candidate: pool::Candidate| {
            (
                &chunks[candidate.chunk as usize],
                usize::from(candidate.slot),
            )
        };
        let candidates = best_codes.into_rows(|candidate| {
            let (chunk, slot) = place(candidate);
            chunk.ids[slot]
        });
        // The candidates' rows are scattered over the stored vectors: read
        // one value of each of their cache lines first, in loads that do
        // not wait on each other, so the CPU overlaps their misses instead
        // of the rescoring below stalling on each row in turn.
        let touched = candidates.iter().fold(0u16, |touched, &candidate| {
            let (chunk, slot) = place(candidate);
            touched ^ chunk.touch(slot, self.dimensions())
        });
        std::hint::black_box(touched);
        let mut best = TopK::new(limit);
        let mut row = vec![0.0; self.dimensions()];
        for candidate in candidates {
            let (chunk, slot) = place(candidate);
            chunk.decode(slot, &mut row);
            let (query, similarity) = best_of(&queries, &row).expect("queries is not empty");
            let id = chunk.ids[slot];
            if best.admits(similarity, id) {
                best.push(Hit {
                    id,
                    similarity,
                    query,
                });
            }
        }
        best.into_sorted()
    }

    /// The full scan that [`Self::search`] approximates: every stored
    /// vector of `namespaces` compared. For measuring the approximation.
    pub fn exact_search(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
    ) -> Vec<Hit> {
        let queries = self.normalised(queries);
        if queries.is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut best = TopK::new(limit);
        let mut row = vec![0.0; self.dimensions()];
        for chunk in self.chunks_of(namespaces) {
            for slot in 0..chunk.ids.len() {
                chunk.decode(slot, &mut row);
                let (query, similarity) = best_of(&queries, &row).expect("queries is not empty");
                if best.admits(similarity, chunk.ids[slot]) {
                    best.push(Hit {
                        id: chunk.ids[slot],
                        similarity,
                        query,
                    });
                }
            }
        }
        best.into_sorted()
    }

    /// Whether a search of `namespaces` with `queries` vectors is small
    /// enough to run in place rather than on another thread: a hand-off
    /// costs two thread wake-ups, each a chance to wait for a busy core.
    pub fn is_small_search(&self, namespaces: &[Namespace], queries: usize) -> bool {
        let entries: usize = self
            .chunks_of(namespaces)
            .map(|chunk| chunk.ids.len())
            .sum();
        entries.saturating_mul(queries.max(1)) <= SMALL_SEARCH
    }

    /// The embedded chunks of `namespaces`: what the vector search scans.
    fn chunks_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<Chunk>> {
        self.embedded.chunks_of(namespaces)
    }

    /// `queries` of the index's dimensions, normalised; others dropped.
    fn normalised(&self, queries: &[Vec<f32>]) -> Vec<Vec<f32>> {
        queries
            .iter()
            .filter(|query| query.len() == self.dimensions())
            .map(|query| {
                let mut query = query.clone();
                normalise(&mut query);
                query
            })
            .collect()
    }
}

/// The query closest to `vector` (a stored, unit-length vector) and its
/// cosine; `None` without queries. Clamped to -1..1: a vector stored in
/// half precision is of unit length within 2⁻¹¹, so a memory compared with
/// its own vector could otherwise score a hair above 1.
fn best_of(queries: &[Vec<f32>], vector: &[f32]) -> Option<(usize, f32)> {
    queries
        .iter()
        .map(|query| dot(query, vector).clamp(-1.0, 1.0))
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

impl Snapshot {
    /// The `limit` entries of `namespaces` with the best BM25 score for
    /// `terms` (positive scores only), best first, among those `accept`
    /// lets through, whether their vectors are in or still on their way;
    /// each with its score, its coverage (the share of the query's weight,
    /// summed idf, that its words match) and its cosine similarity to the
    /// closest of `queries` (vectors, as for [`Self::search`]; 0 while its
    /// own vector is pending).
    pub fn lexical_search(
        &self,
        namespaces: &[Namespace],
        terms: &[lexical::Term],
        queries: &[Vec<f32>],
        limit: usize,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Vec<LexicalHit> {
        // Both sides: a memory is findable by its words before its vector
        // is in, and counts in the statistics like any other.
        let chunks: Vec<(&Chunk, Side)> = self
            .embedded
            .chunks_of(namespaces)
            .map(|chunk| (chunk.as_ref(), Side::Embedded))
            .chain(
                self.words_only
                    .chunks_of(namespaces)
                    .map(|chunk| (chunk.as_ref(), Side::WordsOnly)),
            )
            .collect();
        let documents: usize = chunks.iter().map(|(chunk, _)| chunk.ids.len()).sum();
        if documents == 0 || terms.is_empty() || limit == 0 {
            return Vec::new();
        }
        let total_length: u64 = chunks.iter().map(|(chunk, _)| chunk.total_length).sum();
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts stay far below 2^24 per document"
        )]
        let weights = lexical::Weights::new(total_length as f32 / documents as f32);
        // Each chunk's postings of each term, looked up once: for the
        // document frequencies, then for the scores.
        let postings: Vec<Vec<&[Posting]>> = chunks
            .iter()
            .map(|(chunk, _)| {
                terms
                    .iter()
                    .map(|term| chunk.postings.get(term).map_or(&[][..], Vec::as_slice))
                    .collect()
            })
            .collect();
        let idfs: Vec<(lexical::Term, f32)> = terms
            .iter()
            .enumerate()
            .map(|(nth, term)| {
                let frequency = postings.iter().map(|lists| lists[nth].len()).sum();
                (*term, lexical::idf(documents, frequency))
            })
            .collect();
        let query_weight: f32 = idfs.iter().map(|(_, idf)| idf).sum();
        let mut best = TopK::new(limit);
        // Scores of one chunk at a time, by slot; all 0 between chunks.
        let longest = chunks.iter().map(|(chunk, _)| chunk.ids.len()).max();
        let mut scores = vec![0.0f32; longest.unwrap_or_default()];
        for (index, ((chunk, _), lists)) in chunks.iter().zip(&postings).enumerate() {
            // Plain slices, so that the loop keeps their bounds in
            // registers instead of reloading them after every store.
            let (lengths, totals) = (chunk.lengths.as_slice(), scores.as_mut_slice());
            for ((_, idf), list) in idfs.iter().zip(lists) {
                for &(slot, frequency) in *list {
                    let slot = usize::from(slot);
                    totals[slot] += weights.weight(*idf, frequency.into(), lengths[slot]);
                }
            }
            // Only entries holding a query term have a score: they are
            // found through the postings, not by reading every slot, and
            // each score is taken (reset to 0) as it is read, so an entry
            // in several lists is judged once and the next chunk starts
            // from zeros.
            let mut floor = best.floor();
            for &(slot, _) in lists.iter().copied().flatten() {
                let slot = usize::from(slot);
                let score = std::mem::take(&mut totals[slot]);
                if score <= 0.0 || score < floor {
                    continue;
                }
                let id = chunk.ids[slot];
                if best.admits(score, id) && accept(id, chunk.categories[slot]) {
                    best.push(Scoring {
                        id,
                        score,
                        chunk: index,
                        slot,
                    });
                    floor = best.floor();
                }
            }
        }
        // Only the hits kept are compared with the queries, and have their
        // matched terms looked up.
        let queries = self.normalised(queries);
        best.into_sorted()
            .into_iter()
            .map(|scoring| {
                let (chunk, side) = chunks[scoring.chunk];
                let similarity = match side {
                    Side::Embedded => {
                        best_of(&queries, &chunk.vector(scoring.slot, self.dimensions()))
                            .map_or(0.0, |(_, similarity)| similarity)
                    }
                    Side::WordsOnly => 0.0,
                };
                let (matched_idf, matched_terms) = idfs
                    .iter()
                    .filter(|(term, _)| chunk.holds(term, scoring.slot))
                    .fold((0.0f32, 0u32), |(sum, count), (_, idf)| {
                        (sum + idf, count + 1)
                    });
                LexicalHit {
                    id: scoring.id,
                    score: scoring.score,
                    coverage: matched_idf / query_weight.max(f32::EPSILON),
                    matched_idf,
                    matched_terms,
                    similarity,
                    vector_pending: side == Side::WordsOnly,
                }
            })
            .collect()
    }
}

/// A lexical match while the search runs: its score, and where it lives.
struct Scoring {
    id: MemoryId,
    score: f32,
    chunk: usize,
    slot: usize,
}

impl Scored for Scoring {
    fn similarity(&self) -> f32 {
        self.score
    }

    fn id(&self) -> MemoryId {
        self.id
    }
}

/// The entries of one namespace, in chunks shared between snapshots.
#[derive(Default)]
struct NamespaceIndex {
    chunks: Vec<Arc<Chunk>>,
}

impl NamespaceIndex {
    fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.ids.len()).sum()
    }

    /// `existing` without `removed`, plus `added`. Chunks that lose nothing
    /// are shared, not copied; new entries fill the last chunk, then new ones.
    fn updated(
        existing: Option<&Self>,
        coder: &quantized::Coder,
        removed: Option<&HashSet<MemoryId>>,
        added: Vec<(Entry, Vec<f32>)>,
    ) -> Self {
        let mut chunks: Vec<Arc<Chunk>> = Vec::new();
        for chunk in existing
            .map(|index| index.chunks.as_slice())
            .unwrap_or_default()
        {
            match removed {
                Some(removed) if chunk.ids.iter().any(|id| removed.contains(id)) => {
                    let kept = chunk.without(removed, coder);
                    if !kept.ids.is_empty() {
                        chunks.push(Arc::new(kept));
                    }
                }
                _ => chunks.push(chunk.clone()),
            }
        }
        let mut left = added.len();
        let mut added = added.into_iter();
        while left > 0 {
            let mut last = match chunks.last() {
                Some(last) if last.ids.len() < CHUNK_CAPACITY => {
                    let last = chunks.pop().expect("just seen");
                    Arc::unwrap_or_clone(last)
                }
                _ => Chunk::new(coder),
            };
            let rows = left.min(CHUNK_CAPACITY - last.ids.len());
            last.reserve_exact(coder, rows);
            left -= rows;
            for (entry, vector) in added.by_ref().take(rows) {
                last.push(coder, entry.id, entry.category, &vector, &entry.terms);
            }
            chunks.push(Arc::new(last));
        }
        Self { chunks }
    }
}

/// Up to [`CHUNK_CAPACITY`] entries, stored column-wise: vectors are one
/// contiguous run of `dimensions`-long rows, and so are their codes (none
/// on the words-only side, whose chunks are built with 0 dimensions).
#[derive(Clone, Default)]
struct Chunk {
    ids: Vec<MemoryId>,
    categories: Vec<Category>,
    /// The normalised vectors, in half precision.
    vectors: Vec<f16>,
    /// `vectors` coded for the scan ([`quantized`]), row for row.
    codes: quantized::Codes,
    /// Each entry's length in tokens (its terms live in `postings` only).
    lengths: Vec<u32>,
    /// term → every entry holding it, by slot.
    postings: HashMap<lexical::Term, Vec<Posting>>,
    total_length: u64,
}

impl Chunk {
    /// An empty chunk for vectors (and codes) of `coder`.
    fn new(coder: &quantized::Coder) -> Self {
        Self {
            codes: quantized::Codes::new(coder.words()),
            ..Self::default()
        }
    }

    /// The stored vector of `slot`, into `row` (of the vectors' length).
    fn decode(&self, slot: usize, row: &mut [f32]) {
        let length = row.len();
        self.vectors[slot * length..(slot + 1) * length].convert_to_f32_slice(row);
    }

    /// Reads one value per cache line of `slot`'s stored vector, to bring
    /// it into the cache; returns them combined, for the caller to keep.
    fn touch(&self, slot: usize, dimensions: usize) -> u16 {
        const VALUES_PER_LINE: usize = 64 / size_of::<f16>();
        self.vectors[slot * dimensions..(slot + 1) * dimensions]
            .iter()
            .step_by(VALUES_PER_LINE)
            .fold(0, |touched, value| touched ^ value.to_bits())
    }

    /// The stored vector of `slot`.
    fn vector(&self, slot: usize, dimensions: usize) -> Vec<f32> {
        let mut row = vec![0.0; dimensions];
        self.decode(slot, &mut row);
        row
    }

    /// The rows within `cutoff` bits of their closest query by the codes.
    fn approximate(
        &self,
        queries: &[quantized::Query],
        cutoff: &AtomicU16,
    ) -> Vec<quantized::Near> {
        quantized::scan(queries, &self.codes, cutoff.load(AtomicOrdering::Relaxed))
    }

    /// Room for `rows` more entries, and no more: a chunk's buffers are
    /// copied whenever a snapshot adds to it, so the doubling growth of a
    /// `Vec` would leave up to a third of every one unused, and each
    /// growth step freed memory for the allocator to keep.
    fn reserve_exact(&mut self, coder: &quantized::Coder, rows: usize) {
        self.ids.reserve_exact(rows);
        self.categories.reserve_exact(rows);
        self.lengths.reserve_exact(rows);
        self.vectors.reserve_exact(rows * coder.dimensions());
        self.codes.reserve_exact(rows);
    }

    /// Adds an entry: its (normalised) vector is coded and stored here.
    fn push(
        &mut self,
        coder: &quantized::Coder,
        id: MemoryId,
        category: Category,
        vector: &[f32],
        terms: &lexical::Terms,
    ) {
        let slot = self.next_slot();
        for &(term, frequency) in &terms.counts {
            self.postings
                .entry(term)
                .or_default()
                .push((slot, u16::try_from(frequency).unwrap_or(u16::MAX)));
        }
        self.codes.push(&coder.code(vector));
        self.vectors
            .extend(vector.iter().copied().map(f16::from_f32));
        self.push_row(id, category, terms.length);
    }

    /// Whether the entry in `slot` holds `term` (postings are in slot
    /// order).
    fn holds(&self, term: &lexical::Term, slot: usize) -> bool {
        self.postings.get(term).is_some_and(|postings| {
            postings
                .binary_search_by_key(&slot, |&(holder, _)| usize::from(holder))
                .is_ok()
        })
    }

    fn next_slot(&self) -> u16 {
        u16::try_from(self.ids.len()).expect("a chunk holds at most 1024 entries")
    }

    /// Adds an entry's other columns, its vector and code already in.
    fn push_row(&mut self, id: MemoryId, category: Category, length: u32) {
        self.ids.push(id);
        self.categories.push(category);
        self.lengths.push(length);
        self.total_length += u64::from(length);
    }

    /// A copy without the `removed` entries; the others keep their order,
    /// vectors, codes and postings.
    fn without(&self, removed: &HashSet<MemoryId>, coder: &quantized::Coder) -> Self {
        let dimensions = coder.dimensions();
        let mut kept = Self::new(coder);
        let mut moved_to = vec![None; self.ids.len()];
        for (slot, id) in self.ids.iter().enumerate() {
            if !removed.contains(id) {
                moved_to[slot] = Some(kept.next_slot());
                kept.vectors
                    .extend_from_slice(&self.vectors[slot * dimensions..(slot + 1) * dimensions]);
                kept.codes.push(&self.codes.row(slot));
                kept.push_row(*id, self.categories[slot], self.lengths[slot]);
            }
        }
        for (term, postings) in &self.postings {
            let postings: Vec<Posting> = postings
                .iter()
                .filter_map(|&(slot, frequency)| {
                    moved_to[usize::from(slot)].map(|slot| (slot, frequency))
                })
                .collect();
            if !postings.is_empty() {
                kept.postings.insert(*term, postings);
            }
        }
        kept
    }
}

/// An entry holding a term: its slot, and how often it holds the term (at
/// most `u16::MAX`, far beyond where BM25's term frequency saturates).
type Posting = (u16, u16);

/// Cosine similarity of two vectors of the same length, normalised or not.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms > 0.0 && norms.is_finite() {
        dot(a, b) / norms
    } else {
        0.0
    }
}

/// Scales `vector` to unit length in place; a zero vector stays zero (and
/// so matches nothing).
pub fn normalise(vector: &mut [f32]) {
    let norm = dot(vector, vector).sqrt();
    if norm > 0.0 && norm.is_finite() {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

/// The dot product, written as eight independent lanes so the compiler
/// vectorises it without `unsafe` or target-specific code.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut sums = [0.0f32; LANES];
    let (a_head, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_head, b_tail) = b.split_at(a_head.len());
    for (a, b) in a_head.chunks_exact(LANES).zip(b_head.chunks_exact(LANES)) {
        for lane in 0..LANES {
            sums[lane] += a[lane] * b[lane];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(a, b)| a * b).sum();
    sums.iter().sum::<f32>() + tail
}

/// Something [`TopK`] can rank: by similarity, then by id.
trait Scored {
    fn similarity(&self) -> f32;
    fn id(&self) -> MemoryId;
}

impl Scored for Hit {
    fn similarity(&self) -> f32 {
        self.similarity
    }

    fn id(&self) -> MemoryId {
        self.id
    }
}

/// A bounded min-heap keeping the `limit` best items seen.
struct TopK<T: Scored> {
    limit: usize,
    heap: BinaryHeap<WorstFirst<T>>,
}

/// Orders items so the heap's top is the one to evict: the lowest
/// similarity, and among equals the highest id (so results are
/// deterministic, whatever order items arrive in).
struct WorstFirst<T>(T);

impl<T: Scored> Ord for WorstFirst<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .similarity()
            .total_cmp(&self.0.similarity())
            .then_with(|| self.0.id().cmp(&other.0.id()))
    }
}

impl<T: Scored> PartialOrd for WorstFirst<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Scored> PartialEq for WorstFirst<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T: Scored> Eq for WorstFirst<T> {}

impl<T: Scored> TopK<T> {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            heap: BinaryHeap::with_capacity(limit + 1),
        }
    }

    /// Whether an item with this similarity and id would enter (and stay):
    /// a cheap pre-check before the caller's filter runs. Exact, so that
    /// long runs of equal scores cost no pushes.
    fn admits(&self, similarity: f32, id: MemoryId) -> bool {
        self.heap.len() < self.limit
            || self.heap.peek().is_some_and(|worst| {
                similarity
                    .total_cmp(&worst.0.similarity())
                    .then_with(|| worst.0.id().cmp(&id))
                    .is_gt()
            })
    }

    /// The lowest similarity that may still enter, whatever its id:
    /// minus infinity until the heap is full, then the worst kept. Lets a
    /// caller skip fetching the id of most items.
    fn floor(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.limit => worst.0.similarity(),
            _ => f32::NEG_INFINITY,
        }
    }

    fn push(&mut self, item: T) {
        self.heap.push(WorstFirst(item));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    /// Best first.
    fn into_sorted(self) -> Vec<T> {
        // Ascending by "worst first" order is best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|WorstFirst(item)| item)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn repo(name: &str) -> Namespace {
        Namespace::Repo(name.parse().unwrap())
    }

    /// An entry with its vector, as the indexer applies it.
    #[derive(Clone, Debug)]
    struct Embedded {
        id: MemoryId,
        entry: Entry,
        vector: Vec<f32>,
    }

    impl Embedded {
        fn upsert(&self) -> Change {
            Change::Upsert(self.entry.clone(), self.vector.clone())
        }

        fn words(&self) -> Change {
            Change::Words(self.entry.clone())
        }
    }

    fn entry(namespace: &Namespace, vector: Vec<f32>) -> Embedded {
        let id = MemoryId::new();
        Embedded {
            id,
            entry: Entry {
                id,
                namespace: namespace.clone(),
                category: Category::Patterns,
                terms: lexical::Terms::default(),
            },
            vector,
        }
    }

    fn text_entry(namespace: &Namespace, text: &str) -> Embedded {
        let mut embedded = entry(namespace, vec![1.0, 0.0]);
        embedded.entry.terms = lexical::terms(text);
        embedded
    }

    #[test]
    fn lexical_search_ranks_by_bm25_and_survives_removals() {
        let ns = repo("a");
        let index = Index::new(2);
        let exact = text_entry(&ns, "postgres connection pool size");
        let partial = text_entry(&ns, "the connection to the old office printer downstairs");
        let none = text_entry(&ns, "lunch on fridays");
        let gone = text_entry(&ns, "postgres postgres postgres pool");
        index.apply(
            [&exact, &partial, &none, &gone]
                .map(Embedded::upsert)
                .into(),
        );
        index.apply(vec![Change::Remove(gone.id)]);
        let query = lexical::query_terms("Postgres pool?");
        let hits = index
            .snapshot()
            .lexical_search(std::slice::from_ref(&ns), &query, &[], 10, all);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [exact.id]);
        assert!(
            (hits[0].coverage - 1.0).abs() < 1e-6,
            "both query words match"
        );
        assert_eq!(hits[0].matched_terms, 2);
        let query = lexical::query_terms("connection");
        let hits = index.snapshot().lexical_search(&[ns], &query, &[], 10, all);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].id, exact.id, "the shorter document ranks first");
    }

    #[test]
    fn lexical_hits_carry_their_cosine_to_the_closest_query() {
        let ns = repo("a");
        let index = Index::new(2);
        let hit = text_entry(&ns, "postgres pool"); // its vector is (1, 0)
        index.apply(vec![hit.upsert()]);
        let query = lexical::query_terms("postgres");
        let hits = index.snapshot().lexical_search(
            &[ns],
            &query,
            &[vec![0.0, 2.0], vec![3.0, 4.0]],
            10,
            all,
        );
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [hit.id]);
        assert!((hits[0].similarity - 0.6).abs() < 1e-6, "{hits:?}");
    }

    #[test]
    fn words_come_first_and_the_vector_moves_the_entry_across() {
        let ns = repo("a");
        let index = Index::new(2);
        let early = text_entry(&ns, "zanzibar deployment key");
        index.apply(vec![early.words()]);
        let query = lexical::query_terms("zanzibar deployment");
        let search = |snapshot: &Snapshot| {
            snapshot.lexical_search(
                std::slice::from_ref(&ns),
                &query,
                &[vec![1.0, 0.0]],
                10,
                all,
            )
        };
        let snapshot = index.snapshot();
        let hits = search(&snapshot);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [early.id]);
        assert!(hits[0].vector_pending);
        assert!(
            hits[0].similarity.abs() < f32::EPSILON,
            "no vector, no cosine"
        );
        assert!(
            snapshot
                .search(std::slice::from_ref(&ns), &[vec![1.0, 0.0]], 10, all)
                .is_empty(),
            "the vector search sees only what has a vector"
        );
        assert_eq!((snapshot.len(), snapshot.words_only()), (0, 1));
        assert!(
            snapshot
                .lexical_search(std::slice::from_ref(&ns), &query, &[], 10, |_, _| false)
                .is_empty(),
            "the filters apply to words-only entries too"
        );

        index.apply(vec![early.upsert()]);
        let snapshot = index.snapshot();
        assert_eq!((snapshot.len(), snapshot.words_only()), (1, 0));
        let hits = search(&snapshot);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [early.id]);
        assert!(!hits[0].vector_pending);
        assert!((hits[0].similarity - 1.0).abs() < 1e-6);
        assert_eq!(
            snapshot.search(&[ns], &[vec![1.0, 0.0]], 10, all)[0].id,
            early.id
        );
    }

    #[test]
    fn a_removal_clears_either_side() {
        let ns = repo("a");
        let index = Index::new(2);
        let pending = text_entry(&ns, "zanzibar rotation");
        let embedded = text_entry(&ns, "zanzibar keys");
        let same_batch = text_entry(&ns, "zanzibar tuesdays");
        index.apply(vec![pending.words(), embedded.upsert()]);
        index.apply(vec![
            Change::Remove(pending.id),
            Change::Remove(embedded.id),
            same_batch.words(),
            Change::Remove(same_batch.id),
        ]);
        let snapshot = index.snapshot();
        assert_eq!((snapshot.len(), snapshot.words_only()), (0, 0));
        let query = lexical::query_terms("zanzibar");
        assert!(
            snapshot
                .lexical_search(&[ns], &query, &[], 10, all)
                .is_empty()
        );
    }

    #[test]
    fn words_and_vectors_of_one_batch_count_once_in_the_statistics() {
        let ns = repo("a");
        let index = Index::new(2);
        let memories: Vec<Embedded> = (0..5)
            .map(|i| text_entry(&ns, &format!("shared word{i}")))
            .collect();
        index.apply(memories.iter().map(Embedded::words).collect());
        index.apply(memories[..2].iter().map(Embedded::upsert).collect());
        let snapshot = index.snapshot();
        assert_eq!((snapshot.len(), snapshot.words_only()), (2, 3));
        let hits = snapshot.lexical_search(&[ns], &lexical::query_terms("word3"), &[], 10, all);
        // idf of a word one document in five holds, as if all were embedded.
        assert_eq!(hits.len(), 1);
        assert!((hits[0].matched_idf - lexical::idf(5, 1)).abs() < 1e-6);
    }

    fn all(_: MemoryId, _: Category) -> bool {
        true
    }

    #[test]
    fn search_ranks_by_cosine_and_normalises_both_sides() {
        let ns = repo("a");
        let index = Index::new(3);
        let near = entry(&ns, vec![10.0, 1.0, 0.0]);
        let far = entry(&ns, vec![0.0, 0.0, 5.0]);
        let middle = entry(&ns, vec![1.0, 1.0, 0.0]);
        index.apply([&near, &far, &middle].map(Embedded::upsert).into());
        let hits = index
            .snapshot()
            .search(&[ns], &[vec![3.0, 0.0, 0.0]], 2, all);
        assert_eq!(
            hits.iter().map(|h| h.id).collect::<Vec<_>>(),
            [near.id, middle.id]
        );
        assert!((hits[0].similarity - 10.0 / 101f32.sqrt()).abs() < STORAGE_ERROR);
    }

    #[test]
    fn search_never_leaves_the_requested_namespaces() {
        let (mine, theirs) = (repo("mine"), repo("theirs"));
        let index = Index::new(2);
        let own = entry(&mine, vec![0.0, 1.0]);
        let foreign = entry(&theirs, vec![1.0, 0.0]);
        index.apply(vec![own.upsert(), foreign.upsert()]);
        let hits = index.snapshot().search(&[mine], &[vec![1.0, 0.0]], 10, all);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [own.id]);
    }

    #[test]
    fn each_memory_keeps_its_best_query() {
        let ns = repo("a");
        let index = Index::new(2);
        let x = entry(&ns, vec![1.0, 0.0]);
        let y = entry(&ns, vec![0.0, 1.0]);
        index.apply(vec![x.upsert(), y.upsert()]);
        let hits = index.snapshot().search(
            std::slice::from_ref(&ns),
            &[vec![0.0, 1.0], vec![1.0, 0.1]],
            10,
            all,
        );
        let by_id: HashMap<_, _> = hits.iter().map(|h| (h.id, h.query)).collect();
        assert_eq!(by_id[&y.id], 0);
        assert_eq!(by_id[&x.id], 1);
        assert_eq!(hits.len(), 2, "one hit per memory, not per query");
    }

    #[test]
    fn the_filter_is_applied_before_the_limit() {
        let ns = repo("a");
        let index = Index::new(2);
        let best = entry(&ns, vec![1.0, 0.0]);
        let second = entry(&ns, vec![1.0, 0.5]);
        index.apply(vec![best.upsert(), second.upsert()]);
        let hits = index
            .snapshot()
            .search(&[ns], &[vec![1.0, 0.0]], 1, |id, _| id != best.id);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [second.id]);
    }

    #[test]
    fn a_held_snapshot_does_not_change_under_later_updates() {
        let ns = repo("a");
        let index = Index::new(2);
        let first = entry(&ns, vec![1.0, 0.0]);
        index.apply(vec![first.upsert()]);
        let before = index.snapshot();
        index.apply(vec![
            Change::Remove(first.id),
            entry(&ns, vec![0.0, 1.0]).upsert(),
        ]);
        assert_eq!(before.len(), 1);
        assert!(before.vector(&ns, first.id).is_some());
        assert!(index.snapshot().vector(&ns, first.id).is_none());
        assert_eq!(index.snapshot().len(), 1);
    }

    #[test]
    fn an_upsert_replaces_and_an_emptied_namespace_disappears() {
        let ns = repo("a");
        let index = Index::new(2);
        let mut memory = entry(&ns, vec![1.0, 0.0]);
        index.apply(vec![memory.upsert()]);
        memory.vector = vec![0.0, 2.0];
        index.apply(vec![memory.upsert()]);
        assert_eq!(
            index.snapshot().vector(&ns, memory.id),
            Some(vec![0.0, 1.0])
        );
        assert_eq!(index.snapshot().len(), 1);
        index.apply(vec![Change::Remove(memory.id)]);
        assert_eq!(index.snapshot().namespace_sizes().count(), 0);
    }

    #[test]
    fn a_zero_or_misshapen_query_matches_nothing_useful() {
        let ns = repo("a");
        let index = Index::new(2);
        index.apply(vec![entry(&ns, vec![1.0, 0.0]).upsert()]);
        let snapshot = index.snapshot();
        assert!(
            snapshot
                .search(std::slice::from_ref(&ns), &[vec![1.0, 0.0, 0.0]], 5, all)
                .is_empty()
        );
        let zero = snapshot.search(&[ns], &[vec![0.0, 0.0]], 5, all);
        assert!(zero.iter().all(|hit| hit.similarity == 0.0));
    }

    /// Every remaining entry's similarity to `query` in `f32`, best first.
    fn brute_force(entries: &[Embedded], removed: &HashSet<MemoryId>, query: &[f32]) -> Vec<f32> {
        let mut q = query.to_vec();
        normalise(&mut q);
        let mut exact: Vec<f32> = entries
            .iter()
            .filter(|e| !removed.contains(&e.id))
            .map(|e| {
                let mut v = e.vector.clone();
                normalise(&mut v);
                dot(&q, &v)
            })
            .collect();
        exact.sort_by(|a, b| b.total_cmp(a));
        exact
    }

    /// The most half precision moves a unit vector's similarity to a unit
    /// query: 2⁻¹¹ relative per component, plus `f32` rounding.
    const STORAGE_ERROR: f32 = 1.0 / 2048.0 + 1e-5;

    /// The ids of the `pool` remaining entries the one-bit scan ranks
    /// first (ties by id, as the index breaks them).
    fn pool_of(
        entries: &[Embedded],
        removed: &HashSet<MemoryId>,
        query: &[f32],
        pool: usize,
    ) -> HashSet<MemoryId> {
        let coder = quantized::Coder::new(query.len());
        let mut q = query.to_vec();
        normalise(&mut q);
        let coded = [quantized::Query::new(&coder, &q)];
        let mut estimated: Vec<(u16, MemoryId)> = entries
            .iter()
            .filter(|e| !removed.contains(&e.id))
            .map(|e| {
                let mut v = e.vector.clone();
                normalise(&mut v);
                let mut codes = quantized::Codes::new(coder.words());
                codes.push(&coder.code(&v));
                (quantized::scan(&coded, &codes, u16::MAX)[0].differing, e.id)
            })
            .collect();
        estimated.sort_unstable();
        estimated.iter().take(pool).map(|&(_, id)| id).collect()
    }

    proptest! {
        /// Over random contents spanning several chunks and random
        /// removals: the full scan matches a brute-force sort of the `f32`
        /// vectors within half precision's error, and the search returns
        /// exactly the full scan's best of the pool the one-bit codes
        /// rank first, with the same similarities, best first: all of the
        /// full scan's results whenever the pool holds every entry.
        #[test]
        fn search_is_the_full_scan_over_the_pool_of_best_codes(
            vectors in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 40), 1..2500),
            query in prop::collection::vec(-1.0f32..1.0, 40),
            remove_every in 2usize..7,
            limit in 1usize..40,
            pool in 1usize..3000,
        ) {
            let ns = repo("a");
            let index = Index::new(40);
            let entries: Vec<Embedded> = vectors.into_iter().map(|v| entry(&ns, v)).collect();
            index.apply(entries.iter().map(Embedded::upsert).collect());
            let removed: HashSet<MemoryId> =
                entries.iter().step_by(remove_every).map(|e| e.id).collect();
            index.apply(removed.iter().copied().map(Change::Remove).collect());
            let remaining = entries.len() - removed.len();
            let snapshot = index.snapshot();
            prop_assert_eq!(snapshot.len(), remaining);

            let exact = brute_force(&entries, &removed, &query);
            let everything = snapshot.exact_search(std::slice::from_ref(&ns), std::slice::from_ref(&query), remaining);
            prop_assert_eq!(everything.len(), exact.len());
            for (hit, similarity) in everything.iter().zip(&exact) {
                prop_assert!((hit.similarity - similarity).abs() <= STORAGE_ERROR);
            }

            let pooled = pool_of(&entries, &removed, &query, pool.max(limit));
            let expected: Vec<Hit> = everything
                .iter()
                .filter(|hit| pooled.contains(&hit.id))
                .take(limit)
                .copied()
                .collect();
            let hits = snapshot.search_in_pool(std::slice::from_ref(&ns), std::slice::from_ref(&query), limit, pool, all);
            prop_assert_eq!(&hits, &expected);
            if pool >= remaining {
                let full = snapshot.exact_search(&[ns], std::slice::from_ref(&query), limit);
                prop_assert_eq!(hits, full);
            }
        }

        /// Over documents of a few words from a small vocabulary (so scores
        /// tie often) spanning several chunks, some with their vector
        /// pending, and a filter that turns some down: the lexical search
        /// returns exactly a brute-force BM25 ranking's best, best first,
        /// ties broken by id, each with its count of matched terms.
        #[test]
        fn lexical_search_is_the_brute_force_bm25_ranking(
            documents in prop::collection::vec(prop::collection::vec(0usize..8, 1..6), 1..2600),
            query in prop::collection::vec(0usize..10, 1..5),
            limit in 1usize..40,
            pending_every in 2usize..9,
            refuse_every in 2usize..11,
        ) {
            const WORDS: [&str; 10] = [
                "deploy", "helm", "postgres", "pool", "retry", "jitter", "tracing", "kafka", "absent", "missing",
            ];
            let ns = repo("a");
            let index = Index::new(2);
            let entries: Vec<Embedded> = documents
                .iter()
                .map(|words| {
                    let text: Vec<&str> = words.iter().map(|&word| WORDS[word]).collect();
                    text_entry(&ns, &text.join(" "))
                })
                .collect();
            index.apply(
                entries
                    .iter()
                    .enumerate()
                    .map(|(n, e)| if n % pending_every == 0 { e.words() } else { e.upsert() })
                    .collect(),
            );
            let refused: HashSet<MemoryId> =
                entries.iter().step_by(refuse_every).map(|e| e.id).collect();
            let text: Vec<&str> = query.iter().map(|&word| WORDS[word]).collect();
            let terms = lexical::query_terms(&text.join(" "));

            let total_length: u64 = entries.iter().map(|e| u64::from(e.entry.terms.length)).sum();
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let average_length = total_length as f32 / entries.len() as f32;
            let count = |e: &Embedded, term: &lexical::Term| {
                e.entry.terms.counts.iter().find(|(t, _)| t == term).map(|&(_, n)| n)
            };
            let idfs: Vec<f32> = terms
                .iter()
                .map(|term| {
                    let frequency = entries.iter().filter(|e| count(e, term).is_some()).count();
                    lexical::idf(entries.len(), frequency)
                })
                .collect();
            let mut expected: Vec<(f32, MemoryId, u32)> = entries
                .iter()
                .filter(|e| !refused.contains(&e.id))
                .map(|e| {
                    let score = terms.iter().zip(&idfs).fold(0.0f32, |score, (term, idf)| {
                        count(e, term).map_or(score, |n| {
                            score + lexical::weight(*idf, n, e.entry.terms.length, average_length)
                        })
                    });
                    let matched = terms.iter().filter(|term| count(e, term).is_some()).count();
                    (score, e.id, u32::try_from(matched).unwrap())
                })
                .filter(|(score, _, _)| *score > 0.0)
                .collect();
            expected.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            expected.truncate(limit);

            let hits = index.snapshot().lexical_search(&[ns], &terms, &[], limit, |id, _| {
                !refused.contains(&id)
            });
            let found: Vec<(f32, MemoryId, u32)> =
                hits.iter().map(|hit| (hit.score, hit.id, hit.matched_terms)).collect();
            prop_assert_eq!(found, expected);
        }
    }
}
