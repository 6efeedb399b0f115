//! The time a question names, resolved: [`time_in`] finds the first time
//! phrase of a text ("last week", "in early March", "since the 12th", "3
//! days ago", "2026-03-12") and turns it, against a reference instant (the
//! request's `as_of`, or now), into a half-open UTC window; and it notes
//! the first word asking for the earliest or the latest of something
//! ("first", "originally"; "last", "most recent", "currently"). A text
//! that names no time gives `None`, so a question without one can be
//! ranked exactly as before.
//!
//! It is pure and cheap: one pass cuts the text into tokens (one
//! allocation, `tokens`); a token that no phrase can start with (most of a
//! text's words) is passed over with one look-up (`openers`), and each other is tried
//! as the start of a phrase, looking a bounded number of tokens ahead
//! (`grammar`, and `dates` for the forms of a date), so the cost is linear
//! in the text. Calendar arithmetic lives in `calendar`, the sense of
//! single words (is `last` a word of the prose or part of `last_seen`?) in
//! `reader`, the ordering words in `order`. docs/retrieval.md ("Time in
//! the question") lists every form read.
//!
//! Why a parser of our own: the date crates parse a string that *is* a
//! date expression; none finds one inside a sentence, so each would have
//! to be tried on every run of words (quadratic), and most resolve points,
//! not spans. `interim` (0.2.2, MIT; the maintained successor of the
//! unmaintained `chrono-english`) returns one instant for "last friday"
//! and has no "early March", "in the last 3 days" or "since"; `two_timer`
//! (2.2.5, MIT, one maintainer) returns ranges but builds a large regular
//! grammar at start-up and pulls `pidgin`, `lazy_static` and `serde_json`;
//! `dateparser` (0.3.1, MIT) reads absolute formats only. None knows the
//! false positives a coding question is full of (`last_seen`,
//! `first-class`, `1.12.3`, `Monday.com`, "May I").

mod calendar;
mod dates;
mod grammar;
mod openers;
mod order;
mod reader;
#[cfg(test)]
mod tests;
mod tokens;

use chrono::{DateTime, Utc};

use reader::Reader;

/// The time a question names, resolved. At least one of the two is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeInQuestion {
    /// The span its first time phrase names; `None` when it only asks for
    /// an order ("what did we first use for queues?").
    pub window: Option<TimeWindow>,
    /// The order its first ordering word asks for, if any. A question can
    /// carry both: "the last deploy in March".
    pub order: Option<TimeOrder>,
}

/// A span of time, half-open: `start <= t < end`, UTC, `start < end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeWindow {
    pub start: DateTime<Utc>,
    /// A calendar span ends where it ends ("this year" ends on 1 January
    /// next), even after the reference; a span up to now ("since March",
    /// "in the last 3 days") ends at the reference.
    pub end: DateTime<Utc>,
    /// The words it was read from, as written ("since last week").
    pub phrase: String,
}

/// Which end of a history the question asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeOrder {
    /// first, earliest, oldest, originally, initially.
    Earliest,
    /// last, latest, newest, most recent(ly), recent(ly), lately,
    /// currently, now, nowadays, these days.
    Latest,
}

/// The time `text` names, resolved against `reference`; `None` when it
/// names none. The first time phrase gives the window, the first ordering
/// word the order; words inside code (`` `...` ``, fenced blocks) are not
/// read.
pub fn time_in(text: &str, reference: DateTime<Utc>) -> Option<TimeInQuestion> {
    let tokens = tokens::tokenize(text);
    let reader = Reader::new(text, &tokens, reference);
    let mut window = None;
    let mut order = None;
    let mut at = 0;
    while at < tokens.len() && (window.is_none() || order.is_none()) {
        if !openers::may_start(&reader, at) {
            debug_assert!(
                grammar::window_at(&reader, at).is_none() && order::order_at(&reader, at).is_none(),
                "token {at} of {text:?} starts a phrase that first_words does not know"
            );
            at += 1;
            continue;
        }
        // Every time phrase is read (and skipped), even after the first,
        // so that its words ("the last 3 days") are not taken for orders.
        if let Some(found) = grammar::window_at(&reader, at) {
            if window.is_none()
                && let Some((start, end)) = found.named.bounds()
            {
                let phrase = text[tokens[at].start..tokens[found.end - 1].end].to_owned();
                window = Some(TimeWindow { start, end, phrase });
            }
            at = found.end;
            continue;
        }
        if order.is_none() {
            order = order::order_at(&reader, at);
        }
        at += 1;
    }
    (window.is_some() || order.is_some()).then_some(TimeInQuestion { window, order })
}
