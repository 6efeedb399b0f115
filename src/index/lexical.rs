//! The lexical side of the index: Okapi BM25 over lower-cased word tokens,
//! English function words left out (they match everything and, in short
//! memories, drown the words that matter) and inflections folded by a
//! light stemmer (so "deploys" finds "deployed"). Each choice was measured
//! on LoCoMo's dev split; the figures are in `docs/benchmarks.md`
//! ("LoCoMo").
//!
//! Each chunk keeps postings for its own entries (term → slots and term
//! frequencies), so chunks stay shareable between snapshots; document
//! frequencies and the average length are summed over the searched
//! chunks at query time.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// BM25's term-frequency saturation and length normalisation: Anserini's
/// defaults, which suit short texts better than the textbook 1.2–2 / 0.75:
/// a memory is a sentence or two, so a repeated word says little more and
/// length varies little (measured on LoCoMo: `docs/benchmarks.md`).
pub const K1: f32 = 0.9;
pub const B: f32 = 0.4;

/// A term, by the hash of its lower-cased text.
pub type Term = u64;

/// A text's terms with their frequencies, and its length in tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Terms {
    pub counts: Vec<(Term, u32)>,
    pub length: u32,
}

/// Function words that carry no topic. Contractions split at the
/// apostrophe, so their tails (`s`, `t`, `ll`...) are here too.
const STOPWORDS: &[&str] = &[
    "a", "am", "an", "and", "are", "as", "at", "be", "been", "being", "but", "by", "can", "could",
    "d", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his",
    "how", "i", "if", "in", "is", "it", "its", "just", "ll", "m", "me", "my", "no", "not", "of",
    "on", "or", "our", "re", "s", "she", "should", "so", "t", "than", "that", "the", "their",
    "them", "these", "they", "this", "those", "to", "too", "us", "ve", "very", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "y", "you",
    "your",
];

/// Inflections folded together by [`stem`], longest first, each with what
/// replaces it: `stories` and `studied` end as `story` and `study`.
const SUFFIXES: &[(&str, &str)] = &[
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ed", ""),
    ("es", ""),
    ("s", ""),
];

/// Lower-cased runs of letters and digits, without function words, with
/// common inflections cut off.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|token| !token.is_empty())
        .map(str::to_lowercase)
        .filter(|token| !STOPWORDS.contains(&token.as_str()))
        .map(stem)
}

/// A light stemmer: `painted`, `painting` and `paints` all become `paint`,
/// and `game`, `games` and `gaming` all `gam` (a final `e` goes too, or a
/// word that drops it before `-ing` would never meet its base form). Words
/// of three letters or fewer after the cut keep their suffix, so `bus`,
/// `red` and `sing` stay as they are; a final `ss` is no plural, so
/// `class` stays `class`, as `classes` becomes.
fn stem(mut word: String) -> String {
    if word.ends_with("ss") {
        return word;
    }
    if let Some((suffix, replacement)) = SUFFIXES
        .iter()
        .find(|(suffix, _)| word.len() > suffix.len() + 2 && word.ends_with(suffix))
    {
        word.truncate(word.len() - suffix.len());
        word.push_str(replacement);
    }
    if word.len() > 3 && word.ends_with('e') {
        word.pop();
    }
    word
}

pub fn term(token: &str) -> Term {
    let mut hasher = DefaultHasher::new();
    token.hash(&mut hasher);
    hasher.finish()
}

/// The terms of `text`, counted.
pub fn terms(text: &str) -> Terms {
    let mut counts: HashMap<Term, u32> = HashMap::new();
    let mut length = 0u32;
    for token in tokens(text) {
        *counts.entry(term(&token)).or_default() += 1;
        length = length.saturating_add(1);
    }
    let mut counts: Vec<(Term, u32)> = counts.into_iter().collect();
    counts.sort_unstable();
    Terms { counts, length }
}

/// The distinct terms of a query.
pub fn query_terms(text: &str) -> Vec<Term> {
    let mut terms: Vec<Term> = tokens(text).map(|token| term(&token)).collect();
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// The inverse document frequency of a term in `documents` documents, of
/// which `frequency` hold it (the +1 keeps it positive).
pub fn idf(documents: usize, frequency: usize) -> f32 {
    #[expect(
        clippy::cast_precision_loss,
        reason = "document counts are far below 2^24"
    )]
    let (n, df) = (documents as f32, frequency as f32);
    ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
}

/// One term's contribution to a document's score.
pub fn weight(idf: f32, frequency: u32, length: u32, average_length: f32) -> f32 {
    idf * saturation(frequency, length, average_length)
}

/// A term's weight per unit of idf, in a document that holds it
/// `frequency` times in `length` tokens.
fn saturation(frequency: u32, length: u32, average_length: f32) -> f32 {
    #[expect(
        clippy::cast_precision_loss,
        reason = "frequencies and lengths are small"
    )]
    let (tf, dl) = (frequency as f32, length as f32);
    tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / average_length.max(1.0)))
}

/// Documents up to this many tokens long have their single-occurrence
/// weight looked up in [`Weights`] rather than computed.
const TABULATED_LENGTHS: usize = 256;

/// [`weight`] for one search's average length, with the case almost every
/// posting is (a term held once, in a document of ordinary length)
/// tabulated: a search adds up tens of thousands of postings, and the
/// division in each was most of its time. The same values, bit for bit.
pub struct Weights {
    average_length: f32,
    /// [`saturation`] of a term held once, by document length.
    once: Vec<f32>,
}

impl Weights {
    pub fn new(average_length: f32) -> Self {
        Self {
            average_length,
            once: (0..TABULATED_LENGTHS)
                .map(|length| {
                    saturation(1, u32::try_from(length).unwrap_or(u32::MAX), average_length)
                })
                .collect(),
        }
    }

    /// [`weight`] of a term of `idf` held `frequency` times in `length`
    /// tokens.
    pub fn weight(&self, idf: f32, frequency: u32, length: u32) -> f32 {
        match usize::try_from(length)
            .ok()
            .and_then(|length| self.once.get(length))
        {
            Some(once) if frequency == 1 => idf * once,
            _ => weight(idf, frequency, length, self.average_length),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_lower_cased_words_counted() {
        let counted = terms("Deploy, deploy; DEPLOY the v2 build!");
        assert_eq!(counted.length, 5, "`the` is not a term");
        let deploy = counted
            .counts
            .iter()
            .find(|(t, _)| *t == term("deploy"))
            .unwrap();
        assert_eq!(deploy.1, 3);
        assert_eq!(query_terms("Build THE build"), vec![term("build")]);
        assert_eq!(query_terms("painted painting paints"), vec![term("paint")]);
        assert_eq!(query_terms("game games gaming"), vec![term("gam")]);
        assert_eq!(query_terms("class classes"), vec![term("class")]);
        assert_eq!(query_terms("story stories"), vec![term("story")]);
        assert_eq!(query_terms("bus red"), {
            let mut t = vec![term("bus"), term("red")];
            t.sort_unstable();
            t
        });
        assert!(query_terms("what is it?").is_empty());
    }

    #[test]
    fn tabulated_weights_are_the_computed_ones() {
        let weights = Weights::new(7.3);
        for length in [0, 1, 9, 255, 256, 4000] {
            for frequency in [1, 2, 40] {
                assert_eq!(
                    weights.weight(1.7, frequency, length).to_bits(),
                    weight(1.7, frequency, length, 7.3).to_bits()
                );
            }
        }
    }

    #[test]
    fn rarer_terms_and_shorter_documents_weigh_more() {
        assert!(idf(100, 1) > idf(100, 50));
        assert!(idf(100, 100) > 0.0);
        assert!(weight(1.0, 1, 5, 10.0) > weight(1.0, 1, 50, 10.0));
        assert!(weight(1.0, 3, 10, 10.0) > weight(1.0, 1, 10, 10.0));
    }
}
