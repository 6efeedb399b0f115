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
//! takes an id off whichever side holds it. An embedded memory of several
//! sentences also has a row per passage ([`passages`]) on a third side,
//! under its own id, which only [`Snapshot::search_passages`] reads.
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
//!
//! A namespace of more than `index.approximate_above` rows is searched
//! through an approximate index instead of a full scan: its chunks are
//! grouped into lists around centroids of the codes ([`partition`]), and
//! the search scans the lists nearest its queries. It is built and kept
//! by the writer like the rest of a snapshot, so readers never wait on
//! it, and rebuilt from the embedding cache at start with the index.
//!
//! A namespace left unread (`index.idle_minutes`), or the least recently
//! read while the index is above its ceiling (`index.max_memory_mb`), is
//! dropped from memory and loaded again by its next read ([`residency`]).
//!
//! The parts: [`snapshot`] (a state and its searches), [`chunks`] (one
//! side's namespaces of column-wise chunks), [`partition`] (the
//! approximate index of a large namespace), [`top_k`] (the bounded heap
//! both searches rank with) and [`vector`] (the vector arithmetic).

mod chunk;
mod chunks;
pub mod indexer;
pub mod lexical;
mod partition;
pub mod passages;
mod pool;
pub mod quantized;
mod residency;
mod scan;
mod snapshot;
mod top_k;
mod vector;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::ArcSwap;

pub use residency::{LoadRequest, ResidencyView, spawn_sweeper};
pub use snapshot::{Footprint, Found, Lexical, LexicalHit, Probed, Snapshot};
pub use vector::{cosine, normalise};

use crate::memory::{Category, MemoryId, Namespace};

/// A memory's place in the index, without its vector.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: MemoryId,
    pub namespace: Namespace,
    pub category: Category,
    /// Its words, for lexical search.
    pub terms: lexical::Terms,
}

/// A memory's vectors (any length-`dimensions` vectors; they are
/// normalised on insert): its whole text's, and one per passage
/// ([`passages`]), in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vectors {
    pub whole: Vec<f32>,
    pub passages: Vec<Vec<f32>>,
}

impl From<Vec<f32>> for Vectors {
    /// The vector of a text without passages.
    fn from(whole: Vec<f32>) -> Self {
        Self {
            whole,
            passages: Vec::new(),
        }
    }
}

/// One change to the index; each replaces whatever the index held of the
/// same id, on either side.
#[derive(Clone, Debug)]
pub enum Change {
    /// The entry with its vectors: both searches find it.
    Upsert(Entry, Vectors),
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
    /// Whether one of its passages gave it, at the passage weight, rather
    /// than its whole text.
    pub passage: bool,
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
    /// Namespaces of more rows than this are searched through an
    /// approximate index (`index.approximate_above`).
    approximate_above: usize,
    /// Which namespaces are in memory, and when they leave it.
    residency: residency::Residency,
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
            approximate_above: crate::config::DEFAULT_APPROXIMATE_ABOVE,
            residency: residency::Residency::new(crate::config::Residency::default()),
        }
    }

    /// This index, dropping namespaces from memory as `settings` say
    /// (`index.idle_minutes`, `index.max_memory_mb`).
    #[must_use]
    pub fn evicting(mut self, settings: crate::config::Residency) -> Self {
        self.residency = residency::Residency::new(settings);
        self
    }

    /// This index, searching namespaces of more than `rows` rows through
    /// an approximate index.
    #[must_use]
    pub fn approximate_above(mut self, rows: usize) -> Self {
        self.approximate_above = rows;
        self
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
        self.apply_grouping(changes, Grouping::AsTheyGrow);
    }

    /// [`Index::apply`], grouping the namespaces it changes as `grouping`
    /// says.
    pub fn apply_grouping(&self, changes: Vec<Change>, grouping: Grouping) {
        if changes.is_empty() {
            return;
        }
        // Poisoned only if a writer panicked; the location map is updated
        // together with the snapshot swap, so it is still consistent.
        let mut locations = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let first_length = changes.iter().find_map(|change| match change {
            Change::Upsert(_, vectors) => Some(vectors.whole.len()),
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
        let mut edits = SideEdits::default();
        for change in changes {
            let id = change.id();
            if let Some((namespace, side)) = locations.remove(&id) {
                match side {
                    Side::Embedded => {
                        edits.passages.remove(namespace.clone(), id);
                        edits.embedded.remove(namespace, id);
                    }
                    Side::WordsOnly => edits.words_only.remove(namespace, id),
                }
            }
            match change {
                Change::Upsert(entry, vectors) => {
                    let Vectors {
                        mut whole,
                        passages,
                    } = vectors;
                    assert!(
                        std::iter::once(&whole)
                            .chain(&passages)
                            .all(|vector| vector.len() == dimensions),
                        "the indexer checks dimensions before applying"
                    );
                    locations.insert(id, (entry.namespace.clone(), Side::Embedded));
                    for mut passage in passages {
                        normalise(&mut passage);
                        // A passage is found by its meaning only: its
                        // words are the whole memory's.
                        let row = Entry {
                            terms: lexical::Terms::default(),
                            ..entry.clone()
                        };
                        edits.passages.add(row, passage);
                    }
                    normalise(&mut whole);
                    edits.embedded.add(entry, whole);
                }
                Change::Words(entry) => {
                    locations.insert(id, (entry.namespace.clone(), Side::WordsOnly));
                    edits.words_only.add(entry, Vec::new());
                }
                Change::Remove(_) => {}
            }
        }

        let approximate_above = match grouping {
            Grouping::AsTheyGrow => self.approximate_above,
            Grouping::Deferred => usize::MAX,
        };
        let current = self.snapshot.load();
        self.snapshot
            .store(Arc::new(current.updated(coder, edits, approximate_above)));
    }

    /// Groups for their approximate index the namespaces past
    /// `index.approximate_above` that are not (those a deferred backlog
    /// left as one run), in one swap.
    pub fn group(&self) {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(coder) = self.coder.get() else {
            return;
        };
        let current = self.snapshot.load();
        self.snapshot
            .store(Arc::new(current.grouped(coder, self.approximate_above)));
    }
}

/// How a swap treats the namespaces it changes that are past
/// `index.approximate_above`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Grouped into their lists as they grow, so searches probe a few:
    /// while the service serves.
    AsTheyGrow,
    /// Kept as one run until [`Index::group`]: for a backlog nobody
    /// searches yet (a start), where each swap would otherwise copy the
    /// last chunk of every list its changes fall into, most of a large
    /// namespace each time.
    Deferred,
}

/// What one [`Index::apply`] does to each side of the index.
struct SideEdits {
    embedded: Edits,
    /// Rows of the embedded memories' passages, under their memories' ids.
    passages: Edits,
    words_only: Edits,
}

impl Default for SideEdits {
    fn default() -> Self {
        Self {
            embedded: Edits::of_side(Rows::OneEach),
            passages: Edits::of_side(Rows::SeveralEach),
            words_only: Edits::of_side(Rows::OneEach),
        }
    }
}

/// What one [`Index::apply`] does to one side of the index.
struct Edits {
    removals: HashMap<Namespace, HashSet<MemoryId>>,
    /// Entries with their vectors (empty on the words-only side).
    additions: HashMap<Namespace, Vec<(Entry, Vec<f32>)>>,
    rows: Rows,
}

/// How many rows a memory has on a side of the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    /// One: its removal is done once as many rows as memories removed
    /// are gone, and the rest of the side is not looked through.
    OneEach,
    /// Any number (its passages): every chunk is looked through.
    SeveralEach,
}

impl Edits {
    fn of_side(rows: Rows) -> Self {
        Self {
            removals: HashMap::new(),
            additions: HashMap::new(),
            rows,
        }
    }

    fn remove(&mut self, namespace: Namespace, id: MemoryId) {
        // Added earlier in this same batch: drop it there too.
        if let Some(pending) = self.additions.get_mut(&namespace) {
            pending.retain(|(entry, _)| entry.id != id);
        }
        self.removals.entry(namespace).or_default().insert(id);
    }

    fn add(&mut self, entry: Entry, vector: Vec<f32>) {
        self.additions
            .entry(entry.namespace.clone())
            .or_default()
            .push((entry, vector));
    }
}

#[cfg(test)]
mod tests;
