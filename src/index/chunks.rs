//! One side of the index: its namespaces, each a run of column-wise
//! chunks shared between snapshots behind `Arc`s.
//!
//! An update copies only the chunks it touches: a chunk that loses an
//! entry is rebuilt without it, new entries fill the last chunk and then
//! new ones, and every other chunk is shared with the previous snapshot.
//! A namespace above `index.approximate_above` rows keeps its chunks
//! grouped into the lists of its approximate index ([`partition`]), and
//! new entries fill their own list's last chunk.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::partition::{self, Partition};
use super::{Edits, Entry, lexical, quantized};
use crate::memory::{Category, MemoryId, Namespace};

/// Entries per chunk: small enough that copying one on update is cheap,
/// large enough that a scan is mostly straight-line arithmetic.
pub(super) const CHUNK_CAPACITY: usize = 1024;

/// One side of the index: its entries by namespace.
#[derive(Clone, Default)]
pub(super) struct Namespaces(pub(super) HashMap<Namespace, Arc<NamespaceIndex>>);

impl Namespaces {
    /// These namespaces with `edits` applied; untouched namespaces are
    /// shared, not copied. A namespace of more than `approximate_above`
    /// rows is grouped for its approximate index.
    pub(super) fn updated(
        &self,
        coder: &quantized::Coder,
        mut edits: Edits,
        approximate_above: usize,
    ) -> Self {
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
                approximate_above,
            );
            if next.len() > 0 {
                namespaces.insert(namespace, Arc::new(next));
            }
        }
        Self(namespaces)
    }

    pub(super) fn len(&self) -> usize {
        self.0.values().map(|index| index.len()).sum()
    }

    /// The chunks of `namespaces`.
    pub(super) fn chunks_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<Chunk>> {
        namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
            .flat_map(|index| index.chunks.iter())
    }

    /// The chunks of `namespaces` a vector search for `queries` scans:
    /// all of a namespace without an approximate index; of one with, its
    /// lists nearest the queries, until they hold `wanted` rows per
    /// query (`None`: all). With whether any chunk was left out.
    pub(super) fn probe<'a>(
        &'a self,
        namespaces: &'a [Namespace],
        queries: &[quantized::Query],
        wanted: Option<usize>,
    ) -> (Vec<&'a Arc<Chunk>>, bool) {
        let mut chunks = Vec::new();
        let mut narrowed = false;
        for index in namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
        {
            match (&index.partition, wanted) {
                (Some(partition), Some(wanted)) => {
                    let wanted = wanted.saturating_mul(queries.len());
                    let (probed, left_out) = partition.probe(&index.chunks, queries, wanted);
                    chunks.extend(probed);
                    narrowed |= left_out;
                }
                _ => chunks.extend(index.chunks.iter()),
            }
        }
        (chunks, narrowed)
    }

    /// About how many rows a vector search of `namespaces` scans, at
    /// `probed_rows` rows in all of a namespace with an approximate index.
    pub(super) fn searched_rows(&self, namespaces: &[Namespace], probed_rows: usize) -> usize {
        namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
            .map(|index| match index.partition {
                Some(_) => index.len().min(probed_rows),
                None => index.len(),
            })
            .sum()
    }

    /// The rows of the largest of `namespaces`.
    pub(super) fn largest(&self, namespaces: &[Namespace]) -> usize {
        namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
            .map(|index| index.len())
            .max()
            .unwrap_or(0)
    }

    /// Namespaces with an approximate index, and their lists.
    pub(super) fn partitioned(&self) -> impl Iterator<Item = (&Namespace, usize)> {
        self.0.iter().filter_map(|(namespace, index)| {
            index
                .partition
                .as_ref()
                .map(|partition| (namespace, partition.lists()))
        })
    }
}

/// The entries of one namespace, in chunks shared between snapshots;
/// above the threshold, grouped into its approximate index's lists.
#[derive(Default)]
pub(super) struct NamespaceIndex {
    pub(super) chunks: Vec<Arc<Chunk>>,
    partition: Option<Partition>,
}

impl NamespaceIndex {
    pub(super) fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.ids.len()).sum()
    }

    /// `existing` without `removed`, plus `added`. Chunks that lose nothing
    /// are shared, not copied; new entries fill their list's last chunk,
    /// then new ones. Past `approximate_above` rows the chunks are grouped
    /// into lists (again, once the namespace has outgrown them); at half
    /// of it or less they are one run again.
    fn updated(
        existing: Option<&Self>,
        coder: &quantized::Coder,
        removed: Option<&HashSet<MemoryId>>,
        added: Vec<(Entry, Vec<f32>)>,
        approximate_above: usize,
    ) -> Self {
        let partition = existing.and_then(|index| index.partition.as_ref());
        let chunks = existing
            .map(|index| index.chunks.as_slice())
            .unwrap_or_default();
        let mut lists = match partition {
            Some(partition) => partition.split(chunks),
            None => vec![chunks.to_vec()],
        };
        if let Some(removed) = removed {
            for list in &mut lists {
                *list = without(list, removed, coder);
            }
        }
        let mut pending: Vec<Vec<Coded>> = (0..lists.len()).map(|_| Vec::new()).collect();
        for (entry, vector) in added {
            let code = coder.code(&vector);
            let list = partition.map_or(0, |partition| partition.list_of(&code));
            pending[list].push((entry, vector, code));
        }
        for (list, added) in lists.iter_mut().zip(pending) {
            append(list, coder, added);
        }
        let rows: usize = lists.iter().flatten().map(|chunk| chunk.ids.len()).sum();
        let approximate = coder.words() > 0
            && match partition {
                Some(_) => rows > approximate_above / 2,
                None => rows > approximate_above,
            };
        match partition {
            Some(partition) if approximate && !partition.outgrown(rows) => {
                let (chunks, partition) = partition.regrouped(lists);
                Self {
                    chunks,
                    partition: Some(partition),
                }
            }
            _ if approximate => {
                let chunks: Vec<Arc<Chunk>> = lists.into_iter().flatten().collect();
                let (chunks, partition) = Partition::build(&chunks, coder, rows);
                Self {
                    chunks,
                    partition: Some(partition),
                }
            }
            _ => Self {
                chunks: partition::concatenated(lists).0,
                partition: None,
            },
        }
    }
}

/// An entry to add, with its vector and its code.
type Coded = (Entry, Vec<f32>, Vec<u64>);

/// `chunks` without the `removed` entries: chunks that hold none are
/// shared, the others copied without them (and dropped if emptied).
fn without(
    chunks: &[Arc<Chunk>],
    removed: &HashSet<MemoryId>,
    coder: &quantized::Coder,
) -> Vec<Arc<Chunk>> {
    chunks
        .iter()
        .filter_map(|chunk| {
            if chunk.ids.iter().any(|id| removed.contains(id)) {
                let kept = chunk.without(removed, coder);
                (!kept.ids.is_empty()).then(|| Arc::new(kept))
            } else {
                Some(chunk.clone())
            }
        })
        .collect()
}

/// Appends `added` (entries with their vectors and codes) to `chunks`:
/// the last chunk first while it has room, then new ones.
fn append(chunks: &mut Vec<Arc<Chunk>>, coder: &quantized::Coder, added: Vec<Coded>) {
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
        for (entry, vector, code) in added.by_ref().take(rows) {
            last.push(entry.id, entry.category, &vector, &code, &entry.terms);
        }
        chunks.push(Arc::new(last));
    }
}

/// Up to [`CHUNK_CAPACITY`] entries, stored column-wise: vectors are one
/// contiguous run of `dimensions`-long rows, and so are their codes (none
/// on the words-only side, whose chunks are built with 0 dimensions).
#[derive(Clone, Default)]
pub(super) struct Chunk {
    pub(super) ids: Vec<MemoryId>,
    pub(super) categories: Vec<Category>,
    /// The normalised vectors, in half precision.
    pub(super) vectors: Vec<f16>,
    /// `vectors` coded for the scan ([`quantized`]), row for row.
    pub(super) codes: quantized::Codes,
    /// Each entry's length in tokens (its terms live in `postings` only).
    pub(super) lengths: Vec<u32>,
    /// term → every entry holding it, by slot.
    pub(super) postings: HashMap<lexical::Term, Vec<Posting>>,
    pub(super) total_length: u64,
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
    pub(super) fn decode(&self, slot: usize, row: &mut [f32]) {
        let length = row.len();
        self.vectors[slot * length..(slot + 1) * length].convert_to_f32_slice(row);
    }

    /// Reads one value per cache line of `slot`'s stored vector, to bring
    /// it into the cache; returns them combined, for the caller to keep.
    pub(super) fn touch(&self, slot: usize, dimensions: usize) -> u16 {
        const VALUES_PER_LINE: usize = 64 / size_of::<f16>();
        self.vectors[slot * dimensions..(slot + 1) * dimensions]
            .iter()
            .step_by(VALUES_PER_LINE)
            .fold(0, |touched, value| touched ^ value.to_bits())
    }

    /// The stored vector of `slot`.
    pub(super) fn vector(&self, slot: usize, dimensions: usize) -> Vec<f32> {
        let mut row = vec![0.0; dimensions];
        self.decode(slot, &mut row);
        row
    }

    /// The rows within `cutoff` bits of their closest query by the codes.
    pub(super) fn approximate(
        &self,
        queries: &[quantized::Query],
        cutoff: &AtomicU16,
    ) -> Vec<quantized::Near> {
        quantized::scan(queries, &self.codes, cutoff.load(Ordering::Relaxed))
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

    /// An empty chunk with room for `rows` entries, and no more.
    pub(super) fn with_room(coder: &quantized::Coder, rows: usize) -> Self {
        let mut chunk = Self::new(coder);
        chunk.reserve_exact(coder, rows);
        chunk
    }

    /// Adds an entry: its (normalised) vector and its code are stored
    /// here.
    fn push(
        &mut self,
        id: MemoryId,
        category: Category,
        vector: &[f32],
        code: &[u64],
        terms: &lexical::Terms,
    ) {
        let slot = self.next_slot();
        for &(term, frequency) in &terms.counts {
            self.postings
                .entry(term)
                .or_default()
                .push((slot, u16::try_from(frequency).unwrap_or(u16::MAX)));
        }
        self.codes.push(code);
        self.vectors
            .extend(vector.iter().copied().map(f16::from_f32));
        self.push_row(id, category, terms.length);
    }

    /// Copies the entry in `slot` of `from` here, with its postings
    /// `terms` (its terms and their frequencies, as `from` holds them).
    pub(super) fn push_from(
        &mut self,
        from: &Self,
        slot: usize,
        terms: &[(lexical::Term, u16)],
        dimensions: usize,
    ) {
        let new_slot = self.next_slot();
        for &(term, frequency) in terms {
            self.postings
                .entry(term)
                .or_default()
                .push((new_slot, frequency));
        }
        self.codes.push(&from.codes.row(slot));
        self.vectors
            .extend_from_slice(&from.vectors[slot * dimensions..(slot + 1) * dimensions]);
        self.push_row(from.ids[slot], from.categories[slot], from.lengths[slot]);
    }

    /// Each slot's terms with their frequencies, from the postings.
    pub(super) fn terms_by_slot(&self) -> Vec<Vec<(lexical::Term, u16)>> {
        let mut terms = vec![Vec::new(); self.ids.len()];
        for (&term, postings) in &self.postings {
            for &(slot, frequency) in postings {
                terms[usize::from(slot)].push((term, frequency));
            }
        }
        terms
    }

    /// Whether the entry in `slot` holds `term` (postings are in slot
    /// order).
    pub(super) fn holds(&self, term: &lexical::Term, slot: usize) -> bool {
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
pub(super) type Posting = (u16, u16);
