//! Query expansion: the query plus related terms, by the retrieval model
//! when one is configured, else from the vocabulary of the best matches
//! (pseudo-relevance feedback).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::llm::Llm;
use crate::upstream;
use crate::usage::{CallKind, Owner};

use super::hyde_reply::parse_hypotheses;

/// The most terms added to a query.
const MAX_TERMS: usize = 5;
/// Words too common to say anything about a match.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "are", "was", "were", "use", "uses",
    "used", "not", "but", "all", "any", "can", "has", "have", "had", "its", "our", "out", "you",
    "your", "they", "their", "them", "what", "when", "which", "who", "why", "how", "does", "did",
    "should", "would", "could", "into", "than", "then", "there", "these", "those", "also", "only",
    "over", "must", "never", "always", "because", "about", "user", "after", "before",
];

const SYSTEM_PROMPT: &str = "You expand search queries for a memory store of short \
statements about a software project and its users. Given a query, list up to five single \
words or short phrases that a matching memory might use instead of the query's own words \
(synonyms, tool names, related concepts), one per line, nothing else.";

/// A query with the terms added to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    pub expanded: String,
    pub added_terms: Vec<String>,
}

/// Related terms from the retrieval model within `timeout`, metered as
/// `owner`'s; `None` when it adds nothing new (the query is then searched
/// for as it is).
pub async fn with_model(
    llm: &Llm,
    owner: Owner,
    query: &str,
    timeout: Duration,
) -> Result<Option<Expansion>, upstream::Error> {
    let reply = llm
        .complete(CallKind::Expansion, owner, SYSTEM_PROMPT, query, timeout)
        .await?;
    let known = words(query);
    let terms: Vec<String> = parse_hypotheses(&reply.text, MAX_TERMS)
        .into_iter()
        .filter(|term| !known.contains(&term.to_lowercase()))
        .collect();
    Ok((!terms.is_empty()).then(|| expansion(query, terms)))
}

/// The words the best `matches` share most, that the query lacks.
pub fn from_vocabulary(query: &str, matches: &[&str]) -> Expansion {
    let known = words(query);
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    let mut order = 0;
    for text in matches {
        for word in words(text) {
            if known.contains(&word) || STOPWORDS.contains(&word.as_str()) {
                continue;
            }
            let entry = counts.entry(word).or_insert((0, order));
            entry.0 += 1;
            order += 1;
        }
    }
    let mut ranked: Vec<(String, (usize, usize))> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    let terms = ranked
        .into_iter()
        .take(MAX_TERMS)
        .map(|(word, _)| word)
        .collect();
    expansion(query, terms)
}

fn expansion(query: &str, added_terms: Vec<String>) -> Expansion {
    let mut expanded = query.trim().to_owned();
    for term in &added_terms {
        expanded.push(' ');
        expanded.push_str(term);
    }
    Expansion {
        expanded,
        added_terms,
    }
}

/// Lower-cased words of three or more letters or digits, each once.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_expansion_adds_the_shared_new_words() {
        let expansion = from_vocabulary(
            "which database?",
            &[
                "We store orders in PostgreSQL.",
                "PostgreSQL runs in WAL mode with pgbouncer.",
                "Reports read from a PostgreSQL replica.",
            ],
        );
        assert_eq!(expansion.added_terms[0], "postgresql");
        assert!(expansion.expanded.starts_with("which database? postgresql"));
        assert!(!expansion.added_terms.contains(&"database".to_owned()));
        assert!(expansion.added_terms.len() <= MAX_TERMS);
    }

    #[test]
    fn nothing_to_learn_from_adds_nothing() {
        let expansion = from_vocabulary("anything", &[]);
        assert_eq!(expansion.expanded, "anything");
        assert!(expansion.added_terms.is_empty());
    }
}
