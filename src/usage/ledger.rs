//! The totals: calls and tokens summed by kind, model and owner (one
//! ledger for the day, one since start), and `usage.json`, the day's
//! ledger on disk.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::budget::spent;
use super::{Budget, CallKind, Owner, Tokens};
use crate::memory::{RepoId, UserId};
use crate::store::confine;

/// Sums of calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Totals {
    pub(super) calls: u64,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) estimated_calls: u64,
}

impl Totals {
    pub(super) fn add(&mut self, tokens: Tokens, estimated: bool) {
        self.calls += 1;
        self.prompt_tokens = self.prompt_tokens.saturating_add(tokens.prompt);
        self.completion_tokens = self.completion_tokens.saturating_add(tokens.completion);
        self.estimated_calls += u64::from(estimated);
    }

    pub(super) fn merge(&mut self, other: &Self) {
        self.calls += other.calls;
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.estimated_calls += other.estimated_calls;
    }

    pub(super) fn tokens(&self) -> Tokens {
        Tokens {
            prompt: self.prompt_tokens,
            completion: self.completion_tokens,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) kind: CallKind,
    pub(super) model: String,
    pub(super) owner: Owner,
}

/// Totals by kind, model and owner.
#[derive(Clone, Debug, Default)]
pub(super) struct Ledger(pub(super) BTreeMap<Key, Totals>);

impl Ledger {
    /// Adds `other`'s totals to this ledger's.
    pub(super) fn merge(&mut self, other: &Self) {
        for (key, totals) in &other.0 {
            self.0.entry(key.clone()).or_default().merge(totals);
        }
    }

    /// Tokens counted against `budget`, by `owner` alone when given.
    pub(super) fn used(&self, budget: Budget, owner: Option<&Owner>) -> u64 {
        self.0
            .iter()
            .filter(|(key, _)| {
                key.kind.budget() == Some(budget) && owner.is_none_or(|owner| key.owner == *owner)
            })
            .map(|(_, totals)| totals.tokens().total())
            .fold(0, u64::saturating_add)
    }

    /// The pairs whose capture tokens have spent `limit` (0: unlimited).
    pub(super) fn pairs_past(&self, limit: u64) -> Vec<Owner> {
        let mut pairs: BTreeMap<&Owner, u64> = BTreeMap::new();
        for (key, totals) in &self.0 {
            if key.kind.budget() == Some(Budget::Capture) && key.owner.is_pair() {
                let used = pairs.entry(&key.owner).or_default();
                *used = used.saturating_add(totals.tokens().total());
            }
        }
        pairs
            .into_iter()
            .filter(move |(_, used)| spent(*used, limit))
            .map(|(owner, _)| owner.clone())
            .collect()
    }
}

/// `usage.json`: the day's totals.
#[derive(Serialize, Deserialize)]
pub(super) struct DayFile {
    pub(super) day: NaiveDate,
    pub(super) calls: Vec<DayEntry>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct DayEntry {
    pub(super) kind: CallKind,
    pub(super) model: String,
    pub(super) repo: Option<RepoId>,
    pub(super) user: Option<UserId>,
    #[serde(flatten)]
    pub(super) totals: Totals,
}

/// The most `usage.json` may hold: a day's entries are one per model and
/// owner, a few hundred bytes each.
const MAX_DAY_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// `usage.json`, or `None` when there is none. A link is not followed: the
/// data directory's own file counts the day, not a file elsewhere.
pub(super) fn read_day(file: &Path) -> io::Result<Option<DayFile>> {
    match confine::read_regular_file(file, MAX_DAY_FILE_BYTES) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(io::Error::other),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}
