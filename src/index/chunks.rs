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

use super::chunk::{CHUNK_CAPACITY, Chunk};
use super::partition::{self, Partition};
use super::{Edits, Entry, Rows, quantized};
use crate::memory::{MemoryId, Namespace};

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
                edits.removals.get(&namespace).map(|ids| Removed {
                    ids,
                    rows: edits.rows,
                }),
                edits.additions.remove(&namespace).unwrap_or_default(),
                approximate_above,
            );
            if next.len() > 0 {
                namespaces.insert(namespace, Arc::new(next));
            }
        }
        Self(namespaces)
    }

    /// These namespaces, each of more than `approximate_above` rows
    /// without an approximate index given one; the others shared.
    pub(super) fn grouped(&self, coder: &quantized::Coder, approximate_above: usize) -> Self {
        let mut namespaces = self.0.clone();
        for (namespace, index) in &self.0 {
            if index.partition.is_none() && index.len() > approximate_above {
                let grouped = NamespaceIndex::updated(
                    Some(&**index),
                    coder,
                    None,
                    Vec::new(),
                    approximate_above,
                );
                namespaces.insert(namespace.clone(), Arc::new(grouped));
            }
        }
        Self(namespaces)
    }

    pub(super) fn len(&self) -> usize {
        self.0.values().map(|index| index.len()).sum()
    }

    /// The indexes of those of `namespaces` that have rows here.
    fn indexes_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<NamespaceIndex>> {
        namespaces
            .iter()
            .filter_map(|namespace| self.0.get(namespace))
    }

    /// The chunks of `namespaces`.
    pub(super) fn chunks_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<Chunk>> {
        self.indexes_of(namespaces)
            .flat_map(|index| index.chunks.iter())
    }

    /// The chunks of `namespaces` a vector search for `queries` scans:
    /// all of a namespace without an approximate index; of one with, the
    /// lists nearest each query until they hold `wanted` rows for it
    /// (`None`: all). With whether any chunk was left out.
    pub(super) fn probe<'a>(
        &'a self,
        namespaces: &'a [Namespace],
        queries: &[quantized::Query],
        wanted: Option<usize>,
    ) -> (Vec<&'a Arc<Chunk>>, bool) {
        let mut chunks = Vec::new();
        let mut narrowed = false;
        for index in self.indexes_of(namespaces) {
            match (&index.partition, wanted) {
                (Some(partition), Some(wanted)) => {
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
        self.indexes_of(namespaces)
            .map(|index| match index.partition {
                Some(_) => index.len().min(probed_rows),
                None => index.len(),
            })
            .sum()
    }

    /// The rows of `namespaces`.
    pub(super) fn rows_of(&self, namespaces: &[Namespace]) -> usize {
        self.indexes_of(namespaces).map(|index| index.len()).sum()
    }

    /// The rows of the largest of `namespaces`.
    pub(super) fn largest(&self, namespaces: &[Namespace]) -> usize {
        self.indexes_of(namespaces)
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
        removed: Option<Removed<'_>>,
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
            let mut unfound = (removed.rows == Rows::OneEach).then_some(removed.ids.len());
            for list in &mut lists {
                *list = without(list, removed.ids, &mut unfound, coder);
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

/// The memories a namespace loses on one side, and how many rows each
/// has there.
struct Removed<'a> {
    ids: &'a HashSet<MemoryId>,
    rows: Rows,
}

/// `chunks` without the `removed` entries: chunks that hold none are
/// shared, the others copied without them (and dropped if emptied).
/// `unfound`, when the side holds one row a memory, counts the rows not
/// met yet; once all are, the rest is shared without being looked
/// through (a start-up's backlog takes each batch off the front of a
/// side of a million rows).
fn without(
    chunks: &[Arc<Chunk>],
    removed: &HashSet<MemoryId>,
    unfound: &mut Option<usize>,
    coder: &quantized::Coder,
) -> Vec<Arc<Chunk>> {
    chunks
        .iter()
        .filter_map(|chunk| {
            if *unfound != Some(0) && chunk.ids.iter().any(|id| removed.contains(id)) {
                let kept = chunk.without(removed, coder);
                if let Some(unfound) = unfound {
                    *unfound = unfound.saturating_sub(chunk.ids.len() - kept.ids.len());
                }
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
