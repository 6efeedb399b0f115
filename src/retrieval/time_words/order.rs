//! The words that ask for the earliest or the latest of something ("the
//! first database we used", "the most recent decision"), and the uses of
//! those words that ask for neither: idioms ("at last", "first of all",
//! "for now"), positions ("the first argument", "the last line", "the last
//! week of March"), keywords in capitals (`NULLS FIRST`), and a
//! sentence's opening "First," or "Now,".
//!
//! The grammar reads time phrases before these words, so "last" in "last
//! week" or "in the last 3 days" never reaches here.

use super::TimeOrder;
use super::grammar::UNITS;
use super::reader::Reader;

const ORDER_WORDS: &[(&[&str], TimeOrder)] = &[
    (&["first"], TimeOrder::Earliest),
    (&["earliest"], TimeOrder::Earliest),
    (&["oldest"], TimeOrder::Earliest),
    (&["originally"], TimeOrder::Earliest),
    (&["initially"], TimeOrder::Earliest),
    (&["last"], TimeOrder::Latest),
    (&["latest"], TimeOrder::Latest),
    (&["newest"], TimeOrder::Latest),
    (&["most", "recent"], TimeOrder::Latest),
    (&["most", "recently"], TimeOrder::Latest),
    (&["recent"], TimeOrder::Latest),
    (&["recently"], TimeOrder::Latest),
    (&["lately"], TimeOrder::Latest),
    (&["currently"], TimeOrder::Latest),
    (&["now"], TimeOrder::Latest),
    (&["nowadays"], TimeOrder::Latest),
    (&["these", "days"], TimeOrder::Latest),
];

/// Idioms that hold an ordering word and order nothing.
const IDIOMS: &[&[&str]] = &[
    &["at", "last"],
    &["at", "the", "latest"],
    &["last", "but", "not", "least"],
    &["first", "of", "all"],
    &["first", "and", "foremost"],
    &["first", "things", "first"],
    &["at", "first", "glance"],
    &["for", "now"],
    &["from", "now", "on"],
    &["now", "and", "then"],
];

/// After "first" or "last" (and a count: "the last 3 lines"), a position
/// in something, not a time.
const POSITIONS: &[&str] = &[
    "aid",
    "arg",
    "args",
    "argument",
    "arguments",
    "bit",
    "bits",
    "byte",
    "bytes",
    "cell",
    "cells",
    "char",
    "chars",
    "character",
    "characters",
    "child",
    "children",
    "class",
    "col",
    "column",
    "columns",
    "digit",
    "digits",
    "element",
    "elements",
    "entries",
    "entry",
    "field",
    "fields",
    "frame",
    "frames",
    "half",
    "index",
    "item",
    "items",
    "key",
    "keys",
    "letter",
    "letters",
    "level",
    "line",
    "lines",
    "match",
    "matches",
    "name",
    "names",
    "node",
    "nodes",
    "occurrence",
    "page",
    "pages",
    "param",
    "params",
    "parameter",
    "parameters",
    "part",
    "parts",
    "party",
    "person",
    "place",
    "principles",
    "resort",
    "row",
    "rows",
    "segment",
    "segments",
    "slot",
    "step",
    "steps",
    "token",
    "tokens",
    "value",
    "values",
    "word",
    "words",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "weekend",
    "quarter",
];

/// Every word an ordering word or phrase starts with.
pub(super) fn first_words() -> impl Iterator<Item = &'static str> {
    ORDER_WORDS.iter().map(|(words, _)| words[0])
}

/// The order asked for by the ordering word at `at`, if it asks for one.
pub(super) fn order_at(r: &Reader, at: usize) -> Option<TimeOrder> {
    let (words, order) = ORDER_WORDS.iter().find(|(words, _)| r.words(at, words))?;
    let idiom = IDIOMS
        .iter()
        .any(|idiom| (0..idiom.len()).any(|offset| at >= offset && r.words(at - offset, idiom)));
    // In capitals, an ordering word is a keyword: `NULLS FIRST`, `LAST`.
    let keyword = r.in_capitals(at);
    let opens_sentence = r.starts_sentence(at) && r.punct(at + words.len(), b',');
    let positional = matches!(words, ["first" | "last"]) && {
        let next = at + 1 + usize::from(r.number(at + 1).is_some());
        r.word_in(next, POSITIONS).is_some() || r.lookup(next, UNITS).is_some()
    };
    (!idiom && !keyword && !opens_sentence && !positional).then_some(*order)
}
