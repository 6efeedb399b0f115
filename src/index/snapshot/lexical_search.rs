//! The lexical search over a snapshot: BM25 over the postings of both
//! sides, each hit with its coverage of the query and its cosine to the
//! closest query vector.

use super::Snapshot;
use crate::index::chunk::{Chunk, Posting};
use crate::index::top_k::{Scored, TopK};
use crate::index::vector::best_of;
use crate::index::{Side, lexical};
use crate::memory::{Category, MemoryId, Namespace};

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

/// A lexical search's hits, with the stored vectors their similarities
/// were taken from, so that other query vectors can judge the same hits
/// ([`Snapshot::rejudged`]) without the words being searched again:
/// feedback's second search has the first one's words, and so its hits.
pub struct Lexical {
    /// Best first.
    pub hits: Vec<LexicalHit>,
    /// Each hit's stored vector (`None` while it is pending).
    vectors: Vec<Option<Vec<f32>>>,
}

impl Snapshot {
    /// `lexical`'s hits, each with its similarity to the closest of
    /// `queries` (vectors, as for [`Self::search`]) instead: what
    /// [`Self::lexical_search`] would find for them with the same words.
    pub fn rejudged(&self, mut lexical: Lexical, queries: &[Vec<f32>]) -> Lexical {
        let queries = self.normalised(queries);
        for (hit, vector) in lexical.hits.iter_mut().zip(&lexical.vectors) {
            hit.similarity = similarity(&queries, vector.as_deref());
        }
        lexical
    }

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
    ) -> Lexical {
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
            return Lexical {
                hits: Vec::new(),
                vectors: Vec::new(),
            };
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
        let (hits, vectors) = best
            .into_sorted()
            .into_iter()
            .map(|scoring| {
                let (chunk, side) = chunks[scoring.chunk];
                let vector = match side {
                    Side::Embedded => Some(chunk.vector(scoring.slot, self.dimensions())),
                    Side::WordsOnly => None,
                };
                let (matched_idf, matched_terms) = idfs
                    .iter()
                    .filter(|(term, _)| chunk.holds(term, scoring.slot))
                    .fold((0.0f32, 0u32), |(sum, count), (_, idf)| {
                        (sum + idf, count + 1)
                    });
                let hit = LexicalHit {
                    id: scoring.id,
                    score: scoring.score,
                    coverage: matched_idf / query_weight.max(f32::EPSILON),
                    matched_idf,
                    matched_terms,
                    similarity: similarity(&queries, vector.as_deref()),
                    vector_pending: side == Side::WordsOnly,
                };
                (hit, vector)
            })
            .unzip();
        Lexical { hits, vectors }
    }
}

/// The cosine of a stored `vector` to the closest of normalised `queries`
/// (0 without either).
fn similarity(queries: &[Vec<f32>], vector: Option<&[f32]>) -> f32 {
    vector
        .and_then(|vector| best_of(queries, vector))
        .map_or(0.0, |(_, similarity)| similarity)
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
