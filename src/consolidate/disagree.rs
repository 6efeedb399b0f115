//! The contradiction detector of a pass with no model: a cheap, pure test
//! of whether two statements that are about one subject (the pass decides
//! that by their similarity) say different things about it. It looks at
//! the words alone:
//!
//! - **negation**: one of them is negated and the other is not, and
//!   besides the negation they share at least [`NEGATION_OVERLAP`] of
//!   their words ("Commit to main for small fixes" / "Never commit to
//!   main, even for small fixes"; not "Zustand, not Redux" / "We use
//!   Zustand for client state instead of Redux", which says it in other
//!   words);
//! - **numbers**: both give numbers (or versions, ports, `v2`, `RS256`) and
//!   not the same ones ("line length 100" / "line length 88");
//! - **values**: the same sentence with a few words swapped ("managed with
//!   Zustand" / "managed with Redux Toolkit", "tabs over spaces" / "spaces
//!   over tabs"): the two begin and end alike, and what differs between
//!   the start and the end they share is one to [`MAX_SWAPPED`] words on
//!   each side, with the shared start and end at least half of each.
//!
//! It misses what only meaning tells ("tabs over spaces" / "spaces over
//! tabs"), which is what a model is for. How often it is right is measured
//! on the paraphrase set (`engram-bench paraphrase`, see
//! `docs/benchmarks.md`): it must never flag a paraphrase.

use std::collections::BTreeSet;
use std::fmt;

/// The most words a side may have that the other lacks for the two to be
/// one sentence with a value swapped.
pub const MAX_SWAPPED: usize = 3;

/// Words that negate a statement, or turn an alternative down ("pnpm,
/// not npm" says what "pnpm rather than npm", "pnpm instead of npm" and
/// "pnpm over npm" say); any word ending in `n't` does too.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "cannot", "nor", "without", "avoid", "avoids", "instead", "rather",
    "over",
];

/// The share of their words (Jaccard, negations left out) two statements
/// of which one is negated must have in common to disagree.
pub const NEGATION_OVERLAP: f64 = 0.35;

/// How two statements on one subject disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disagreement {
    /// One is negated, the other is not.
    Negation,
    /// Both give numbers, not the same ones: each side's, in order.
    Numbers {
        ours: Vec<String>,
        theirs: Vec<String>,
    },
    /// One sentence with words swapped: the words only each side has.
    Values {
        ours: Vec<String>,
        theirs: Vec<String>,
    },
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Negation => f.write_str("one says not, the other does not"),
            Self::Numbers { ours, theirs } => {
                write!(f, "{} against {}", ours.join(", "), theirs.join(", "))
            }
            Self::Values { ours, theirs } => {
                write!(f, "\"{}\" against \"{}\"", ours.join(" "), theirs.join(" "))
            }
        }
    }
}

/// How `ours` and `theirs` disagree, if the words tell.
pub fn disagreement(ours: &str, theirs: &str) -> Option<Disagreement> {
    let (our_words, their_words) = (words(ours), words(theirs));
    if negated(&our_words) != negated(&their_words)
        && overlap(&our_words, &their_words) >= NEGATION_OVERLAP
    {
        return Some(Disagreement::Negation);
    }
    let (our_numbers, their_numbers) = (numbers(ours), numbers(theirs));
    if !our_numbers.is_empty() && !their_numbers.is_empty() && our_numbers != their_numbers {
        return Some(Disagreement::Numbers {
            ours: our_numbers.into_iter().collect(),
            theirs: their_numbers.into_iter().collect(),
        });
    }
    swapped(
        &words_in_order(ours).collect::<Vec<_>>(),
        &words_in_order(theirs).collect::<Vec<_>>(),
    )
}

/// The words between the start and the end `ours` and `theirs` share, if
/// that is all that differs: one to [`MAX_SWAPPED`] words a side, the
/// shared start and end at least half of each.
fn swapped(ours: &[String], theirs: &[String]) -> Option<Disagreement> {
    let start = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
    let shorter = ours.len().min(theirs.len());
    let end = ours
        .iter()
        .rev()
        .zip(theirs.iter().rev())
        .take(shorter - start)
        .take_while(|(a, b)| a == b)
        .count();
    let shared = start + end;
    let middle = |words: &[String]| words[start..words.len() - end].to_vec();
    let (our_middle, their_middle) = (middle(ours), middle(theirs));
    let fits = |middle: &[String], all: &[String]| {
        (1..=MAX_SWAPPED).contains(&middle.len()) && 2 * shared >= all.len()
    };
    (fits(&our_middle, ours) && fits(&their_middle, theirs)).then_some(Disagreement::Values {
        ours: our_middle,
        theirs: their_middle,
    })
}

/// The distinct words of `text`, in lower case, without the punctuation
/// around them (inner punctuation stays: `config/app.yaml`, `don't`).
fn words(text: &str) -> BTreeSet<String> {
    words_in_order(text).collect()
}

fn is_negation(word: &str) -> bool {
    NEGATIONS.contains(&word) || word.ends_with("n't")
}

fn negated(words: &BTreeSet<String>) -> bool {
    words.iter().any(|word| is_negation(word))
}

/// The Jaccard overlap of two sets of words, their negations left out.
fn overlap(ours: &BTreeSet<String>, theirs: &BTreeSet<String>) -> f64 {
    let kept = |words: &BTreeSet<String>| -> BTreeSet<String> {
        words
            .iter()
            .filter(|word| !is_negation(word))
            .cloned()
            .collect()
    };
    let (ours, theirs) = (kept(ours), kept(theirs));
    let union = ours.union(&theirs).count();
    #[expect(clippy::cast_precision_loss, reason = "word counts are small")]
    let share = ours.intersection(&theirs).count() as f64 / union.max(1) as f64;
    share
}

/// The numbers of `text`: each run of letters, digits and inner dots that
/// holds a digit (`1.22`, `6379`, `v2`, `rs256`), in lower case.
fn numbers(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map(|run| run.trim_matches('.'))
        .filter(|run| run.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .collect()
}

/// The words of `text` as [`words`] reads them, in order, repeats kept.
fn words_in_order(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || ",;:()[]{}\"`".contains(c))
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negation_on_one_side_only_disagrees() {
        assert_eq!(
            disagreement(
                "Commit directly to main for small fixes.",
                "Never commit directly to main, even for small fixes."
            ),
            Some(Disagreement::Negation)
        );
        assert_eq!(
            disagreement(
                "Don't use unwrap() in library code.",
                "Library code must not call unwrap()."
            ),
            None,
            "both negated"
        );
        assert_eq!(
            disagreement(
                "Frontend state is managed with Zustand, not Redux.",
                "We use Zustand for client state management instead of Redux."
            ),
            None,
            "the same said in other words"
        );
    }

    #[test]
    fn different_numbers_disagree_and_one_sided_ones_do_not() {
        assert_eq!(
            disagreement(
                "Format with black at line length 100.",
                "Format with black at line length 88."
            ),
            Some(Disagreement::Numbers {
                ours: vec!["100".to_owned()],
                theirs: vec!["88".to_owned()]
            })
        );
        assert_eq!(
            disagreement(
                "Webhooks are retried up to 5 times with backoff.",
                "Failed webhook deliveries are retried five times, backing off."
            ),
            None
        );
        assert_eq!(
            disagreement(
                "Use a 100-character line.",
                "Lines are at most 100 characters."
            ),
            None,
            "the same number in other words"
        );
    }

    #[test]
    fn one_sentence_with_a_value_swapped_disagrees() {
        let found = disagreement(
            "Frontend state is managed with Zustand.",
            "Frontend state is managed with Redux Toolkit.",
        );
        assert_eq!(
            found,
            Some(Disagreement::Values {
                ours: vec!["zustand".to_owned()],
                theirs: vec!["redux".to_owned(), "toolkit".to_owned()]
            })
        );
        assert_eq!(
            found.unwrap().to_string(),
            "\"zustand\" against \"redux toolkit\""
        );
        assert!(
            disagreement(
                "The user prefers tabs over spaces for indentation.",
                "The user prefers spaces over tabs for indentation."
            )
            .is_some(),
            "the same words in another order"
        );
        assert_eq!(
            disagreement("Use pnpm for packages.", "pnpm installs the packages."),
            None,
            "little of the two is shared start or end"
        );
        assert_eq!(
            disagreement(
                "The mobile app is written in Flutter.",
                "Our mobile client is built with Flutter."
            ),
            None,
            "a rewording swaps more than a value"
        );
    }
}
