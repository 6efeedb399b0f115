//! [`RecentTriggers`], a bounded log of the latest capture passes and what
//! each wrote, each trigger seen through its [`TriggerSummary`].
//!
//! The log lives in memory only (it starts empty at each start) and keeps
//! the last [`RECENT_CAPACITY`] outcomes; the worker appends, readers copy.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::capture::queue::Trigger;
pub use crate::capture::queue::summary::TriggerSummary;
use crate::memory::MemoryId;
use crate::store::NamespacePair;
use crate::usage::Metered;

/// How many finished passes the log keeps.
pub const RECENT_CAPACITY: usize = 200;

/// How a capture pass ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PassResult {
    /// Done; `written` lists what it wrote (possibly nothing).
    Processed,
    /// Failed for now; it waits in the queue for another attempt.
    Retrying,
    /// Failed for good; it is in `queue/failed/`.
    Failed,
    /// Stopped before its next classifier call by a spent daily token
    /// budget; it waits in the queue for the budget to renew, and what its
    /// passes so far wrote is kept.
    Held,
}

/// One finished capture pass.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PassOutcome {
    #[serde(flatten)]
    pub trigger: TriggerSummary,
    pub result: PassResult,
    pub finished_at: DateTime<Utc>,
    /// The memories the pass wrote, in order.
    pub written: Vec<MemoryId>,
    /// Why the pass failed, for `retrying` and `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The classifier call's tokens and cost; absent when the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Metered>,
}

/// The latest capture passes, newest last, at most [`RECENT_CAPACITY`].
#[derive(Default)]
pub struct RecentTriggers {
    passes: Mutex<VecDeque<PassOutcome>>,
}

impl RecentTriggers {
    /// Logs a finished pass of `trigger`, forgetting the oldest past the bound.
    pub fn record(
        &self,
        trigger: &Trigger,
        result: PassResult,
        written: Vec<MemoryId>,
        error: Option<String>,
        usage: Option<Metered>,
    ) {
        let mut summary = TriggerSummary::of(trigger);
        if matches!(result, PassResult::Retrying | PassResult::Failed) {
            // This pass failed too.
            summary.attempts += 1;
        }
        let outcome = PassOutcome {
            trigger: summary,
            result,
            finished_at: Utc::now(),
            written,
            error,
            usage,
        };
        let mut passes = self.lock();
        if passes.len() == RECENT_CAPACITY {
            passes.pop_front();
        }
        passes.push_back(outcome);
    }

    /// Up to `limit` passes whose pair `visible` admits, newest first.
    pub fn newest(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Vec<PassOutcome> {
        self.lock()
            .iter()
            .rev()
            .filter(|pass| visible(&pass.trigger.pair()))
            .take(limit)
            .cloned()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<PassOutcome>> {
        // A push or pop cannot leave the deque half-changed.
        self.passes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::queue::summary::PREVIEW_CHARS;
    use crate::capture::queue::{Kind, StoredLine};
    use uuid::Uuid;

    fn trigger(repo: &str, lines: &[(&str, &str)]) -> Trigger {
        Trigger {
            id: Uuid::now_v7(),
            kind: Kind::Turn,
            session_id: "s1".parse().unwrap(),
            turn_id: None,
            repo: repo.parse().unwrap(),
            user: "ana".parse().unwrap(),
            window: lines
                .iter()
                .map(|(role, text)| StoredLine {
                    role: (*role).to_owned(),
                    text: (*text).to_owned(),
                })
                .collect(),
            accepted_at: Utc::now(),
            attempts: 0,
            last_error: None,
            commit: None,
            observed_at: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn a_summary_previews_the_last_user_line_briefly() {
        let long = format!("use  tabs\n{}", "x".repeat(500));
        let summary = TriggerSummary::of(&trigger(
            "forge",
            &[("user", "first"), ("user", &long), ("assistant", "ok")],
        ));
        assert_eq!(summary.lines, 3);
        assert!(summary.preview.starts_with("use tabs x"));
        assert_eq!(summary.preview.chars().count(), PREVIEW_CHARS + 1);
    }

    #[test]
    fn the_log_is_bounded_newest_first_and_filtered() {
        let log = RecentTriggers::default();
        let first = trigger("forge", &[("user", "hi")]);
        log.record(
            &first,
            PassResult::Failed,
            Vec::new(),
            Some("boom".into()),
            None,
        );
        for _ in 0..RECENT_CAPACITY {
            log.record(
                &trigger("other", &[("user", "hi")]),
                PassResult::Processed,
                vec![MemoryId::new()],
                None,
                None,
            );
        }
        let all = log.newest(usize::MAX, |_| true);
        assert_eq!(all.len(), RECENT_CAPACITY);
        assert!(
            all.iter().all(|pass| pass.trigger.id != first.id),
            "oldest forgotten"
        );
        log.record(&first, PassResult::Processed, Vec::new(), None, None);
        let forge = log.newest(10, |pair| pair.repo.as_str() == "forge");
        assert_eq!(forge.len(), 1);
        assert_eq!(log.newest(1, |_| true)[0].trigger.id, first.id);
    }
}
