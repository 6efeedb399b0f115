//! Fusion of the vector and the lexical (BM25) rankings into one match
//! score, 0..1: a weighted reciprocal-rank fusion in which each list's vote
//! is scaled by how strong its evidence is, not only by where it ranks.
//!
//! Plain reciprocal-rank fusion gives any first place a full vote. In a
//! small store a memory that shares one common word with the query ("the
//! user") is first, and often alone, in the lexical list, and that vote
//! outweighs a clearly better match by meaning. So:
//!
//! - the lexical vote is scaled by how much the match tells: half of it
//!   always and half by the share of the query's summed idf the memory's
//!   words hold (its coverage), and all of it by the matched idf itself, in
//!   nats, up to [`CERTAIN_IDF`]. One word that a sixth of the store (or a
//!   third, or every memory) holds narrows little and votes little; a rare
//!   name or id votes in full, in a store of any size;
//! - the vector vote is scaled by the memory's cosine relative to the best
//!   of this retrieval, raised to [`DENSE_SHARPNESS`]: second place well
//!   behind the first is not nearly first.
//!
//! First place in both lists, with every query word and the best cosine,
//! scores 1. The constants were chosen on LoCoMo's dev split and the
//! repository's own semantic eval set (see README, "Retrieval quality").

/// The rank offset of reciprocal-rank fusion: small, so that first place
/// counts clearly more than tenth.
const K: f64 = 5.0;
/// The matched idf (nats) at which a lexical match counts in full: about
/// what one word held by a twentieth of the store is worth.
const CERTAIN_IDF: f64 = 3.0;
/// How sharply the vector vote falls with the cosine's distance from the
/// best.
const DENSE_SHARPNESS: i32 = 2;

/// What the vector search says about a memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dense {
    /// 0-based place among the memories the vector search found.
    pub rank: usize,
    /// Its cosine over the best cosine of this retrieval, 0..1.
    pub relative_similarity: f32,
}

/// What the lexical search says about a memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lexical {
    /// 0-based place among the memories the lexical search found.
    pub rank: usize,
    /// The share of the query's summed idf its words hold, 0..1.
    pub coverage: f32,
    /// The summed idf of the query words it holds, in nats.
    pub matched_idf: f32,
}

/// The fused match score, 0..1, for a memory one or both searches found;
/// `lexical_weight` (0..1) is the lexical list's share of the vote.
pub fn fuse(dense: Option<Dense>, lexical: Option<Lexical>, lexical_weight: f64) -> f64 {
    let dense = dense.map_or(0.0, |dense| {
        let closeness = f64::from(dense.relative_similarity).clamp(0.0, 1.0);
        vote(dense.rank, 1.0 - lexical_weight) * closeness.powi(DENSE_SHARPNESS)
    });
    let lexical = lexical.map_or(0.0, |lexical| {
        let coverage = f64::from(lexical.coverage).clamp(0.0, 1.0);
        let certainty = (f64::from(lexical.matched_idf) / CERTAIN_IDF).clamp(0.0, 1.0);
        vote(lexical.rank, lexical_weight) * (0.5 + 0.5 * coverage) * certainty
    });
    (dense + lexical) * (K + 1.0)
}

/// The reciprocal-rank vote of place `rank` (0-based) in a list of share
/// `weight`.
fn vote(rank: usize, weight: f64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "ranks are small")]
    let place = rank as f64 + 1.0;
    weight / (K + place)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(rank: usize) -> Option<Dense> {
        Some(Dense {
            rank,
            relative_similarity: 1.0,
        })
    }

    /// A match on rare words: its idf is no limit.
    fn lexical(rank: usize, coverage: f32) -> Option<Lexical> {
        Some(Lexical {
            rank,
            coverage,
            matched_idf: 8.0,
        })
    }

    #[test]
    fn fusion_rewards_agreement_and_whole_word_matches() {
        let weight = 0.6;
        let top_of_both = fuse(dense(0), lexical(0, 1.0), weight);
        assert!((top_of_both - 1.0).abs() < 1e-12);
        // Second in both beats first in one list alone.
        assert!(fuse(dense(1), lexical(1, 1.0), weight) > fuse(dense(0), None, weight));
        assert!(fuse(dense(1), lexical(1, 1.0), weight) > fuse(None, lexical(0, 1.0), weight));
        // The lexical list weighs more, but a match on few of the words less.
        assert!(fuse(None, lexical(0, 1.0), weight) > fuse(dense(0), None, weight));
        assert!(fuse(None, lexical(0, 0.2), weight) < fuse(dense(0), None, weight));
        assert_eq!(
            fuse(None, lexical(0, 1.0), 0.0),
            0.0,
            "weight 0: vector only"
        );
    }

    #[test]
    fn one_shared_common_word_never_beats_a_clearly_closer_meaning() {
        // The defect's store of six: the answer is first by cosine (0.23)
        // and shares no word with the question; another memory shares only
        // "user" (held by one memory in six: idf 1.54 nats, a third of the
        // question's) and is further by cosine (0.15).
        let weight = 0.6;
        let answer = fuse(dense(0), None, weight);
        let one_word = fuse(
            Some(Dense {
                rank: 1,
                relative_similarity: 0.15 / 0.23,
            }),
            Some(Lexical {
                rank: 0,
                coverage: 0.37,
                matched_idf: 1.54,
            }),
            weight,
        );
        assert!(answer > one_word, "{answer} <= {one_word}");
    }

    #[test]
    fn a_rare_word_votes_in_full_and_a_common_one_little() {
        let common = Lexical {
            rank: 0,
            coverage: 0.5,
            matched_idf: 0.3,
        };
        let rare = Lexical {
            matched_idf: 6.0,
            ..common
        };
        assert!(fuse(None, Some(rare), 0.6) > 5.0 * fuse(None, Some(common), 0.6));
    }

    #[test]
    fn a_weaker_cosine_is_a_weaker_vote() {
        let at = |relative_similarity| {
            fuse(
                Some(Dense {
                    rank: 1,
                    relative_similarity,
                }),
                None,
                0.6,
            )
        };
        assert!(at(0.95) > at(0.5));
    }
}
