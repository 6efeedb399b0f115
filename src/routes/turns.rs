//! `POST /turns` and `POST /compactions`: check the window (and the files
//! it names), strip tool traffic from it, and hand it to capture,
//! answering `202` at once.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::capture::Capture;
use crate::capture::queue::{
    EnqueueStatus, Kind, MAX_TOUCHED_FILES, StoredLine, TouchedFile, Trigger,
};
use crate::config::Defaults;
use crate::error::{ApiError, Problem};
use crate::memory::{CommitId, RepoId, SessionId, UserId};
use crate::routes::extract::{self, ApiJson};
use crate::routes::problems::{BodyProblems, CaptureProblems, Unauthorized};
use crate::secrets;
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
    /// The working tree's `HEAD` as the window is sent: the `commit` of
    /// the repo memories captured from it.
    pub commit: Option<CommitId>,
    /// The repo's files the conversation read or edited (at most 64, each
    /// path once, checked as anchors are), with their content hashes now.
    /// The classifier is asked which of them each fact is about, and a
    /// repo memory is anchored to those it names.
    #[serde(default)]
    pub files: Vec<TouchedFile>,
    /// When the conversation took place (its latest message; RFC 3339),
    /// the `observed_at` of the memories captured from it. Default, and
    /// for a time past the server's clock: when the window is received.
    /// Not before 1970.
    pub observed_at: Option<DateTime<Utc>>,
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
    let pair = caller.pair(request.repo, request.user, &defaults);
    caller.check_pair(&pair)?;
    // Written into every memory captured from the window.
    secrets::ensure_no_secret("session_id", request.session_id.as_str())?;
    check_files(&request.files)?;
    // A time past the server's clock is the client's clock running ahead:
    // the turn is taken as said now rather than lost.
    let accepted_at = Utc::now();
    let observed_at = request
        .observed_at
        .map(|at| extract::observed_at("observed_at", at.min(accepted_at)))
        .transpose()?;
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
        accepted_at,
        attempts: 0,
        last_error: None,
        commit: request.commit,
        files: request.files,
        observed_at,
    };
    let trigger_id = trigger.id;
    let status = capture.enqueue(trigger).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { trigger_id, status }),
    ))
}

/// Checks the files a window names as anchors are checked: at most
/// [`MAX_TOUCHED_FILES`], each path once, none that looks like a secret
/// (a path is stored and shown with the memories anchored to it).
fn check_files(files: &[TouchedFile]) -> Result<(), ApiError> {
    if files.len() > MAX_TOUCHED_FILES {
        return Err(ApiError::invalid(
            "files",
            format!(
                "`files` names {} files; the limit is {MAX_TOUCHED_FILES}",
                files.len()
            ),
        ));
    }
    let mut seen = HashSet::with_capacity(files.len());
    for (index, file) in files.iter().enumerate() {
        let field = format!("files[{index}].path");
        if !seen.insert(&file.path) {
            let detail = format!("`{field}` repeats {}", file.path);
            return Err(ApiError::invalid(field, detail));
        }
        secrets::ensure_no_secret(field, file.path.as_str())?;
    }
    Ok(())
}
