//! A memory's passages: the sentences of a text of several, each embedded
//! on its own beside the whole text.
//!
//! One vector for a whole text is the mean of its tokens, so a fact said in
//! passing ("By the way, I go to Zumba on Tuesdays") in a turn about
//! something else barely moves it: the question about that fact finds the
//! turn's topic instead. A passage's own vector keeps the fact. The vector
//! search scores a memory by the larger of its whole text's cosine and a
//! share (`retrieval.passage_weight`) of its closest passage's (see
//! `docs/retrieval.md`, "Passages").
//!
//! A sentence ends at `.`, `!` or `?` followed by white space, or at a line
//! break. A text of one sentence has no passages (its vector is the
//! sentence's); a text of more than [`MAX_PASSAGES`] sentences has its
//! sentences grouped, in order, into that many passages at most.

use std::ops::Range;

/// The most passages a text is embedded as, besides the whole: a long
/// document costs at most this many more vectors.
pub const MAX_PASSAGES: usize = 16;

/// The passages of `text`: none for a text of one sentence, else its
/// sentences (grouped when there are more than [`MAX_PASSAGES`]), trimmed,
/// in order.
pub fn passages(text: &str) -> Vec<&str> {
    let sentences = sentences(text);
    if sentences.len() < 2 {
        return Vec::new();
    }
    let per_passage = sentences.len().div_ceil(MAX_PASSAGES);
    sentences
        .chunks(per_passage)
        .map(|group| &text[group[0].start..group[group.len() - 1].end])
        .collect()
}

/// Where the trimmed, non-empty sentences of `text` are, in bytes.
fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut previous = None;
    for (at, c) in text.char_indices() {
        let ends = c == '\n' || (c.is_whitespace() && matches!(previous, Some('.' | '!' | '?')));
        if ends {
            push_trimmed(&mut sentences, text, start..at);
            start = at + c.len_utf8();
        }
        previous = Some(c);
    }
    push_trimmed(&mut sentences, text, start..text.len());
    sentences
}

/// `piece` of `text` without its surrounding white space, unless nothing
/// is left.
fn push_trimmed(sentences: &mut Vec<Range<usize>>, text: &str, piece: Range<usize>) {
    let held = &text[piece.clone()];
    let trimmed = held.trim_start();
    let start = piece.start + (held.len() - trimmed.len());
    let end = start + trimmed.trim_end().len();
    if end > start {
        sentences.push(start..end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_of_several_sentences_has_one_passage_each() {
        let text = "I need a playlist. Any ideas?  By the way, I go to Zumba on Tuesdays!\n\
                    Thanks\n\nv2.1 is out.";
        assert_eq!(
            passages(text),
            [
                "I need a playlist.",
                "Any ideas?",
                "By the way, I go to Zumba on Tuesdays!",
                "Thanks",
                "v2.1 is out."
            ]
        );
    }

    #[test]
    fn a_text_of_one_sentence_has_none() {
        assert!(passages("We deploy with Helm 3.12 from the ops repo.").is_empty());
        assert!(passages("  Deploys go out on Fridays.  \n").is_empty());
        assert!(passages("").is_empty());
    }

    #[test]
    fn many_sentences_are_grouped_in_order_into_at_most_the_cap() {
        let text: String = (0..40).map(|n| format!("Sentence {n}. ")).collect();
        let grouped = passages(&text);
        assert_eq!(grouped.len(), 14, "40 sentences in groups of 3");
        assert_eq!(grouped[0], "Sentence 0. Sentence 1. Sentence 2.");
        assert_eq!(grouped[13], "Sentence 39.");
        let text: String = (0..16).map(|n| format!("Line {n}\n")).collect();
        assert_eq!(passages(&text).len(), MAX_PASSAGES);
    }
}
