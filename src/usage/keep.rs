//! Where the meter keeps the day's totals: nowhere (a default meter),
//! `usage.json` in the data directory (files mode: the day of one
//! process), or the database's shared sums (postgres mode: the day of all
//! replicas, so that a daily budget is one budget for all of them).
//!
//! In postgres mode a replica counts each call in memory at once (its
//! checks see it at once) and adds its calls to the database at each save:
//! after every capture pass and every second. Between two saves a replica
//! does not see the others' calls, so the replicas may together pass a
//! budget by what they start in that second. A database that does not
//! answer stops no call and loses no count: the calls not added are kept
//! and added at the next save that reaches it.

use std::path::PathBuf;

use chrono::{NaiveDate, Utc};

use super::budget::{spent, warn_spent};
use super::ledger::{Key, Ledger, Totals};
use super::{Budget, CallKind, Meter, Owner};
use crate::store::postgres::usage::UsageCount;
use crate::store::postgres::{Database, Error};

#[derive(Default)]
pub(super) enum Keep {
    #[default]
    Nowhere,
    File(PathBuf),
    Database(Database),
}

impl std::fmt::Debug for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nowhere => f.write_str("Nowhere"),
            Self::File(file) => f.debug_tuple("File").field(file).finish(),
            Self::Database(_) => f.write_str("Database"),
        }
    }
}

impl Meter {
    /// Adds the calls not yet added to the database's sums, then reads
    /// back the day of all replicas. Blocking, on a thread of the runtime;
    /// called with the save lock held.
    pub(super) fn share(&self, database: &Database) -> Result<(), Error> {
        let unsent = std::mem::take(&mut self.lock().unsent);
        let runtime = tokio::runtime::Handle::current();
        for (index, (day, ledger)) in unsent.iter().enumerate() {
            if let Err(err) = runtime.block_on(database.add_usage(*day, &counts(ledger))) {
                // Kept, with whatever was counted meanwhile, for the next save.
                let mut state = self.lock();
                for (day, ledger) in unsent.into_iter().skip(index) {
                    state.unsent.entry(day).or_default().merge(&ledger);
                }
                return Err(err);
            }
        }
        let now = Utc::now();
        let day = now.date_naive();
        let shared = read_shared(database, day)?;
        let mut state = self.lock();
        state.roll(day);
        let before = state.today.used(Budget::Capture, None);
        let retrieval_before = state.today.used(Budget::Retrieval, None);
        state.today = shared;
        // Calls counted since the sums were added, not in them yet.
        if let Some(unsent) = state.unsent.get(&day).cloned() {
            state.today.merge(&unsent);
        }
        for (budget, before) in [
            (Budget::Capture, before),
            (Budget::Retrieval, retrieval_before),
        ] {
            let used = state.today.used(budget, None);
            let limit = self.inner.budgets.limit(budget);
            if !spent(before, limit) && spent(used, limit) {
                warn_spent(budget, used, limit, now);
            }
        }
        Ok(())
    }
}

/// The day's totals of all replicas, as the database holds them. Blocking,
/// on a thread of the runtime.
pub(super) fn read_shared(database: &Database, day: NaiveDate) -> Result<Ledger, Error> {
    let counts = tokio::runtime::Handle::current().block_on(database.usage_of(day))?;
    let mut ledger = Ledger::default();
    for count in counts {
        let Some(key) = key_of(&count) else {
            // A kind this binary does not know (a newer replica's), or an
            // owner edited by hand: no budget of this binary counts it.
            continue;
        };
        ledger.0.entry(key).or_default().merge(&Totals {
            calls: count.calls,
            prompt_tokens: count.prompt_tokens,
            completion_tokens: count.completion_tokens,
            estimated_calls: count.estimated_calls,
        });
    }
    Ok(ledger)
}

/// A ledger as the table's rows.
fn counts(ledger: &Ledger) -> Vec<UsageCount> {
    ledger
        .0
        .iter()
        .map(|(key, totals)| UsageCount {
            kind: key.kind.as_str().to_owned(),
            model: key.model.clone(),
            repo: key
                .owner
                .repo
                .as_ref()
                .map_or_else(String::new, |repo| repo.as_str().to_owned()),
            user: key
                .owner
                .user
                .as_ref()
                .map_or_else(String::new, |user| user.as_str().to_owned()),
            calls: totals.calls,
            prompt_tokens: totals.prompt_tokens,
            completion_tokens: totals.completion_tokens,
            estimated_calls: totals.estimated_calls,
        })
        .collect()
}

/// A row's key, if this binary can read it.
fn key_of(count: &UsageCount) -> Option<Key> {
    let kind = CallKind::ALL
        .into_iter()
        .find(|kind| kind.as_str() == count.kind)?;
    let owner = Owner {
        repo: optional(&count.repo)?,
        user: optional(&count.user)?,
    };
    Some(Key {
        kind,
        model: count.model.clone(),
        owner,
    })
}

/// An owner's field: none where it is empty, `None` where it is not valid.
fn optional<T: std::str::FromStr>(text: &str) -> Option<Option<T>> {
    if text.is_empty() {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}
