//! `/healthz` (the process answers) and `/readyz` (start-up work is done).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, Problem};
use crate::state::Readiness;

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

/// Readiness: 200 once start-up work is done, 503 before.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    security(()),
    responses(
        (status = 200, body = HealthResponse),
        (status = 503, description = "Still starting", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_readyz(
    State(readiness): State<Readiness>,
) -> Result<Json<HealthResponse>, ApiError> {
    if readiness.is_ready() {
        Ok(Json(HealthResponse { status: "ready" }))
    } else {
        Err(ApiError::NotReady)
    }
}
