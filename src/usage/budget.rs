//! The daily token budgets: which one a call counts against, whether it
//! is spent, when it renews (the next midnight, UTC), the one `warn` line
//! a crossing logs, and the gate capture's worker asks before it takes a
//! trigger.

use std::collections::HashSet;

use chrono::{DateTime, Days, Utc};

use super::Owner;
use crate::config::Config;
use crate::memory::{RepoId, UserId};

/// One of the two daily budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// `capture.daily_token_budget` (and, per pair,
    /// `capture.pair_daily_token_budget`).
    Capture,
    /// `retrieval.daily_token_budget`.
    Retrieval,
}

impl Budget {
    pub(super) fn key(self) -> &'static str {
        match self {
            Self::Capture => "capture.daily_token_budget",
            Self::Retrieval => "retrieval.daily_token_budget",
        }
    }

    pub(super) fn consequence(self) -> &'static str {
        match self {
            Self::Capture => "triggers stay queued, none dropped, until it renews",
            Self::Retrieval => {
                "HyDE and query expansion are skipped (the plain query is searched for) until it renews"
            }
        }
    }
}

/// The daily budgets, in tokens; 0 is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budgets {
    pub capture: u64,
    pub capture_per_pair: u64,
    pub retrieval: u64,
}

impl Budgets {
    pub fn from_config(config: &Config) -> Self {
        Self {
            capture: config.capture.daily_token_budget,
            capture_per_pair: config.capture.pair_daily_token_budget,
            retrieval: config.retrieval.daily_token_budget,
        }
    }

    pub(super) fn limit(&self, budget: Budget) -> u64 {
        match budget {
            Budget::Capture => self.capture,
            Budget::Retrieval => self.retrieval,
        }
    }
}

/// Whether `used` tokens have spent `limit` (0: unlimited).
pub(super) fn spent(used: u64, limit: u64) -> bool {
    limit > 0 && used >= limit
}

pub(super) fn warn_spent(budget: Budget, used: u64, limit: u64, now: DateTime<Utc>) {
    tracing::warn!(
        config.key = budget.key(),
        tokens.used = used,
        tokens.budget = limit,
        renews_at = %renewal(now),
        "the daily token budget `{}` is spent; {}",
        budget.key(),
        budget.consequence()
    );
}

/// When the day of `now` ends: the next midnight, UTC.
pub fn renewal(now: DateTime<Utc>) -> DateTime<Utc> {
    (now.date_naive() + Days::new(1))
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc()
}

/// Which capture triggers the budgets let through, as of one moment.
#[derive(Clone, Debug)]
pub struct CaptureGate {
    /// The global budget is spent.
    pub(super) closed: bool,
    /// Pairs that spent their own budget.
    pub(super) closed_pairs: HashSet<Owner>,
    pub(super) renews_at: DateTime<Utc>,
}

impl CaptureGate {
    /// Whether a trigger of (`repo`, `user`) may be classified.
    pub fn admits(&self, repo: &RepoId, user: &UserId) -> bool {
        !self.closed
            && !self
                .closed_pairs
                .iter()
                .any(|owner| owner.repo.as_ref() == Some(repo) && owner.user.as_ref() == Some(user))
    }

    /// Whether the whole capture budget is spent (a consolidation pass,
    /// which acts for one namespace rather than a pair, asks only this).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// When a held trigger may go again, if any is held.
    pub fn reopens_at(&self) -> Option<DateTime<Utc>> {
        (self.closed || !self.closed_pairs.is_empty()).then_some(self.renews_at)
    }
}
