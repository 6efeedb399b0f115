//! Fusion of the vector and the lexical (BM25) evidence about a memory into
//! one match score, 0..1: a convex combination of two normalised scores,
//! computed for every candidate, whichever search found it.
//!
//! - Meaning: the memory's cosine over the best cosine of this retrieval,
//!   squared ([`CLOSENESS_EXPONENT`]). A memory only the lexical search
//!   found still has a cosine, and it counts here too: words that the
//!   vector side does not back lift little.
//! - Words: the share of the query's information (summed idf) that the
//!   memory's words hold, its coverage, times how much that match narrows
//!   the store, its matched idf in nats up to [`CERTAIN_IDF`]. One word
//!   that a sixth of the store holds ("the user") carries a small share of
//!   the question and narrows little, so it cannot outweigh a clearly
//!   closer meaning; a match on most of the question's rare words can.
//! - A single shared word votes only when it holds most of the question's
//!   information ([`SOLE_WORD_COVERAGE`]). One word of a question of
//!   several, however rare in this store, is thin evidence that a memory
//!   is about the question ("How often do we ship a new version?" shares
//!   only "version" with a changelog note), while a question whose other
//!   words are common is still answered by its one telling word.
//!
//! Neither rank enters: plain reciprocal-rank fusion gives any first place a
//! full vote, so in a small store one shared common word outranked the
//! answer. The best cosine with every query word scores 1. The constants
//! were chosen on LoCoMo's dev split and the repository's semantic eval set
//! (see README, "Retrieval quality").

/// How sharply the meaning score falls with the cosine's distance from the
/// best: squared, a memory at 0.9 of the best cosine scores 0.81, so a
/// small lexical lift can reorder near-ties but not close a clear gap.
/// (Linear let one shared rare word win over a clearly closer meaning on
/// the semantic eval set; the cube cost LoCoMo dev recall.)
const CLOSENESS_EXPONENT: i32 = 2;
/// The matched idf (nats) at which a lexical match counts in full: a
/// match that singles out about one memory in e⁶ ≈ 400, or two words each
/// held by one in twenty. LoCoMo dev ranked best between 5 and 8.
const CERTAIN_IDF: f64 = 6.0;
/// The least share of the question's information (coverage) a match on a
/// single query word must hold to vote: most of it.
const SOLE_WORD_COVERAGE: f64 = 0.5;

/// What the lexical search says about a memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lexical {
    /// 0-based place among the memories the lexical search found.
    pub rank: usize,
    /// The share of the query's summed idf its words hold, 0..1.
    pub coverage: f32,
    /// The summed idf of the query words it holds, in nats.
    pub matched_idf: f32,
    /// How many of the query's distinct words it holds.
    pub matched_terms: u32,
}

/// What the vector search says about a memory it found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dense {
    /// 0-based place among the memories the vector search found.
    pub rank: usize,
}

/// The fused match score, 0..1, of a memory whose cosine is `closeness`
/// times the best cosine of this retrieval (whichever search found it),
/// with its `lexical` match if the lexical search found it;
/// `lexical_weight` (0..1) is the words' share of the score.
pub fn fuse(closeness: f32, lexical: Option<Lexical>, lexical_weight: f64) -> f64 {
    let meaning = f64::from(closeness)
        .clamp(0.0, 1.0)
        .powi(CLOSENESS_EXPONENT);
    let words = lexical.map_or(0.0, |lexical| {
        let coverage = f64::from(lexical.coverage).clamp(0.0, 1.0);
        if lexical.matched_terms < 2 && coverage < SOLE_WORD_COVERAGE {
            return 0.0;
        }
        let certainty = (f64::from(lexical.matched_idf) / CERTAIN_IDF).clamp(0.0, 1.0);
        coverage * certainty
    });
    (1.0 - lexical_weight) * meaning + lexical_weight * words
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEIGHT: f64 = 0.6;

    /// A match on several rare words: its idf is no limit.
    fn words(coverage: f32) -> Lexical {
        Lexical {
            rank: 0,
            coverage,
            matched_idf: 12.0,
            matched_terms: 3,
        }
    }

    #[test]
    fn the_best_cosine_with_every_query_word_scores_one_and_weight_zero_is_vector_only() {
        assert!((fuse(1.0, Some(words(1.0)), WEIGHT) - 1.0).abs() < 1e-12);
        assert!((fuse(0.7, Some(words(1.0)), 0.0) - 0.49).abs() < 1e-6);
        assert!(fuse(0.9, None, 0.0) > fuse(0.8, Some(words(1.0)), 0.0));
    }

    #[test]
    fn one_shared_common_word_never_beats_a_clearly_closer_meaning() {
        // The defect's store of six: the answer is first by cosine (0.23)
        // and shares no word with the question; another memory shares only
        // "user" (held by one memory in six: idf 1.54 nats, a third of the
        // question's) and is further by cosine (0.15).
        let answer = fuse(1.0, None, WEIGHT);
        let one_word = fuse(
            0.15 / 0.23,
            Some(Lexical {
                rank: 0,
                coverage: 0.37,
                matched_idf: 1.54,
                matched_terms: 1,
            }),
            WEIGHT,
        );
        assert!(answer > one_word, "{answer} <= {one_word}");
        // Nor one rare word that holds a fifth of the question, against a
        // memory a fifth closer in meaning.
        let rare_word = fuse(
            0.8,
            Some(Lexical {
                rank: 0,
                coverage: 0.2,
                matched_idf: 5.0,
                matched_terms: 1,
            }),
            WEIGHT,
        );
        assert!(answer > rare_word, "{answer} <= {rare_word}");
    }

    #[test]
    fn strong_lexical_evidence_that_the_vector_side_backs_lifts() {
        // Most of the question's rare words, at 0.8 of the best cosine,
        // beat the best cosine alone and the same words without meaning.
        let backed = fuse(0.8, Some(words(0.9)), WEIGHT);
        assert!(backed > fuse(1.0, None, WEIGHT));
        assert!(backed > fuse(0.2, Some(words(0.9)), WEIGHT));
        // More of the question's words, more lift.
        assert!(fuse(0.8, Some(words(0.9)), WEIGHT) > fuse(0.8, Some(words(0.5)), WEIGHT));
    }

    #[test]
    fn a_rare_match_votes_in_full_and_a_common_one_little() {
        let common = Lexical {
            rank: 0,
            coverage: 0.5,
            matched_idf: 0.6,
            matched_terms: 2,
        };
        let rare = Lexical {
            matched_idf: 8.0,
            ..common
        };
        let lift = |lexical| fuse(0.5, Some(lexical), WEIGHT) - fuse(0.5, None, WEIGHT);
        assert!(lift(rare) > 5.0 * lift(common));
    }

    #[test]
    fn one_word_of_several_votes_only_when_it_holds_most_of_the_question() {
        // From the semantic eval set: "How often do we ship a new version?"
        // The answer is first by cosine and shares no word; a changelog
        // note at 0.92 of its cosine shares only "version" (3.7 nats, a
        // fifth of the question's information).
        let answer = fuse(1.0, None, WEIGHT);
        let version = Lexical {
            rank: 0,
            coverage: 0.19,
            matched_idf: 3.69,
            matched_terms: 1,
        };
        assert!(fuse(0.92, Some(version), WEIGHT) < answer);
        // The same share held by two words still votes.
        let two_words = Lexical {
            matched_terms: 2,
            ..version
        };
        assert!(fuse(0.92, Some(two_words), WEIGHT) > fuse(0.92, None, WEIGHT));
        // One word that is most of the question votes in full.
        let telling = Lexical {
            coverage: 0.8,
            matched_idf: 6.0,
            matched_terms: 1,
            ..version
        };
        assert!(fuse(0.92, Some(telling), WEIGHT) > answer);
    }

    #[test]
    fn a_weaker_cosine_is_a_weaker_score() {
        assert!(fuse(0.95, Some(words(0.5)), WEIGHT) > fuse(0.5, Some(words(0.5)), WEIGHT));
        assert!(fuse(0.95, None, WEIGHT) > fuse(0.5, None, WEIGHT));
    }
}
