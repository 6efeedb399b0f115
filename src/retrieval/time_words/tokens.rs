//! A text cut into the words, numbers and punctuation the time grammar
//! reads, in one linear pass and one allocation.
//!
//! A word is a maximal run of letters, digits and `_` (any script), so an
//! identifier such as `last_seen` stays one token that no time word equals.
//! Whitespace separates tokens and is not kept; a token's byte offsets tell
//! whether it touches its neighbour. Inline code and fenced code (a run of
//! backticks up to the next run of the same length) become one `` ` ``
//! token: words inside code are not the question's words. Typographic
//! punctuation is read as its ASCII counterpart (’ as `'`, “ as `"`, a dash
//! as `,`), so "this year’s" reads like "this year's".

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Letters, or letters mixed with digits, as written.
    Word,
    /// Digits alone ("2026"), or an ordinal ("12th"): its value and digit count.
    Number {
        value: u32,
        digits: u8,
        ordinal: bool,
    },
    /// One punctuation character (a whole code span is one `` ` ``).
    Punct(u8),
}

/// One token: its byte range in the text and its kind.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// A run of this many backticks or more shares one "never closed" mark.
const LONGEST_TRACKED_FENCE: usize = 16;

/// The tokens of `text`, in order.
pub(super) fn tokenize(text: &str) -> Vec<Token> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(text.len() / 4);
    // A run length found once without a closing run has none later either:
    // remembering it keeps a text full of stray backticks linear.
    let mut never_closed = [false; LONGEST_TRACKED_FENCE + 1];
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == b'`' {
            let run = run_length(bytes, at);
            let end = closing_fence(bytes, at + run, run, &mut never_closed).unwrap_or(at + run);
            tokens.push(Token {
                start: at,
                end,
                kind: Kind::Punct(b'`'),
            });
            at = end;
            continue;
        }
        if byte == b' ' {
            at += 1;
            continue;
        }
        let c = if byte.is_ascii() {
            char::from(byte)
        } else {
            let Some(c) = text[at..].chars().next() else {
                break;
            };
            c
        };
        let width = c.len_utf8();
        if is_word_char(c) {
            let end = word_end(text, at);
            tokens.push(Token {
                start: at,
                end,
                kind: word_kind(&text[at..end]),
            });
            at = end;
        } else if c.is_whitespace() {
            at += width;
        } else {
            tokens.push(Token {
                start: at,
                end: at + width,
                kind: Kind::Punct(ascii_punct(c)),
            });
            at += width;
        }
    }
    tokens
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn word_end(text: &str, start: usize) -> usize {
    let ascii_end = text.as_bytes()[start..]
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
        .map_or(text.len(), |offset| start + offset);
    if text.as_bytes().get(ascii_end).is_none_or(u8::is_ascii) {
        return ascii_end;
    }
    // A letter of another script goes on the word: read it by characters.
    text[ascii_end..]
        .char_indices()
        .find(|&(_, c)| !is_word_char(c))
        .map_or(text.len(), |(offset, _)| ascii_end + offset)
}

fn word_kind(word: &str) -> Kind {
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    let suffix = &word[digits..];
    let ordinal = ["st", "nd", "rd", "th"]
        .iter()
        .any(|s| suffix.eq_ignore_ascii_case(s));
    // Nine digits always fit a u32; longer numbers are never a date.
    if digits == 0 || digits > 9 || !(suffix.is_empty() || ordinal) {
        return Kind::Word;
    }
    let value = word[..digits]
        .bytes()
        .fold(0, |n, d| n * 10 + u32::from(d - b'0'));
    Kind::Number {
        value,
        digits: u8::try_from(digits).unwrap_or(u8::MAX),
        ordinal,
    }
}

fn ascii_punct(c: char) -> u8 {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{2032}' => b'\'',
        '\u{201C}' | '\u{201D}' | '\u{00AB}' | '\u{00BB}' => b'"',
        '\u{2026}' => b'.',
        c if c.is_ascii() => u8::try_from(c).unwrap_or(b','),
        // Dashes and any other symbol: a pause between words, like a comma.
        _ => b',',
    }
}

fn run_length(bytes: &[u8], start: usize) -> usize {
    bytes[start..].iter().take_while(|&&b| b == b'`').count()
}

/// The end of the next run of exactly `length` backticks from `from`.
fn closing_fence(
    bytes: &[u8],
    from: usize,
    length: usize,
    never_closed: &mut [bool; LONGEST_TRACKED_FENCE + 1],
) -> Option<usize> {
    let mark = length.min(LONGEST_TRACKED_FENCE);
    if never_closed[mark] {
        return None;
    }
    let mut at = from;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'`') {
        let start = at + offset;
        let run = run_length(bytes, start);
        if run == length {
            return Some(start + run);
        }
        at = start + run;
    }
    never_closed[mark] = true;
    None
}
