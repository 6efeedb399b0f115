//! Which tokens a time phrase or an ordering word can start at: the
//! first words of every phrase the grammar and the ordering words know,
//! in one sorted table, so that most of a text's words are passed over
//! with one look-up.

use std::sync::LazyLock;

use super::reader::Reader;
use super::tokens::Kind;
use super::{grammar, order};

/// The words a time phrase or an ordering word can start with, each
/// lower case in one integer ([`packed`]), sorted for a binary search.
static FIRST_WORDS: LazyLock<Vec<u128>> = LazyLock::new(|| {
    let mut words: Vec<u128> = grammar::first_words()
        .chain(order::first_words())
        .filter_map(|word| packed(word.as_bytes()))
        .collect();
    words.sort_unstable();
    words.dedup();
    words
});

/// A word of up to 16 bytes, lower case, as one integer: comparing two is
/// one instruction, not a call to `memcmp`.
fn packed(word: &[u8]) -> Option<u128> {
    let mut bytes = [0; 16];
    bytes.get_mut(..word.len())?.copy_from_slice(word);
    bytes.make_ascii_lowercase();
    Some(u128::from_be_bytes(bytes))
}

/// Whether anything can be read from token `at` of `r`: a number, a word
/// that a time phrase or an ordering word starts with, or "the" before
/// one of those.
pub(super) fn may_start(r: &Reader, at: usize) -> bool {
    let at = at + usize::from(r.raw_word(at, "the"));
    let Some(token) = r.tokens.get(at) else {
        return false;
    };
    match token.kind {
        Kind::Number { .. } => true,
        Kind::Punct(_) => false,
        Kind::Word => packed(&r.text.as_bytes()[token.start..token.end])
            .is_some_and(|word| FIRST_WORDS.binary_search(&word).is_ok()),
    }
}
