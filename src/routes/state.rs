//! The state handlers share: cheap clonable handles, one per component,
//! with `FromRef` (derived, one per field) so a handler asks only for what
//! it uses.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::auth::Access;
use crate::capture::Capture;
use crate::config::{Config, Defaults};
use crate::consolidate::Consolidator;
use crate::index::indexer::IndexerStats;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::retrieval::Retriever;
use crate::routes::extract::BodyLimit;
use crate::routes::stats::StatsSources;
use crate::store::Store;
use crate::usage::Meter;
use prometheus_client::registry::Registry;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub store: Store,
    pub capture: Capture,
    pub retriever: Retriever,
    /// Consolidation passes, by hand and on the schedule.
    pub consolidator: Consolidator,
    pub metrics: Metrics,
    /// What `/metrics` encodes.
    pub registry: Arc<Registry>,
    pub indexer_stats: Arc<IndexerStats>,
    pub config: Arc<Config>,
    pub readiness: Readiness,
    /// The keys and tokens that admit a caller.
    pub access: Access,
    /// `limits.max_body_bytes`, for the JSON extractor.
    pub body_limit: BodyLimit,
    /// The owners an omitted `repo` or `user` stands for.
    pub defaults: Defaults,
    /// Every model call's tokens, and the daily budgets.
    pub meter: Meter,
}

/// What `/stats` and `/metrics` ask for their views.
impl FromRef<AppState> for StatsSources {
    fn from_ref(state: &AppState) -> Self {
        Self {
            store: state.store.clone(),
            retriever: state.retriever.clone(),
            capture: state.capture.clone(),
            indexer: state.indexer_stats.clone(),
            readiness: state.readiness.clone(),
            meter: state.meter.clone(),
        }
    }
}
