//! Reading tokens as English words: which tokens are free-standing words
//! of the prose (not parts of identifiers, paths, versions or hosts), and
//! the word lists the grammar shares.
//!
//! A token is free when nothing but a space, the end, or a soft mark
//! (`, ; ! ? " ( ) [ ]`, a sentence's final `.` or `:`, a possessive `'s`)
//! touches it. So `first-class`, `Monday.com`, `foo.last`, `localhost:2025`,
//! `1.12.3`, `src/2025/` and `first(` are not words here, nor is a token
//! shaped like code: `last_seen`, `firstName`.

use chrono::{DateTime, NaiveDate, Utc};

use super::tokens::{Kind, Token};

/// The words after which a bare month, year or "the 12th" names a time.
pub(super) const INTRODUCERS: &[&str] = &[
    "in",
    "of",
    "on",
    "during",
    "since",
    "after",
    "before",
    "until",
    "till",
    "from",
    "through",
    "throughout",
    "around",
];

/// Words that may follow a date given without its year, or a year alone,
/// when they end the time phrase ("in 2025 we", "on the 12th and"); any
/// other word makes the number something else ("in 2048 bytes", "on the
/// 3rd try").
const FOLLOWERS: &[&str] = &[
    "a",
    "about",
    "after",
    "ago",
    "an",
    "and",
    "are",
    "at",
    "before",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "for",
    "from",
    "had",
    "has",
    "have",
    "he",
    "how",
    "i",
    "in",
    "is",
    "it",
    "last",
    "morning",
    "afternoon",
    "evening",
    "night",
    "my",
    "on",
    "or",
    "our",
    "she",
    "should",
    "since",
    "so",
    "that",
    "the",
    "their",
    "then",
    "there",
    "they",
    "this",
    "to",
    "until",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
];

/// The tokens of one text, read against one reference instant.
pub(super) struct Reader<'a> {
    pub text: &'a str,
    pub tokens: &'a [Token],
    pub reference: DateTime<Utc>,
    pub today: NaiveDate,
}

impl<'a> Reader<'a> {
    pub(super) fn new(text: &'a str, tokens: &'a [Token], reference: DateTime<Utc>) -> Self {
        Self {
            text,
            tokens,
            reference,
            today: reference.date_naive(),
        }
    }

    fn slice(&self, at: usize) -> &'a str {
        let token = self.tokens[at];
        &self.text[token.start..token.end]
    }

    /// Whether token `at` is the free word `word` (ASCII, lower case).
    pub(super) fn word(&self, at: usize, word: &str) -> bool {
        self.raw_word(at, word) && self.free(at)
    }

    /// Whether token `at` is the word `word`, free or not (inside "mid-March").
    pub(super) fn raw_word(&self, at: usize, word: &str) -> bool {
        // The hot path of the whole reading: most tries fail on the length.
        self.tokens.get(at).is_some_and(|t| {
            t.end - t.start == word.len()
                && t.kind == Kind::Word
                && self.text.as_bytes()[t.start..t.end].eq_ignore_ascii_case(word.as_bytes())
        })
    }

    /// Whether the tokens from `at` are the free words `words`.
    pub(super) fn words(&self, at: usize, words: &[&str]) -> bool {
        words
            .iter()
            .enumerate()
            .all(|(offset, word)| self.word(at + offset, word))
    }

    /// The index in `list` of the free word at `at`.
    pub(super) fn word_in(&self, at: usize, list: &[&str]) -> Option<usize> {
        list.iter().position(|word| self.word(at, word))
    }

    /// The entry of `table` whose name is the free word at `at`.
    pub(super) fn lookup<T: Copy>(&self, at: usize, table: &[(&str, T)]) -> Option<T> {
        table
            .iter()
            .find(|(name, _)| self.word(at, name))
            .map(|&(_, value)| value)
    }

    /// The free number at `at`: (value, digit count, ordinal).
    pub(super) fn number(&self, at: usize) -> Option<(u32, u8, bool)> {
        match self.tokens.get(at)?.kind {
            Kind::Number {
                value,
                digits,
                ordinal,
            } if self.free(at) => Some((value, digits, ordinal)),
            _ => None,
        }
    }

    /// The number at `at` whether free or not (inside "2026-03-12").
    pub(super) fn raw_number(&self, at: usize) -> Option<(u32, u8, bool)> {
        match self.tokens.get(at)?.kind {
            Kind::Number {
                value,
                digits,
                ordinal,
            } => Some((value, digits, ordinal)),
            _ => None,
        }
    }

    pub(super) fn punct(&self, at: usize, mark: u8) -> bool {
        self.tokens
            .get(at)
            .is_some_and(|t| t.kind == Kind::Punct(mark))
    }

    /// Whether tokens `at` and `at + 1` touch, with no space between.
    pub(super) fn touching(&self, at: usize) -> bool {
        matches!((self.tokens.get(at), self.tokens.get(at + 1)), (Some(a), Some(b)) if a.end == b.start)
    }

    /// Whether the word before `at` introduces a time ("in", "since" ...).
    pub(super) fn introduced(&self, at: usize) -> bool {
        at > 0 && self.word_in(at - 1, INTRODUCERS).is_some()
    }

    /// Whether the phrase ending before `at` ends there: the text or a
    /// sentence ends, a mark follows, or one of the [`FOLLOWERS`] does.
    pub(super) fn ends_phrase(&self, at: usize) -> bool {
        match self.tokens.get(at).map(|t| t.kind) {
            None | Some(Kind::Punct(_)) => true,
            Some(Kind::Number { .. }) => false,
            Some(Kind::Word) => self.word_in(at, FOLLOWERS).is_some(),
        }
    }

    /// Whether token `at` is written in capitals only, as a keyword is
    /// (`NULLS FIRST`).
    pub(super) fn in_capitals(&self, at: usize) -> bool {
        let word = self.slice(at);
        word.len() > 1 && !word.bytes().any(|b| b.is_ascii_lowercase())
    }

    /// Whether token `at` starts a sentence: the text's first, or after `.`, `!`, `?` or `:`.
    pub(super) fn starts_sentence(&self, at: usize) -> bool {
        at == 0
            || [b'.', b'!', b'?', b':']
                .iter()
                .any(|&mark| self.punct(at - 1, mark))
    }

    /// Whether token `at` stands free in the prose (see the module header).
    pub(super) fn free(&self, at: usize) -> bool {
        self.free_span(at, at)
    }

    /// Whether the tokens `first..=last`, taken together, stand free.
    pub(super) fn free_span(&self, first: usize, last: usize) -> bool {
        let code_shaped =
            |at: usize| self.tokens[at].kind == Kind::Word && looks_like_code(self.slice(at));
        !code_shaped(first) && !code_shaped(last) && self.free_left(first) && self.free_right(last)
    }

    fn free_left(&self, at: usize) -> bool {
        if at == 0 || !self.touching(at - 1) {
            return true;
        }
        match self.tokens[at - 1].kind {
            Kind::Punct(b'"' | b'\'' | b'(' | b'[' | b',' | b';') => true,
            // "...", or a sentence's end without its space: not "foo.last".
            Kind::Punct(b'.' | b':') => at < 2 || !self.touching(at - 2),
            _ => false,
        }
    }

    fn free_right(&self, at: usize) -> bool {
        if !self.touching(at) {
            return true;
        }
        match self.tokens[at + 1].kind {
            Kind::Punct(b',' | b';' | b'!' | b'?' | b'"' | b')' | b']') => true,
            // A sentence ends ("in March."), not "Monday.com" or "host:2025".
            Kind::Punct(b'.' | b':') => !self.touching(at + 1),
            // A possessive ("this year's") or a closing quote.
            Kind::Punct(b'\'') => !self.touching(at + 1) || self.word(at + 2, "s"),
            _ => false,
        }
    }
}

/// An identifier rather than a word: an underscore, or a lower-case letter
/// followed by a capital (`firstName`).
fn looks_like_code(word: &str) -> bool {
    word.contains('_')
        || word
            .as_bytes()
            .windows(2)
            .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
}
