//! Every form `time_in` reads, and the prose it must not read, as one
//! table. A row is `text | start..end | phrase | order | reference`:
//! a bound is a date (its midnight, UTC), a date and time, or `now` (the
//! reference); trailing columns may be left out, and a row of text alone
//! names no time. The reference is Saturday 28 November 2026, 15:00 UTC
//! unless a row names another. `\n` in a text is a line break.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use proptest::prelude::*;

use super::{TimeOrder, time_in};

const REFERENCE: &str = "2026-11-28T15:00";

const TABLE: &str = "
# Absolute dates.
what did we decide on 2026-03-12?       | 2026-03-12..2026-03-13 | 2026-03-12
the deploy on March 12                  | 2026-03-12..2026-03-13 | March 12
the outage on 12 March                  | 2026-03-12..2026-03-13 | 12 March
on March 12th, we lost data             | 2026-03-12..2026-03-13 | March 12th
notes from Mar 12, 2026 please          | 2026-03-12..2026-03-13 | Mar 12, 2026
notes from Mar. 12 2025                 | 2025-03-12..2025-03-13 | Mar. 12 2025
what broke on the 12th of March         | 2026-03-12..2026-03-13 | the 12th of March
what broke March the 12th               | 2026-03-12..2026-03-13 | March the 12th
what happened on December 25            | 2025-12-25..2025-12-26 | December 25
the party on 25 December 2026           | 2026-12-25..2026-12-26 | 25 December 2026
changes in March 2025                   | 2025-03-01..2025-04-01 | March 2025
what shipped in 2025?                   | 2025-01-01..2026-01-01 | 2025
the release on 25/03/2026               | 2026-03-25..2026-03-26 | 25/03/2026
the release on 03/25/2026               | 2026-03-25..2026-03-26 | 03/25/2026
the release on 04/04/2026               | 2026-04-04..2026-04-05 | 04/04/2026
the release on 2026/03/12               | 2026-03-12..2026-03-13 | 2026/03/12
the release on 12/03/2026
what did we do on Feb 29                | 2024-02-29..2024-03-01 | Feb 29
what did we change on the 12th          | 2026-11-12..2026-11-13 | the 12th
what did we change on the 28th          | 2026-11-28..2026-11-29 | the 28th
what did we change on the 29th          | 2026-10-29..2026-10-30 | the 29th
what did we change on the 31st          | 2026-10-31..2026-11-01 | the 31st

# Days and periods relative to the reference.
what did we do today                    | 2026-11-28..2026-11-29 | today
tonight's deploy                        | 2026-11-28..2026-11-29 | tonight
what did I fix this morning             | 2026-11-28..2026-11-29 | this morning
what did I fix yesterday?               | 2026-11-27..2026-11-28 | yesterday
the bug from last night                 | 2026-11-27..2026-11-28 | last night
the day before yesterday we merged      | 2026-11-26..2026-11-27 | the day before yesterday
what changed this week                  | 2026-11-23..2026-11-30 | this week
what changed last week                  | 2026-11-16..2026-11-23 | last week
What Changed Last Week?                 | 2026-11-16..2026-11-23 | Last Week
plans this weekend                      | 2026-11-28..2026-11-30 | this weekend
what broke last weekend                 | 2026-11-21..2026-11-23 | last weekend
decisions this month                    | 2026-11-01..2026-12-01 | this month
decisions last month                    | 2026-10-01..2026-11-01 | last month
goals THIS YEAR                         | 2026-01-01..2027-01-01 | THIS YEAR
what did we ship last year              | 2025-01-01..2026-01-01 | last year
this year's config                      | 2026-01-01..2027-01-01 | this year
this year’s config                      | 2026-01-01..2027-01-01 | this year

# N units ago: the whole day, week, month or year; for hours and minutes, one unit either side.
the fix from 3 days ago                 | 2026-11-25..2026-11-26 | 3 days ago
the fix from two days ago               | 2026-11-26..2026-11-27 | two days ago
a week ago we chose postgres            | 2026-11-16..2026-11-23 | a week ago
2 weeks ago                             | 2026-11-09..2026-11-16 | 2 weeks ago
a couple of weeks ago                   | 2026-11-09..2026-11-16 | a couple of weeks ago
a few days ago                          | 2026-11-24..2026-11-27 | a few days ago
3 months ago                            | 2026-08-01..2026-09-01 | 3 months ago
a month ago                             | 2026-10-01..2026-11-01 | a month ago
twelve months ago                       | 2025-11-01..2025-12-01 | twelve months ago
a year ago                              | 2025-01-01..2026-01-01 | a year ago
an hour ago                             | 2026-11-28T13:00..now  | an hour ago
5 minutes ago                           | 2026-11-28T14:54..2026-11-28T14:56 | 5 minutes ago

# The last N units: from then to the reference.
errors in the last 3 days               | 2026-11-25T15:00..now | the last 3 days
in the past two weeks                   | 2026-11-14T15:00..now | the past two weeks
over the last few months                | 2026-07-28T15:00..now | the last few months
in the last 24 hours                    | 2026-11-27T15:00..now | the last 24 hours
during the past week                    | 2026-11-21T15:00..now | the past week
in the last month                       | 2026-10-28T15:00..now | the last month
commits from the last 30 minutes        | 2026-11-28T14:30..now | the last 30 minutes

# Months, their parts, and years.
what did we decide in March             | 2026-03-01..2026-04-01 | March
what did we decide in December          | 2025-12-01..2026-01-01 | December
what did we decide in November          | 2026-11-01..2026-12-01 | November
what did we decide in May?              | 2026-05-01..2026-06-01 | May
early March                             | 2026-03-01..2026-03-11 | early March
mid March                               | 2026-03-11..2026-03-21 | mid March
in mid-March                            | 2026-03-11..2026-03-21 | mid-March
late October                            | 2026-10-21..2026-11-01 | late October
late February                           | 2026-02-21..2026-03-01 | late February
at the beginning of March               | 2026-03-01..2026-03-11 | the beginning of March
by the end of October                   | 2026-10-21..2026-11-01 | the end of October
early 2025                              | 2025-01-01..2025-05-01 | early 2025
late last year                          | 2025-09-01..2026-01-01 | late last year
early last month                        | 2026-10-01..2026-10-11 | early last month
last March                              | 2026-03-01..2026-04-01 | last March
last November                           | 2025-11-01..2025-12-01 | last November
this March                              | 2026-03-01..2026-04-01 | this March
in March last year                      | 2025-03-01..2025-04-01 | March last year
in October of last year                 | 2025-10-01..2025-11-01 | October of last year
the first week of March                 | 2026-03-01..2026-04-01 | March

# Weekdays: the most recent before today; with `this`, this week's.
what did we discuss on Monday           | 2026-11-23..2026-11-24 | on Monday
last Tuesday                            | 2026-11-24..2026-11-25 | last Tuesday
on Saturday                             | 2026-11-21..2026-11-22 | on Saturday
this Monday                             | 2026-11-23..2026-11-24 | this Monday
Friday's standup                        | 2026-11-27..2026-11-28 | Friday
last Sunday                             | 2026-11-22..2026-11-23 | last Sunday

# Bounds: since / after run to the reference; before / until from the epoch.
what changed since last week            | 2026-11-16..now        | since last week
anything after the 12th?                | 2026-11-13..now        | after the 12th
decisions before March                  | 1970-01-01..2026-03-01 | before March
everything until yesterday              | 1970-01-01..2026-11-28 | until yesterday
since 2025                              | 2025-01-01..now        | since 2025
prior to October                        | 1970-01-01..2026-10-01 | prior to October
since 3 days ago                        | 2026-11-25..now        | since 3 days ago
between March and May                   | 2026-03-01..2026-06-01 | between March and May
from March 3 to March 10                | 2026-03-03..2026-03-11 | from March 3 to March 10
logs from March                         | 2026-03-01..2026-04-01 | March

# Ordering words, alone and with a window.
what was the first database we used     | | | Earliest
what did we originally choose?          | | | Earliest
what is the latest decision about auth  | | | Latest
the most recent migration               | | | Latest
what do we currently use for logging?   | | | Latest
which queue do we use now?              | | | Latest
what did we change recently             | | | Latest
when did we last deploy?                | | | Latest
the last deploy in March                | 2026-03-01..2026-04-01 | March | Latest
the first deploy last week              | 2026-11-16..2026-11-23 | last week | Earliest
in the last 3 days, what was the first error | 2026-11-25T15:00..now | the last 3 days | Earliest
in March, or was it last week?          | 2026-03-01..2026-04-01 | March

# A year's end (Friday 2 January 2026), a leap day, a month's end.
last week                               | 2025-12-22..2025-12-29 | last week          | | 2026-01-02T09:00
this week                               | 2025-12-29..2026-01-05 | this week          | | 2026-01-02T09:00
last month                              | 2025-12-01..2026-01-01 | last month         | | 2026-01-02T09:00
in December                             | 2025-12-01..2026-01-01 | December           | | 2026-01-02T09:00
in January                              | 2026-01-01..2026-02-01 | January            | | 2026-01-02T09:00
yesterday                               | 2026-01-01..2026-01-02 | yesterday          | | 2026-01-02T09:00
a week ago                              | 2025-12-22..2025-12-29 | a week ago         | | 2026-01-02T09:00
in the last 3 days                      | 2025-12-30T09:00..now  | the last 3 days    | | 2026-01-02T09:00
on the 31st                             | 2025-12-31..2026-01-01 | the 31st           | | 2026-01-02T09:00
last Monday                             | 2025-12-29..2025-12-30 | last Monday        | | 2026-01-02T09:00
yesterday                               | 2028-02-29..2028-03-01 | yesterday          | | 2028-03-01T12:00
late February                           | 2028-02-21..2028-03-01 | late February      | | 2028-03-01T12:00
a month ago                             | 2028-02-01..2028-03-01 | a month ago        | | 2028-03-01T12:00
in the last month                       | 2026-02-28T15:00..now  | the last month     | | 2026-03-31T15:00
a month ago                             | 2026-02-01..2026-03-01 | a month ago        | | 2026-03-31T15:00

# Prose that names no time.
is the trait system first-class?
at last it compiles
a last-minute fix broke the build
May I ask how the cache works?
march the files through the pipeline
get a second opinion on this design
it took 3 days of work to port
we need a 2025-era library
bump serde to 1.12.3
the server listens on port 2025
connect to localhost:2025
the Monday.com integration
the week function in chrono
why does last_seen stay null?
rename firstName to givenName
sort with NULLS FIRST
what's the first argument of spawn?
take the last element of the vec
the last 3 lines of the file
First, run the tests.
keep it for now
it happened at the last minute
split it into chunks of 2048
read it in 2048 byte chunks
on the 3rd try it worked
may 5 users log in at once?
run `git log --since yesterday` and explain
```\\nlet now = Instant::now();\\n```\\nwhy is this slow?
call Date.now() in the handler
the log says 2026-03-12T10:00:00Z error
open logs/2026-03-12.log
How do I configure the retrieval budget?
Why does cargo build fail with a linker error?
What is the default port of the service?
How are memories deduplicated?
Explain how vector and lexical scores are fused.
Can you refactor this function to return a Result?
";

fn instant(text: &str, reference: DateTime<Utc>) -> DateTime<Utc> {
    if text == "now" {
        return reference;
    }
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M").map_or_else(
        |_| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .expect(text)
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
        },
        |t| t.and_utc(),
    )
}

/// The row's failure, if `time_in` reads its text otherwise.
fn check_row(row: &str) -> Option<String> {
    let mut columns = row.split('|').map(str::trim);
    let text = columns.next().unwrap().replace("\\n", "\n");
    let window = columns.next().filter(|c| !c.is_empty());
    let phrase = columns.next().unwrap_or_default();
    let order = match columns.next().unwrap_or_default() {
        "" => None,
        "Earliest" => Some(TimeOrder::Earliest),
        "Latest" => Some(TimeOrder::Latest),
        other => panic!("{row}: no order {other}"),
    };
    let reference = instant(columns.next().unwrap_or(REFERENCE), DateTime::UNIX_EPOCH);
    let expected = window.map(|window| {
        let (start, end) = window.split_once("..").expect(row);
        (instant(start, reference), instant(end, reference), phrase)
    });
    let got = time_in(&text, reference);
    let got_window = got
        .as_ref()
        .and_then(|t| t.window.as_ref())
        .map(|w| (w.start, w.end, w.phrase.as_str()));
    let got_order = got.as_ref().and_then(|t| t.order);
    (got_window != expected || got_order != order).then(|| {
        format!("{text:?}: expected {expected:?} {order:?}, got {got_window:?} {got_order:?}")
    })
}

#[test]
fn time_in_reads_every_form_in_the_table() {
    let rows: Vec<&str> = TABLE
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let failures: Vec<String> = rows.iter().filter_map(|row| check_row(row)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

proptest! {
    #[test]
    fn time_in_never_panics_and_its_windows_are_spans_of_the_text(text in ".{0,200}") {
        check(&text);
    }

    #[test]
    fn time_in_never_panics_on_time_words(
        words in proptest::collection::vec(
            "last|first|the|in|of|march|mid|-|/|,|\\.|12th|31st|2026|2025|03|12|ago|3|a|few|days|weeks|since|before|between|and|early|`|'s",
            0..16,
        ),
        glue in proptest::collection::vec(prop_oneof![Just(" "), Just("")], 16),
    ) {
        let text: String = words.iter().zip(&glue).flat_map(|(word, glue)| [word.as_str(), *glue]).collect();
        check(&text);
    }
}

fn check(text: &str) {
    let reference = instant(REFERENCE, DateTime::UNIX_EPOCH);
    if let Some(found) = time_in(text, reference) {
        assert!(found.window.is_some() || found.order.is_some());
        if let Some(window) = found.window {
            assert!(window.start < window.end, "{text:?}: {window:?}");
            assert!(text.contains(&window.phrase), "{text:?}: {window:?}");
        }
    }
}
