//! Provider keys written in pieces: with whitespace between their
//! characters or groups (`g h p _ …`), or as string literals joined in code
//! (`"AKIAIOSF" + "ODNN7EXAMPLE"`). The provider patterns run again over
//! the text with its whitespace and its literals' joints taken out.

use std::sync::LazyLock;

use regex::Regex;

use super::Finding;
use super::detectors::{SPACED_OUT, provider_findings};

/// Where one string literal ends and the next begins: the quotes, and a
/// concatenation operator between them (`+`, PHP's `.`, Lua's `..`, SQL's
/// `||`) or nothing (adjacent literals in C and Python).
static JOINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""\s*(?:\+|\.\.?|\|\|)?\s*"|'\s*(?:\+|\.\.?|\|\|)?\s*'"#)
        .expect("the joint pattern is valid")
});

/// Joining pieces can fake a prefix, so a match counts only where a word
/// starts in the text and where it spans something taken out (else the
/// detectors' own pass judged it); and, as every rewritten match, where it
/// holds a digit, as random keys do and joined prose rarely does.
pub fn findings(text: &str) -> Vec<Finding> {
    if !text.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        return Vec::new();
    }
    // The bytes of joints; most texts hold no quotes, and so none.
    let mut removed = Vec::new();
    if text.contains(['"', '\'']) {
        for joint in JOINT.find_iter(text) {
            removed.resize(text.len(), false);
            removed[joint.range()].fill(true);
        }
    }
    let kept = |&(at, c): &(usize, char)| !c.is_whitespace() && removed.get(at) != Some(&true);
    let joined: String = text.char_indices().filter(kept).map(|(_, c)| c).collect();
    // One pass decides whether any provider shape is there at all; the
    // offsets are worked out only then.
    if joined.len() == text.len() || !SPACED_OUT.is_match(&joined) {
        return Vec::new();
    }
    // The offset in `text` of each byte of `joined`.
    let origin: Vec<usize> = text
        .char_indices()
        .filter(kept)
        .flat_map(|(at, c)| at..at + c.len_utf8())
        .collect();
    provider_findings(
        text,
        &joined,
        &origin,
        |detector| detector.spaced_out.as_ref(),
        |span, matched| {
            let starts_a_word = text[..span.start]
                .chars()
                .next_back()
                .is_none_or(|before| !before.is_alphanumeric());
            starts_a_word && span.len() > matched.len()
        },
    )
}
