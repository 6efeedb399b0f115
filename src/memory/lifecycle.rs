//! A memory's lifecycle: whether its anchors still hold, how sure Engram
//! is of it, whether a change to a memory it is linked to asks for a
//! review, and whether it was let go for disuse. None of it is part of a
//! version: changing it writes no new version, and a new version starts
//! with a lifecycle of its own.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
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
    /// A consolidation pass found it says what this memory of its
    /// namespace says, and kept that one: this one is no longer current
    /// (never injected; a search that matches it finds that one), as if
    /// superseded by it, and comes back if the pass is undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<MemoryId>,
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
