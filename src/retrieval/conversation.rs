//! The conversation's lift: a memory is judged with the memories captured
//! from the same conversation (its namespace and `session_id`), not alone.
//!
//! A question often names several things that one conversation spread over
//! several memories ("the total of the episodes I listened to from *How I
//! Built This* and *My Favorite Murder*"): each memory holds some of the
//! words, none holds them all, and judged one by one they lose to a single
//! memory elsewhere that happens to share one rare word. So each
//! conversation's words score is the sum of its candidates' BM25 scores
//! (relative to the best single match), the best conversation of the
//! retrieval scores 1, and each memory's match becomes
//! `(match + weight × conversation) / (1 + weight)`: still 0..1, and with
//! the same order as an unscaled lift.
//!
//! A memory without a session has no conversation to be judged with: its
//! match stays as it was (its own words are in it already), so a store of
//! memories written by hand ranks as before. The weight was chosen on
//! LongMemEval's tune half and checked on LoCoMo's dev split and the
//! semantic eval set (`docs/benchmarks.md`).

use std::collections::HashMap;

use crate::memory::{Memory, Namespace, SessionId};

/// A conversation: the namespace and session its memories share.
type Conversation<'a> = (&'a Namespace, &'a SessionId);

fn conversation_of(memory: &Memory) -> Option<Conversation<'_>> {
    memory
        .session_id
        .as_ref()
        .map(|session| (&memory.namespace, session))
}

/// The conversation score, 0..1, of each found memory with its BM25 score
/// relative to the best match: `None` for a memory without a session, and
/// for all of them when no conversation's words matched.
pub fn scores<'a>(found: impl IntoIterator<Item = (&'a Memory, f32)>) -> Vec<Option<f64>> {
    let found: Vec<(Option<Conversation<'a>>, f32)> = found
        .into_iter()
        .map(|(memory, lexical)| (conversation_of(memory), lexical))
        .collect();
    let mut words: HashMap<Conversation<'a>, f64> = HashMap::new();
    for (conversation, lexical) in &found {
        if let Some(conversation) = conversation {
            *words.entry(*conversation).or_default() += f64::from(*lexical);
        }
    }
    let best = words.values().copied().fold(0.0, f64::max);
    found
        .iter()
        .map(|(conversation, _)| {
            conversation
                .filter(|_| best > 0.0)
                .map(|conversation| words[&conversation] / best)
        })
        .collect()
}

/// `matched` lifted by `weight` (0..1) of its conversation's `score`.
pub fn lift(matched: f64, score: f64, weight: f64) -> f64 {
    (matched + weight * score) / (1.0 + weight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Category;

    fn memory(namespace: &str, session: Option<&str>) -> Memory {
        let mut memory = Memory::example(
            Namespace::User(namespace.parse().unwrap()),
            Category::UserFacts,
            "x",
        );
        memory.session_id = session.map(|session| session.parse().unwrap());
        memory
    }

    fn close(got: &[Option<f64>], want: &[Option<f64>]) -> bool {
        got.len() == want.len()
            && got.iter().zip(want).all(|pair| match pair {
                (Some(got), Some(want)) => (got - want).abs() < 1e-6,
                (got, want) => got == want,
            })
    }

    #[test]
    fn a_conversation_scores_its_memories_summed_words_against_the_best() {
        let memories = [
            memory("ana", Some("s1")),
            memory("ana", Some("s1")),
            memory("ana", Some("s2")),
            memory("ana", None),
            memory("bo", Some("s1")),
        ];
        let lexical = [0.5, 0.5, 0.8, 0.9, 0.25];
        let scores = scores(memories.iter().zip(lexical));
        assert!(
            close(
                &scores,
                &[Some(1.0), Some(1.0), Some(0.8), None, Some(0.25)]
            ),
            "a session's memories share one score, the same session elsewhere is \
             another conversation, and a memory without one has none: {scores:?}"
        );
    }

    #[test]
    fn without_words_matched_no_memory_has_a_conversation_score() {
        let memories = [memory("ana", Some("s1")), memory("ana", None)];
        assert_eq!(scores(memories.iter().zip([0.0, 0.4])), [None, None]);
    }

    #[test]
    fn the_lift_keeps_the_match_within_0_and_1_and_does_nothing_at_weight_0() {
        assert!((lift(0.55, 1.0, 0.3) - 0.85 / 1.3).abs() < 1e-12);
        assert!(lift(0.6, 0.8, 0.3) < lift(0.55, 1.0, 0.3));
        assert_eq!(lift(1.0, 1.0, 1.0), 1.0);
        assert_eq!(lift(0.42, 1.0, 0.0), 0.42);
    }
}
