//! The forms of a calendar date, a month, a weekday or a year: "March
//! 12", "12 March 2026", "the 12th", "in March", "last March", "March last
//! year", "2026-03-12", "25/03/2026", "on Monday", "in 2025". A date or
//! month named without its year is its most recent occurrence not after
//! the reference.

use chrono::{Datelike, NaiveDate, Weekday};

use super::calendar::{self, Found, Named};
use super::reader::Reader;

pub(super) const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("may", 5),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
];

pub(super) const MONTH_ABBREVIATIONS: &[(&str, u32)] = &[
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("sept", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
];

pub(super) const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

/// The month named at `at` and the token after it (past an abbreviation's
/// dot): (month, abbreviated, next).
fn month_word(r: &Reader, at: usize) -> Option<(u32, bool, usize)> {
    if let Some(month) = r.lookup(at, MONTHS) {
        return Some((month, false, at + 1));
    }
    let month = r.lookup(at, MONTH_ABBREVIATIONS)?;
    Some((
        month,
        true,
        at + 1 + usize::from(r.punct(at + 1, b'.') && r.touching(at)),
    ))
}

/// A 4-digit year at `at`; `bare` (no day or month beside it) keeps only
/// years from 1970 to the reference's, as "in 2048 bytes" is no year.
fn year_number(r: &Reader, at: usize, bare: bool) -> Option<i32> {
    let (value, 4, false) = r.number(at)? else {
        return None;
    };
    let year = i32::try_from(value).ok()?;
    (!bare || (1970..=r.today.year()).contains(&year)).then_some(year)
}

fn day_number(r: &Reader, at: usize) -> Option<(u32, bool)> {
    let (value, digits, ordinal) = r.number(at)?;
    ((1..=31).contains(&value) && digits <= 2).then_some((value, ordinal))
}

/// A day of `month`, with the year at `year_at` or, when the phrase ends
/// at `year_at`, the most recent such day.
fn dated(r: &Reader, month: u32, day: u32, year_at: usize) -> Option<Found> {
    if let Some(year) = year_number(r, year_at, false) {
        return Some(Found {
            named: Named::Day(NaiveDate::from_ymd_opt(year, month, day)?),
            end: year_at + 1,
        });
    }
    let after_comma = year_at + usize::from(r.punct(year_at, b','));
    if let Some(year) = year_number(r, after_comma, false) {
        return Some(Found {
            named: Named::Day(NaiveDate::from_ymd_opt(year, month, day)?),
            end: after_comma + 1,
        });
    }
    if !r.ends_phrase(year_at) {
        return None;
    }
    Some(Found {
        named: Named::Day(calendar::recent_date(r.today, month, day)?),
        end: year_at,
    })
}

/// "March 12", "Mar 12th, 2026", "March the 12th", "March 2025", "March
/// last year", "in March".
pub(super) fn month_first(r: &Reader, at: usize, introduced: bool) -> Option<Found> {
    let (month, abbreviated, next) = month_word(r, at)?;
    let day_at = next + usize::from(r.word(next, "the"));
    if let Some((day, ordinal)) = day_number(r, day_at)
        && (day_at == next || ordinal)
        && let Some(found) = dated(r, month, day, day_at + 1)
    {
        return Some(found);
    }
    if let Some(year) = year_number(r, next, false) {
        return Some(Found {
            named: Named::Month(year, month),
            end: next + 1,
        });
    }
    let year_at = next + usize::from(r.word(next, "of"));
    for (words, back) in [(["last", "year"], 1), (["this", "year"], 0)] {
        if !abbreviated && r.words(year_at, &words) {
            return Some(Found {
                named: Named::Month(r.today.year() - back, month),
                end: year_at + 2,
            });
        }
    }
    (introduced && !abbreviated).then(|| Found {
        named: calendar::recent_month(r.today, month, false),
        end: next,
    })
}

/// "last March" (the most recent before this month), "this March".
pub(super) fn modified_month(r: &Reader, at: usize) -> Option<Found> {
    let last = r.word(at, "last");
    if !last && !r.word(at, "this") {
        return None;
    }
    let month = r.lookup(at + 1, MONTHS)?;
    let named = if last {
        calendar::recent_month(r.today, month, true)
    } else {
        Named::Month(r.today.year(), month)
    };
    Some(Found { named, end: at + 2 })
}

/// "12 March", "the 12th of March 2026", and, after an introducing word,
/// "the 12th" alone (the most recent 12th).
pub(super) fn day_first(r: &Reader, at: usize, introduced: bool) -> Option<Found> {
    let the = r.word(at, "the");
    let day_at = at + usize::from(the);
    let (day, ordinal) = day_number(r, day_at)?;
    if the && !ordinal {
        return None;
    }
    let month_at = day_at + 1 + usize::from(r.word(day_at + 1, "of"));
    if let Some((month, _, next)) = month_word(r, month_at) {
        return dated(r, month, day, next);
    }
    if the && introduced && r.ends_phrase(day_at + 1) {
        let date = calendar::recent_day_of_month(r.today, day)?;
        return Some(Found {
            named: Named::Day(date),
            end: day_at + 1,
        });
    }
    None
}

/// "2026-03-12": four digits, two, two, joined by hyphens, standing free
/// (not "2026-03-12T10:00", "logs/2026-03-12.log").
pub(super) fn iso_date(r: &Reader, at: usize) -> Option<Found> {
    let [year, month, day] = joined_numbers(r, at, b'-')?;
    if year.1 != 4 || month.1 != 2 || day.1 != 2 {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(i32::try_from(year.0).ok()?, month.0, day.0)?;
    Some(Found {
        named: Named::Day(date),
        end: at + 5,
    })
}

/// "2026/03/12", or a day and a month with a 4-digit year after them in
/// either order when only one order is a date: "25/03/2026" and
/// "03/25/2026" are 25 March; "12/03/2026" (12 March or 3 December?) is
/// not read.
pub(super) fn slash_date(r: &Reader, at: usize) -> Option<Found> {
    let [a, b, c] = joined_numbers(r, at, b'/')?;
    let (year, month, day) = match (a.1, b.1, c.1) {
        (4, 1 | 2, 1 | 2) => (a.0, b.0, c.0),
        (1 | 2, 1 | 2, 4) => match (a.0 > 12, b.0 > 12) {
            (true, false) => (c.0, b.0, a.0),
            (false, true) => (c.0, a.0, b.0),
            (false, false) if a.0 == b.0 => (c.0, a.0, a.0),
            _ => return None,
        },
        _ => return None,
    };
    let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
    Some(Found {
        named: Named::Day(date),
        end: at + 5,
    })
}

/// Three plain numbers joined by `mark` with no space, standing free
/// together: each (value, digits).
fn joined_numbers(r: &Reader, at: usize, mark: u8) -> Option<[(u32, u8); 3]> {
    let plain = |offset: usize| match r.raw_number(at + offset)? {
        (value, digits, false) => Some((value, digits)),
        _ => None,
    };
    let joined = (0..4).all(|offset| r.touching(at + offset))
        && r.punct(at + 1, mark)
        && r.punct(at + 3, mark)
        && r.free_span(at, at + 4);
    joined.then_some(())?;
    Some([plain(0)?, plain(2)?, plain(4)?])
}

/// "on Monday", "last Tuesday", "Friday" (the most recent before today),
/// "this Monday" (in this week).
pub(super) fn weekday(r: &Reader, at: usize) -> Option<Found> {
    let this = r.word(at, "this");
    let modified = this || r.word(at, "last") || r.word(at, "on");
    let day_at = at + usize::from(modified);
    let weekday = r.lookup(day_at, WEEKDAYS)?;
    let date = if this {
        calendar::weekday_this_week(r.today, weekday)?
    } else {
        calendar::weekday_before(r.today, weekday)?
    };
    Some(Found {
        named: Named::Day(date),
        end: day_at + 1,
    })
}

/// "in 2025", "since 2025": a year alone after an introducing word.
pub(super) fn bare_year(r: &Reader, at: usize, introduced: bool) -> Option<Found> {
    if !introduced || !r.ends_phrase(at + 1) {
        return None;
    }
    Some(Found {
        named: Named::Year(year_number(r, at, true)?),
        end: at + 1,
    })
}
