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

use crate::memory::{Namespace, SessionId};

use super::search::Candidate;

/// A conversation: the namespace and session its memories share.
type Conversation<'a> = (&'a Namespace, &'a SessionId);

fn conversation_of(candidate: &Candidate) -> Option<Conversation<'_>> {
    let memory = &candidate.memory;
    memory
        .session_id
        .as_ref()
        .map(|session| (&memory.namespace, session))
}

/// Sets the `conversation` score of each candidate that has a session and
/// lifts its `fused` match by `weight` of it. Nothing changes at weight 0
/// or without words matched.
pub fn lift(candidates: &mut [Candidate], weight: f64) {
    if weight <= 0.0 {
        return;
    }
    let mut words: HashMap<Conversation<'_>, f64> = HashMap::new();
    for candidate in candidates.iter() {
        if let Some(conversation) = conversation_of(candidate) {
            *words.entry(conversation).or_default() += f64::from(candidate.lexical);
        }
    }
    let best = words.values().copied().fold(0.0, f64::max);
    if best <= 0.0 {
        return;
    }
    let scores: Vec<Option<f64>> = candidates
        .iter()
        .map(|candidate| conversation_of(candidate).map(|conversation| words[&conversation] / best))
        .collect();
    for (candidate, score) in candidates.iter_mut().zip(scores) {
        if let Some(score) = score {
            candidate.conversation = Some(score);
            candidate.fused = (candidate.fused + weight * score) / (1.0 + weight);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::{Category, Memory};

    fn candidate(session: Option<&str>, lexical: f32, fused: f64) -> Candidate {
        let mut memory = Memory::example(
            Namespace::User("ana".parse().unwrap()),
            Category::UserFacts,
            "x",
        );
        memory.session_id = session.map(|session| session.parse().unwrap());
        Candidate::example(memory, lexical, fused)
    }

    fn conversations_and_matches(candidates: &[Candidate]) -> Vec<(Option<f64>, f64)> {
        candidates
            .iter()
            .map(|candidate| (candidate.conversation, candidate.fused))
            .collect()
    }

    #[test]
    fn a_conversation_whose_memories_share_the_words_lifts_each_of_them_and_no_other() {
        let mut candidates = vec![
            candidate(Some("s1"), 0.5, 0.55),
            candidate(Some("s1"), 0.5, 0.40),
            candidate(Some("s2"), 0.8, 0.60),
            candidate(None, 0.3, 0.30),
        ];
        lift(&mut candidates, 0.3);
        let lifted = conversations_and_matches(&candidates);
        let expected = [
            (Some(1.0), (0.55 + 0.3) / 1.3),
            (Some(1.0), (0.40 + 0.3) / 1.3),
            (Some(0.8), (0.60 + 0.3 * 0.8) / 1.3),
            (None, 0.30),
        ];
        for ((conversation, fused), (want_conversation, want_fused)) in lifted.iter().zip(expected)
        {
            match (conversation, want_conversation) {
                (Some(got), Some(want)) => assert!((got - want).abs() < 1e-6, "{lifted:?}"),
                (got, want) => assert_eq!(*got, want, "{lifted:?}"),
            }
            assert!((fused - want_fused).abs() < 1e-6, "{lifted:?}");
        }
        assert!(
            lifted[0].1 > lifted[2].1,
            "the first memory of s1 now outranks s2's single better match"
        );
    }

    #[test]
    fn the_same_session_in_another_namespace_is_another_conversation() {
        let mut elsewhere = candidate(Some("s1"), 0.5, 0.5);
        Arc::get_mut(&mut elsewhere.memory).unwrap().namespace =
            Namespace::User("bo".parse().unwrap());
        let mut candidates = vec![candidate(Some("s1"), 0.5, 0.5), elsewhere];
        lift(&mut candidates, 0.3);
        assert!(
            candidates
                .iter()
                .all(|candidate| candidate.conversation == Some(1.0))
        );
    }

    #[test]
    fn nothing_changes_at_weight_zero_or_without_words() {
        let mut candidates = vec![candidate(Some("s1"), 0.5, 0.55), candidate(None, 0.0, 0.4)];
        lift(&mut candidates, 0.0);
        assert_eq!(
            conversations_and_matches(&candidates),
            [(None, 0.55), (None, 0.4)]
        );
        let mut wordless = vec![candidate(Some("s1"), 0.0, 0.55), candidate(None, 0.0, 0.4)];
        lift(&mut wordless, 0.3);
        assert_eq!(
            conversations_and_matches(&wordless),
            [(None, 0.55), (None, 0.4)]
        );
    }
}
