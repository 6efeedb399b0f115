//! The state handlers share: cheap clonable handles, one per component,
//! with `FromRef` so a handler asks only for what it uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::FromRef;

use crate::auth::ApiKeys;
use crate::capture::Capture;
use crate::config::{Config, Defaults};
use crate::index::indexer::IndexerStats;
use crate::metrics::Metrics;
use crate::retrieval::Retriever;
use crate::routes::extract::BodyLimit;
use crate::store::Store;
use prometheus_client::registry::Registry;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub capture: Capture,
    pub retriever: Retriever,
    pub metrics: Metrics,
    /// What `/metrics` encodes.
    pub registry: Arc<Registry>,
    pub indexer_stats: Arc<IndexerStats>,
    pub config: Arc<Config>,
    pub readiness: Readiness,
    pub api_keys: ApiKeys,
}

impl FromRef<AppState> for Capture {
    fn from_ref(state: &AppState) -> Self {
        state.capture.clone()
    }
}

impl FromRef<AppState> for Retriever {
    fn from_ref(state: &AppState) -> Self {
        state.retriever.clone()
    }
}

impl FromRef<AppState> for Arc<IndexerStats> {
    fn from_ref(state: &AppState) -> Self {
        state.indexer_stats.clone()
    }
}

impl FromRef<AppState> for Arc<Registry> {
    fn from_ref(state: &AppState) -> Self {
        state.registry.clone()
    }
}

impl FromRef<AppState> for Metrics {
    fn from_ref(state: &AppState) -> Self {
        state.metrics.clone()
    }
}

impl FromRef<AppState> for Arc<Config> {
    fn from_ref(state: &AppState) -> Self {
        state.config.clone()
    }
}

impl FromRef<AppState> for Store {
    fn from_ref(state: &AppState) -> Self {
        state.store.clone()
    }
}

impl FromRef<AppState> for Readiness {
    fn from_ref(state: &AppState) -> Self {
        state.readiness.clone()
    }
}

impl FromRef<AppState> for BodyLimit {
    fn from_ref(state: &AppState) -> Self {
        BodyLimit(state.config.limits.max_body_bytes)
    }
}

impl FromRef<AppState> for Defaults {
    fn from_ref(state: &AppState) -> Self {
        state.config.defaults.clone()
    }
}

/// Whether the start-up work (loading the store, building the vector
/// index) is done and the service answers with complete data. `/readyz`
/// reports it.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Marks start-up done; the first call logs the transition.
    pub fn set_ready(&self) {
        if !self.0.swap(true, Ordering::AcqRel) {
            tracing::info!("engram is ready: /readyz answers 200");
        }
    }
}
