//! Fusion of the vector and the lexical (BM25) evidence about a memory into
//! one match score, 0..1: a convex combination of two normalised scores,
//! computed for every candidate, whichever search found it, with the words'
//! share set once per retrieval by how much the vector side can tell.
//!
//! - Meaning: the memory's cosine over the best cosine of this retrieval,
//!   squared ([`CLOSENESS_EXPONENT`]). A memory only the lexical search
//!   found still has a cosine, and it counts here too: words that the
//!   vector side does not back lift little.
//! - Words ([`words`]): the share of the query's information (summed idf)
//!   that the memory's words hold, its coverage, times how much that match
//!   narrows the store, its matched idf in nats up to [`CERTAIN_IDF`]. One
//!   word that a sixth of the store holds ("the user") carries a small
//!   share of the question and narrows little. A single shared word votes
//!   only when it holds most of the question's information
//!   ([`SOLE_WORD_COVERAGE`]): one word of a question of several, however
//!   rare in this store, is thin evidence that a memory is about the
//!   question ("How often do we ship a new version?" shares only "version"
//!   with a changelog note).
//! - The words' share ([`words_share`]): `lexical_weight` where the
//!   closest memories all sit near the best cosine, so that the cosine
//!   cannot tell them apart (a conversation's turns, which MiniLM scores
//!   alike); an eighth of it where the best stands clear of the rest, so
//!   that shared words only break near-ties against a clearly closer
//!   meaning. A memory that holds (nearly) the whole question gets the
//!   words their full share either way.
//!
//! Neither rank enters: plain reciprocal-rank fusion gives any first place a
//! full vote, so in a small store one shared common word outranked the
//! answer. The best cosine with every query word scores 1. The constants
//! were chosen on LoCoMo's dev split and the repository's semantic eval set
//! (see `docs/retrieval.md`, "How the fusion was chosen").

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
/// How many of the closest memories (best first) tell how flat the vector
/// side is: the fewest candidates a search hands on.
pub const SPREAD_SAMPLE: usize = 32;
/// Their mean cosine, as a share of the best, at or below which the best
/// stands clear and the words get [`CLEAR_SHARE`] of `lexical_weight`...
const CLEAR_SPREAD: f64 = 0.72;
/// ...and at or above which the vector side is flat and the words get all
/// of it (linear in between). On the semantic eval set the closest 32
/// average 0.6 of the best (median), on LoCoMo's dev turns 0.79.
const FLAT_SPREAD: f64 = 0.80;
/// The words' share where meaning stands clear, as a part of
/// `lexical_weight`: enough to break near-ties.
const CLEAR_SHARE: f64 = 0.125;
/// The coverage from which one memory's match counts as holding the whole
/// question (full share at 1). Coverage, not the words score: in a small
/// store no match reaches [`CERTAIN_IDF`].
const WHOLE_QUESTION: f64 = 0.8;

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

/// The words score of a memory, 0..1: 0 without a `lexical` match, 1 for
/// every query word with a certain idf.
pub fn words(lexical: Option<Lexical>) -> f64 {
    lexical.map_or(0.0, |lexical| {
        let coverage = f64::from(lexical.coverage).clamp(0.0, 1.0);
        if lexical.matched_terms < 2 && coverage < SOLE_WORD_COVERAGE {
            return 0.0;
        }
        let certainty = (f64::from(lexical.matched_idf) / CERTAIN_IDF).clamp(0.0, 1.0);
        coverage * certainty
    })
}

/// The words' share of the match score in one retrieval, 0..`lexical_weight`:
/// `closest` are the cosines of the memories the vector search found, best
/// first (the first [`SPREAD_SAMPLE`] count), and `best_coverage` the best
/// coverage among the lexical matches.
pub fn words_share(lexical_weight: f64, closest: &[f32], best_coverage: f32) -> f64 {
    let by_spread = (flatness(closest) - CLEAR_SPREAD) / (FLAT_SPREAD - CLEAR_SPREAD);
    let by_spread = CLEAR_SHARE + (1.0 - CLEAR_SHARE) * by_spread.clamp(0.0, 1.0);
    let whole_question =
        ((f64::from(best_coverage) - WHOLE_QUESTION) / (1.0 - WHOLE_QUESTION)).clamp(0.0, 1.0);
    lexical_weight * by_spread.max(whole_question)
}

/// The mean cosine of the closest [`SPREAD_SAMPLE`] memories (negative
/// ones as 0) over the best: 1 when they are all alike, or when no cosine
/// is positive. A store of fewer memories than the sample counts the
/// missing ones as 0: the best of a young store stands clear of nothing,
/// and a lone memory's cosine alone would call the vector side flat and
/// hand the match to words whose idf a store that small cannot make
/// certain (a lone memory found by its meaning scored 0.2).
fn flatness(closest: &[f32]) -> f64 {
    let sample = &closest[..closest.len().min(SPREAD_SAMPLE)];
    let best = sample.first().map_or(0.0, |&best| f64::from(best));
    if best <= 0.0 {
        return 1.0;
    }
    let sum: f64 = sample
        .iter()
        .map(|&cosine| f64::from(cosine).max(0.0))
        .sum();
    #[expect(clippy::cast_precision_loss, reason = "a small constant")]
    let mean = sum / SPREAD_SAMPLE as f64;
    mean / best
}

/// The fused match score, 0..1, of a memory whose cosine is `closeness`
/// times the best cosine of this retrieval (whichever search found it),
/// with its [`words`] score; `share` (0..1, from [`words_share`]) is the
/// words' share of the score.
pub fn fuse(closeness: f32, words: f64, share: f64) -> f64 {
    let meaning = f64::from(closeness)
        .clamp(0.0, 1.0)
        .powi(CLOSENESS_EXPONENT);
    (1.0 - share) * meaning + share * words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `lexical_weight`: the words' share on a flat vector side.
    const FLAT: f64 = 0.8;

    /// A match on several rare words: its idf is no limit.
    fn several(coverage: f32) -> Lexical {
        Lexical {
            rank: 0,
            coverage,
            matched_idf: 12.0,
            matched_terms: 3,
        }
    }

    fn fused(closeness: f32, lexical: Option<Lexical>, share: f64) -> f64 {
        fuse(closeness, words(lexical), share)
    }

    /// Cosines of 32 memories, best first, whose mean is `spread` of the
    /// best (0.5).
    fn closest(spread: f32) -> Vec<f32> {
        let mut cosines = vec![0.5];
        let rest = (spread * 0.5 * 32.0 - 0.5) / 31.0;
        cosines.extend([rest; 31]);
        cosines
    }

    #[test]
    fn the_best_cosine_with_every_query_word_scores_one_and_weight_zero_is_vector_only() {
        assert!((fused(1.0, Some(several(1.0)), FLAT) - 1.0).abs() < 1e-12);
        assert!((fused(0.7, Some(several(1.0)), 0.0) - 0.49).abs() < 1e-6);
        assert!(fused(0.9, None, 0.0) > fused(0.8, Some(several(1.0)), 0.0));
        assert!(words_share(0.0, &closest(0.9), 1.0).abs() < 1e-12);
    }

    #[test]
    fn first_in_both_searches_is_not_a_full_match_when_its_words_hold_little_of_the_question() {
        // First by cosine and first by BM25, but its words hold a tenth of
        // the question's information, on a flat vector side (share 0.8):
        // the score is (1 - 0.8) * 1 + 0.8 * 0.1 = 0.28, far from 1.
        let first_in_both = Lexical {
            rank: 0,
            coverage: 0.1,
            matched_idf: 12.0,
            matched_terms: 2,
        };
        let score = fused(1.0, Some(first_in_both), FLAT);
        assert!((score - 0.28).abs() < 1e-6, "{score}");
        // With the words holding the whole question it is 1.
        assert!((fused(1.0, Some(several(1.0)), FLAT) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn one_shared_common_word_never_beats_a_clearly_closer_meaning() {
        // The defect's store of six: the answer is first by cosine (0.23)
        // and shares no word with the question; another memory shares only
        // "user" (held by one memory in six: idf 1.54 nats, a third of the
        // question's) and is further by cosine (0.15).
        let answer = fused(1.0, None, FLAT);
        let one_word = fused(
            0.15 / 0.23,
            Some(Lexical {
                rank: 0,
                coverage: 0.37,
                matched_idf: 1.54,
                matched_terms: 1,
            }),
            FLAT,
        );
        assert!(answer > one_word, "{answer} <= {one_word}");
        // Nor one rare word that holds a fifth of the question, against a
        // memory a fifth closer in meaning.
        let rare_word = fused(
            0.8,
            Some(Lexical {
                rank: 0,
                coverage: 0.2,
                matched_idf: 5.0,
                matched_terms: 1,
            }),
            FLAT,
        );
        assert!(answer > rare_word, "{answer} <= {rare_word}");
    }

    #[test]
    fn strong_lexical_evidence_that_the_vector_side_backs_lifts() {
        // Most of the question's rare words, at 0.8 of the best cosine,
        // beat the best cosine alone and the same words without meaning.
        let backed = fused(0.8, Some(several(0.9)), FLAT);
        assert!(backed > fused(1.0, None, FLAT));
        assert!(backed > fused(0.2, Some(several(0.9)), FLAT));
        // More of the question's words, more lift.
        assert!(fused(0.8, Some(several(0.9)), FLAT) > fused(0.8, Some(several(0.5)), FLAT));
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
        let lift = |lexical| fused(0.5, Some(lexical), FLAT) - fused(0.5, None, FLAT);
        assert!(lift(rare) > 5.0 * lift(common));
    }

    #[test]
    fn one_word_of_several_votes_only_when_it_holds_most_of_the_question() {
        // From the semantic eval set: "How often do we ship a new version?"
        // The answer is first by cosine and shares no word; a changelog
        // note at 0.92 of its cosine shares only "version" (3.7 nats, a
        // fifth of the question's information).
        let answer = fused(1.0, None, FLAT);
        let version = Lexical {
            rank: 0,
            coverage: 0.19,
            matched_idf: 3.69,
            matched_terms: 1,
        };
        assert!(fused(0.92, Some(version), FLAT) < answer);
        // The same share held by two words still votes.
        let two_words = Lexical {
            matched_terms: 2,
            ..version
        };
        assert!(fused(0.92, Some(two_words), FLAT) > fused(0.92, None, FLAT));
        // One word that is most of the question votes in full.
        let telling = Lexical {
            coverage: 0.8,
            matched_idf: 6.0,
            matched_terms: 1,
            ..version
        };
        assert!(fused(0.92, Some(telling), FLAT) > answer);
    }

    #[test]
    fn the_words_get_their_share_where_the_vector_side_is_flat_and_an_eighth_where_it_is_clear() {
        assert!((words_share(FLAT, &closest(0.9), 0.0) - FLAT).abs() < 1e-6);
        assert!((words_share(FLAT, &closest(0.6), 0.0) - FLAT / 8.0).abs() < 1e-6);
        let between = words_share(FLAT, &closest(0.76), 0.0);
        assert!(FLAT / 8.0 < between && between < FLAT, "{between}");
        // Nothing to compare: the words decide.
        assert!((words_share(FLAT, &[], 0.0) - FLAT).abs() < 1e-12);
        // Only the closest 32 count.
        let mut more = closest(0.9);
        more.extend([0.0; 100]);
        assert!((words_share(FLAT, &more, 0.0) - FLAT).abs() < 1e-6);
    }

    #[test]
    fn a_store_smaller_than_the_sample_is_not_flat_for_lack_of_memories() {
        // One memory: it stands clear of the empty places, so meaning
        // leads its match as it would beside a second, unrelated memory.
        let alone = words_share(FLAT, &[0.46], 0.0);
        assert!((alone - FLAT / 8.0).abs() < 1e-6, "{alone}");
        assert!((alone - words_share(FLAT, &[0.46, 0.0], 0.0)).abs() < 1e-12);
        // A full sample of near-equal cosines is flat, as before.
        assert!((words_share(FLAT, &[0.46; SPREAD_SAMPLE], 0.0) - FLAT).abs() < 1e-6);
    }

    #[test]
    fn two_shared_words_overtake_a_closer_meaning_only_where_the_vector_side_is_flat() {
        // From the semantic eval set: "Does the user own a pet?" The answer
        // is first by cosine and shares no word; "The user owns the
        // payments dashboard." shares "own" and "user" (0.44 of the
        // question's information, 5.1 nats) at 0.96 of its cosine.
        let owns = Lexical {
            rank: 0,
            coverage: 0.44,
            matched_idf: 5.12,
            matched_terms: 2,
        };
        let clear = words_share(FLAT, &closest(0.6), owns.coverage);
        assert!(fused(1.0, None, clear) > fused(0.96, Some(owns), clear));
        // Among a conversation's turns, all about as close, they decide.
        let flat = words_share(FLAT, &closest(0.9), owns.coverage);
        assert!(fused(1.0, None, flat) < fused(0.96, Some(owns), flat));
    }

    #[test]
    fn a_memory_holding_the_whole_question_gets_the_words_their_full_share() {
        let clear = closest(0.6);
        assert!((words_share(FLAT, &clear, 1.0) - FLAT).abs() < 1e-12);
        let share = words_share(FLAT, &clear, 0.9);
        assert!(FLAT / 8.0 < share && share < FLAT, "{share}");
        // In a store of 51, "zebra" (3.6 nats) is nearly all of "zebra
        // stripes" (fifty memories say "stripes"): the one memory that
        // names it leads over the clearly closest stripes.
        let zebra = Lexical {
            rank: 0,
            coverage: 0.99,
            matched_idf: 3.55,
            matched_terms: 1,
        };
        let share = words_share(FLAT, &clear, zebra.coverage);
        assert!(fused(0.1, Some(zebra), share) > fused(1.0, None, share));
    }

    #[test]
    fn a_weaker_cosine_is_a_weaker_score() {
        assert!(fused(0.95, Some(several(0.5)), FLAT) > fused(0.5, Some(several(0.5)), FLAT));
        assert!(fused(0.95, None, FLAT) > fused(0.5, None, FLAT));
    }
}
