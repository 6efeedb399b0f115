//! LongMemEval's retrieval metrics, as its own evaluation computes them
//! (`src/retrieval/eval_utils.py` of the benchmark's repository):
//! recall_any@k (some relevant item in the top k), recall_all@k (every
//! one), and NDCG@k with that script's discount (positions 1 and 2 both
//! weigh 1, position p > 1 weighs 1 / log2 p). A ranking of turns becomes
//! a ranking of sessions by each session's best-ranked turn, which is what
//! the script's `turn2session` does for recall.

use std::collections::HashSet;
use std::hash::Hash;

/// The cut-offs reported.
pub const CUTOFFS: [usize; 2] = [5, 10];

/// `ranking` with each item kept at its first (best) place only: several
/// memories of one turn, or several turns of one session, count once.
pub fn first_places<T: Eq + Hash + Copy>(ranking: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = HashSet::new();
    ranking
        .into_iter()
        .filter(|item| seen.insert(*item))
        .collect()
}

/// 1 when some relevant item is in the top `k`.
pub fn recall_any<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>, k: usize) -> f64 {
    let hit = ranked.iter().take(k).any(|item| relevant.contains(item));
    f64::from(u8::from(hit))
}

/// 1 when every relevant item is in the top `k` (vacuously so with none).
pub fn recall_all<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>, k: usize) -> f64 {
    let top: HashSet<&T> = ranked.iter().take(k).collect();
    f64::from(u8::from(relevant.iter().all(|item| top.contains(item))))
}

/// NDCG@k of binary relevance, against the ideal ranking that puts every
/// relevant item first; 0 with nothing relevant.
pub fn ndcg<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>, k: usize) -> f64 {
    let gains = ranked
        .iter()
        .take(k)
        .map(|item| f64::from(u8::from(relevant.contains(item))));
    let ideal = dcg(std::iter::repeat_n(1.0, relevant.len().min(k)));
    if ideal == 0.0 {
        return 0.0;
    }
    dcg(gains) / ideal
}

/// The benchmark's DCG: the first gain as it is, the one at position
/// p ≥ 2 divided by log2 p.
fn dcg(gains: impl IntoIterator<Item = f64>) -> f64 {
    gains
        .into_iter()
        .enumerate()
        .map(|(index, gain)| {
            if index == 0 {
                gain
            } else {
                #[expect(clippy::cast_precision_loss, reason = "a rank below 2^52")]
                let position = (index + 1) as f64;
                gain / position.log2()
            }
        })
        .sum()
}

/// One ranking's scores at every cut-off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Scores {
    pub recall_any: [f64; CUTOFFS.len()],
    pub recall_all: [f64; CUTOFFS.len()],
    pub ndcg: [f64; CUTOFFS.len()],
}

impl Scores {
    pub fn of<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>) -> Self {
        Self {
            recall_any: CUTOFFS.map(|k| recall_any(ranked, relevant, k)),
            recall_all: CUTOFFS.map(|k| recall_all(ranked, relevant, k)),
            ndcg: CUTOFFS.map(|k| ndcg(ranked, relevant, k)),
        }
    }
}

/// Means of [`Scores`] over questions, in percent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    sum: Scores,
    pub questions: usize,
}

impl Tally {
    pub fn add(&mut self, scores: &Scores) {
        for at in 0..CUTOFFS.len() {
            self.sum.recall_any[at] += scores.recall_any[at];
            self.sum.recall_all[at] += scores.recall_all[at];
            self.sum.ndcg[at] += scores.ndcg[at];
        }
        self.questions += 1;
    }

    /// The means in percent, as `(metric name, value)`, in the order the
    /// report prints them.
    pub fn percentages(&self) -> Vec<(String, f64)> {
        #[expect(clippy::cast_precision_loss, reason = "a question count")]
        let questions = self.questions.max(1) as f64;
        let mut named = Vec::new();
        for (at, k) in CUTOFFS.iter().enumerate() {
            named.push((
                format!("recall_any@{k}"),
                100.0 * self.sum.recall_any[at] / questions,
            ));
            named.push((
                format!("recall_all@{k}"),
                100.0 * self.sum.recall_all[at] / questions,
            ));
        }
        let ndcg_at = CUTOFFS.len() - 1;
        named.push((
            format!("NDCG@{}", CUTOFFS[ndcg_at]),
            100.0 * self.sum.ndcg[ndcg_at] / questions,
        ));
        named
    }
}

/// The nearest-rank percentile of `values` (sorted here); 0 when empty.
pub fn percentile(values: &mut [usize], quantile: f64) -> usize {
    values.sort_unstable();
    if values.is_empty() {
        return 0;
    }
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index into a small sample"
    )]
    let rank = ((quantile * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&'static str]) -> HashSet<&'static str> {
        items.iter().copied().collect()
    }

    #[test]
    fn recall_any_needs_one_relevant_item_within_k() {
        let ranked = ["a", "b", "c", "d", "e", "f"];
        assert_eq!(recall_any(&ranked, &set(&["f"]), 5), 0.0);
        assert_eq!(recall_any(&ranked, &set(&["f"]), 10), 1.0);
        assert_eq!(recall_any(&ranked, &set(&["e", "z"]), 5), 1.0);
        assert_eq!(recall_any(&ranked, &set(&[]), 5), 0.0);
    }

    #[test]
    fn recall_all_needs_every_relevant_item_within_k() {
        let ranked = ["a", "b", "c", "d", "e", "f"];
        assert_eq!(recall_all(&ranked, &set(&["a", "e"]), 5), 1.0);
        assert_eq!(recall_all(&ranked, &set(&["a", "f"]), 5), 0.0);
        assert_eq!(recall_all(&ranked, &set(&["a", "f"]), 10), 1.0);
        // An item never retrieved keeps it at 0 whatever k.
        assert_eq!(recall_all(&ranked, &set(&["a", "z"]), 10), 0.0);
    }

    #[test]
    fn ndcg_uses_the_benchmarks_discount() {
        let one = set(&["x"]);
        assert_eq!(ndcg(&["x", "a"], &one, 10), 1.0);
        // Position 2 weighs 1 / log2 2 = 1, as the benchmark's dcg has it.
        assert_eq!(ndcg(&["a", "x"], &one, 10), 1.0);
        let third = ndcg(&["a", "b", "x"], &one, 10);
        assert!((third - 1.0 / 3f64.log2()).abs() < 1e-12, "{third}");
        assert_eq!(ndcg(&["a", "b", "x"], &one, 2), 0.0);
        // Two relevant items at places 1 and 4: (1 + 1/2) / (1 + 1).
        let two = ndcg(&["x", "a", "b", "y"], &set(&["x", "y"]), 10);
        assert!((two - 0.75).abs() < 1e-12, "{two}");
        assert_eq!(ndcg(&["a"], &set(&[]), 10), 0.0);
    }

    #[test]
    fn turns_become_sessions_at_their_best_place() {
        // (session, turn) pairs as a turn-level retrieval returns them.
        let turns = [(3, 0), (3, 2), (1, 5), (3, 1), (7, 0), (1, 0)];
        let sessions = first_places(turns.iter().map(|(session, _)| *session));
        assert_eq!(sessions, vec![3, 1, 7]);
        let evidence: HashSet<i32> = [1, 7].into_iter().collect();
        // Session 7 is the third session although its turn is fifth.
        assert_eq!(recall_all(&sessions, &evidence, 3), 1.0);
        assert_eq!(recall_all(&sessions, &evidence, 2), 0.0);
        assert_eq!(first_places(turns), turns.to_vec());
    }

    #[test]
    fn tally_reports_means_in_percent() {
        let relevant = set(&["x"]);
        let mut tally = Tally::default();
        tally.add(&Scores::of(&["x"], &relevant));
        tally.add(&Scores::of(&["a", "b", "c", "d", "e", "x"], &relevant));
        let named = tally.percentages();
        let value = |name: &str| named.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(tally.questions, 2);
        assert_eq!(value("recall_any@5"), 50.0);
        assert_eq!(value("recall_all@10"), 100.0);
        let expected = 100.0 * (1.0 + 1.0 / 6f64.log2()) / 2.0;
        assert!((value("NDCG@10") - expected).abs() < 1e-9);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let mut values = vec![40, 10, 30, 20];
        assert_eq!(percentile(&mut values, 0.5), 20);
        assert_eq!(percentile(&mut values, 0.95), 40);
        assert_eq!(percentile(&mut [], 0.5), 0);
    }
}
