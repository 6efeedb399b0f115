//! The answer a retrieval gives: assembled once, from what its stages
//! returned, whether it searched or could not.

use std::time::{Duration, Instant};

use super::inject;
use super::outcome::{Degraded, Mode, NotInjected, Outcome, RetrievedMemory, Timings};
use super::plan::Plan;
use super::rank::Ranked;
use super::request::Request;
use crate::memory::MemoryView;

/// What ranking and hops returned.
#[derive(Default)]
pub(super) struct Found {
    /// Most relevant first: the best `top_k` and the hops from them.
    pub(super) ranked: Vec<Ranked>,
    /// How many qualified before `top_k` cut them; hops not included.
    pub(super) total_matches: usize,
}

/// The outcome of a retrieval, from what its stages returned: the plan,
/// the memories found (rendered here into the injection), whether the
/// index had caught up, and a degradation the plan does not already say.
pub(super) fn assemble(
    request: &Request,
    plan: Plan,
    found: Found,
    caught_up: bool,
    degraded: Option<Degraded>,
    timings_ms: Timings,
) -> Outcome {
    let views: Vec<MemoryView> = found
        .ranked
        .iter()
        .map(|ranked| MemoryView::from(ranked.memory.as_ref()))
        .collect();
    let (injection, injected) = inject::render(
        &views.iter().collect::<Vec<_>>(),
        request.tuning.token_budget,
    );
    let memories = found
        .ranked
        .into_iter()
        .zip(views)
        .zip(injected)
        .map(|((ranked, memory), injected)| RetrievedMemory {
            memory,
            relevance: ranked.relevance,
            scores: ranked.scores,
            reason: ranked.reason,
            injected,
            not_injected: (!injected).then_some(NotInjected::OverBudget),
        })
        .collect();
    let (expanded_query, added_terms) = plan
        .expansion
        .map(|expansion| (Some(expansion.expanded), expansion.added_terms))
        .unwrap_or_default();
    let degraded = degraded.or(plan.degraded);
    if let Some(reason) = degraded {
        tracing::info!(degraded = reason.as_str(), "retrieval degraded");
    }
    Outcome {
        turn_id: request.turn_id.clone(),
        cached: false,
        mode: plan.mode,
        degraded,
        query: plan.query,
        hypotheses: plan.hypotheses,
        expanded_query,
        added_terms,
        moved_toward: plan.moved_toward,
        total_matches: found.total_matches,
        index_catching_up: !caught_up,
        memories,
        injection,
        timings_ms,
    }
}

/// An answer with no memories, for a retrieval that could not search.
pub(super) fn nothing(request: &Request, degraded: Degraded, started: Instant) -> Outcome {
    let timings = Timings {
        total: millis(started.elapsed()),
        ..Timings::default()
    };
    assemble(
        request,
        Plan::of(Mode::Query),
        Found::default(),
        true,
        Some(degraded),
        timings,
    )
}

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
