//! Consolidation by hand: `POST /consolidate` runs one pass over a
//! request's namespaces and answers what it changed; `GET /consolidations`
//! lists the passes kept, each change with its reason; and
//! `POST /consolidations/{id}/undo` undoes a pass's changes. A key limited
//! to some namespaces reaches only theirs: a pass of another namespace is
//! as absent as one that does not exist.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::config::Defaults;
use crate::consolidate::{Consolidated, Consolidator, UndoError, Undone};
use crate::error::{ApiError, Problem};
use crate::memory::{RepoId, UserId};
use crate::routes::extract::{ApiJson, ApiPath, ApiQuery, in_range};
use crate::routes::memories::named_namespaces;
use crate::routes::problems::{BodyProblems, Unauthorized};
use crate::store::Store;
use crate::store::consolidations::{Pass, PassTrigger};

/// The default and largest number of passes listed.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;

/// The namespaces a pass goes over.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsolidateRequest {
    /// `repo/<repo>` (the configured default when left out, if the key
    /// holds it).
    pub repo: Option<RepoId>,
    /// `user/<user>` (the configured default when left out, if the key
    /// holds it).
    pub user: Option<UserId>,
}

/// Run a consolidation pass.
///
/// One pass over `repo/<repo>` and `user/<user>`: near-duplicates are
/// reduced to their best-supported member (confirmed, then the most used,
/// then the newest), the others `superseded_by` it (no new version,
/// nothing deleted); two memories on one subject that disagree are both
/// put under review. Answers each change with its reason; every change
/// is listed in `GET /consolidations` and can be undone.
#[utoipa::path(
    post,
    path = "/consolidate",
    tag = "memories",
    request_body = ConsolidateRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "What was weighed, and the passes that changed something", body = Consolidated),
        (status = 403, description = "The API key does not hold the repo or user named, nor either default", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn consolidate_memories(
    State(consolidator): State<Consolidator>,
    State(defaults): State<Defaults>,
    caller: Caller,
    ApiJson(request): ApiJson<ConsolidateRequest>,
) -> Result<Json<Consolidated>, ApiError> {
    let reach = caller.reach(request.repo, request.user, &defaults)?;
    let consolidated = consolidator
        .consolidate(reach.namespaces(), PassTrigger::Request)
        .await?;
    Ok(Json(consolidated))
}

/// Which passes to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListConsolidationsQuery {
    /// Only the passes over `repo/<repo>` (with `user/<user>` when `user`
    /// is also given).
    pub repo: Option<RepoId>,
    /// Only the passes over `user/<user>` (with `repo/<repo>` when `repo`
    /// is also given).
    pub user: Option<UserId>,
    /// The most passes listed, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// Passes, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListConsolidationsResponse {
    pub passes: Vec<Pass>,
}

/// List consolidation passes and their changes.
///
/// Newest first, each change with its action, its reason, the memories it
/// touched, the lifecycles it set (what an undo restores) and when it was
/// undone. Without `repo` and `user`, the passes of every namespace that
/// holds a memory and that the key holds.
#[utoipa::path(
    get,
    path = "/consolidations",
    tag = "memories",
    params(ListConsolidationsQuery),
    responses(
        Unauthorized,
        (status = 200, body = ListConsolidationsResponse),
        (status = 403, description = "The API key does not hold the repo or user named", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A query parameter is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_consolidations(
    State(store): State<Store>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListConsolidationsQuery>,
) -> Result<Json<ListConsolidationsResponse>, ApiError> {
    let limit = in_range("limit", query.limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let named = named_namespaces(query.repo, query.user, &caller)?;
    let namespaces = if named.is_empty() {
        store
            .namespaces_held()
            .into_iter()
            .filter(|namespace| caller.can_see(namespace))
            .collect()
    } else {
        named
    };
    let mut passes = store.passes(namespaces).await?;
    passes.truncate(limit);
    Ok(Json(ListConsolidationsResponse { passes }))
}

/// Which changes of a pass to undo.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    /// The changes to undo, by their place in the pass's `changes` (from
    /// 0); every change not undone yet when left out.
    pub changes: Option<Vec<usize>>,
}

/// Undo a consolidation pass's changes.
///
/// Each lifecycle the changes set is put back as it was before the pass
/// (a memory superseded by the pass is current again, a flag is
/// cleared), where it is still as the pass left it; a memory changed
/// since is left as it is and listed in `left`. Later passes do not merge
/// again what was undone.
#[utoipa::path(
    post,
    path = "/consolidations/{id}/undo",
    tag = "memories",
    params(("id" = String, Path, description = "The pass id (a UUID)")),
    request_body = UndoRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "The pass, with what was restored and what was left", body = Undone),
        (status = 404, description = "No such pass", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The changes asked for are undone already", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The id is not a UUID, or a change index is past the pass's changes", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn undo_consolidation(
    State(consolidator): State<Consolidator>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<UndoRequest>,
) -> Result<Json<Undone>, ApiError> {
    let undone = consolidator
        .undo(id, request.changes, |namespace| caller.can_see(namespace))
        .await
        .map_err(|err| match err {
            UndoError::NoSuchPass(_) => ApiError::not_found(err.to_string()),
            UndoError::NoSuchChange { .. } => ApiError::invalid("changes", err.to_string()),
            UndoError::AlreadyUndone(_) => ApiError::Conflict {
                field: "id".to_owned(),
                detail: err.to_string(),
            },
            UndoError::Write(err) => err.into(),
        })?;
    Ok(Json(undone))
}
