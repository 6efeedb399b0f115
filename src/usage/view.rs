//! Model usage as `/stats` shows it: today's and since-start totals by
//! kind and model, by owner, and the budgets.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::{CallKind, Owner};

/// Model usage for `/stats`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UsageView {
    /// The UTC day `today` counts.
    pub day: NaiveDate,
    /// When today's totals and the budgets start again from zero.
    pub renews_at: DateTime<Utc>,
    /// Today's calls by kind and model.
    pub today: Vec<UsageRow>,
    /// Today's cost of the priced models; null when none is priced.
    pub cost_today: Option<f64>,
    /// Since this process started, by kind and model.
    pub since_start: Vec<UsageRow>,
    /// Today's calls by owner (repo and user; both null for calls that
    /// name no pair, such as indexing's embeddings).
    pub pairs_today: Vec<PairUsage>,
    pub budgets: BudgetsView,
}

/// The calls of one kind and model.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UsageRow {
    pub kind: CallKind,
    pub model: String,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Calls whose tokens were counted with the tokenizer (no `usage` in
    /// the reply).
    pub estimated_calls: u64,
    /// Null when the model has no price in `prices`.
    pub cost: Option<f64>,
}

/// One owner's calls today.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PairUsage {
    #[serde(flatten)]
    pub owner: Owner,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost: Option<f64>,
}

/// The daily budgets and how much of them today took.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct BudgetsView {
    /// `capture.daily_token_budget`: the classifier's tokens.
    pub capture: BudgetView,
    /// `capture.pair_daily_token_budget` (0: unlimited).
    pub capture_per_pair: u64,
    /// Pairs past their own capture budget: their triggers wait.
    pub exhausted_pairs: Vec<Owner>,
    /// `retrieval.daily_token_budget`: HyDE's, expansion's and
    /// suggestions' tokens.
    pub retrieval: BudgetView,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct BudgetView {
    /// Tokens a day; 0 is unlimited.
    pub limit: u64,
    /// Tokens counted against it today.
    pub used: u64,
    /// Whether it is spent (until `renews_at`).
    pub exhausted: bool,
}
