//! `retrieval`: the service's retrieval settings, the defaults of what one
//! `POST /retrieve` may set for itself ([`Tuning`]), a request's overrides
//! of those, and the limits both are checked against.

use serde::{Deserialize, Serialize};

use super::bounds;
use super::signals::{MatchSettings, Weights, WeightsRequest, with_match_settings};

/// The default daily budget of the retrieval model: a HyDE call is at most
/// about 3,500 tokens (a 12,000-character window and the prompt), and a
/// heavy day of about 250 turns that each retrieve once is under a
/// million tokens.
const DEFAULT_RETRIEVAL_DAILY_TOKENS: u64 = 1_000_000;

/// Expands the match stage's settings into the section's fields, their
/// defaults and the [`MatchSettings`] the search reads; the section's other
/// fields are written out here.
macro_rules! retrieval_section {
    ($($(#[doc = $doc:literal])* $name:ident = $default:literal, zero: $zero:literal;)+) => {
        /// The `retrieval` section. The service-wide settings (time budget,
        /// cache, the match stage's) are read once at start; the rest are
        /// the defaults of each request's [`Tuning`].
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct Retrieval {
            /// How many memories a retrieval returns at most (before hops).
            pub top_k: usize,
            /// How many `related` edges to follow from each result, 0–3.
            pub hop_depth: usize,
            /// How many hypothetical memories HyDE asks for, 1–10.
            pub hypothesis_count: usize,
            /// The most tokens the injection text may take.
            pub token_budget: usize,
            /// The least relevance (0..1) a returned memory has.
            pub min_relevance: f64,
            /// The whole retrieval's time budget, in ms; past it the answer
            /// is `degraded`.
            pub budget_ms: u64,
            $($(#[doc = $doc])* pub $name: f64,)+
            /// How long a turn's result stays cached, in seconds.
            pub cache_ttl_s: u64,
            /// The most turns cached at once.
            pub cache_capacity: usize,
            /// The most bytes the cached answers may hold (estimated from
            /// their text); the least recently used go first.
            pub cache_max_bytes: usize,
            /// The retrieval model's tokens (HyDE, expansion, suggestions) a
            /// UTC day; past it they are skipped and the plain query is
            /// searched for. 0 is unlimited. Not a request's to override.
            pub daily_token_budget: u64,
            /// What a memory's relevance is multiplied by when the code it
            /// describes changed since it was written (`validity: changed`),
            /// 0..1.
            pub changed_factor: f64,
            /// What a memory's relevance is multiplied by while it is under
            /// review (`needs_review`: a memory it is linked to changed),
            /// 0..1.
            pub review_factor: f64,
            /// What a provisional memory's relevance (written by the
            /// classifier, not yet confirmed) is multiplied by, 0..1.
            pub provisional_factor: f64,
            /// How much the time a question names counts, 0..1: a memory's
            /// relevance becomes `(relevance + w × scores.time) / (1 + w)`
            /// when the query or latest user message names a time (0: time
            /// is ignored).
            pub time_weight: f64,
            pub weights: Weights,
        }

        impl Default for Retrieval {
            fn default() -> Self {
                Self {
                    top_k: 5,
                    hop_depth: 1,
                    hypothesis_count: 3,
                    $($name: $default,)+
                    cache_ttl_s: 300,
                    cache_capacity: 10_000,
                    cache_max_bytes: 32 * 1024 * 1024,
                    token_budget: 1000,
                    min_relevance: 0.0,
                    budget_ms: 2000,
                    daily_token_budget: DEFAULT_RETRIEVAL_DAILY_TOKENS,
                    changed_factor: 0.8,
                    review_factor: 0.7,
                    provisional_factor: 0.9,
                    time_weight: 0.15,
                    weights: Weights::default(),
                }
            }
        }

        impl Retrieval {
            /// The match stage's settings, as the search reads them.
            pub fn match_settings(&self) -> MatchSettings {
                MatchSettings { $($name: self.$name,)+ }
            }
        }
    };
}

with_match_settings!(retrieval_section);

/// The weights' check; the signals themselves are declared in
/// [`super::signals`].
impl Weights {
    /// The first weight outside 0..1, or that all are zero.
    pub fn check(&self) -> Result<(), SettingError> {
        let named = self.named();
        for (field, weight) in named {
            within(field, weight, 0.0..=1.0)?;
        }
        if named.iter().all(|(_, weight)| *weight == 0.0) {
            return Err(SettingError::AllWeightsZero);
        }
        Ok(())
    }
}

/// What one retrieval may set for itself: the configured defaults with the
/// request's overrides applied, checked. The only settings a request
/// carries; everything else of [`Retrieval`] is the service's.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    pub top_k: usize,
    pub hop_depth: usize,
    pub hypothesis_count: usize,
    pub token_budget: usize,
    pub min_relevance: f64,
    pub weights: Weights,
}

impl Tuning {
    /// The first setting outside its limits, in the order of the fields.
    fn check(&self) -> Result<(), SettingError> {
        within("top_k", self.top_k, bounds::TOP_K)?;
        within("hop_depth", self.hop_depth, bounds::HOP_DEPTH)?;
        within(
            "hypothesis_count",
            self.hypothesis_count,
            bounds::HYPOTHESIS_COUNT,
        )?;
        within("token_budget", self.token_budget, bounds::TOKEN_BUDGET)?;
        within("min_relevance", self.min_relevance, 0.0..=1.0)?;
        self.weights.check()
    }
}

/// What a request may override of the configured [`Tuning`]; `None`
/// keeps the configured value.
#[derive(Clone, Debug, Default)]
pub struct RetrievalOverrides {
    pub top_k: Option<usize>,
    pub hop_depth: Option<usize>,
    pub hypothesis_count: Option<usize>,
    pub token_budget: Option<usize>,
    pub min_relevance: Option<f64>,
    pub weights: WeightsRequest,
}

/// A retrieval setting outside its limits. `field` is its name within
/// `retrieval` (`top_k`, `weights.recency`): the configuration reports it
/// as `retrieval.top_k`, a request as `top_k`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("must be between {low} and {high}, got {got}")]
    OutOfRange {
        field: &'static str,
        low: String,
        high: String,
        got: String,
    },
    #[error("the weights must not all be zero")]
    AllWeightsZero,
}

impl SettingError {
    /// The setting at fault, relative to `retrieval`.
    pub fn field(&self) -> &'static str {
        match self {
            Self::OutOfRange { field, .. } => field,
            Self::AllWeightsZero => "weights.similarity",
        }
    }
}

/// `value` if it lies in `range`, else the error naming `field`.
fn within<T: PartialOrd + Copy + std::fmt::Display>(
    field: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<(), SettingError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(SettingError::OutOfRange {
            field,
            low: range.start().to_string(),
            high: range.end().to_string(),
            got: value.to_string(),
        })
    }
}

impl Retrieval {
    /// The configured defaults with a request's `overrides` applied, checked.
    pub fn tuning(&self, overrides: &RetrievalOverrides) -> Result<Tuning, SettingError> {
        let tuning = Tuning {
            top_k: overrides.top_k.unwrap_or(self.top_k),
            hop_depth: overrides.hop_depth.unwrap_or(self.hop_depth),
            hypothesis_count: overrides.hypothesis_count.unwrap_or(self.hypothesis_count),
            token_budget: overrides.token_budget.unwrap_or(self.token_budget),
            min_relevance: overrides.min_relevance.unwrap_or(self.min_relevance),
            weights: self.weights.overridden(&overrides.weights),
        };
        tuning.check()?;
        Ok(tuning)
    }

    /// The first setting outside its limits: the defaults a request
    /// starts from, then the service's own.
    pub fn check(&self) -> Result<(), SettingError> {
        self.tuning(&RetrievalOverrides::default())?;
        for (field, value) in self.match_settings().named() {
            within(field, value, 0.0..=1.0)?;
        }
        within("changed_factor", self.changed_factor, 0.0..=1.0)?;
        within("review_factor", self.review_factor, 0.0..=1.0)?;
        within("provisional_factor", self.provisional_factor, 0.0..=1.0)?;
        within("time_weight", self.time_weight, 0.0..=1.0)?;
        within("cache_ttl_s", self.cache_ttl_s, 1..=86_400)?;
        within("cache_capacity", self.cache_capacity, 1..=1_000_000)?;
        within(
            "cache_max_bytes",
            self.cache_max_bytes,
            64 * 1024..=64 * 1024 * 1024 * 1024,
        )?;
        within("budget_ms", self.budget_ms, bounds::BUDGET_MS)
    }
}
