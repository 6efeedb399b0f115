//! One immutable state of the index: its sides' namespaces and the
//! vectors' coder, with what reads them whole (sizes, footprint, stored
//! vectors). Its two searches live in [`vector_search`] and
//! [`lexical_search`]; [`Snapshot::updated`] builds the next state.

mod lexical_search;
mod vector_search;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use half::f16;

pub use lexical_search::{Lexical, LexicalHit};
pub use vector_search::{Found, Probed};

use super::chunk::{Chunk, Posting};
use super::chunks::Namespaces;
use super::{SideEdits, lexical, normalise, quantized};
use crate::memory::{Category, MemoryId, Namespace};

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

impl Footprint {
    /// Every part's bytes.
    pub fn total(&self) -> usize {
        self.vectors + self.codes + self.columns + self.postings
    }
}

/// One immutable state of the index.
#[derive(Default)]
pub struct Snapshot {
    /// Memories with their vectors.
    embedded: Namespaces,
    /// The embedded memories' passages: a row each, under the memory's id,
    /// without words.
    passages: Namespaces,
    /// Memories whose words are indexed and whose vectors are not yet.
    words_only: Namespaces,
    /// The vectors' length and their codes' rotation.
    coder: Arc<quantized::Coder>,
}

impl Snapshot {
    /// This state with `edits` applied to each side, its vectors coded by
    /// `coder`; a namespace of more than `approximate_above` rows on a
    /// side gets an approximate index there.
    pub(super) fn updated(
        &self,
        coder: Arc<quantized::Coder>,
        edits: SideEdits,
        approximate_above: usize,
    ) -> Self {
        Self {
            embedded: self
                .embedded
                .updated(&coder, edits.embedded, approximate_above),
            passages: self
                .passages
                .updated(&coder, edits.passages, approximate_above),
            words_only: self.words_only.updated(
                &quantized::Coder::default(),
                edits.words_only,
                approximate_above,
            ),
            coder,
        }
    }

    /// This state with every namespace past `approximate_above` rows
    /// that has no approximate index given one.
    pub(super) fn grouped(&self, coder: &quantized::Coder, approximate_above: usize) -> Self {
        Self {
            embedded: self.embedded.grouped(coder, approximate_above),
            passages: self.passages.grouped(coder, approximate_above),
            words_only: self.words_only.clone(),
            coder: self.coder.clone(),
        }
    }

    /// Entries with their vectors, across every namespace.
    pub fn len(&self) -> usize {
        self.embedded.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Passage rows, across every namespace.
    pub fn passages(&self) -> usize {
        self.passages.len()
    }

    /// What the columns of every side hold, in bytes.
    pub fn footprint(&self) -> Footprint {
        footprint_of(
            self.sides()
                .flat_map(|side| side.0.values())
                .flat_map(|index| index.chunks.iter()),
        )
    }

    fn sides(&self) -> impl Iterator<Item = &Namespaces> {
        [&self.embedded, &self.passages, &self.words_only].into_iter()
    }

    /// The namespaces with any row on any side.
    pub fn namespaces(&self) -> HashSet<&Namespace> {
        self.sides().flat_map(|side| side.0.keys()).collect()
    }

    /// Each namespace's bytes on every side: `count(namespace, address,
    /// recount)` answers a side's, where `address` identifies that side's
    /// state of the namespace (unchanged while it is), so a caller can
    /// keep what `recount` computed.
    pub(super) fn namespace_footprints(
        &self,
        mut count: impl FnMut(&Namespace, usize, &dyn Fn() -> usize) -> usize,
    ) -> Vec<(&Namespace, usize)> {
        let mut sizes: HashMap<&Namespace, usize> = HashMap::new();
        for side in self.sides() {
            for (namespace, index) in &side.0 {
                let address = Arc::as_ptr(index) as usize;
                let recount = || footprint_of(index.chunks.iter()).total();
                *sizes.entry(namespace).or_default() += count(namespace, address, &recount);
            }
        }
        sizes.into_iter().collect()
    }

    /// The ids of every row of `namespaces`, on every side.
    pub(super) fn ids_in(&self, namespaces: &[Namespace]) -> Vec<MemoryId> {
        self.sides()
            .flat_map(|side| side.chunks_of(namespaces))
            .flat_map(|chunk| chunk.ids.iter().copied())
            .collect()
    }

    /// This state without `namespaces`' rows.
    pub(super) fn without_namespaces(&self, namespaces: &[Namespace]) -> Self {
        let without = |side: &Namespaces| {
            let mut side = side.clone();
            for namespace in namespaces {
                side.0.remove(namespace);
            }
            side
        };
        Self {
            embedded: without(&self.embedded),
            passages: without(&self.passages),
            words_only: without(&self.words_only),
            coder: self.coder.clone(),
        }
    }

    /// The namespaces whose whole texts have an approximate index, with
    /// its number of lists.
    pub fn approximate(&self) -> impl Iterator<Item = (&Namespace, usize)> {
        self.embedded.partitioned()
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
        self.rows_of(&self.embedded)
    }

    /// Every passage row's memory id and (normalised, stored) vector; a
    /// memory's passages in their order.
    pub fn passage_entries(&self) -> impl Iterator<Item = (MemoryId, Vec<f32>)> {
        self.rows_of(&self.passages)
    }

    fn rows_of<'a>(
        &'a self,
        side: &'a Namespaces,
    ) -> impl Iterator<Item = (MemoryId, Vec<f32>)> + 'a {
        let dimensions = self.dimensions();
        side.0
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

/// What `chunks`' columns hold, in bytes.
fn footprint_of<'a>(chunks: impl Iterator<Item = &'a Arc<Chunk>>) -> Footprint {
    let mut total = Footprint::default();
    for chunk in chunks {
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
