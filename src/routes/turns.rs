//! `POST /turns` and `POST /compactions`: check the window, strip tool
//! traffic from it, and hand it to capture, answering `202` at once.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::capture::Capture;
use crate::capture::queue::{EnqueueStatus, Kind, StoredLine, Trigger};
use crate::config::Defaults;
use crate::error::{ApiError, Problem};
use crate::memory::{RepoId, SessionId, UserId};
use crate::routes::extract::{self, ApiJson};
use crate::routes::problems::{BodyProblems, CaptureProblems, Unauthorized};
use crate::secrets;
use crate::store::NamespacePair;
use crate::window::{self, Message};

/// A conversation window to capture memories from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerRequest {
    /// The agent session; a newer turn of the same session replaces a
    /// queued older one.
    pub session_id: SessionId,
    /// The user turn this window ends with (1–256 characters).
    pub turn_id: Option<String>,
    pub repo: Option<RepoId>,
    pub user: Option<UserId>,
    /// User and assistant messages since the last summarisation; tool
    /// calls and tool results are stripped here and never stored.
    pub messages: Vec<Message>,
}

/// What became of the trigger.
#[derive(Debug, Serialize, ToSchema)]
pub struct TriggerResponse {
    pub trigger_id: Uuid,
    pub status: EnqueueStatus,
}

/// A turn completed: queue a capture pass over its window.
///
/// Answers at once; the classifier runs later. A newer turn of the same
/// session replaces a queued older one (`coalesced`); with the queue full,
/// the turn is `dropped`. Below the disk floor, `507`.
#[utoipa::path(
    post,
    path = "/turns",
    tag = "capture",
    request_body = TriggerRequest,
    responses(
        CaptureProblems,
        BodyProblems,
        Unauthorized,
        (status = 202, body = TriggerResponse),
    )
)]
pub async fn capture_turn(
    State(capture): State<Capture>,
    State(defaults): State<Defaults>,
    caller: Caller,
    ApiJson(request): ApiJson<TriggerRequest>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    accept(&capture, defaults, &caller, request, Kind::Turn).await
}

/// A goal arc was compacted: queue a capture pass over it; never dropped.
///
/// Bounded, though: a compaction that would take its session's queued
/// files past `capture.session_queue_bytes`, or the queue's past
/// `capture.queue_bytes`, is refused with `429` and `Retry-After` (nothing
/// is stored; send it again later). Below the disk floor, `507`.
#[utoipa::path(
    post,
    path = "/compactions",
    tag = "capture",
    request_body = TriggerRequest,
    responses(
        CaptureProblems,
        BodyProblems,
        Unauthorized,
        (status = 202, body = TriggerResponse),
        (status = 429, description = "The queue is at its byte budget for this session (`capture.session_queue_bytes`) or in all (`capture.queue_bytes`); nothing was queued: send it again after `Retry-After` seconds", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before sending the compaction again"))),
    )
)]
pub async fn capture_compaction(
    State(capture): State<Capture>,
    State(defaults): State<Defaults>,
    caller: Caller,
    ApiJson(request): ApiJson<TriggerRequest>,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    accept(&capture, defaults, &caller, request, Kind::Compaction).await
}

async fn accept(
    capture: &Capture,
    defaults: Defaults,
    caller: &Caller,
    request: TriggerRequest,
    kind: Kind,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    if !capture.is_enabled() {
        return Err(ApiError::CaptureDisabled);
    }
    let pair = NamespacePair::or_defaults(request.repo, request.user, &defaults);
    caller.check_pair(&pair)?;
    // Written into every memory captured from the window.
    secrets::ensure_no_secret("session_id", request.session_id.as_str())?;
    let turn_id = request
        .turn_id
        .as_deref()
        .map(extract::turn_id)
        .transpose()?;
    let lines = window::window(&request.messages);
    if lines.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` holds no user or assistant text",
        ));
    }
    let trigger = Trigger {
        id: Uuid::now_v7(),
        kind,
        session_id: request.session_id,
        turn_id,
        repo: pair.repo,
        user: pair.user,
        window: lines
            .into_iter()
            .map(|line| StoredLine {
                role: line.speaker.as_str().to_owned(),
                text: line.text,
            })
            .collect(),
        accepted_at: Utc::now(),
        attempts: 0,
        last_error: None,
    };
    let trigger_id = trigger.id;
    let status = capture.enqueue(trigger).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { trigger_id, status }),
    ))
}
