//! The calendar arithmetic of the time words: what a named time is
//! ([`Named`]) and the instants it spans, resolved in UTC against a
//! reference instant. Every step is checked: a count too large for the
//! calendar resolves to nothing, never to a panic.
//!
//! Weeks start on Monday (ISO 8601). A day, week, month or year named
//! without a year is its most recent occurrence not after the reference.

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, NaiveTime, TimeDelta, Utc, Weekday};

/// A phrase found: what it names, and the token after it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Found {
    pub named: Named,
    pub end: usize,
}

/// A time named in a text, before it becomes instants. Months and years
/// stay themselves so that "early" or "the end of" can take a part of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Named {
    Day(NaiveDate),
    /// The week that starts on this Monday.
    Week(NaiveDate),
    Month(i32, u32),
    Year(i32),
    /// Any other span, half-open.
    Span(DateTime<Utc>, DateTime<Utc>),
}

/// The units a count of time is given in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// A third of a month or of a year.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Early,
    Mid,
    Late,
}

impl Named {
    /// Its first instant and the instant after its last.
    pub(super) fn bounds(self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let (start, end) = match self {
            Self::Day(day) => (midnight(day), midnight(day.succ_opt()?)),
            Self::Week(monday) => (
                midnight(monday),
                midnight(monday.checked_add_days(Days::new(7))?),
            ),
            Self::Month(year, month) => (
                midnight(first_of(year, month)?),
                midnight(first_after(year, month)?),
            ),
            Self::Year(year) => (
                midnight(first_of(year, 1)?),
                midnight(first_of(year.checked_add(1)?, 1)?),
            ),
            Self::Span(start, end) => (start, end),
        };
        (start < end).then_some((start, end))
    }

    /// The early, middle or late third of a month (days 1–10, 11–20,
    /// 21–end) or of a year (January–April, May–August, September–December).
    pub(super) fn part(self, part: Part) -> Option<Self> {
        let (start, end) = match self {
            Self::Month(year, month) => {
                let first = first_of(year, month)?;
                let day = |n| NaiveDate::from_ymd_opt(year, month, n);
                match part {
                    Part::Early => (first, day(11)?),
                    Part::Mid => (day(11)?, day(21)?),
                    Part::Late => (day(21)?, first_after(year, month)?),
                }
            }
            Self::Year(year) => match part {
                Part::Early => (first_of(year, 1)?, first_of(year, 5)?),
                Part::Mid => (first_of(year, 5)?, first_of(year, 9)?),
                Part::Late => (first_of(year, 9)?, first_of(year.checked_add(1)?, 1)?),
            },
            Self::Day(_) | Self::Week(_) | Self::Span(..) => return None,
        };
        Some(Self::Span(midnight(start), midnight(end)))
    }
}

pub(super) fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(NaiveTime::MIN).and_utc()
}

fn first_of(year: i32, month: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, 1)
}

fn first_after(year: i32, month: u32) -> Option<NaiveDate> {
    first_of(year, month)?.checked_add_months(Months::new(1))
}

pub(super) fn monday_of(day: NaiveDate) -> Option<NaiveDate> {
    day.checked_sub_days(Days::new(u64::from(day.weekday().num_days_from_monday())))
}

/// The month `month` named without a year: this year's if it is not later
/// than `today`'s month (or, with `before_this_month`, earlier), else last
/// year's.
pub(super) fn recent_month(today: NaiveDate, month: u32, before_this_month: bool) -> Named {
    let this_year = month < today.month() || (month == today.month() && !before_this_month);
    Named::Month(
        if this_year {
            today.year()
        } else {
            today.year() - 1
        },
        month,
    )
}

/// The most recent `month`/`day` not after `today`; a 29 February looks
/// back to the last leap year.
pub(super) fn recent_date(today: NaiveDate, month: u32, day: u32) -> Option<NaiveDate> {
    (0..8)
        .filter_map(|back| NaiveDate::from_ymd_opt(today.year() - back, month, day))
        .find(|&date| date <= today)
}

/// The most recent day numbered `day` not after `today` ("the 31st" skips
/// the months that have none).
pub(super) fn recent_day_of_month(today: NaiveDate, day: u32) -> Option<NaiveDate> {
    let this_month = first_of(today.year(), today.month())?;
    (0..12)
        .filter_map(|back| this_month.checked_sub_months(Months::new(back)))
        .filter_map(|first| first.with_day(day))
        .find(|&date| date <= today)
}

/// The most recent `weekday` strictly before `today` (one to seven days back).
pub(super) fn weekday_before(today: NaiveDate, weekday: Weekday) -> Option<NaiveDate> {
    let today_index = today.weekday().num_days_from_monday();
    let back = (today_index + 6 - weekday.num_days_from_monday()) % 7 + 1;
    today.checked_sub_days(Days::new(u64::from(back)))
}

/// `weekday` in the week of `today`.
pub(super) fn weekday_this_week(today: NaiveDate, weekday: Weekday) -> Option<NaiveDate> {
    monday_of(today)?.checked_add_days(Days::new(u64::from(weekday.num_days_from_monday())))
}

/// "N units ago", N between `fewest` and `most`: the whole calendar day,
/// week, month or year that many back (a vague count spans all of them);
/// hours and minutes, the span from one unit before to one unit after.
pub(super) fn ago(reference: DateTime<Utc>, unit: Unit, fewest: u32, most: u32) -> Option<Named> {
    let today = reference.date_naive();
    let span = |start: NaiveDate, end: NaiveDate| Named::Span(midnight(start), midnight(end));
    Some(match unit {
        Unit::Minute | Unit::Hour => {
            let step = if unit == Unit::Hour {
                TimeDelta::try_hours(1)?
            } else {
                TimeDelta::try_minutes(1)?
            };
            let start = reference
                .checked_sub_signed(step.checked_mul(i32::try_from(most).ok()?.checked_add(1)?)?)?;
            let end =
                reference.checked_sub_signed(step.checked_mul(i32::try_from(fewest).ok()? - 1)?)?;
            Named::Span(start, end)
        }
        Unit::Day => span(
            today.checked_sub_days(Days::new(u64::from(most)))?,
            today
                .checked_sub_days(Days::new(u64::from(fewest)))?
                .succ_opt()?,
        ),
        Unit::Week => {
            let weeks_back =
                |n: u32| monday_of(today.checked_sub_days(Days::new(7 * u64::from(n)))?);
            span(
                weeks_back(most)?,
                weeks_back(fewest)?.checked_add_days(Days::new(7))?,
            )
        }
        Unit::Month => {
            let this_month = first_of(today.year(), today.month())?;
            span(
                this_month.checked_sub_months(Months::new(most))?,
                this_month
                    .checked_sub_months(Months::new(fewest))?
                    .checked_add_months(Months::new(1))?,
            )
        }
        Unit::Year => {
            let year = |n: u32| today.year().checked_sub(i32::try_from(n).ok()?);
            span(
                first_of(year(most)?, 1)?,
                first_of(year(fewest)?.checked_add(1)?, 1)?,
            )
        }
    })
}

/// "The last N units": from N units before the reference to the reference.
pub(super) fn last(reference: DateTime<Utc>, unit: Unit, count: u32) -> Option<Named> {
    let start = match unit {
        Unit::Minute => reference.checked_sub_signed(TimeDelta::try_minutes(i64::from(count))?),
        Unit::Hour => reference.checked_sub_signed(TimeDelta::try_hours(i64::from(count))?),
        Unit::Day => reference.checked_sub_days(Days::new(u64::from(count))),
        Unit::Week => reference.checked_sub_days(Days::new(7 * u64::from(count))),
        Unit::Month => reference.checked_sub_months(Months::new(count)),
        Unit::Year => reference.checked_sub_months(Months::new(count.checked_mul(12)?)),
    }?;
    Some(Named::Span(start, reference))
}
