//! The first stage of a retrieval: the texts to search for, and how they
//! were made. The request's query as it is; for a conversation window, HyDE
//! hypotheses from the retrieval model, or its latest user message when
//! there is no model or the model fails; with `expand_query` and a model,
//! the query plus the terms the model adds.
//!
//! The model gets the budget less a reserve, so that when it times out the
//! fallback search still fits. Past the retrieval model's daily token
//! budget (`retrieval.daily_token_budget`) it is not called at all: the
//! plain query (or the latest user message) is searched for, and the plan
//! says why.

use std::time::{Duration, Instant};

use tokio::time::Instant as Deadline;

use crate::causes::error_chain;
use crate::llm::Llm;
use crate::memory::MemoryId;
use crate::metrics::Metrics;
use crate::upstream;
use crate::usage::{CallKind, Owner};
use crate::window;

use super::expand::{self, Expansion};
use super::hyde;
use super::outcome::{Degraded, Mode};
use super::request::{Input, Request};

/// The share of the budget the retrieval model may not use.
const FALLBACK_RESERVE_DIVISOR: u32 = 4;

/// The texts a retrieval searches for.
#[derive(Debug)]
pub struct Plan {
    pub mode: Mode,
    /// The text searched for in query mode (the request's, or the latest
    /// user message when HyDE was unavailable).
    pub query: Option<String>,
    /// The HyDE hypotheses, in order; searched for instead of `query`.
    pub hypotheses: Vec<String>,
    /// The query with the terms the retrieval model added.
    pub expansion: Option<Expansion>,
    /// The best match of a first search, toward which the query vectors
    /// were moved for the search whose results these are.
    pub moved_toward: Option<MemoryId>,
    /// Set when the retrieval model limited this plan.
    pub degraded: Option<Degraded>,
    /// Time spent waiting for the retrieval model.
    pub model_time: Duration,
}

impl Plan {
    /// A plan of `mode` with nothing to search for yet.
    pub fn of(mode: Mode) -> Self {
        Self {
            mode,
            query: None,
            hypotheses: Vec::new(),
            expansion: None,
            moved_toward: None,
            degraded: None,
            model_time: Duration::ZERO,
        }
    }

    fn query(text: String) -> Self {
        Self {
            query: Some(text),
            ..Self::of(Mode::Query)
        }
    }

    /// The texts to embed, in order: the hypotheses, else the query and
    /// its expansion.
    pub fn texts(&self) -> Vec<String> {
        if self.hypotheses.is_empty() {
            self.query
                .iter()
                .chain(self.expansion.iter().map(|expansion| &expansion.expanded))
                .cloned()
                .collect()
        } else {
            self.hypotheses.clone()
        }
    }

    /// Whether the texts are the query itself (not hypotheses, nor the
    /// message that stands in for them), so that expanding it makes sense.
    pub fn searches_the_query(&self) -> bool {
        self.mode == Mode::Query
    }
}

/// Plans the search for a query or a window (not a filter-only request),
/// within `budget`, which ends at `deadline`.
pub async fn make(
    request: &Request,
    llm: Option<&Llm>,
    budget: Duration,
    deadline: Deadline,
    metrics: &Metrics,
) -> Plan {
    let reserve = budget / FALLBACK_RESERVE_DIVISOR;
    let window = match &request.input {
        Input::Query(query) => {
            let mut plan = Plan::query(query.clone());
            if request.expand_query
                && let Some(llm) = llm
            {
                if llm.meter().allows_retrieval() {
                    expand_with_model(&mut plan, request, llm, deadline, reserve, metrics).await;
                } else {
                    plan.degraded = Some(Degraded::DailyTokenBudgetExhausted);
                }
            }
            return plan;
        }
        Input::Window(window) => window,
        Input::Filters => return Plan::of(Mode::Filter),
    };
    let latest = window::latest_user_text(window)
        .unwrap_or_default()
        .to_owned();
    let Some(llm) = llm else {
        return Plan::query(latest);
    };
    if !llm.meter().allows_retrieval() {
        return Plan {
            degraded: Some(Degraded::DailyTokenBudgetExhausted),
            ..Plan::query(latest)
        };
    }
    let started = Instant::now();
    let timeout = deadline
        .saturating_duration_since(Deadline::now())
        .saturating_sub(reserve);
    let hypotheses = hyde::hypotheses(
        llm,
        (CallKind::Hyde, Owner::from(&request.pair)),
        window,
        request.tuning.hypothesis_count,
        timeout,
    )
    .await;
    let model_time = started.elapsed();
    match hypotheses {
        Ok(hypotheses) => Plan {
            hypotheses,
            model_time,
            ..Plan::of(Mode::Hyde)
        },
        Err(failure) => {
            if let hyde::Failure::Upstream(err) = &failure {
                metrics.upstream_error("chat", err);
            }
            tracing::warn!(error = %error_chain(&failure), "HyDE failed; searching for the latest user message");
            Plan {
                query: Some(latest),
                degraded: Some(Degraded::of_hyde(&failure)),
                model_time,
                ..Plan::of(Mode::Hyde)
            }
        }
    }
}

/// Adds the retrieval model's terms to the query; on a failure the query
/// is searched for as it is and the plan says why.
async fn expand_with_model(
    plan: &mut Plan,
    request: &Request,
    llm: &Llm,
    deadline: Deadline,
    reserve: Duration,
    metrics: &Metrics,
) {
    let Some(query) = plan.query.as_deref() else {
        return;
    };
    let started = Instant::now();
    let timeout = deadline
        .saturating_duration_since(Deadline::now())
        .saturating_sub(reserve);
    match expand::with_model(llm, Owner::from(&request.pair), query, timeout).await {
        Ok(expansion) => plan.expansion = expansion,
        Err(err) => {
            metrics.upstream_error("chat", &err);
            tracing::warn!(error = %error_chain(&err), "query expansion failed; searching for the query as it is");
            plan.degraded = Some(match err {
                upstream::Error::Timeout { .. } => Degraded::ExpansionTimeout,
                _ => Degraded::ExpansionFailed,
            });
        }
    }
    plan.model_time += started.elapsed();
}
