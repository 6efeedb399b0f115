//! What a pass with no model would change in one namespace, worked out
//! from its current memories, their vectors and use counts, and the
//! decisions of earlier passes; pure, so every rule is tested here.
//!
//! - **Near-duplicates**: taken in order of support (confirmed before
//!   provisional, then the most used, then the newest), each memory not
//!   yet placed keeps every other unplaced memory whose similarity to it
//!   is at or above the duplicate threshold and whose words do not
//!   disagree with it ([`disagree`]): those are reduced to it. Every
//!   member of a group is near the kept one itself, so one loose chain of
//!   likenesses never pulls unlike memories together.
//! - **Contradictions**: two memories left current whose similarity is at
//!   or above the subject threshold and whose words disagree are flagged,
//!   each for review naming the other.
//! - **A person's word stands**: a pair whose merge was undone is never
//!   merged again, and a pair flagged once (reviewed since, or not) is
//!   never flagged again.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use crate::memory::{Confidence, Memory, MemoryId, excerpt};

use super::disagree::{Disagreement, disagreement};

/// The most of the other memory a review reason quotes, in characters.
const QUOTED_CHARS: usize = 120;

/// A current memory a pass weighs.
pub struct Candidate {
    pub memory: Arc<Memory>,
    /// Its stored vector, of unit length.
    pub vector: Vec<f32>,
    /// How often retrieval returned it.
    pub uses: u64,
}

/// The similarities a pass judges by.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub duplicate: f64,
    pub subject: f64,
}

/// Pairs earlier passes decided about, each as (smaller id, larger id).
#[derive(Default)]
pub struct History {
    /// Merges a person undid.
    pub unmerged: HashSet<(MemoryId, MemoryId)>,
    /// Pairs flagged before.
    pub flagged: HashSet<(MemoryId, MemoryId)>,
}

/// A pair, the same whichever way round it is given.
pub fn pair(one: MemoryId, other: MemoryId) -> (MemoryId, MemoryId) {
    (one.min(other), one.max(other))
}

/// A group of near-duplicates: the member kept and the others, each with
/// its similarity to the kept one.
#[derive(Debug, PartialEq)]
pub struct Merge {
    pub kept: MemoryId,
    pub others: Vec<(MemoryId, f64)>,
    /// Why the kept one was kept, in words.
    pub support: String,
}

/// Two memories that seem to disagree, each with the reason its review
/// gives.
#[derive(Debug, PartialEq)]
pub struct Contradiction {
    pub first: (MemoryId, String),
    pub second: (MemoryId, String),
    pub similarity: f64,
    pub disagreement: Disagreement,
}

/// What a pass with no model changes.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub merges: Vec<Merge>,
    pub contradictions: Vec<Contradiction>,
}

/// Works out the plan over `candidates`.
pub fn plan(mut candidates: Vec<Candidate>, thresholds: Thresholds, history: &History) -> Plan {
    candidates.sort_by(support_order);
    let count = candidates.len();
    let similarity =
        |i: usize, j: usize| f64::from(dot(&candidates[i].vector, &candidates[j].vector));
    let disagree = |i: usize, j: usize| {
        disagreement(&candidates[i].memory.content, &candidates[j].memory.content)
    };
    let id = |i: usize| candidates[i].memory.id;

    let mut placed = vec![false; count];
    let mut merges = Vec::new();
    for kept in 0..count {
        if placed[kept] {
            continue;
        }
        let others: Vec<(usize, f64)> = (kept + 1..count)
            .filter(|&other| !placed[other])
            .map(|other| (other, similarity(kept, other)))
            .filter(|&(other, similar)| {
                similar >= thresholds.duplicate
                    && !history.unmerged.contains(&pair(id(kept), id(other)))
                    && disagree(kept, other).is_none()
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        placed[kept] = true;
        for &(other, _) in &others {
            placed[other] = true;
        }
        merges.push(Merge {
            kept: id(kept),
            others: others
                .iter()
                .map(|&(other, similar)| (id(other), similar))
                .collect(),
            support: support(&candidates[kept]),
        });
    }

    let superseded: BTreeSet<usize> = (0..count)
        .filter(|&i| placed[i] && !merges.iter().any(|merge| merge.kept == id(i)))
        .collect();
    let mut contradictions = Vec::new();
    for first in (0..count).filter(|i| !superseded.contains(i)) {
        for second in (first + 1..count).filter(|j| !superseded.contains(j)) {
            let similar = similarity(first, second);
            if similar < thresholds.subject
                || history.flagged.contains(&pair(id(first), id(second)))
            {
                continue;
            }
            if let Some(disagreement) = disagree(first, second) {
                let reason = |other: usize| {
                    format!(
                        "it may contradict memory {} (\"{}\"): {disagreement}",
                        id(other),
                        excerpt(&candidates[other].memory.content, QUOTED_CHARS)
                    )
                };
                contradictions.push(Contradiction {
                    first: (id(first), reason(second)),
                    second: (id(second), reason(first)),
                    similarity: similar,
                    disagreement,
                });
            }
        }
    }
    Plan {
        merges,
        contradictions,
    }
}

/// Best supported first: confirmed, then the most used, then the newest.
fn support_order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    let confirmed =
        |candidate: &Candidate| candidate.memory.lifecycle.confidence == Confidence::Confirmed;
    confirmed(b)
        .cmp(&confirmed(a))
        .then(b.uses.cmp(&a.uses))
        .then(b.memory.created_at.cmp(&a.memory.created_at))
        .then(b.memory.id.cmp(&a.memory.id))
}

/// Why a member was kept, in words.
fn support(candidate: &Candidate) -> String {
    let memory = &candidate.memory;
    format!(
        "{}, retrieved {} time{}, written {}",
        memory.lifecycle.confidence,
        candidate.uses,
        if candidate.uses == 1 { "" } else { "s" },
        memory.created_at.format("%Y-%m-%d %H:%M UTC")
    )
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};

    use super::*;
    use crate::memory::{Category, Lifecycle, Namespace};

    const THRESHOLDS: Thresholds = Thresholds {
        duplicate: 0.9,
        subject: 0.6,
    };

    /// A candidate saying `content`, written `age_minutes` ago, with its
    /// vector at `angle` radians on a circle (so similarities are cosines
    /// of angle differences).
    fn candidate(
        content: &str,
        angle: f32,
        age_minutes: i64,
        uses: u64,
        confidence: Confidence,
    ) -> Candidate {
        let namespace = Namespace::Repo("forge".parse().unwrap());
        let mut memory = Memory::example(namespace, Category::ProjectConventions, content);
        memory.created_at = Utc::now() - TimeDelta::minutes(age_minutes);
        memory.lifecycle = Lifecycle::of_new(confidence);
        Candidate {
            memory: Arc::new(memory),
            vector: vec![angle.cos(), angle.sin()],
            uses,
        }
    }

    fn ids(candidates: &[Candidate]) -> Vec<MemoryId> {
        candidates
            .iter()
            .map(|candidate| candidate.memory.id)
            .collect()
    }

    #[test]
    fn the_confirmed_then_most_used_then_newest_member_is_kept() {
        let provisional_busy = candidate(
            "Use pnpm for packages.",
            0.0,
            1,
            50,
            Confidence::Provisional,
        );
        let confirmed_old = candidate(
            "Packages are installed with pnpm.",
            0.05,
            60,
            1,
            Confidence::Confirmed,
        );
        let confirmed_newer = candidate(
            "We install packages using pnpm.",
            0.1,
            5,
            1,
            Confidence::Confirmed,
        );
        let confirmed_used = candidate(
            "pnpm installs the packages.",
            0.08,
            90,
            3,
            Confidence::Confirmed,
        );
        let all = vec![
            provisional_busy,
            confirmed_old,
            confirmed_newer,
            confirmed_used,
        ];
        let [busy, old, newer, used] = ids(&all)[..] else {
            unreachable!()
        };
        let plan = plan(all, THRESHOLDS, &History::default());
        assert_eq!(plan.merges.len(), 1, "{plan:?}");
        let merge = &plan.merges[0];
        assert_eq!(merge.kept, used, "confirmed, and the most used of those");
        let mut others: Vec<MemoryId> = merge.others.iter().map(|(id, _)| *id).collect();
        others.sort();
        let mut expected = vec![busy, old, newer];
        expected.sort();
        assert_eq!(others, expected);
        assert!(
            merge.support.starts_with("confirmed, retrieved 3 times"),
            "{}",
            merge.support
        );

        let tie = vec![
            candidate("Use pnpm for packages.", 0.0, 60, 0, Confidence::Confirmed),
            candidate(
                "Packages are installed with pnpm.",
                0.05,
                5,
                0,
                Confidence::Confirmed,
            ),
        ];
        let newest = tie[1].memory.id;
        assert_eq!(plan_of(tie).merges[0].kept, newest, "then the newest");
    }

    fn plan_of(candidates: Vec<Candidate>) -> Plan {
        plan(candidates, THRESHOLDS, &History::default())
    }

    #[test]
    fn each_member_is_near_the_kept_one_itself() {
        // 0 ~ 1 and 1 ~ 2, but 0 and 2 are far apart (cos 0.4 = 0.92).
        let chain = vec![
            candidate(
                "Run the linter before pushing.",
                0.0,
                1,
                9,
                Confidence::Confirmed,
            ),
            candidate(
                "Lint the code before a push.",
                0.4,
                2,
                5,
                Confidence::Confirmed,
            ),
            candidate(
                "Pushing needs a clean lint run first.",
                0.8,
                3,
                1,
                Confidence::Confirmed,
            ),
        ];
        let [first, second, third] = ids(&chain)[..] else {
            unreachable!()
        };
        let plan = plan_of(chain);
        assert_eq!(plan.merges.len(), 1, "{plan:?}");
        assert_eq!(plan.merges[0].kept, first);
        assert_eq!(plan.merges[0].others.len(), 1);
        assert_eq!(plan.merges[0].others[0].0, second);
        assert!(!plan.merges.iter().any(|merge| merge.kept == third));
    }

    #[test]
    fn near_duplicates_whose_words_disagree_are_flagged_not_merged() {
        let two = vec![
            candidate(
                "Format Python code with black at line length 100.",
                0.0,
                1,
                0,
                Confidence::Confirmed,
            ),
            candidate(
                "Format Python code with black at line length 88.",
                0.1,
                2,
                0,
                Confidence::Confirmed,
            ),
        ];
        let [newer, older] = ids(&two)[..] else {
            unreachable!()
        };
        let plan = plan_of(two);
        assert!(plan.merges.is_empty(), "{plan:?}");
        assert_eq!(plan.contradictions.len(), 1);
        let flagged = &plan.contradictions[0];
        assert_eq!((flagged.first.0, flagged.second.0), (newer, older));
        assert_eq!(
            flagged.first.1,
            format!(
                "it may contradict memory {older} (\"Format Python code with black at line length 88.\"): 100 against 88"
            )
        );
    }

    #[test]
    fn unrelated_and_agreeing_memories_are_left_alone() {
        let plan = plan_of(vec![
            candidate(
                "Format Python code with black at line length 100.",
                0.0,
                1,
                0,
                Confidence::Confirmed,
            ),
            // About something else: far below the subject threshold.
            candidate(
                "The CI runs on GitHub Actions at 3 a.m.",
                1.5,
                2,
                0,
                Confidence::Confirmed,
            ),
            // On the subject, and agreeing.
            candidate(
                "Python imports are sorted with isort.",
                0.7,
                3,
                0,
                Confidence::Confirmed,
            ),
        ]);
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn a_merge_undone_and_a_pair_flagged_before_are_not_decided_again() {
        let duplicates = vec![
            candidate("Use pnpm for packages.", 0.0, 1, 0, Confidence::Confirmed),
            candidate(
                "Packages are installed with pnpm.",
                0.05,
                2,
                0,
                Confidence::Confirmed,
            ),
        ];
        let contradiction = vec![
            candidate(
                "Format Python code with black at line length 100.",
                0.0,
                1,
                0,
                Confidence::Confirmed,
            ),
            candidate(
                "Format Python code with black at line length 88.",
                0.1,
                2,
                0,
                Confidence::Confirmed,
            ),
        ];
        let [a, b] = ids(&duplicates)[..] else {
            unreachable!()
        };
        let [c, d] = ids(&contradiction)[..] else {
            unreachable!()
        };
        let history = History {
            unmerged: HashSet::from([pair(b, a)]),
            flagged: HashSet::from([pair(d, c)]),
        };
        assert_eq!(plan(duplicates, THRESHOLDS, &history), Plan::default());
        assert_eq!(plan(contradiction, THRESHOLDS, &history), Plan::default());
    }
}
