//! The search stage: the vector search and the lexical (BM25) search over
//! a request's namespaces, in one pass over one index snapshot, merged into
//! candidates with a fused match score ([`super::fusion`]), each lifted by
//! how well its conversation's words match ([`super::conversation`]).
//!
//! Heads of chains stand in for matched old versions (the reason names the
//! version that matched), deleted memories and the request's exclusions and
//! filters are left out, and a memory barely like the query counts as no
//! vector evidence, unless the store is no larger than `top_k`. A memory whose vector is still being
//! computed is found by its words alone, with a closeness of 0 (no cosine
//! to judge it by) and a reason that says its vector is pending.

use std::collections::HashMap;
use std::sync::Arc;

use crate::blocking;
use crate::config::MatchSettings;
use crate::index::{Found, Hit, Lexical, LexicalHit, Probed, Snapshot, lexical};
use crate::memory::{Category, Memory, MemoryId};
use crate::store::Store;

use super::outcome::{FoundBy, Reason};
use super::request::Request;
use super::{conversation, fusion};

/// How many more candidates than `top_k` each search hands to ranking:
/// recency, importance and access can lift a memory that is not among the
/// closest few.
pub const CANDIDATE_FACTOR: usize = 4;
const MIN_CANDIDATES: usize = 32;

/// A memory found by the vector search, the lexical search, or both.
pub struct Candidate {
    pub memory: Arc<Memory>,
    /// Best cosine similarity among its matching versions (a passage's
    /// counting at the passage weight).
    pub similarity: f32,
    /// BM25 score relative to the best of this retrieval, 0..1.
    pub lexical: f32,
    /// The fused match score, 0..1, with the conversation's lift.
    pub fused: f64,
    /// How well the words of its conversation match, relative to the best
    /// conversation of this retrieval, 0..1; `None` without a session.
    pub conversation: Option<f64>,
    pub reason: Reason,
    dense: Option<fusion::Dense>,
    lexical_match: Option<fusion::Lexical>,
    /// Whether the version its best lexical match came from had no vector
    /// yet (its similarity is then 0: closeness unknown, not measured).
    vector_pending: bool,
}

/// What the search stage looks for.
pub struct Query {
    /// One vector per text; the first `hypotheses` are HyDE hypotheses,
    /// the rest queries; then, with feedback, moved ones.
    pub vectors: Vec<Vec<f32>>,
    pub hypotheses: usize,
    /// For each moved vector at the end of `vectors`, the index of the
    /// vector it is, moved toward the best match of a search before
    /// ([`super::feedback`]).
    pub moved_from: Vec<usize>,
    pub terms: Vec<lexical::Term>,
    /// What a search before this one with the same words found
    /// (feedback's second search, whose moved queries lie beside the
    /// first's): its lexical hits are judged again by these vectors
    /// instead of the words being searched again, and the rows an
    /// approximate index gave it are judged instead of its lists being
    /// probed again.
    pub earlier: Option<Earlier>,
}

/// What a search keeps for another look with other vectors and the same
/// words ([`Query::earlier`]).
pub struct Earlier {
    /// The rows an approximate index had the vector search rescore.
    pub probed: Option<Probed>,
    lexical: Lexical,
}

/// The candidates for `query`, best fused score first, and what it found
/// for another look (for [`Query::earlier`]).
/// With a lexical weight of 0 the lexical search does not run (and
/// conversations, which are judged by their words, lift nothing).
pub async fn candidates(
    snapshot: Arc<Snapshot>,
    store: &Store,
    request: &Request,
    query: Query,
    matching: MatchSettings,
) -> (Vec<Candidate>, Earlier) {
    let Query {
        vectors,
        hypotheses,
        moved_from,
        terms,
        earlier,
    } = query;
    let texts = Texts {
        hypotheses,
        unmoved: vectors.len() - moved_from.len(),
        moved_from,
    };
    let (found, lexical) = scan(snapshot, request, vectors, terms, earlier, matching).await;
    let Found {
        hits: dense,
        probed,
    } = found;
    let sparse = &lexical.hits;
    let closest: Vec<f32> = dense
        .iter()
        .take(fusion::SPREAD_SAMPLE)
        .map(|hit| hit.similarity)
        .collect();
    let (evidence, best_similarity) = evidence(
        &dense,
        sparse,
        matching.min_similarity,
        request.tuning.top_k,
    );
    let best_lexical = sparse.first().map_or(1.0, |hit| hit.score);
    let by_head = merge(store, request, evidence, &texts, best_lexical);
    let mut candidates = fused(by_head, matching.lexical_weight, &closest, best_similarity);
    if matching.conversation_weight > 0.0 {
        lift_by_conversation(&mut candidates, matching.conversation_weight);
    }
    by_fused_score(&mut candidates);
    (candidates, Earlier { probed, lexical })
}

/// Which text each query vector stands for: the first `hypotheses` are
/// HyDE hypotheses, the rest up to `unmoved` queries, and each after that
/// the text `moved_from` names, moved toward a best match.
struct Texts {
    hypotheses: usize,
    unmoved: usize,
    moved_from: Vec<usize>,
}

impl Texts {
    /// The text query vector `query` searched for, and whether it was moved.
    fn of(&self, query: usize) -> (usize, bool) {
        if query >= self.unmoved {
            (self.moved_from[query - self.unmoved], true)
        } else {
            (query, false)
        }
    }
}

/// The vector search (by whole texts and passages, or on the rows an
/// `earlier` search probed) and the lexical search over the request's
/// namespaces (or the `earlier` one's hits judged again), in one pass
/// over `snapshot`; off the async workers unless the scan is small.
async fn scan(
    snapshot: Arc<Snapshot>,
    request: &Request,
    vectors: Vec<Vec<f32>>,
    terms: Vec<lexical::Term>,
    earlier: Option<Earlier>,
    matching: MatchSettings,
) -> (Found, Lexical) {
    let namespaces = request.pair.namespaces();
    let limit = (request.tuning.top_k * CANDIDATE_FACTOR).max(MIN_CANDIDATES);
    let filters = request.filters.clone();
    let lexical_limit = if matching.lexical_weight > 0.0 {
        limit
    } else {
        0
    };
    #[expect(clippy::cast_possible_truncation, reason = "a weight, 0..1")]
    let passage_weight = matching.passage_weight as f32;
    let (probed, earlier_lexical) = match earlier {
        Some(Earlier { probed, lexical }) => (probed, Some(lexical)),
        None => (None, None),
    };
    // Rescoring rows and hits found before is a few hundred dot products.
    let small = probed.is_some() || snapshot.is_small_search(&namespaces, vectors.len());
    let scan = move || {
        let admit = |_: MemoryId, category: Category| filters.admit_category(category);
        let found = match probed {
            Some(probed) => Found {
                hits: snapshot.rescore(&probed, &vectors, limit),
                probed: None,
            },
            None => snapshot.search_passages(&namespaces, &vectors, limit, passage_weight, admit),
        };
        let lexical = match earlier_lexical {
            Some(lexical) => snapshot.rejudged(lexical, &vectors),
            None => snapshot.lexical_search(&namespaces, &terms, &vectors, lexical_limit, admit),
        };
        (found, lexical)
    };
    // A small scan costs less than a hand-off's two thread wake-ups.
    if small {
        scan()
    } else {
        blocking::run(scan).await
    }
}

/// One hit of either search, with its rank in its own list.
enum Evidence<'a> {
    /// `faint`: below `min_similarity`, kept only for a store no larger
    /// than `top_k`.
    Dense {
        rank: usize,
        hit: &'a Hit,
        faint: bool,
    },
    Lexical {
        rank: usize,
        hit: &'a LexicalHit,
    },
}

impl Evidence<'_> {
    fn id(&self) -> MemoryId {
        match self {
            Self::Dense { hit, .. } => hit.id,
            Self::Lexical { hit, .. } => hit.id,
        }
    }
}

/// The hits in the order they count: the vector hits at `min_similarity`
/// or above, the lexical hits, then the faint vector hits; and the best
/// passing cosine (1 when none passes).
fn evidence<'a>(
    dense: &'a [Hit],
    sparse: &'a [LexicalHit],
    min_similarity: f64,
    top_k: usize,
) -> (Vec<Evidence<'a>>, f32) {
    #[expect(clippy::cast_possible_truncation, reason = "a cosine, 0..1")]
    let min_similarity = min_similarity as f32;
    // A store no larger than `top_k` answers with all of it, best first:
    // no floor tells a faint match from an unrelated one (on the coding
    // set a fifth of prompts' own memory scores under 0.1, some under 0,
    // and a fifth of the others over it), and a new user's few memories
    // are better shown than lost. In a larger store the floor keeps the
    // top k from filling with whatever scores above nothing. Every memory
    // of a small store is in the vector list, so its length tells. A faint
    // hit only adds a memory nothing else found; it is no evidence for
    // one that was.
    let whole_store = dense.len() <= top_k;
    let (passing, faint): (Vec<&Hit>, Vec<&Hit>) = dense
        .iter()
        .partition(|hit| hit.similarity >= min_similarity);
    let faint = if whole_store { faint } else { Vec::new() };
    let best_similarity = passing.first().map_or(1.0, |hit| hit.similarity);
    let ranked_before_faint = passing.len();
    // Faint hits come last, ranked after the passing ones.
    let evidence = passing
        .into_iter()
        .enumerate()
        .map(|(rank, hit)| Evidence::Dense {
            rank,
            hit,
            faint: false,
        })
        .chain(
            sparse
                .iter()
                .enumerate()
                .map(|(rank, hit)| Evidence::Lexical { rank, hit }),
        )
        .chain(
            faint
                .into_iter()
                .enumerate()
                .map(|(rank, hit)| Evidence::Dense {
                    rank: ranked_before_faint + rank,
                    hit,
                    faint: true,
                }),
        )
        .collect();
    (evidence, best_similarity)
}

/// The evidence gathered by the head of each memory's chain (the current
/// version stands in for a matched old one), leaving out deleted memories,
/// the request's exclusions and what its filters refuse.
fn merge(
    store: &Store,
    request: &Request,
    evidence: Vec<Evidence<'_>>,
    texts: &Texts,
    best_lexical: f32,
) -> HashMap<MemoryId, Candidate> {
    let mut by_head: HashMap<MemoryId, Candidate> = HashMap::new();
    for evidence in evidence {
        let id = evidence.id();
        let Some(head) = request.answer_for_match(store, id) else {
            continue; // deleted since the snapshot was taken, or after `as_of`
        };
        let faint = matches!(evidence, Evidence::Dense { faint: true, .. });
        if request.exclude_ids.contains(&head.id)
            || !request.filters.admit(&head)
            || (faint && by_head.contains_key(&head.id))
        {
            continue;
        }
        let matched_version = (head.id != id).then_some(id);
        let candidate = by_head
            .entry(head.id)
            .or_insert_with(|| Candidate::found(head, matched_version));
        match evidence {
            Evidence::Dense { rank, hit, .. } => {
                candidate.take_dense(rank, hit, matched_version, texts);
            }
            Evidence::Lexical { rank, hit } => candidate.take_lexical(rank, hit, best_lexical),
        }
    }
    by_head
}

impl Candidate {
    /// A memory before any evidence is taken into account.
    fn found(memory: Arc<Memory>, matched_version: Option<MemoryId>) -> Self {
        Self {
            memory,
            similarity: 0.0,
            lexical: 0.0,
            fused: 0.0,
            conversation: None,
            dense: None,
            lexical_match: None,
            vector_pending: false,
            reason: Reason::Query {
                found_by: FoundBy::Lexical,
                matched_version,
                vector_pending: false,
                passage: false,
                feedback: false,
                time_window: None,
            },
        }
    }

    /// A vector hit, kept when it ranks better than the one before: its
    /// similarity and the text it matched become the memory's.
    fn take_dense(
        &mut self,
        rank: usize,
        hit: &Hit,
        matched_version: Option<MemoryId>,
        texts: &Texts,
    ) {
        if self.dense.is_some_and(|best| best.rank <= rank) {
            return;
        }
        self.dense = Some(fusion::Dense { rank });
        self.similarity = hit.similarity;
        let (text, feedback) = texts.of(hit.query);
        self.reason = if text < texts.hypotheses {
            Reason::Hypothesis {
                hypothesis: text,
                found_by: FoundBy::Vector,
                matched_version,
                vector_pending: false,
                passage: hit.passage,
                feedback,
                time_window: None,
            }
        } else {
            Reason::Query {
                found_by: FoundBy::Vector,
                matched_version,
                vector_pending: false,
                passage: hit.passage,
                feedback,
                time_window: None,
            }
        };
    }

    /// A lexical hit, kept when it ranks better than the one before.
    fn take_lexical(&mut self, rank: usize, hit: &LexicalHit, best_lexical: f32) {
        if self.lexical_match.is_some_and(|best| best.rank <= rank) {
            return;
        }
        self.lexical_match = Some(fusion::Lexical {
            rank,
            coverage: hit.coverage,
            matched_idf: hit.matched_idf,
            matched_terms: hit.matched_terms,
        });
        self.lexical = hit.score / best_lexical;
        self.vector_pending = hit.vector_pending;
        if self.dense.is_none() {
            // Found by its words alone: still say how close it is in
            // meaning.
            self.similarity = self.similarity.max(hit.similarity);
        }
    }
}

/// The candidates with their fused match score and which search found
/// them.
fn fused(
    by_head: HashMap<MemoryId, Candidate>,
    lexical_weight: f64,
    closest: &[f32],
    best_similarity: f32,
) -> Vec<Candidate> {
    let best_coverage = by_head
        .values()
        .filter_map(|candidate| candidate.lexical_match)
        .map(|lexical| lexical.coverage)
        .fold(0.0, f32::max);
    let share = fusion::words_share(lexical_weight, closest, best_coverage);
    by_head
        .into_values()
        .map(|mut candidate| {
            candidate.fused = fusion::fuse(
                candidate.similarity / best_similarity,
                fusion::words(candidate.lexical_match),
                share,
            );
            let found_by = match (candidate.dense, candidate.lexical_match) {
                (Some(_), Some(_)) => FoundBy::Both,
                (Some(_), None) => FoundBy::Vector,
                _ => FoundBy::Lexical,
            };
            candidate
                .reason
                .set_found_by(found_by, candidate.vector_pending);
            candidate
        })
        .collect()
}

/// Lifts each candidate with a session by how well its conversation's
/// words match, at `weight`.
fn lift_by_conversation(candidates: &mut [Candidate], weight: f64) {
    let scores = conversation::scores(
        candidates
            .iter()
            .map(|candidate| (&*candidate.memory, candidate.lexical)),
    );
    for (candidate, score) in candidates.iter_mut().zip(scores) {
        if let Some(score) = score {
            candidate.conversation = Some(score);
            candidate.fused = conversation::lift(candidate.fused, score, weight);
        }
    }
}

/// Best fused score first; ties by similarity, then in a fixed order (by
/// id).
fn by_fused_score(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        b.fused
            .total_cmp(&a.fused)
            .then_with(|| b.similarity.total_cmp(&a.similarity))
            .then_with(|| a.memory.id.cmp(&b.memory.id))
    });
}
