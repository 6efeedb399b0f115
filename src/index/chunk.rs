//! A chunk of the index: up to [`CHUNK_CAPACITY`] entries of one
//! namespace stored column-wise (ids, categories, vectors, their codes,
//! the words' postings), shared between snapshots behind an `Arc` and
//! copied only when an update touches it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU16, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::{lexical, quantized};
use crate::memory::{Category, MemoryId};

/// Entries per chunk: small enough that copying one on update is cheap,
/// large enough that a scan is mostly straight-line arithmetic.
pub(super) const CHUNK_CAPACITY: usize = 1024;

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
    pub(super) fn new(coder: &quantized::Coder) -> Self {
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
    pub(super) fn reserve_exact(&mut self, coder: &quantized::Coder, rows: usize) {
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
    pub(super) fn push(
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

    pub(super) fn next_slot(&self) -> u16 {
        u16::try_from(self.ids.len()).expect("a chunk holds at most 1024 entries")
    }

    /// Adds an entry's other columns, its vector and code already in.
    pub(super) fn push_row(&mut self, id: MemoryId, category: Category, length: u32) {
        self.ids.push(id);
        self.categories.push(category);
        self.lengths.push(length);
        self.total_length += u64::from(length);
    }

    /// A copy without the `removed` entries; the others keep their order,
    /// vectors, codes and postings.
    pub(super) fn without(&self, removed: &HashSet<MemoryId>, coder: &quantized::Coder) -> Self {
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
