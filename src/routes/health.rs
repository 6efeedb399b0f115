//! `/healthz` (the process answers), `/readyz` (start-up work is done and,
//! in postgres mode, the replica is current with the database) and
//! `/metrics` (Prometheus text).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::registry::Registry;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::capture::Capture;
use crate::error::{ApiError, Problem};
use crate::readiness::Readiness;
use crate::store::Store;

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    /// `ok` or `ready`.
    pub status: &'static str,
}

/// Liveness: 200 as soon as the process serves.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    security(()),
    responses((status = 200, body = HealthResponse))
)]
pub async fn get_healthz() -> Json<HealthResponse> {
    Json(HealthResponse { status: "ok" })
}

/// Readiness: 200 once start-up work is done and, with PostgreSQL, while
/// this replica is current with the database; 503 (saying why) otherwise.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    security(()),
    responses(
        (status = 200, body = HealthResponse),
        (status = 503, description = "Still starting, behind the database's change log, or cut off from the database; `detail` says which", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_readyz(
    State(readiness): State<Readiness>,
    State(store): State<Store>,
) -> Result<Json<HealthResponse>, ApiError> {
    match not_ready(&readiness, &store) {
        None => Ok(Json(HealthResponse { status: "ready" })),
        Some(reason) => {
            // Expected while starting or while the database is down: not
            // an error.
            tracing::debug!(reason, "not ready yet");
            Err(ApiError::NotReady(reason))
        }
    }
}

/// Why this replica should not be sent traffic yet, if it should not.
fn not_ready(readiness: &Readiness, store: &Store) -> Option<&'static str> {
    if !readiness.is_ready() {
        return Some("the service is still starting: the start-up index build is running");
    }
    let replication = store.database()?.replication();
    if !replication.caught_up() {
        Some("this replica has not caught up with the database's change log yet")
    } else if !replication.connected() {
        Some(
            "the database cannot be reached: retrievals are served from what this replica holds, writes are refused",
        )
    } else {
        None
    }
}

/// The OpenMetrics text media type `prometheus-client` writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prometheus metrics (OpenMetrics text). With API keys configured, it
/// needs a key with access to every namespace.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses(
        (status = 200, description = "Metrics in the OpenMetrics text format", body = String, content_type = "application/openmetrics-text"),
        (status = 401, description = "Keys are configured and none or a wrong one was sent", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The key does not see every namespace (the labels name them)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_metrics(
    State(registry): State<Arc<Registry>>,
    State(capture): State<Capture>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    if !caller.sees_everything() {
        return Err(ApiError::Forbidden {
            detail: "metrics need an API key with access to every namespace".to_owned(),
        });
    }
    // The collector reads synchronously: the shared queue's depth first.
    capture.refresh_depth().await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).map_err(ApiError::internal)?;
    Ok(([(header::CONTENT_TYPE, OPENMETRICS)], text))
}
