//! The English phrases that name a time, read at one token: each matcher
//! takes the token where a phrase may start and returns what it names and
//! where it ends, looking a bounded number of tokens ahead (so a whole
//! text is read in linear time).
//!
//! A phrase that could be ordinary prose needs context: a month or a year
//! alone needs an introducing word ("in March", "since 2025"), a day of the
//! month needs "the" and one ("on the 12th"), and a day or year without the
//! rest of a date must end the phrase ("in 2025 we", not "in 2048 bytes").
//! Month abbreviations ("Mar") count only beside a day or a year. The
//! forms of dates, months, weekdays and years are in `dates`.

use chrono::{DateTime, Datelike, Days, NaiveDate, Utc};

use super::calendar::{self, Found, Named, Part, Unit};
use super::dates::{
    MONTH_ABBREVIATIONS, MONTHS, WEEKDAYS, bare_year, day_first, iso_date, modified_month,
    month_first, slash_date, weekday,
};
use super::reader::Reader;

pub(super) const UNITS: &[(&str, Unit)] = &[
    ("minute", Unit::Minute),
    ("minutes", Unit::Minute),
    ("hour", Unit::Hour),
    ("hours", Unit::Hour),
    ("day", Unit::Day),
    ("days", Unit::Day),
    ("week", Unit::Week),
    ("weeks", Unit::Week),
    ("month", Unit::Month),
    ("months", Unit::Month),
    ("year", Unit::Year),
    ("years", Unit::Year),
];

const COUNTS: &[(&str, u32)] = &[
    ("a", 1),
    ("an", 1),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
];

const PARTS: &[(&str, Part)] = &[
    ("early", Part::Early),
    ("mid", Part::Mid),
    ("late", Part::Late),
];

/// "the beginning of March", "the end of last year".
const PART_NOUNS: &[(&str, Part)] = &[
    ("beginning", Part::Early),
    ("start", Part::Early),
    ("middle", Part::Mid),
    ("end", Part::Late),
];

/// A day or period fixed relative to the reference.
#[derive(Clone, Copy, Debug)]
enum Relative {
    Today,
    Yesterday,
    DayBeforeYesterday,
    ThisWeek,
    LastWeek,
    ThisWeekend,
    LastWeekend,
    ThisMonth,
    LastMonth,
    ThisYear,
    LastYear,
}

const RELATIVE: &[(&[&str], Relative)] = &[
    (
        &["the", "day", "before", "yesterday"],
        Relative::DayBeforeYesterday,
    ),
    (
        &["day", "before", "yesterday"],
        Relative::DayBeforeYesterday,
    ),
    (&["yesterday"], Relative::Yesterday),
    (&["last", "night"], Relative::Yesterday),
    (&["today"], Relative::Today),
    (&["tonight"], Relative::Today),
    (&["this", "morning"], Relative::Today),
    (&["this", "afternoon"], Relative::Today),
    (&["this", "evening"], Relative::Today),
    (&["this", "week"], Relative::ThisWeek),
    (&["last", "week"], Relative::LastWeek),
    (&["this", "weekend"], Relative::ThisWeekend),
    (&["last", "weekend"], Relative::LastWeekend),
    (&["this", "month"], Relative::ThisMonth),
    (&["last", "month"], Relative::LastMonth),
    (&["this", "year"], Relative::ThisYear),
    (&["last", "year"], Relative::LastYear),
];

/// How a bounding word ("since March") turns the time it names into a span.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// From its start to the reference.
    Since,
    /// From its end to the reference.
    After,
    /// From the Unix epoch (older than anything Engram holds) to its start.
    Before,
    /// From the Unix epoch to its end.
    Until,
}

const BOUNDS: &[(&[&str], Bound)] = &[
    (&["since"], Bound::Since),
    (&["after"], Bound::After),
    (&["before"], Bound::Before),
    (&["prior", "to"], Bound::Before),
    (&["until"], Bound::Until),
    (&["till"], Bound::Until),
    (&["up", "to"], Bound::Until),
];

/// Every word a time phrase can start with (a number can start one too),
/// but "the": every phrase that starts with it ("the last 3 days", "the
/// 12th", "the end of March") goes on with one of these words or a number.
/// The reading passes over any other word at once.
pub(super) fn first_words() -> impl Iterator<Item = &'static str> {
    // The words the matchers name themselves: `range`, `rolling`, `count`,
    // `part`, `modified_month`, `weekday`.
    const OPENERS: &[&str] = &[
        "between", "from", "last", "past", "this", "on", "a", "couple", "few",
    ];
    let phrases = RELATIVE
        .iter()
        .map(|(words, _)| words[0])
        .chain(BOUNDS.iter().map(|(words, _)| words[0]));
    let names = MONTHS
        .iter()
        .chain(MONTH_ABBREVIATIONS)
        .chain(COUNTS)
        .map(|&(word, _)| word)
        .chain(WEEKDAYS.iter().map(|&(word, _)| word))
        .chain(PARTS.iter().chain(PART_NOUNS).map(|&(word, _)| word));
    phrases.chain(names).chain(OPENERS.iter().copied())
}

/// The time phrase that starts at token `at`, if one does.
pub(super) fn window_at(r: &Reader, at: usize) -> Option<Found> {
    range(r, at)
        .or_else(|| bounded(r, at))
        .or_else(|| point(r, at, r.introduced(at)))
}

/// "between March and May", "from March 3 to March 10".
fn range(r: &Reader, at: usize) -> Option<Found> {
    let joiners: &[&str] = if r.word(at, "between") {
        &["and"]
    } else if r.word(at, "from") {
        &["to", "until", "till", "through"]
    } else {
        return None;
    };
    let first = point(r, at + 1, true)?;
    r.word_in(first.end, joiners)?;
    let last = point(r, first.end + 1, true)?;
    let (start, _) = first.named.bounds()?;
    let (_, end) = last.named.bounds()?;
    Some(Found {
        named: Named::Span(start, end),
        end: last.end,
    })
}

/// "since last week", "after the 12th", "before March", "until yesterday".
fn bounded(r: &Reader, at: usize) -> Option<Found> {
    let (words, bound) = BOUNDS.iter().find(|(words, _)| r.words(at, words))?;
    let inner = point(r, at + words.len(), true)?;
    let (start, end) = inner.named.bounds()?;
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    let span = match bound {
        Bound::Since => (start, r.reference),
        Bound::After => (end, r.reference),
        Bound::Before => (epoch, start),
        Bound::Until => (epoch, end),
    };
    Some(Found {
        named: Named::Span(span.0, span.1),
        end: inner.end,
    })
}

/// One time named without a bounding word. `introduced`: whether a word
/// before it says a time follows ("in", "since" ...), which a bare month,
/// year or "the 12th" needs.
fn point(r: &Reader, at: usize, introduced: bool) -> Option<Found> {
    relative(r, at)
        .or_else(|| rolling(r, at))
        .or_else(|| ago(r, at))
        .or_else(|| part(r, at))
        .or_else(|| month_first(r, at, introduced))
        .or_else(|| modified_month(r, at))
        .or_else(|| day_first(r, at, introduced))
        .or_else(|| iso_date(r, at))
        .or_else(|| slash_date(r, at))
        .or_else(|| weekday(r, at))
        .or_else(|| bare_year(r, at, introduced))
}

fn relative(r: &Reader, at: usize) -> Option<Found> {
    let (words, relative) = RELATIVE.iter().find(|(words, _)| r.words(at, words))?;
    // "the last week" is the seven days before now, read by `rolling`.
    if words[0] == "last" && at > 0 && r.word(at - 1, "the") {
        return None;
    }
    let today = r.today;
    let this_monday = calendar::monday_of(today)?;
    let days_back = |n| today.checked_sub_days(Days::new(n));
    let weekend = |monday: NaiveDate| {
        let saturday = monday.checked_add_days(Days::new(5))?;
        Some(Named::Span(
            calendar::midnight(saturday),
            calendar::midnight(saturday.checked_add_days(Days::new(2))?),
        ))
    };
    let last_month = today
        .with_day(1)?
        .checked_sub_months(chrono::Months::new(1))?;
    let named = match relative {
        Relative::Today => Named::Day(today),
        Relative::Yesterday => Named::Day(days_back(1)?),
        Relative::DayBeforeYesterday => Named::Day(days_back(2)?),
        Relative::ThisWeek => Named::Week(this_monday),
        Relative::LastWeek => Named::Week(this_monday.checked_sub_days(Days::new(7))?),
        Relative::ThisWeekend => weekend(this_monday)?,
        Relative::LastWeekend => weekend(this_monday.checked_sub_days(Days::new(7))?)?,
        Relative::ThisMonth => Named::Month(today.year(), today.month()),
        Relative::LastMonth => Named::Month(last_month.year(), last_month.month()),
        Relative::ThisYear => Named::Year(today.year()),
        Relative::LastYear => Named::Year(today.year() - 1),
    };
    Some(Found {
        named,
        end: at + words.len(),
    })
}

/// A count of units: digits, a number word, "a couple (of)", "a few" (two
/// to four). Returns (fewest, most, the token after).
fn count(r: &Reader, at: usize) -> Option<(u32, u32, usize)> {
    if let Some((value, _, false)) = r.number(at) {
        return Some((value, value, at + 1));
    }
    let after_a = at + usize::from(r.word(at, "a"));
    if r.word(after_a, "couple") {
        return Some((2, 2, after_a + 1 + usize::from(r.word(after_a + 1, "of"))));
    }
    if r.word(after_a, "few") {
        return Some((2, 4, after_a + 1));
    }
    r.lookup(at, COUNTS).map(|n| (n, n, at + 1))
}

/// "in the last 3 days", "the past two weeks", "over the past month",
/// "last 24 hours": from that long before the reference to the reference.
fn rolling(r: &Reader, at: usize) -> Option<Found> {
    let the = r.word(at, "the");
    let word = at + usize::from(the);
    let past = r.word(word, "past");
    if !past && !r.word(word, "last") {
        return None;
    }
    let counted = count(r, word + 1);
    let unit_at = counted.map_or(word + 1, |(_, _, next)| next);
    let unit = r.lookup(unit_at, UNITS)?;
    let uncounted_ok = (the || past) && !matches!(unit, Unit::Minute | Unit::Hour);
    // "last week" alone is the calendar week; "at the last minute" is no
    // span; "the last week of March" is a part of March.
    if (counted.is_none() && !uncounted_ok) || r.word(unit_at + 1, "of") {
        return None;
    }
    let most = counted.map_or(1, |(_, most, _)| most);
    Some(Found {
        named: calendar::last(r.reference, unit, most)?,
        end: unit_at + 1,
    })
}

/// "3 days ago", "a week ago", "a few months ago".
fn ago(r: &Reader, at: usize) -> Option<Found> {
    let (fewest, most, unit_at) = count(r, at)?;
    let unit = r.lookup(unit_at, UNITS)?;
    if !r.word(unit_at + 1, "ago") {
        return None;
    }
    Some(Found {
        named: calendar::ago(r.reference, unit, fewest, most)?,
        end: unit_at + 2,
    })
}

/// "early March", "mid-March", "late 2025", "the end of last year".
fn part(r: &Reader, at: usize) -> Option<Found> {
    let (part, inner_at) = if let Some(part) = r.lookup(at, PARTS) {
        (part, at + 1)
    } else if let Some(found) = mid_hyphen_month(r, at) {
        return Some(found);
    } else {
        let noun_at = at + usize::from(r.word(at, "the"));
        let part = r.lookup(noun_at, PART_NOUNS)?;
        if !r.word(noun_at + 1, "of") {
            return None;
        }
        (part, noun_at + 2)
    };
    // Only a month or a year has parts; nested parts are not read.
    let inner = relative(r, inner_at)
        .or_else(|| month_first(r, inner_at, true))
        .or_else(|| modified_month(r, inner_at))
        .or_else(|| bare_year(r, inner_at, true))?;
    Some(Found {
        named: inner.named.part(part)?,
        end: inner.end,
    })
}

/// "mid-March": written as one hyphenated word.
fn mid_hyphen_month(r: &Reader, at: usize) -> Option<Found> {
    let joined = r.raw_word(at, "mid")
        && r.punct(at + 1, b'-')
        && r.touching(at)
        && r.touching(at + 1)
        && r.free_span(at, at + 2);
    if !joined {
        return None;
    }
    let &(_, month) = MONTHS.iter().find(|(name, _)| r.raw_word(at + 2, name))?;
    let named = calendar::recent_month(r.today, month, false).part(Part::Mid)?;
    Some(Found { named, end: at + 3 })
}
