//! Metering of model calls: the tokens of every call to a chat model
//! (classifier, HyDE, expansion, suggestions) or to the remote embedder,
//! by kind, model and namespace pair, turned into money where
//! `prices` names the model; totals since start and for the current UTC
//! day; and the daily token budgets checked before a call.
//!
//! Tokens are the reply's `usage` when the server sends one, else counted
//! with the `o200k_base` tokenizer (the count is then an estimate, and
//! said so). The embedded local embedder costs nothing and is not
//! metered.
//!
//! The day's totals are kept in `<data_dir>/usage.json`, written
//! atomically (temporary file, fsync, rename), so a restart, or a crash
//! loop, does not reset a budget. In postgres mode they are the day of all
//! replicas instead, kept in the database ([`keep`]): the budgets are one
//! budget for all of them. The totals since start live in memory.
//!
//! A budget is checked before a call, not during it: the call that
//! crosses a budget finishes and is counted, so a day may end a little
//! past it. Crossing one logs one `warn` line.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::config::{Config, Price};
use crate::memory::{RepoId, UserId};
use crate::store::postgres::Database;
use crate::store::{NamespacePair, Reach, atomic};

mod budget;
mod keep;
mod ledger;
mod view;

pub use budget::{Budget, Budgets, CaptureGate, renewal};
pub use view::{BudgetView, BudgetsView, PairUsage, UsageRow, UsageView};

use budget::{spent, warn_spent};
use keep::Keep;
use ledger::{DayEntry, DayFile, Key, Ledger, Totals, read_day};

/// The day's totals, under the data directory.
pub const FILE_NAME: &str = "usage.json";

/// What a model call was for.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// Capture's classifier.
    Classifier,
    /// HyDE hypotheses for a retrieval.
    Hyde,
    /// Query expansion for a retrieval.
    Expansion,
    /// `POST /suggestions` (HyDE without the search).
    Suggestions,
    /// The remote embedder (indexing, queries, capture's duplicate check).
    Embeddings,
    /// A consolidation pass's merges and settlements (the classifier
    /// model, counted against the capture budget).
    Consolidation,
}

impl CallKind {
    const ALL: [Self; 6] = [
        Self::Classifier,
        Self::Hyde,
        Self::Expansion,
        Self::Suggestions,
        Self::Embeddings,
        Self::Consolidation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Classifier => "classifier",
            Self::Hyde => "hyde",
            Self::Expansion => "expansion",
            Self::Suggestions => "suggestions",
            Self::Embeddings => "embeddings",
            Self::Consolidation => "consolidation",
        }
    }

    /// The daily budget this kind's tokens count against: embeddings count
    /// against none (they are cheap, and indexing must not stop).
    fn budget(self) -> Option<Budget> {
        match self {
            Self::Classifier | Self::Consolidation => Some(Budget::Capture),
            Self::Hyde | Self::Expansion | Self::Suggestions => Some(Budget::Retrieval),
            Self::Embeddings => None,
        }
    }
}

/// Whose call it was: the namespace pair, or as much of it as the call
/// names (an indexing batch or a suggestion names none).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub struct Owner {
    pub repo: Option<RepoId>,
    pub user: Option<UserId>,
}

impl From<&NamespacePair> for Owner {
    fn from(pair: &NamespacePair) -> Self {
        Self {
            repo: Some(pair.repo.clone()),
            user: Some(pair.user.clone()),
        }
    }
}

impl From<&Reach> for Owner {
    fn from(reach: &Reach) -> Self {
        Self {
            repo: reach.repo().cloned(),
            user: reach.user().cloned(),
        }
    }
}

impl Owner {
    /// Whether this is a whole pair (a per-pair budget applies to it).
    fn is_pair(&self) -> bool {
        self.repo.is_some() && self.user.is_some()
    }
}

/// The tokens of a call, or a sum of calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
}

impl Tokens {
    pub fn total(self) -> u64 {
        self.prompt.saturating_add(self.completion)
    }

    /// The `usage` object of an OpenAI-style reply, if it has one with a
    /// whole `prompt_tokens` (`completion_tokens` is 0 when absent, as
    /// embeddings replies leave it out).
    pub fn reported(usage: Option<&Value>) -> Option<Self> {
        let usage = usage?;
        Some(Self {
            prompt: usage.get("prompt_tokens")?.as_u64()?,
            completion: usage
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    }
}

/// One finished call, as the meter takes it.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub kind: CallKind,
    pub model: &'a str,
    pub owner: Owner,
    pub tokens: Tokens,
    /// Counted with the tokenizer: the server reported no `usage`.
    pub estimated: bool,
}

/// What one call took, for its caller to show.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct Metered {
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Counted with the tokenizer: the server reported no `usage`.
    pub estimated: bool,
    /// In the currency of `prices`; null when the model has no price.
    pub cost: Option<f64>,
}

impl Metered {
    /// No call yet, of `model`: what a sum of calls starts from.
    pub fn none(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            prompt_tokens: 0,
            completion_tokens: 0,
            estimated: false,
            cost: None,
        }
    }

    /// Adds `other`'s call to this sum (a trigger's passes).
    pub fn add(&mut self, other: &Self) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.estimated |= other.estimated;
        self.cost = add_cost(self.cost, other.cost);
    }
}

#[derive(Default)]
struct State {
    /// The UTC day `today` counts.
    day: NaiveDate,
    /// The day's totals: this process's (files), or all replicas' as last
    /// read from the database with this replica's calls since (postgres).
    today: Ledger,
    since_start: Ledger,
    /// Postgres mode: calls counted here and not yet added to the
    /// database's sums, by their day.
    unsent: BTreeMap<NaiveDate, Ledger>,
}

impl State {
    /// Starts a new day's totals when `day` is not the one counted.
    fn roll(&mut self, day: NaiveDate) {
        if self.day != day {
            self.day = day;
            self.today = Ledger::default();
        }
    }
}

/// The meter every model call goes through; cheap to clone. The default
/// one prices nothing, has no budgets and keeps nothing on disk.
#[derive(Clone, Default)]
pub struct Meter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("budgets", &self.inner.budgets)
            .field("keep", &self.inner.keep)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Inner {
    prices: BTreeMap<String, Price>,
    budgets: Budgets,
    /// Where the day's totals are kept.
    keep: Keep,
    state: Mutex<State>,
    /// Calls counted since the last save.
    dirty: AtomicBool,
    /// Held through a save, so that two saves do not interleave (one
    /// reading the database's sums before the other's additions).
    saving: Mutex<()>,
}

impl Meter {
    /// The meter of `config`, with today's totals read back from
    /// `<data_dir>/usage.json`, or from `database` when there is one (a
    /// missing or unreadable file, or a database that does not answer,
    /// starts the day at zero, with a warning for the errors; the
    /// database's sums are read again at the next save). Blocking.
    pub fn open(config: &Config, database: Option<Database>) -> Self {
        let keep = match database {
            Some(database) => Keep::Database(database),
            None => Keep::File(config.data_dir.join(FILE_NAME)),
        };
        Self::open_at(config, keep, Utc::now())
    }

    fn open_at(config: &Config, keep: Keep, now: DateTime<Utc>) -> Self {
        let mut state = State {
            day: now.date_naive(),
            ..State::default()
        };
        match &keep {
            Keep::File(file) => state.today = day_of_file(file, state.day),
            Keep::Database(database) => match keep::read_shared(database, state.day) {
                Ok(shared) => state.today = shared,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read the day's model usage from the database; counting from zero until it answers");
                }
            },
            Keep::Nowhere => {}
        }
        let meter = Self {
            inner: Arc::new(Inner {
                prices: config.prices.clone(),
                budgets: Budgets::from_config(config),
                keep,
                state: Mutex::new(state),
                dirty: AtomicBool::new(false),
                saving: Mutex::new(()),
            }),
        };
        for budget in [Budget::Capture, Budget::Retrieval] {
            let used = meter.lock().today.used(budget, None);
            let limit = meter.inner.budgets.limit(budget);
            if spent(used, limit) {
                warn_spent(budget, used, limit, now);
            }
        }
        meter
    }

    /// The cost of `tokens` of `model`, if it is priced.
    pub fn cost(&self, model: &str, tokens: Tokens) -> Option<f64> {
        let price = self.inner.prices.get(model)?;
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts stay far below 2^52"
        )]
        let (prompt, completion) = (tokens.prompt as f64, tokens.completion as f64);
        Some((prompt * price.input_per_million + completion * price.output_per_million) / 1e6)
    }

    /// Counts a finished call; what it took.
    pub fn record(&self, call: Call<'_>) -> Metered {
        self.record_at(call, Utc::now())
    }

    fn record_at(&self, call: Call<'_>, now: DateTime<Utc>) -> Metered {
        let metered = Metered {
            model: call.model.to_owned(),
            prompt_tokens: call.tokens.prompt,
            completion_tokens: call.tokens.completion,
            estimated: call.estimated,
            cost: self.cost(call.model, call.tokens),
        };
        let key = Key {
            kind: call.kind,
            model: call.model.to_owned(),
            owner: call.owner,
        };
        let budget = call.kind.budget();
        let mut state = self.lock();
        state.roll(now.date_naive());
        let used = |state: &State| {
            budget.map(|budget| {
                (
                    state.today.used(budget, None),
                    state.today.used(budget, Some(&key.owner)),
                )
            })
        };
        let before = used(&state);
        state
            .today
            .0
            .entry(key.clone())
            .or_default()
            .add(call.tokens, call.estimated);
        state
            .since_start
            .0
            .entry(key.clone())
            .or_default()
            .add(call.tokens, call.estimated);
        if matches!(self.inner.keep, Keep::Database(_)) {
            let day = state.day;
            state
                .unsent
                .entry(day)
                .or_default()
                .0
                .entry(key.clone())
                .or_default()
                .add(call.tokens, call.estimated);
        }
        let after = used(&state);
        drop(state);
        self.inner.dirty.store(true, Ordering::Relaxed);
        if let (Some(budget), Some((all_before, pair_before)), Some((all_after, pair_after))) =
            (budget, before, after)
        {
            let limit = self.inner.budgets.limit(budget);
            if !spent(all_before, limit) && spent(all_after, limit) {
                warn_spent(budget, all_after, limit, now);
            }
            let pair_limit = self.inner.budgets.capture_per_pair;
            if budget == Budget::Capture
                && key.owner.is_pair()
                && !spent(pair_before, pair_limit)
                && spent(pair_after, pair_limit)
            {
                tracing::warn!(
                    config.key = "capture.pair_daily_token_budget",
                    repo = ?key.owner.repo,
                    user = ?key.owner.user,
                    tokens.used = pair_after,
                    tokens.budget = pair_limit,
                    renews_at = %renewal(now),
                    "a namespace pair has spent its daily capture token budget; its triggers stay queued, none dropped, until it renews"
                );
            }
        }
        metered
    }

    /// Whether retrieval may call its model (HyDE, expansion, suggestions).
    pub fn allows_retrieval(&self) -> bool {
        self.allows_retrieval_at(Utc::now())
    }

    fn allows_retrieval_at(&self, now: DateTime<Utc>) -> bool {
        let mut state = self.lock();
        state.roll(now.date_naive());
        !spent(
            state.today.used(Budget::Retrieval, None),
            self.inner.budgets.retrieval,
        )
    }

    /// Which capture triggers may be classified now.
    pub fn capture_gate(&self) -> CaptureGate {
        self.capture_gate_at(Utc::now())
    }

    fn capture_gate_at(&self, now: DateTime<Utc>) -> CaptureGate {
        let budgets = self.inner.budgets;
        let mut state = self.lock();
        state.roll(now.date_naive());
        let closed = spent(state.today.used(Budget::Capture, None), budgets.capture);
        let closed_pairs = state
            .today
            .pairs_past(budgets.capture_per_pair)
            .into_iter()
            .collect();
        CaptureGate {
            closed,
            closed_pairs,
            renews_at: renewal(now),
        }
    }

    /// Today's and the since-start totals, with the budgets, for `/stats`.
    pub fn view(&self) -> UsageView {
        self.view_at(Utc::now())
    }

    fn view_at(&self, now: DateTime<Utc>) -> UsageView {
        let budgets = self.inner.budgets;
        let mut state = self.lock();
        state.roll(now.date_naive());
        let today = self.rows(&state.today);
        let since_start = self.rows(&state.since_start);
        let mut pairs: BTreeMap<&Owner, (Totals, Option<f64>)> = BTreeMap::new();
        for (key, totals) in &state.today.0 {
            let entry = pairs.entry(&key.owner).or_default();
            entry.0.merge(totals);
            entry.1 = add_cost(entry.1, self.cost(&key.model, totals.tokens()));
        }
        let pairs_today = pairs
            .into_iter()
            .map(|(owner, (totals, cost))| PairUsage {
                owner: owner.clone(),
                calls: totals.calls,
                prompt_tokens: totals.prompt_tokens,
                completion_tokens: totals.completion_tokens,
                cost,
            })
            .collect();
        let budget = |budget: Budget| {
            let used = state.today.used(budget, None);
            let limit = budgets.limit(budget);
            BudgetView {
                limit,
                used,
                exhausted: spent(used, limit),
            }
        };
        let capture = budget(Budget::Capture);
        let retrieval = budget(Budget::Retrieval);
        let exhausted_pairs = state.today.pairs_past(budgets.capture_per_pair);
        UsageView {
            day: state.day,
            renews_at: renewal(now),
            cost_today: today.iter().fold(None, |sum, row| add_cost(sum, row.cost)),
            today,
            since_start,
            pairs_today,
            budgets: BudgetsView {
                capture,
                capture_per_pair: budgets.capture_per_pair,
                exhausted_pairs,
                retrieval,
            },
        }
    }

    /// Totals by kind and model (owners summed).
    fn rows(&self, ledger: &Ledger) -> Vec<UsageRow> {
        let mut rows: BTreeMap<(CallKind, &str), Totals> = BTreeMap::new();
        for (key, totals) in &ledger.0 {
            rows.entry((key.kind, &key.model))
                .or_default()
                .merge(totals);
        }
        rows.into_iter()
            .map(|((kind, model), totals)| UsageRow {
                kind,
                model: model.to_owned(),
                calls: totals.calls,
                prompt_tokens: totals.prompt_tokens,
                completion_tokens: totals.completion_tokens,
                estimated_calls: totals.estimated_calls,
                cost: self.cost(model, totals.tokens()),
            })
            .collect()
    }

    /// Writes the day's totals to `usage.json` if a call was counted since
    /// the last save; in postgres mode, adds this replica's calls since to
    /// the database's sums and reads back the day of all replicas (calls it
    /// could not add are kept and added at a later save). Blocking: call it
    /// from a blocking thread (of the runtime, in postgres mode).
    pub fn save(&self) -> io::Result<()> {
        let _saving = self
            .inner
            .saving
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let file = match &self.inner.keep {
            Keep::Nowhere => return Ok(()),
            Keep::Database(database) => return self.share(database).map_err(io::Error::other),
            Keep::File(file) => file,
        };
        if !self.inner.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let json = {
            let state = self.lock();
            let day = DayFile {
                day: state.day,
                calls: state
                    .today
                    .0
                    .iter()
                    .map(|(key, totals)| DayEntry {
                        kind: key.kind,
                        model: key.model.clone(),
                        repo: key.owner.repo.clone(),
                        user: key.owner.user.clone(),
                        totals: *totals,
                    })
                    .collect(),
            };
            serde_json::to_vec_pretty(&day).expect("the day's usage serializes")
        };
        atomic::write(file, &json).inspect_err(|_| {
            // Tried again at the next save.
            self.inner.dirty.store(true, Ordering::Relaxed);
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every section under this lock leaves the state whole.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The totals `usage.json` holds for `day`.
fn day_of_file(file: &std::path::Path, day: NaiveDate) -> Ledger {
    let mut today = Ledger::default();
    match read_day(file) {
        Ok(Some(saved)) if saved.day == day => {
            for entry in saved.calls {
                let key = Key {
                    kind: entry.kind,
                    model: entry.model,
                    owner: Owner {
                        repo: entry.repo,
                        user: entry.user,
                    },
                };
                today.0.entry(key).or_default().merge(&entry.totals);
            }
        }
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(file.path = %file.display(), error = %err, "cannot read the day's model usage; counting it from zero");
        }
    }
    today
}

/// The sum of two costs, where either is known.
fn add_cost(sum: Option<f64>, cost: Option<f64>) -> Option<f64> {
    match (sum, cost) {
        (None, None) => None,
        (sum, cost) => Some(sum.unwrap_or(0.0) + cost.unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod tests;
