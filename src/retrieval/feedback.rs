//! Pseudo-relevance feedback: the query moved toward its best match, for a
//! second search.
//!
//! A question about several events ("in what order did I take my three
//! trips?") is put in general words, and each event's memory in its own
//! particular ones: the first search finds the event closest to the
//! question, and the others rank among whatever else is near the topic.
//! The best match says how this user speaks of the topic, so the query
//! moved a little toward it (`retrieval.feedback_weight`, 0.2 by default)
//! finds its siblings as well. A fifth of the way keeps the question in
//! charge: a best match that is off the point hardly moves it (see
//! `docs/retrieval.md`, "Feedback").

/// Each of `queries`, normalised, plus `weight` times `best` (a normalised
/// vector), normalised again. A query of another length, or of no length,
/// is returned as it is.
pub fn moved(queries: &[Vec<f32>], best: &[f32], weight: f32) -> Vec<Vec<f32>> {
    queries
        .iter()
        .map(|query| {
            let length = norm(query);
            if query.len() != best.len() || length == 0.0 {
                return query.clone();
            }
            let mut moved: Vec<f32> = query
                .iter()
                .zip(best)
                .map(|(q, b)| q / length + weight * b)
                .collect();
            let moved_length = norm(&moved);
            if moved_length > 0.0 {
                moved.iter_mut().for_each(|x| *x /= moved_length);
            }
            moved
        })
        .collect()
}

fn norm(vector: &[f32]) -> f32 {
    vector.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(b))
    }

    #[test]
    fn a_query_moves_toward_the_best_match_by_the_weight_and_stays_normalised() {
        let query = vec![2.0, 0.0, 0.0];
        let best = [0.0, 1.0, 0.0];
        let moved = moved(std::slice::from_ref(&query), &best, 0.2);
        assert!((norm(&moved[0]) - 1.0).abs() < 1e-6);
        // (1, 0.2, 0) normalised: the angle's tangent is the weight.
        assert!((moved[0][1] / moved[0][0] - 0.2).abs() < 1e-6);
        assert!(cosine(&moved[0], &best) > cosine(&query, &best));
        assert!(cosine(&moved[0], &query) > cosine(&moved[0], &best));
    }

    #[test]
    fn a_query_of_no_length_or_another_length_is_left_alone() {
        let queries = vec![vec![0.0, 0.0, 0.0], vec![1.0, 0.0]];
        assert_eq!(moved(&queries, &[0.0, 1.0, 0.0], 0.2), queries);
    }

    #[test]
    fn a_weight_of_zero_only_normalises() {
        let moved = moved(&[vec![3.0, 4.0]], &[1.0, 0.0], 0.0);
        assert_eq!(moved, [vec![0.6, 0.8]]);
    }
}
