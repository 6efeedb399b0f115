//! Provider keys with look-alike letters from other scripts (`ghр_…` with
//! a Cyrillic `р`, `ΑKIA…` with a Greek `Α`): NFKC leaves Cyrillic and
//! Greek letters alone, so the provider patterns run again over the text
//! with each confusable letter read as the Latin one it looks like.
//!
//! Only provider patterns (known prefixes and lengths) are run: a word of
//! Russian or Greek read as Latin letters is not a password word, and
//! would make prose of the others.

use super::Finding;
use super::detectors::provider_findings;

/// Cyrillic and Greek letters drawn like a Latin one, and that letter
/// (from Unicode's confusables, letters only).
const CONFUSABLES: &[(char, char)] = &[
    // Cyrillic capitals and small letters.
    ('А', 'A'),
    ('В', 'B'),
    ('Е', 'E'),
    ('К', 'K'),
    ('М', 'M'),
    ('Н', 'H'),
    ('О', 'O'),
    ('Р', 'P'),
    ('С', 'C'),
    ('Т', 'T'),
    ('У', 'Y'),
    ('Х', 'X'),
    ('Ѕ', 'S'),
    ('І', 'I'),
    ('Ј', 'J'),
    ('Ү', 'Y'),
    ('Ԛ', 'Q'),
    ('Ԝ', 'W'),
    ('а', 'a'),
    ('е', 'e'),
    ('о', 'o'),
    ('р', 'p'),
    ('с', 'c'),
    ('у', 'y'),
    ('х', 'x'),
    ('ѕ', 's'),
    ('і', 'i'),
    ('ј', 'j'),
    ('һ', 'h'),
    ('ԁ', 'd'),
    ('ԛ', 'q'),
    ('ԝ', 'w'),
    ('ӏ', 'l'),
    // Greek capitals and small letters.
    ('Α', 'A'),
    ('Β', 'B'),
    ('Ε', 'E'),
    ('Ζ', 'Z'),
    ('Η', 'H'),
    ('Ι', 'I'),
    ('Κ', 'K'),
    ('Μ', 'M'),
    ('Ν', 'N'),
    ('Ο', 'O'),
    ('Ρ', 'P'),
    ('Τ', 'T'),
    ('Υ', 'Y'),
    ('Χ', 'X'),
    ('α', 'a'),
    ('ι', 'i'),
    ('κ', 'k'),
    ('ν', 'v'),
    ('ο', 'o'),
    ('ρ', 'p'),
    ('υ', 'u'),
    ('ϲ', 'c'),
    ('ϳ', 'j'),
];

fn latin_look_alike(c: char) -> Option<char> {
    CONFUSABLES
        .iter()
        .find(|&&(confusable, _)| confusable == c)
        .map(|&(_, latin)| latin)
}

/// Provider keys with look-alike letters, read as the Latin ones.
pub fn findings(text: &str) -> Vec<Finding> {
    if text.is_ascii() || !text.chars().any(|c| latin_look_alike(c).is_some()) {
        return Vec::new();
    }
    // The text read in Latin letters, and the offset in `text` of each of
    // its bytes.
    let mut latin = String::with_capacity(text.len());
    let mut origin = Vec::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        let read = latin_look_alike(c).unwrap_or(c);
        latin.push(read);
        origin.extend(std::iter::repeat_n(at, read.len_utf8()));
    }
    // Where it holds a look-alike: else the detectors' own pass judged it.
    provider_findings(
        text,
        &latin,
        &origin,
        |detector| Some(&detector.pattern),
        |span, _| !text[span].is_ascii(),
    )
}
