//! `/triggers`: what capture is doing. The queue (waiting and in flight),
//! the latest passes with the memories each wrote, the triggers set aside
//! in `queue/failed/` with their errors, and a retry that puts a failed
//! one back in the queue. A key limited to some namespaces sees only the
//! triggers of (repo, user) pairs it may use, as for `POST /turns`; any
//! other trigger is as absent as one that does not exist.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::capture::queue::{EnqueueStatus, QueuedTrigger};
use crate::capture::triggers::{PassOutcome, RECENT_CAPACITY, TriggerSummary};
use crate::capture::{Capture, CaptureMode};
use crate::error::{ApiError, Problem};
use crate::routes::extract::{ApiPath, ApiQuery, in_range};
use crate::routes::problems::Unauthorized;
use crate::routes::turns::TriggerResponse;

const DEFAULT_LIMIT: usize = 50;

/// How many of each to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListTriggersQuery {
    /// The most triggers listed in each section, 1–200 (default 50).
    pub limit: Option<usize>,
}

/// Capture's triggers, as the caller may see them.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListTriggersResponse {
    /// Whether the classifier runs (an `llm` is configured); when it does
    /// not, triggers are neither accepted nor processed (`mode` is `agent`).
    pub enabled: bool,
    /// What writes memories: the classifier, or the agent alone.
    pub mode: CaptureMode,
    /// What captures in this mode and what does not, in one sentence.
    pub mode_summary: &'static str,
    /// In flight first, then waiting, oldest first.
    pub queued: Vec<QueuedTrigger>,
    /// The latest finished passes since start, newest first (the service
    /// keeps the last 200).
    pub recent: Vec<PassOutcome>,
    /// `queue/failed/`, newest first: triggers that failed for good, with
    /// the error of their last attempt.
    pub failed: Vec<TriggerSummary>,
    /// Whether `queue/failed/` holds more than `failed` lists.
    pub failed_more: bool,
}

/// List capture's queue, its latest passes and its failed triggers.
#[utoipa::path(
    get,
    path = "/triggers",
    tag = "capture",
    params(ListTriggersQuery),
    responses(
        Unauthorized,
        (status = 200, body = ListTriggersResponse),
        (status = 422, description = "`limit` is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_triggers(
    State(capture): State<Capture>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListTriggersQuery>,
) -> Result<Json<ListTriggersResponse>, ApiError> {
    let limit = in_range("limit", query.limit, DEFAULT_LIMIT, 1..=RECENT_CAPACITY)?;
    let visible = {
        let caller = caller.clone();
        move |pair: &crate::store::NamespacePair| caller.can_use(pair)
    };
    // In the order a trigger moves (queued, then logged, then failed), so
    // one moving meanwhile shows in both places rather than in neither.
    let queued = capture.queued(limit, &visible).await?;
    let recent = capture.recent(limit, &visible);
    let (failed, failed_more) = capture.failed(limit, visible).await?;
    Ok(Json(ListTriggersResponse {
        enabled: capture.is_enabled(),
        mode: capture.mode(),
        mode_summary: capture.mode().summary(),
        queued,
        recent,
        failed,
        failed_more,
    }))
}

/// Put a failed trigger back in the queue.
///
/// Moves the trigger from `queue/failed/` back into `queue/` (durably, with
/// its attempts reset), where the worker takes it like a new one. A retried
/// compaction obeys the queue's byte budgets; a retried turn is never
/// dropped for a full queue.
#[utoipa::path(
    post,
    path = "/triggers/{id}/retry",
    tag = "capture",
    params(("id" = String, Path, description = "The trigger id (a UUID)")),
    responses(
        Unauthorized,
        (status = 202, description = "Queued again", body = TriggerResponse),
        (status = 404, description = "No failed trigger has this id (for this API key)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Capture is agent-driven (no `llm` configured, so nothing is classified), or the trigger is queued already", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "A compaction would take the queue past its byte budget; nothing changed: retry after `Retry-After` seconds", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying"))),
        (status = 507, description = "The data directory is below its free-space floor (`limits.min_free_disk_bytes`); nothing changed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn retry_trigger(
    State(capture): State<Capture>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    if !capture.is_enabled() {
        return Err(ApiError::CaptureDisabled);
    }
    capture.retry(id, move |pair| caller.can_use(pair)).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse {
            trigger_id: id,
            status: EnqueueStatus::Queued,
        }),
    ))
}
