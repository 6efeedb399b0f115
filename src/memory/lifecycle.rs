//! A memory's lifecycle: whether its anchors still hold, how sure Engram
//! is of it, whether a change to a memory it is linked to asks for a
//! review, and whether it was let go for disuse. None of it is part of a
//! version: changing it writes no new version, and a new version starts
//! with a lifecycle of its own.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{CommitId, MemoryId, ParseError, truncate_for_message};

word_enum!(
    /// Whether what a memory is about still holds in the code.
    Validity, "validity" {
        Current => "current",
        Changed => "changed",
        Gone => "gone",
        Unverified => "unverified",
    }
);

word_enum!(
    /// How sure Engram is of a memory.
    Confidence, "confidence" {
        Provisional => "provisional",
        Confirmed => "confirmed",
    }
);

/// The longest `review_reason`, in characters.
pub const MAX_REVIEW_REASON_CHARS: usize = 500;

/// A memory's lifecycle, as its JSON, its row and the lifecycle file of
/// its namespace hold it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Lifecycle {
    /// `current` (its anchors hold), `changed` (a file it is about changed
    /// since), `gone` (a file or symbol it is about no longer exists) or
    /// `unverified` (no anchors, or never checked).
    #[serde(default = "Validity::unverified")]
    pub validity: Validity,
    /// When `engram check` last judged its anchors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<DateTime<Utc>>,
    /// The working tree's HEAD that check ran against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_commit: Option<CommitId>,
    /// `provisional` (written by the classifier, not yet confirmed) or
    /// `confirmed`.
    #[serde(default = "Confidence::confirmed")]
    pub confidence: Confidence,
    /// A memory it is linked to changed: `review_reason` says which and how.
    #[serde(default)]
    pub needs_review: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_reason: Option<String>,
    /// Let go for disuse: not retrieved or injected, listed only when
    /// asked for (`archived=true`), never deleted.
    #[serde(default)]
    pub archived: bool,
    /// When it was last retrieved, confirmed, kept or restored (to the
    /// day: a memory in daily use is not rewritten at every retrieval).
    /// Retention measures disuse from it, from a check that found it
    /// `current`, or from when its version was written, whichever is
    /// latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_at: Option<DateTime<Utc>>,
    /// A consolidation pass found it says what this memory of its
    /// namespace says, and kept that one: this one is no longer current
    /// (never injected; a search that matches it finds that one), as if
    /// superseded by it, and comes back if the pass is undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<MemoryId>,
}

/// How long `used_at` may lag behind a use before the use is written
/// down: a memory retrieved all day is written once that day, not at
/// every retrieval.
pub const USE_GRANULARITY: TimeDelta = TimeDelta::days(1);

/// How long memories are kept in use without a sign of life; `None`
/// keeps them however long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// How long a provisional memory waits to be confirmed.
    pub provisional: Option<TimeDelta>,
    /// How long a memory may go without being retrieved, confirmed or
    /// found `current` by a check.
    pub unused: Option<TimeDelta>,
    /// Since when this store has counted uses: disuse is never counted
    /// from before it, so that a store older than the counting is not let
    /// go at once for the uses nobody wrote down.
    pub counting_since: DateTime<Utc>,
}

/// Why a memory was let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LetGo {
    /// Provisional for longer than [`Retention::provisional`].
    Unconfirmed,
    /// Unused for longer than [`Retention::unused`].
    Unused,
}

impl Validity {
    /// The default of a field left out (serde's `default` takes a path).
    pub fn unverified() -> Self {
        Self::Unverified
    }
}

impl Confidence {
    /// The default of a field left out.
    pub fn confirmed() -> Self {
        Self::Confirmed
    }
}

/// Checks a review reason: non-empty once trimmed, at most
/// [`MAX_REVIEW_REASON_CHARS`]. Returns it trimmed.
pub fn parse_review_reason(reason: &str) -> Result<&str, ParseError> {
    let trimmed = reason.trim();
    let chars = trimmed.chars().count();
    if trimmed.is_empty() {
        Err(ParseError("must not be empty".to_owned()))
    } else if chars > MAX_REVIEW_REASON_CHARS {
        Err(ParseError(format!(
            "is {chars} characters long; the limit is {MAX_REVIEW_REASON_CHARS}"
        )))
    } else {
        Ok(trimmed)
    }
}

impl Default for Lifecycle {
    /// A memory nobody has checked, confirmed by whoever wrote it (a
    /// person, an agent asked to remember, or a file written by hand).
    fn default() -> Self {
        Self {
            validity: Validity::Unverified,
            checked_at: None,
            checked_commit: None,
            confidence: Confidence::Confirmed,
            needs_review: false,
            review_reason: None,
            archived: false,
            used_at: None,
            superseded_by: None,
        }
    }
}

impl Lifecycle {
    /// Whether it says nothing the default does not (such records are not
    /// kept).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The lifecycle of a new memory: `provisional` when the classifier
    /// wrote it.
    pub fn of_new(confidence: Confidence) -> Self {
        Self {
            confidence,
            ..Self::default()
        }
    }

    /// Why a current memory whose version was written at `written` is to
    /// be let go at `now` under `retention`, if it is: provisional for too
    /// long, or with no sign of life (written, used, or found `current`)
    /// for too long. An archived one already was.
    pub fn to_let_go(
        &self,
        written: DateTime<Utc>,
        retention: &Retention,
        now: DateTime<Utc>,
    ) -> Option<LetGo> {
        if self.archived {
            return None;
        }
        let older_than = |since: DateTime<Utc>, limit: Option<TimeDelta>| {
            limit.is_some_and(|limit| now - since > limit)
        };
        if self.confidence == Confidence::Provisional && older_than(written, retention.provisional)
        {
            return Some(LetGo::Unconfirmed);
        }
        let found_current = self
            .checked_at
            .filter(|_| self.validity == Validity::Current);
        let last_sign_of_life = [
            Some(written),
            self.used_at,
            found_current,
            Some(retention.counting_since),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(written);
        older_than(last_sign_of_life, retention.unused).then_some(LetGo::Unused)
    }

    /// Confirmed at `now` (by a person, an agent, or the same fact
    /// captured again), which is a use too.
    pub fn confirmed(&self, now: DateTime<Utc>) -> Self {
        Self {
            confidence: Confidence::Confirmed,
            used_at: Some(now),
            ..self.clone()
        }
    }

    /// Kept at `now` by a review: the change it was flagged for does not
    /// touch it.
    pub fn kept(&self, now: DateTime<Utc>) -> Self {
        Self {
            needs_review: false,
            review_reason: None,
            used_at: Some(now),
            ..self.clone()
        }
    }

    /// Brought back at `now` by a person (a restore, or an edit of its
    /// file): no longer archived, and confirmed, since a person vouched
    /// for it; retention counts from now.
    pub fn restored(&self, now: DateTime<Utc>) -> Self {
        Self {
            archived: false,
            ..self.confirmed(now)
        }
    }

    /// This lifecycle used at `now`, if that is news: `used_at` is unset or
    /// more than [`USE_GRANULARITY`] older.
    pub fn used(&self, now: DateTime<Utc>) -> Option<Self> {
        let news = self
            .used_at
            .is_none_or(|used_at| now - used_at >= USE_GRANULARITY);
        news.then(|| Self {
            used_at: Some(now),
            ..self.clone()
        })
    }

    /// Whether retrieval may inject it: never when its code is gone or
    /// it was let go.
    pub fn is_injectable(&self) -> bool {
        !self.archived && self.validity != Validity::Gone
    }

    /// The caveat an injection carries with it, if any: the code it is
    /// about changed, or a memory it is linked to did.
    pub fn caveat(&self) -> Option<String> {
        let changed = (self.validity == Validity::Changed)
            .then(|| "the code it describes changed since it was written".to_owned());
        let review = self.needs_review.then(|| {
            self.review_reason
                .clone()
                .unwrap_or_else(|| "a memory it is linked to changed".to_owned())
        });
        match (changed, review) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one),
            (Some(changed), Some(review)) => Some(format!("{changed}; {review}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_lifecycle_is_written_as_nothing_but_its_words() {
        let json = serde_json::to_value(Lifecycle::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"validity": "unverified", "confidence": "confirmed",
                               "needs_review": false, "archived": false})
        );
        let read: Lifecycle = serde_json::from_str("{}").unwrap();
        assert!(read.is_default());
        assert!(serde_json::from_str::<Lifecycle>(r#"{"validity": "stale"}"#).is_err());
    }

    #[test]
    fn memories_are_let_go_unconfirmed_or_unused_and_any_sign_of_life_keeps_them() {
        let now = Utc::now();
        let days = |n: i64| now - TimeDelta::days(n);
        let retention = Retention {
            provisional: Some(TimeDelta::days(14)),
            unused: Some(TimeDelta::days(180)),
            counting_since: days(1000),
        };
        let provisional = Lifecycle::of_new(Confidence::Provisional);
        let confirmed = Lifecycle::default();
        let let_go = |lifecycle: &Lifecycle, written| lifecycle.to_let_go(written, &retention, now);
        assert_eq!(let_go(&provisional, days(13)), None);
        assert_eq!(let_go(&provisional, days(15)), Some(LetGo::Unconfirmed));
        assert_eq!(let_go(&confirmed, days(15)), None);
        assert_eq!(let_go(&confirmed, days(181)), Some(LetGo::Unused));
        let used = confirmed.used(days(10)).unwrap();
        assert_eq!(let_go(&used, days(400)), None);
        let found_current = Lifecycle {
            validity: Validity::Current,
            checked_at: Some(days(5)),
            ..Lifecycle::default()
        };
        assert_eq!(let_go(&found_current, days(400)), None);
        let found_changed = Lifecycle {
            validity: Validity::Changed,
            ..found_current.clone()
        };
        assert_eq!(let_go(&found_changed, days(400)), Some(LetGo::Unused));
        let archived = Lifecycle {
            archived: true,
            ..Lifecycle::default()
        };
        assert_eq!(let_go(&archived, days(400)), None);
        let forever = Retention {
            provisional: None,
            unused: None,
            counting_since: days(1000),
        };
        assert_eq!(provisional.to_let_go(days(4000), &forever, now), None);
        let counting_lately = Retention {
            counting_since: days(30),
            ..retention
        };
        assert_eq!(
            confirmed.to_let_go(days(400), &counting_lately, now),
            None,
            "uses before the counting began are unknown, not absent"
        );
    }

    #[test]
    fn a_use_is_written_down_once_a_day() {
        let now = Utc::now();
        let used = Lifecycle::default().used(now).unwrap();
        assert_eq!(used.used_at, Some(now));
        assert_eq!(used.used(now + TimeDelta::hours(23)), None);
        assert!(used.used(now + TimeDelta::hours(25)).is_some());
    }

    #[test]
    fn gone_and_archived_memories_are_never_injected_and_changed_ones_say_why() {
        let gone = Lifecycle {
            validity: Validity::Gone,
            ..Lifecycle::default()
        };
        assert!(!gone.is_injectable());
        let archived = Lifecycle {
            archived: true,
            ..Lifecycle::default()
        };
        assert!(!archived.is_injectable());
        let changed = Lifecycle {
            validity: Validity::Changed,
            needs_review: true,
            review_reason: Some("memory 0193 it depends on was superseded".to_owned()),
            ..Lifecycle::default()
        };
        assert!(changed.is_injectable());
        let caveat = changed.caveat().unwrap();
        assert!(caveat.contains("code it describes changed") && caveat.contains("superseded"));
        assert_eq!(Lifecycle::default().caveat(), None);
    }
}
