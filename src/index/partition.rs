//! The approximate index of a large namespace: an inverted file over the
//! one-bit codes ([`quantized`]).
//!
//! Above `index.approximate_above` rows, a namespace's rows are grouped
//! into lists by their nearest centroid, and each list is a run of the
//! namespace's chunks. Centroids are codes themselves, trained by k-means
//! in the codes' space (each centroid bit the majority of its members'),
//! so a row's list is found with the same XOR and popcount as the scan,
//! from the code the chunk already keeps. A search scans only the chunks
//! of the lists whose centroids are nearest its queries, enough of them
//! for [`probed_rows`] rows a query, and rescores its pool as the full
//! scan does (a pool sized for the whole namespace, whose nearest rows
//! these are); a row whose true neighbours sit in lists it did not probe
//! is what the index can miss (recall is measured by `engram-bench
//! scale`, not bounded).
//!
//! A new row joins its nearest list's last chunk; a removal rebuilds its
//! chunk as the flat layout does. The centroids are trained again when
//! the namespace has grown [`RETRAIN_GROWTH`] times since they were, so
//! the lists stay near their trained size.

use std::sync::Arc;

use super::chunk::{CHUNK_CAPACITY, Chunk};
use super::quantized::{self, Coder, Codes, Query};

/// The rows a search scans per query, at least: the nearest lists until
/// their rows reach it, or [`PROBED_SHARE`] of the namespace if more.
pub(super) const PROBED_ROWS: usize = 16 * 1024;

/// The share of a large namespace's rows a search scans per query (one
/// in this many). Measured on the bench's corpus (`docs/benchmarks.md`,
/// "Search at scale"): at a million rows in 2,000 lists, recall@10
/// against the exact scan was 0.97 probing 16,384 rows and 0.99 probing
/// 32,768 (pool 512); at 200,000 rows, 1.0 probing 16,384.
const PROBED_SHARE: usize = 32;

/// The rows a search of a namespace of `rows` rows scans per query.
pub(super) fn probed_rows(rows: usize) -> usize {
    PROBED_ROWS.max(rows / PROBED_SHARE)
}

/// The namespace's growth since its centroids were trained at which they
/// are trained again.
const RETRAIN_GROWTH: usize = 4;

/// Rows of the training sample per centroid.
const SAMPLE_PER_LIST: usize = 32;

/// Rounds of k-means: the lists settle in a few.
const ROUNDS: usize = 6;

/// The lists a query ranks by its rotated vector, as a multiple of those
/// its rows would need were the lists even, plus [`SHORTLIST_SPARE`]:
/// the rest are ranked by their codes' differing bits only, and ranked
/// finely only if the shortlist falls short of the rows.
const SHORTLIST: usize = 4;
const SHORTLIST_SPARE: usize = 16;

/// The most lists: a list's number is a row of the centroids' codes,
/// which the scan numbers in 16 bits.
const MAX_LISTS: usize = u16::MAX as usize;

/// A namespace's lists.
pub(super) struct Partition {
    /// One code per list, for finding a row's list.
    centroids: Arc<Codes>,
    /// The same codes one after another, for ranking the lists for a
    /// query ([`quantized::Leaning`]).
    directions: Arc<Vec<u64>>,
    /// Where each list's chunks end in the namespace's chunks.
    ends: Vec<usize>,
    /// The namespace's rows when the centroids were trained.
    trained_for: usize,
}

/// How many lists `rows` rows are grouped into: about twice the square
/// root, and no fewer than [`MIN_LIST_ROWS`] rows a list. Finer lists
/// hold a query's neighbours in fewer rows (at a million rows, recall@10
/// probing 32,768 rows was 0.96 in 1,000 lists and 0.99 in 2,000), and
/// the shortlist keeps ranking them cheap; the training's cost grows with
/// their square (a million rows are indexed in 12.3 s in 2,000 lists,
/// 10.2 s in 1,000).
fn lists_for(rows: usize) -> usize {
    (2 * rows.isqrt())
        .min(rows / MIN_LIST_ROWS)
        .clamp(1, MAX_LISTS)
}

/// The fewest rows a list is trained for: smaller lists make more, smaller
/// chunks, which the lexical search pays for per chunk.
const MIN_LIST_ROWS: usize = 256;

impl Partition {
    /// Whether the namespace, now of `rows` rows, has outgrown these
    /// centroids.
    pub(super) fn outgrown(&self, rows: usize) -> bool {
        rows >= self.trained_for.saturating_mul(RETRAIN_GROWTH)
    }

    pub(super) fn lists(&self) -> usize {
        self.ends.len()
    }

    /// The list of a row of code `code`.
    pub(super) fn list_of(&self, code: &[u64]) -> usize {
        quantized::closest(code, &self.centroids).map_or(0, |(list, _)| list)
    }

    /// `chunks` cut into their lists.
    pub(super) fn split(&self, chunks: &[Arc<Chunk>]) -> Vec<Vec<Arc<Chunk>>> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let list = chunks[start..end].to_vec();
                start = end;
                list
            })
            .collect()
    }

    /// These centroids over `lists`: their chunks, list after list, and
    /// the partition that says where each ends.
    pub(super) fn regrouped(&self, lists: Vec<Vec<Arc<Chunk>>>) -> (Vec<Arc<Chunk>>, Self) {
        let (chunks, ends) = concatenated(lists);
        let partition = Self {
            centroids: self.centroids.clone(),
            directions: self.directions.clone(),
            ends,
            trained_for: self.trained_for,
        };
        (chunks, partition)
    }

    /// The chunks of the lists nearest each of `queries`, until they hold
    /// `wanted` rows for that query, a list once however many queries
    /// want it (the first query's nearest first); and whether that left
    /// any list out. Each query probes as it would alone, so a search of
    /// several (a question and its HyDE hypothesis) finds for each what a
    /// search of it alone would, and scans the lists they share once. A
    /// list's nearness is the query's rotated vector's dot product with
    /// its centroid's direction: finer than the bits the query's code
    /// differs in, so the lists that hold a query's true neighbours come
    /// first more often. Only a shortlist of the lists whose centroids'
    /// codes differ least from the query's ([`SHORTLIST`]) is ranked so.
    pub(super) fn probe<'a>(
        &self,
        chunks: &'a [Arc<Chunk>],
        queries: &[Query],
        wanted: usize,
    ) -> (Vec<&'a Arc<Chunk>>, bool) {
        let lists = self.ends.len();
        let list_rows = chunks.iter().map(|chunk| chunk.ids.len()).sum::<usize>() / lists.max(1);
        let shortlist = SHORTLIST * wanted / list_rows.max(1) + SHORTLIST_SPARE;
        self.probe_shortlisting(chunks, queries, wanted, shortlist)
    }

    /// [`Self::probe`], ranking `shortlist` lists a query finely.
    fn probe_shortlisting<'a>(
        &self,
        chunks: &'a [Arc<Chunk>],
        queries: &[Query],
        wanted: usize,
        shortlist: usize,
    ) -> (Vec<&'a Arc<Chunk>>, bool) {
        let lists = self.ends.len();
        let words = self.directions.len() / lists.max(1);
        let range = |list: usize| {
            let start = if list == 0 { 0 } else { self.ends[list - 1] };
            start..self.ends[list]
        };
        let shortlist = shortlist.clamp(1, lists.max(1));
        let mut taken = vec![false; lists];
        // Nearest first, so the pool's cutoff tightens early in the scan.
        let mut order = Vec::new();
        for query in queries {
            let leaning = query.leaning();
            let ranked = |lists: Vec<usize>| {
                let mut near: Vec<(f32, usize)> = lists
                    .into_iter()
                    .map(|list| {
                        let direction = &self.directions[list * words..(list + 1) * words];
                        (leaning.toward(direction), list)
                    })
                    .collect();
                near.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                near.into_iter().map(|(_, list)| list)
            };
            let (first, rest) = self.shortlisted(query, shortlist);
            // The rest is ranked only if the shortlist falls short.
            let nearest = ranked(first).chain(std::iter::once(rest).flat_map(ranked));
            let mut rows = 0;
            for list in nearest {
                if rows >= wanted {
                    break;
                }
                if !taken[list] {
                    taken[list] = true;
                    order.push(list);
                }
                rows += chunks[range(list)]
                    .iter()
                    .map(|chunk| chunk.ids.len())
                    .sum::<usize>();
            }
        }
        let left_out = order.len() < self.ends.len();
        let probed = order
            .into_iter()
            .flat_map(|list| &chunks[range(list)])
            .collect();
        (probed, left_out)
    }

    /// The `count` lists whose centroids' codes differ least from
    /// `query`'s (the first in order on a tie), and the others.
    fn shortlisted(&self, query: &Query, count: usize) -> (Vec<usize>, Vec<usize>) {
        let mut by_bits: Vec<(u16, usize)> = quantized::differing(query.code(), &self.centroids)
            .into_iter()
            .zip(0..)
            .collect();
        if count < by_bits.len() {
            by_bits.select_nth_unstable(count);
        }
        let rest = by_bits.split_off(count.min(by_bits.len()));
        let lists =
            |by_bits: Vec<(u16, usize)>| by_bits.into_iter().map(|(_, list)| list).collect();
        (lists(by_bits), lists(rest))
    }

    /// `chunks` (a namespace's, `rows` rows in all) regrouped into lists
    /// around centroids trained on them.
    pub(super) fn build(
        chunks: &[Arc<Chunk>],
        coder: &Coder,
        rows: usize,
    ) -> (Vec<Arc<Chunk>>, Self) {
        let lists = lists_for(rows);
        let step = (rows / (SAMPLE_PER_LIST * lists)).max(1);
        let codes = || {
            chunks
                .iter()
                .flat_map(|chunk| (0..chunk.ids.len()).map(|slot| chunk.codes.row(slot)))
        };
        let sample: Vec<Vec<u64>> = codes().step_by(step).collect();
        let directions = train(&sample, lists, coder.words());
        let mut centroids = Codes::new(coder.words());
        centroids.reserve_exact(directions.len());
        for direction in &directions {
            centroids.push(direction);
        }
        let partition = Self {
            centroids: Arc::new(centroids),
            directions: Arc::new(directions.concat()),
            ends: Vec::new(),
            trained_for: rows,
        };
        // Each row's list first, so that every list's chunks are sized
        // exactly (see `Chunk::reserve_exact`).
        let placed: Vec<u32> = codes()
            .map(|code| u32::try_from(partition.list_of(&code)).expect("at most 2^16 lists"))
            .collect();
        let mut left = vec![0usize; lists];
        for &list in &placed {
            left[list as usize] += 1;
        }
        let mut grouped: Vec<Vec<Chunk>> = (0..lists).map(|_| Vec::new()).collect();
        let mut placed = placed.into_iter();
        for chunk in chunks {
            let terms = chunk.terms_by_slot();
            for (slot, terms) in terms.iter().enumerate() {
                let list = placed.next().expect("a list for every row") as usize;
                let group = &mut grouped[list];
                if group
                    .last()
                    .is_none_or(|last| last.ids.len() >= CHUNK_CAPACITY)
                {
                    let rows = left[list].min(CHUNK_CAPACITY);
                    group.push(Chunk::with_room(coder, rows));
                }
                group.last_mut().expect("just made").push_from(
                    chunk,
                    slot,
                    terms,
                    coder.dimensions(),
                );
                left[list] -= 1;
            }
        }
        partition.regrouped(
            grouped
                .into_iter()
                .map(|list| list.into_iter().map(Arc::new).collect())
                .collect(),
        )
    }
}

/// `lists` one after another, and where each ends.
pub(super) fn concatenated(lists: Vec<Vec<Arc<Chunk>>>) -> (Vec<Arc<Chunk>>, Vec<usize>) {
    let mut chunks = Vec::with_capacity(lists.iter().map(Vec::len).sum());
    let mut ends = Vec::with_capacity(lists.len());
    for list in lists {
        chunks.extend(list);
        ends.push(chunks.len());
    }
    (chunks, ends)
}

/// `lists` centroids for the codes of `sample` (of `words` words each),
/// by k-means in the codes' space: each row joins its nearest centroid
/// (fewest differing bits), and each centroid bit becomes the majority of
/// its members'. Seeded with rows spread evenly over the sample, so the
/// same rows train the same centroids; a centroid left without members is
/// seeded again from another row.
fn train(sample: &[Vec<u64>], lists: usize, words: usize) -> Vec<Vec<u64>> {
    let lists = lists.min(sample.len()).max(1);
    let codes_of = |centroids: &[Vec<u64>]| {
        let mut codes = Codes::new(words);
        codes.reserve_exact(centroids.len());
        for centroid in centroids {
            codes.push(centroid);
        }
        codes
    };
    let mut centroids: Vec<Vec<u64>> = (0..lists)
        .map(|list| {
            sample
                .get(list * sample.len() / lists)
                .cloned()
                .unwrap_or_else(|| vec![0; words])
        })
        .collect();
    let bits = words * 64;
    for round in 0..ROUNDS {
        let codes = codes_of(&centroids);
        let mut ones = vec![0u32; lists * bits];
        let mut members = vec![0u32; lists];
        for row in sample {
            let (list, _) = quantized::closest(row, &codes).expect("at least one centroid");
            members[list] += 1;
            let counts = &mut ones[list * bits..(list + 1) * bits];
            for (word, &value) in row.iter().enumerate() {
                let mut value = value;
                while value != 0 {
                    let bit = value.trailing_zeros() as usize;
                    counts[word * 64 + bit] += 1;
                    value &= value - 1;
                }
            }
        }
        for (list, centroid) in centroids.iter_mut().enumerate() {
            if members[list] == 0 {
                let reseed = (list * 7919 + round * 104_729) % sample.len().max(1);
                if let Some(row) = sample.get(reseed) {
                    centroid.clone_from(row);
                }
                continue;
            }
            let counts = &ones[list * bits..(list + 1) * bits];
            for (word, value) in centroid.iter_mut().enumerate() {
                *value = (0..64).fold(0u64, |value, bit| {
                    if 2 * counts[word * 64 + bit] > members[list] {
                        value | 1 << bit
                    } else {
                        value
                    }
                });
            }
        }
    }
    centroids
}

#[cfg(test)]
mod tests;
