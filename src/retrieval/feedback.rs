//! Pseudo-relevance feedback: the query moved toward its best match, for a
//! second search.
//!
//! A question about several events ("in what order did I take my three
//! trips?") is put in general words, and each event's memory in its own
//! particular ones: the first search finds the event closest to the
//! question, and the others rank among whatever else is near the topic.
//! The best match says how this user speaks of the topic, so the query
//! moved a little toward it (`retrieval.feedback_weight`, 0.2 by default)
//! and searched for beside the query itself finds its siblings as well.
//!
//! It runs only when the two closest memories are near-tied
//! ([`NEAR_TIE`]): that is what a question about several like things
//! looks like, while a clear winner answers a question about one thing,
//! and moving toward it only crowds the answer with the winner's
//! neighbours, a near miss's when the winner is wrong (see
//! `docs/retrieval.md`, "Feedback").

use crate::index::{cosine, normalise};

/// The largest gap between the two closest memories' cosines at which the
/// query is moved. Chosen on LongMemEval's tune half and the repository's
/// semantic eval set together: from 0.03 to 0.07 both stayed within a
/// question of each other and the semantic set lost nothing, while
/// without the gate it lost two questions of 150.
pub const NEAR_TIE: f32 = 0.05;

/// Whether the two largest of `similarities` are within [`NEAR_TIE`] of
/// each other (never with fewer than two).
pub fn near_tie(similarities: impl IntoIterator<Item = f32>) -> bool {
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for similarity in similarities {
        if similarity > first {
            second = first;
            first = similarity;
        } else if similarity > second {
            second = similarity;
        }
    }
    second.is_finite() && first - second < NEAR_TIE
}

/// The cosine from which a query already points at the best match: moving
/// it would change nothing but rounding.
const PARALLEL: f32 = 0.9999;

/// Each of `queries` that moving changes, by its index: the query,
/// normalised, plus `weight` times `best` (a normalised vector),
/// normalised again. A query of no length or of another length, or one
/// that already points at `best`, has none.
pub fn moved(queries: &[Vec<f32>], best: &[f32], weight: f32) -> Vec<(usize, Vec<f32>)> {
    queries
        .iter()
        .enumerate()
        .filter_map(|(index, query)| {
            if query.len() != best.len() || is_zero(query) || cosine(query, best) >= PARALLEL {
                return None;
            }
            let mut unit = query.clone();
            normalise(&mut unit);
            let mut moved: Vec<f32> = unit.iter().zip(best).map(|(q, b)| q + weight * b).collect();
            normalise(&mut moved);
            // The best match's opposite, moved all the way, is nothing.
            (!is_zero(&moved)).then_some((index, moved))
        })
        .collect()
}

fn is_zero(vector: &[f32]) -> bool {
    vector.iter().all(|&x| x == 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(vector: &[f32]) -> f32 {
        vector.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    #[test]
    fn a_query_moves_toward_the_best_match_by_the_weight_and_stays_normalised() {
        let query = vec![2.0, 0.0, 0.0];
        let best = [0.0, 1.0, 0.0];
        let moved = moved(std::slice::from_ref(&query), &best, 0.2);
        assert_eq!(moved.len(), 1);
        let (index, moved) = &moved[0];
        assert_eq!(*index, 0);
        assert!((norm(moved) - 1.0).abs() < 1e-6);
        // (1, 0.2, 0) normalised: the angle's tangent is the weight.
        assert!((moved[1] / moved[0] - 0.2).abs() < 1e-6);
        assert!(cosine(moved, &best) > cosine(&query, &best));
        assert!(cosine(moved, &query) > cosine(moved, &best));
    }

    #[test]
    fn a_query_moving_cannot_change_has_no_moved_vector() {
        let best = [0.0, 1.0, 0.0];
        let queries = vec![
            vec![0.0, 0.0, 0.0],
            vec![1.0, 0.0],
            vec![0.0, 3.0, 0.0],
            vec![0.0, -1.0, 0.0],
            vec![1.0, 0.0, 0.0],
        ];
        let moved = moved(&queries, &best, 1.0);
        let indices: Vec<usize> = moved.iter().map(|(index, _)| *index).collect();
        assert_eq!(
            indices,
            [4],
            "of no length, of another length, parallel, opposite"
        );
    }

    #[test]
    fn only_two_closest_memories_within_the_gap_are_a_near_tie() {
        assert!(near_tie([0.30, 0.61, 0.58]));
        assert!(!near_tie([0.30, 0.61, 0.52]));
        assert!(!near_tie([0.61]));
        assert!(!near_tie([]));
    }

    #[test]
    fn a_weight_of_zero_only_normalises() {
        let moved = moved(&[vec![3.0, 4.0]], &[1.0, 0.0], 0.0);
        assert_eq!(moved, [(0, vec![0.6, 0.8])]);
    }
}
