//! Provider keys written with whitespace between their characters or
//! groups (`g h p _ …`): the provider patterns run again over the text with
//! its whitespace taken out.

use super::Finding;
use super::detectors::{DETECTORS, SPACED_OUT};

/// Joining words can fake a prefix, so a match counts only where a word
/// starts in the text, where it spans whitespace (else the detectors' own
/// pass judged it), and where it holds a digit, as random keys do and
/// joined prose rarely does.
pub fn findings(text: &str) -> Vec<Finding> {
    if !text.contains(char::is_whitespace) {
        return Vec::new();
    }
    let joined: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    // One pass decides whether any provider shape is there at all; the
    // offsets are worked out only then.
    if !SPACED_OUT.is_match(&joined) {
        return Vec::new();
    }
    // The offset in `text` of each byte of `joined`.
    let origin: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .flat_map(|(at, c)| at..at + c.len_utf8())
        .collect();
    let mut found = Vec::new();
    for (rank, detector) in DETECTORS.iter().enumerate() {
        let Some(pattern) = &detector.spaced_out else {
            continue;
        };
        for captures in pattern.captures_iter(&joined) {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            let (start, last) = (origin[whole.start()], origin[whole.end() - 1]);
            let end = last + text[last..].chars().next().map_or(1, char::len_utf8);
            let starts_a_word = text[..start]
                .chars()
                .next_back()
                .is_none_or(|before| !before.is_alphanumeric());
            let spans_whitespace = end - start > whole.len();
            if starts_a_word
                && spans_whitespace
                && whole.as_str().bytes().any(|b| b.is_ascii_digit())
                && (detector.confirms)(&joined, &captures)
            {
                found.push(Finding {
                    kind: detector.kind,
                    span: start..end,
                    rank,
                });
            }
        }
    }
    found
}
