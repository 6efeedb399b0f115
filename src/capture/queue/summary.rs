//! A queued trigger as listings show it: a [`TriggerSummary`] holds
//! everything but the window, of which it keeps only the length and a
//! short preview of the last user line, so listing a queue of large
//! compactions stays small.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Kind, Trigger};
use crate::memory::{RepoId, SessionId, UserId};
use crate::store::NamespacePair;
use crate::window::Speaker;

/// The longest preview of a window, in characters.
pub const PREVIEW_CHARS: usize = 160;

/// A trigger without its window.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TriggerSummary {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub kind: Kind,
    pub session_id: SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub repo: RepoId,
    pub user: UserId,
    pub accepted_at: DateTime<Utc>,
    /// Classifier attempts that failed so far.
    pub attempts: u32,
    /// The error of the last failed attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Lines (user and assistant messages) in the window.
    pub lines: usize,
    /// The start of the window's last user line (at most 160 characters).
    pub preview: String,
}

impl TriggerSummary {
    pub fn of(trigger: &Trigger) -> Self {
        let last_user = trigger
            .window
            .iter()
            .rev()
            .find(|line| line.speaker() == Speaker::User)
            .or_else(|| trigger.window.last());
        Self {
            id: trigger.id,
            kind: trigger.kind,
            session_id: trigger.session_id.clone(),
            turn_id: trigger.turn_id.clone(),
            repo: trigger.repo.clone(),
            user: trigger.user.clone(),
            accepted_at: trigger.accepted_at,
            attempts: trigger.attempts,
            last_error: trigger.last_error.clone(),
            lines: trigger.window.len(),
            preview: last_user.map_or_else(String::new, |line| preview(&line.text)),
        }
    }

    pub fn pair(&self) -> NamespacePair {
        NamespacePair {
            repo: self.repo.clone(),
            user: self.user.clone(),
        }
    }
}

/// The first [`PREVIEW_CHARS`] characters of `text`, whitespace collapsed.
fn preview(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &collapsed[..cut]),
        None => collapsed,
    }
}
