//! The reference retriever beside Engram in the same run: textbook Okapi
//! BM25 over one question's haystack, as `rank_bm25`'s `BM25Okapi` (the
//! benchmark's own `flat-bm25` baseline) scores it: k1 1.5, b 0.75, idf
//! ln((N − n + 0.5) / (n + 0.5)) with negative idfs raised to a quarter of
//! the mean idf. Words are lower-cased runs of letters and digits (the
//! benchmark splits on spaces only, keeping case and punctuation; LoCoMo's
//! reference row here lower-cases too).

use std::collections::HashMap;

const K1: f64 = 1.5;
const B: f64 = 0.75;
const EPSILON: f64 = 0.25;

pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The indices of `documents`, best match for `query` first; ties keep
/// the documents' order.
pub fn rank(documents: &[&str], query: &str) -> Vec<usize> {
    let scores = scores(documents, query);
    let mut order: Vec<usize> = (0..documents.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    order
}

#[expect(clippy::cast_precision_loss, reason = "counts below 2^52")]
fn scores(documents: &[&str], query: &str) -> Vec<f64> {
    let counted: Vec<HashMap<String, usize>> = documents
        .iter()
        .map(|document| {
            let mut counts = HashMap::new();
            for word in words(document) {
                *counts.entry(word).or_insert(0) += 1;
            }
            counts
        })
        .collect();
    let lengths: Vec<f64> = counted
        .iter()
        .map(|counts| counts.values().sum::<usize>() as f64)
        .collect();
    let total = documents.len() as f64;
    let mean_length = lengths.iter().sum::<f64>() / total.max(1.0);
    let mut holding: HashMap<&str, usize> = HashMap::new();
    for counts in &counted {
        for word in counts.keys() {
            *holding.entry(word.as_str()).or_insert(0) += 1;
        }
    }
    let raw_idf = |held: usize| ((total - held as f64 + 0.5) / (held as f64 + 0.5)).ln();
    let mean_idf =
        holding.values().map(|held| raw_idf(*held)).sum::<f64>() / (holding.len().max(1) as f64);
    let idf = |word: &str| {
        holding.get(word).map_or(0.0, |held| {
            let idf = raw_idf(*held);
            if idf < 0.0 { EPSILON * mean_idf } else { idf }
        })
    };
    let query = words(query);
    counted
        .iter()
        .zip(&lengths)
        .map(|(counts, length)| {
            query
                .iter()
                .map(|word| {
                    let frequency = counts.get(word).copied().unwrap_or(0) as f64;
                    let norm = K1 * (1.0 - B + B * length / mean_length.max(f64::MIN_POSITIVE));
                    idf(word) * frequency * (K1 + 1.0) / (frequency + norm)
                })
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lower_cased_runs_of_letters_and_digits() {
        assert_eq!(
            words("My cat's vet, Dr. Ng (2023)!"),
            ["my", "cat", "s", "vet", "dr", "ng", "2023"]
        );
    }

    #[test]
    fn rare_shared_words_rank_first() {
        let documents = [
            "I went to the gym today",
            "My dog Rex needs a new vet",
            "The weather today is nice",
            "I like the gym near work",
        ];
        assert_eq!(rank(&documents, "What is my dog's name?")[0], 1);
        assert_eq!(rank(&documents, "Which gym near work?")[0], 3);
    }

    #[test]
    fn scores_match_the_okapi_formula() {
        // "b" is in one of three documents: idf ln(2.5 / 1.5); the first
        // document has length 2 against a mean of 5 / 3.
        let scored = scores(&["a b", "a c", "a"], "b");
        let idf = (2.5f64 / 1.5).ln();
        let norm = K1 * (1.0 - B + B * 2.0 / (5.0 / 3.0));
        assert!((scored[0] - idf * (K1 + 1.0) / (1.0 + norm)).abs() < 1e-12);
        assert_eq!(scored[1], 0.0);
        // "a" is in every document: its negative idf becomes a quarter of
        // the mean idf over "a", "b", "c".
        let negative = (0.5f64 / 3.5).ln();
        let mean = (negative + 2.0 * idf) / 3.0;
        let scored = scores(&["a b", "a c", "a"], "a");
        let norm = K1 * (1.0 - B + B * 1.0 / (5.0 / 3.0));
        assert!((scored[2] - EPSILON * mean * (K1 + 1.0) / (1.0 + norm)).abs() < 1e-12);
    }
}
