//! A memory's lifecycle by hand: `POST /memories/{id}/confirm`,
//! `/review` (keep it, or forget it) and `/restore`. None writes a new
//! version: the memory keeps its id, version and file.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiError, Problem};
use crate::memory::{Lifecycle, Memory, MemoryId, MemoryView};
use crate::routes::extract::{ApiJson, ApiPath};
use crate::routes::memories::{delete_memory, no_such_memory, visible_memory};
use crate::routes::problems::{BodyProblems, NoSuchMemory, Unauthorized};
use crate::store::Store;

/// Confirm a memory: its `confidence` becomes `confirmed`.
///
/// For a memory the classifier wrote (`provisional`), which otherwise
/// ranks below confirmed ones and is archived after
/// `retention.provisional_days` unconfirmed.
#[utoipa::path(
    post,
    path = "/memories/{id}/confirm",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)")),
    responses(
        Unauthorized,
        (status = 200, description = "The memory, confirmed", body = MemoryView),
        NoSuchMemory,
        (status = 422, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn confirm_memory(
    State(store): State<Store>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
) -> Result<Json<MemoryView>, ApiError> {
    change(&store, &caller, id, |lifecycle| {
        lifecycle.confirmed(Utc::now())
    })
    .await
}

/// What a review decides.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewAction {
    /// The memory still holds: `needs_review` is cleared.
    Keep,
    /// It no longer holds: it is forgotten, as `DELETE /memories/{id}`.
    Forget,
}

/// A review's decision.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    pub action: ReviewAction,
}

/// Review a memory: keep it (its `needs_review` is cleared) or forget it.
#[utoipa::path(
    post,
    path = "/memories/{id}/review",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)")),
    request_body = ReviewRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "`keep`: the memory, no longer under review", body = MemoryView),
        (status = 204, description = "`forget`: the memory is gone"),
        NoSuchMemory,
        (status = 422, description = "The id is not a UUID, or `action` is neither `keep` nor `forget`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`forget`: the memory's namespace directory in the data directory has become a symbolic link (never removed through)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn review_memory(
    State(store): State<Store>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
    ApiJson(request): ApiJson<ReviewRequest>,
) -> Result<Response, ApiError> {
    match request.action {
        ReviewAction::Keep => Ok(keep_memory(&store, &caller, id).await?.into_response()),
        ReviewAction::Forget => Ok(delete_memory(State(store), caller, ApiPath(id))
            .await?
            .into_response()),
    }
}

/// A review's `keep`: the memory is no longer under review.
pub async fn keep_memory(
    store: &Store,
    caller: &Caller,
    id: MemoryId,
) -> Result<Json<MemoryView>, ApiError> {
    change(store, caller, id, |lifecycle| lifecycle.kept(Utc::now())).await
}

/// Bring back a memory let go for disuse: it is retrieved and injected
/// again.
#[utoipa::path(
    post,
    path = "/memories/{id}/restore",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)")),
    responses(
        Unauthorized,
        (status = 200, description = "The memory, no longer archived", body = MemoryView),
        NoSuchMemory,
        (status = 422, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn restore_memory(
    State(store): State<Store>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
) -> Result<Json<MemoryView>, ApiError> {
    change(&store, &caller, id, |lifecycle| {
        lifecycle.restored(Utc::now())
    })
    .await
}

/// Sets the lifecycle of a memory the caller sees to `to` of its current
/// one, and answers the memory as it is then.
async fn change(
    store: &Store,
    caller: &Caller,
    id: MemoryId,
    to: fn(&Lifecycle) -> Lifecycle,
) -> Result<Json<MemoryView>, ApiError> {
    visible_memory(store, caller, id)?;
    store
        .update_lifecycles(vec![id], move |memory: &Memory| Some(to(&memory.lifecycle)))
        .await?;
    let memory = store.get(id).ok_or_else(|| no_such_memory(id))?;
    Ok(Json(MemoryView::seen_by(&memory, store, caller)))
}
