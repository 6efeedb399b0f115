//! The vector search over a snapshot: a one-bit scan of the codes picks
//! a pool of candidates, rescored with the stored vectors; with passages,
//! a memory's passage rows are scanned beside its whole text's row.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use super::Snapshot;
use crate::index::chunk::Chunk;
use crate::index::top_k::{Scored, TopK};
use crate::index::vector::best_of;
use crate::index::{Hit, partition, pool, quantized, scan};
use crate::memory::{Category, MemoryId, Namespace};

/// The fewest and the most candidates of the one-bit scan rescored.
const MIN_POOL: usize = 256;
const MAX_POOL: usize = 512;

/// How many candidates of the one-bit scan are rescored with the stored
/// vectors, for a search of `limit` over namespaces of `rows` entries:
/// the codes' estimates are coarse, and the rows whose estimates crowd
/// out a true result grow with the rows, so the pool is 1 % of them,
/// between [`MIN_POOL`] and [`MAX_POOL`], and at least 4 × `limit`. The
/// rows are the namespaces' whether scanned or not: an approximate index
/// scans the lists nearest the query, which hold about as many close
/// rivals as the whole namespace (at a million rows, probing 32,768,
/// recall@10 was 0.974 rescoring 312 and 0.987 rescoring 512). Rescoring
/// one costs a 384-float dot product from wherever the row is stored, so
/// a pool wider than needed is what a small namespace's search pays most.
fn rescore_pool(limit: usize, rows: usize) -> usize {
    (rows / 100)
        .clamp(MIN_POOL, MAX_POOL)
        .max(limit.saturating_mul(4))
}

/// Below this many entries × queries a search is a few tens of
/// microseconds of work: cheaper done in place than handed to another
/// thread (see [`Snapshot::is_small_search`]).
const SMALL_SEARCH: usize = 16 * 1024;

/// What a vector search found, and, when an approximate index narrowed
/// it, the rows it rescored, for another look at them.
pub struct Found {
    /// Best first.
    pub hits: Vec<Hit>,
    pub probed: Option<Probed>,
}

/// The rows a search narrowed by an approximate index rescored with their
/// stored vectors, kept so that queries close to its own can be judged on
/// them ([`Snapshot::rescore`]) instead of probing the lists again:
/// feedback's moved queries, whose neighbours are the first queries'.
pub struct Probed {
    sides: Sides,
    rows: Vec<pool::Candidate>,
}

impl Probed {
    /// How many rows the search rescored: its pool.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Snapshot {
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
        self.search_passages(namespaces, queries, limit, 0.0, accept)
            .hits
    }

    /// [`Self::search`] that also reads the memories' passages
    /// ([`crate::index::passages`]): a memory scores the larger of its
    /// whole text's similarity and `passage_weight` times its closest
    /// passage's (0: whole texts only, as [`Self::search`]).
    ///
    /// A namespace with an approximate index ([`partition`]) is searched
    /// in the lists nearest the queries only. When those could not fill
    /// the pool with rows `accept` lets through (a selective filter), the
    /// search runs again over four times the rows, up to the full scan,
    /// so a filter never leaves it short of what the scan would find; the
    /// rows it rescored come back with the hits, for [`Self::rescore`].
    pub fn search_passages(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        passage_weight: f32,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Found {
        let probe = Probe {
            rows: Some(partition::probed_rows(self.embedded.largest(namespaces))),
            pool: None,
        };
        self.search_widening(namespaces, queries, limit, passage_weight, probe, accept)
    }

    /// [`Self::search`], scanning the nearest lists of an approximate
    /// index until they hold `probed_rows` rows per query (and widening
    /// as it does): for measuring recall against the probe's width.
    pub fn search_probing(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        probed_rows: usize,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Found {
        let probe = Probe {
            rows: Some(probed_rows),
            pool: None,
        };
        self.search_widening(namespaces, queries, limit, 0.0, probe, accept)
    }

    /// [`Self::search_probing`], rescoring the `pool` best estimates of
    /// the rows probed: for measuring recall against both.
    pub fn search_probing_in_pool(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        probed_rows: usize,
        pool: usize,
    ) -> Vec<Hit> {
        let probe = Probe {
            rows: Some(probed_rows),
            pool: Some(pool),
        };
        self.search_widening(namespaces, queries, limit, 0.0, probe, |_, _| true)
            .hits
    }

    /// [`Self::search`] as a full scan, rescoring the `pool` best
    /// estimates (at least `limit`): for measuring recall against the
    /// pool's size.
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
        let coded = self.coded(&queries);
        let sides = Sides::probed(self, namespaces, &coded, None, 0.0);
        let (rows, _) = self.pool_of(&sides, &coded, limit, pool, &accept);
        self.rescored(&sides, &rows, &queries, limit)
    }

    fn search_widening(
        &self,
        namespaces: &[Namespace],
        queries: &[Vec<f32>],
        limit: usize,
        passage_weight: f32,
        probe: Probe,
        accept: impl Fn(MemoryId, Category) -> bool,
    ) -> Found {
        let queries = self.normalised(queries);
        if queries.is_empty() || limit == 0 {
            return Found {
                hits: Vec::new(),
                probed: None,
            };
        }
        let coded = self.coded(&queries);
        let mut probed_rows = probe.rows;
        loop {
            let sides = Sides::probed(self, namespaces, &coded, probed_rows, passage_weight);
            let pool = probe
                .pool
                .unwrap_or_else(|| rescore_pool(limit, sides.whole_rows))
                .max(limit);
            let (rows, accepted) = self.pool_of(&sides, &coded, limit, pool, &accept);
            if !sides.narrowed || accepted >= pool {
                let hits = self.rescored(&sides, &rows, &queries, limit);
                let probed = sides.narrowed.then_some(Probed { sides, rows });
                return Found { hits, probed };
            }
            probed_rows = probed_rows.map(|rows| rows.saturating_mul(4));
        }
    }

    /// The `limit` best of the rows `probed` rescored, by their stored
    /// vectors' similarity to any of `queries`, best first: what a search
    /// of these queries would find if the first one's probe had been
    /// theirs. A row per memory, as the search gives.
    pub fn rescore(&self, probed: &Probed, queries: &[Vec<f32>], limit: usize) -> Vec<Hit> {
        let queries = self.normalised(queries);
        if queries.is_empty() || limit == 0 {
            return Vec::new();
        }
        self.rescored(&probed.sides, &probed.rows, &queries, limit)
    }

    /// The stored vector of `id`'s whole text, if it is among the rows
    /// `probed` holds: a look at a few hundred rows where [`Self::vector`]
    /// may read a whole namespace's ids.
    pub fn probed_vector(&self, probed: &Probed, id: MemoryId) -> Option<Vec<f32>> {
        probed.rows.iter().find_map(|&candidate| {
            let (chunk, slot) = probed.sides.place(candidate);
            (chunk.ids[slot] == id && !probed.sides.is_passage(candidate.chunk as usize))
                .then(|| chunk.vector(slot, self.dimensions()))
        })
    }

    fn coded(&self, queries: &[Vec<f32>]) -> Arc<Vec<quantized::Query>> {
        Arc::new(
            queries
                .iter()
                .map(|query| quantized::Query::new(&self.coder, query))
                .collect(),
        )
    }

    /// The pool of the one-bit scan over `sides` for `queries`' codes: the
    /// `pool` rows (at least `limit`) with the best estimates that
    /// `accept` lets through; with how many rows it let into the pool.
    fn pool_of(
        &self,
        sides: &Sides,
        coded: &Arc<Vec<quantized::Query>>,
        limit: usize,
        pool: usize,
        accept: &impl Fn(MemoryId, Category) -> bool,
    ) -> (Vec<pool::Candidate>, usize) {
        let chunks = &sides.chunks;
        let mut best_codes = pool::Pool::new(pool.max(limit), self.coder.bits());
        let cutoff = Arc::new(AtomicU16::new(best_codes.cutoff()));
        let mut accepted = 0;
        scan::approximate(chunks, coded, &cutoff, |index, near| {
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
                    accepted += 1;
                    best_codes.offer(row.differing, candidate);
                }
            }
            cutoff.store(best_codes.cutoff(), Ordering::Relaxed);
        });
        let rows = best_codes.into_rows(|candidate| {
            let (chunk, slot) = sides.place(candidate);
            chunk.ids[slot]
        });
        (rows, accepted)
    }

    /// `rows` of `sides` rescored with their stored vectors against
    /// normalised `queries`: the `limit` best, a memory once.
    fn rescored(
        &self,
        sides: &Sides,
        rows: &[pool::Candidate],
        queries: &[Vec<f32>],
        limit: usize,
    ) -> Vec<Hit> {
        // The rows are scattered over the stored vectors: read one value
        // of each of their cache lines first, in loads that do not wait on
        // each other, so the CPU overlaps their misses instead of the
        // rescoring below stalling on each row in turn.
        let touched = rows.iter().fold(0u16, |touched, &candidate| {
            let (chunk, slot) = sides.place(candidate);
            touched ^ chunk.touch(slot, self.dimensions())
        });
        std::hint::black_box(touched);
        let mut row = vec![0.0; self.dimensions()];
        let hits = rows.iter().map(|&candidate| {
            let (chunk, slot) = sides.place(candidate);
            chunk.decode(slot, &mut row);
            let (query, similarity) = best_of(queries, &row).expect("queries is not empty");
            Hit {
                id: chunk.ids[slot],
                similarity: similarity * sides.weight(candidate.chunk as usize),
                query,
                passage: sides.is_passage(candidate.chunk as usize),
            }
        });
        let mut best = TopK::new(limit);
        let mut offer = |hit: Hit| {
            if best.admits(hit.similarity, hit.id) {
                best.push(hit);
            }
        };
        if sides.has_passages() {
            // A memory's rows (its whole text and its passages) count
            // once, with the best of their weighted similarities. Without
            // passages every row is a memory of its own, and the search
            // skips the map.
            let mut by_memory: HashMap<MemoryId, Hit> = HashMap::new();
            for hit in hits {
                by_memory
                    .entry(hit.id)
                    .and_modify(|kept| {
                        if hit.similarity > kept.similarity {
                            *kept = hit;
                        }
                    })
                    .or_insert(hit);
            }
            by_memory.into_values().for_each(&mut offer);
        } else {
            hits.for_each(&mut offer);
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
                        passage: false,
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
        let probed = partition::probed_rows(self.embedded.largest(namespaces));
        let entries = self
            .embedded
            .searched_rows(namespaces, probed.saturating_mul(queries));
        entries.saturating_mul(queries.max(1)) <= SMALL_SEARCH
    }

    /// The embedded chunks of `namespaces`: what the full scan reads.
    fn chunks_of<'a>(
        &'a self,
        namespaces: &'a [Namespace],
    ) -> impl Iterator<Item = &'a Arc<Chunk>> {
        self.embedded.chunks_of(namespaces)
    }
}

/// How much of an approximate index a search reads: the nearest lists
/// until they hold `rows` rows per query (`None`: every list), and the
/// pool of best estimates rescored (`None`: [`rescore_pool`]'s).
#[derive(Clone, Copy)]
struct Probe {
    rows: Option<usize>,
    pool: Option<usize>,
}

/// The chunks a search scans: the whole texts' first, then, if asked for,
/// the passages', whose similarities count at `passage_weight`.
struct Sides {
    chunks: Vec<Arc<Chunk>>,
    /// Where the passages' chunks begin in `chunks`.
    passages_from: usize,
    passage_weight: f32,
    /// Whether an approximate index left chunks out.
    narrowed: bool,
    /// The rows of the namespaces on the sides scanned, left out or not.
    whole_rows: usize,
}

impl Sides {
    /// The whole texts' chunks, and the passages' if `passage_weight` is
    /// above 0, of `namespaces` a search for `queries` scans: of a
    /// namespace with an approximate index, its nearest lists until they
    /// hold `probed_rows` rows per query (`None`: all).
    fn probed(
        snapshot: &Snapshot,
        namespaces: &[Namespace],
        queries: &[quantized::Query],
        probed_rows: Option<usize>,
        passage_weight: f32,
    ) -> Self {
        let (whole, mut narrowed) = snapshot.embedded.probe(namespaces, queries, probed_rows);
        let mut chunks: Vec<Arc<Chunk>> = whole.into_iter().cloned().collect();
        let mut whole_rows = snapshot.embedded.rows_of(namespaces);
        let passages_from = chunks.len();
        if passage_weight > 0.0 {
            let (passages, left_out) = snapshot.passages.probe(namespaces, queries, probed_rows);
            chunks.extend(passages.into_iter().cloned());
            narrowed |= left_out;
            whole_rows += snapshot.passages.rows_of(namespaces);
        }
        Self {
            chunks,
            passages_from,
            passage_weight,
            narrowed,
            whole_rows,
        }
    }

    /// The chunk and slot of a row of the pool.
    fn place(&self, candidate: pool::Candidate) -> (&Arc<Chunk>, usize) {
        (
            &self.chunks[candidate.chunk as usize],
            usize::from(candidate.slot),
        )
    }

    fn has_passages(&self) -> bool {
        self.passages_from < self.chunks.len()
    }

    /// Whether the chunk at `index` holds passages.
    fn is_passage(&self, index: usize) -> bool {
        index >= self.passages_from
    }

    /// What a similarity found in the chunk at `index` counts for.
    fn weight(&self, index: usize) -> f32 {
        if self.is_passage(index) {
            self.passage_weight
        } else {
            1.0
        }
    }
}

impl Scored for Hit {
    fn similarity(&self) -> f32 {
        self.similarity
    }

    fn id(&self) -> MemoryId {
        self.id
    }
}
