//! `POST /memories/check`: what `engram check` found when it judged a
//! repo's anchored memories against a working tree (the server never
//! sees the tree), recorded as each memory's `validity` and `checked_at`
//! in one durable write for the whole batch, without a new version; an
//! anchor on a file git found renamed comes to name its new path.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiError, Problem};
use crate::memory::{
    CommitId, Lifecycle, MAX_ANCHORS, Memory, MemoryId, Namespace, Renamed, RepoId, Validity,
    follow_renames,
};
use crate::routes::extract::{self, ApiJson};
use crate::routes::problems::{BodyProblems, Unauthorized};
use crate::store::{InPlace, Store};

/// The most results one request records.
pub const MAX_RESULTS: usize = 10_000;

/// What a check found of a repo's memories.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// The repo whose memories were judged; the key must hold it.
    pub repo: RepoId,
    /// The working tree's `HEAD` when it was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitId>,
    /// 1–10,000 results, each memory once.
    pub results: Vec<CheckResult>,
}

/// One memory's judgement.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    pub id: MemoryId,
    pub validity: Verdict,
    /// Its anchored files git found renamed (at most 32): the anchors on
    /// each `from` come to name its `to`, in the same version. A `from`
    /// the memory has no anchor on is passed over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renamed: Vec<Renamed>,
}

/// What a check can find of a memory (never `unverified`: it was
/// checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every anchored file is as it was, each symbol still in it.
    Current,
    /// An anchored file's content differs from its anchor's hash.
    Changed,
    /// An anchored file is gone (and not renamed), or a symbol is.
    Gone,
}

impl From<Verdict> for Validity {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Current => Self::Current,
            Verdict::Changed => Self::Changed,
            Verdict::Gone => Self::Gone,
        }
    }
}

/// What was recorded.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct CheckResponse {
    /// Memories whose `validity` and `checked_at` were set.
    pub recorded: usize,
    /// Ids of no memory of the repo (forgotten since, or of another
    /// namespace): nothing recorded for them.
    pub unknown: Vec<MemoryId>,
}

/// Record a check of a repo's memories against its code.
///
/// `engram check` judges each anchored memory of a repo against a git
/// working tree and sends the results here: each memory's `validity`
/// becomes the one found and its `checked_at` now, all in one durable
/// write, without a new version. An id of no memory of `repo` that the
/// key sees is listed in `unknown`, not refused.
#[utoipa::path(
    post,
    path = "/memories/check",
    tag = "memories",
    request_body = CheckRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "How many were recorded, and the ids of no memory of the repo", body = CheckResponse),
        (status = 403, description = "The API key does not hold the repo", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid (named, e.g. `results[3].validity`): no results or more than 10,000, an id given twice, a validity other than `current`, `changed` or `gone`", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn record_check(
    State(store): State<Store>,
    caller: Caller,
    ApiJson(request): ApiJson<CheckRequest>,
) -> Result<Json<CheckResponse>, ApiError> {
    let count = request.results.len();
    extract::one_to("results", count, MAX_RESULTS, "results")?;
    let mut seen = HashSet::with_capacity(count);
    for (index, result) in request.results.iter().enumerate() {
        if !seen.insert(result.id) {
            let field = format!("results[{index}].id");
            let detail = format!("`{field}` repeats {}", result.id);
            return Err(ApiError::invalid(field, detail));
        }
        if result.renamed.len() > MAX_ANCHORS {
            let field = format!("results[{index}].renamed");
            let detail = format!(
                "`{field}` holds {} renames; a memory has at most {MAX_ANCHORS} anchors",
                result.renamed.len()
            );
            return Err(ApiError::invalid(field, detail));
        }
    }
    let namespace = Namespace::Repo(request.repo);
    if !caller.can_see(&namespace) {
        return Err(ApiError::Forbidden {
            detail: format!("this API key may not use {namespace}"),
        });
    }
    let (known, unknown): (Vec<CheckResult>, Vec<CheckResult>) =
        request.results.into_iter().partition(|result| {
            store
                .get(result.id)
                .is_some_and(|memory| memory.namespace == namespace)
        });
    let checked_at = Utc::now();
    let ids = known.iter().map(|result| result.id).collect();
    let verdicts: HashMap<MemoryId, CheckResult> = known
        .into_iter()
        .map(|result| (result.id, result))
        .collect();
    let checked_commit = request.commit.clone();
    let recorded = store
        .update_in_place(ids, move |memory: &Memory| {
            let result = verdicts.get(&memory.id)?;
            Some(InPlace {
                lifecycle: Lifecycle {
                    validity: Validity::from(result.validity),
                    checked_at: Some(checked_at),
                    checked_commit: checked_commit.clone(),
                    ..memory.lifecycle.clone()
                },
                anchors: follow_renames(&memory.anchors, &result.renamed),
            })
        })
        .await?;
    tracing::info!(
        memories.recorded = recorded.len(),
        memories.unknown = unknown.len(),
        check.commit = request.commit.as_ref().map(CommitId::as_str),
        "check recorded"
    );
    Ok(Json(CheckResponse {
        recorded: recorded.len(),
        unknown: unknown.into_iter().map(|result| result.id).collect(),
    }))
}
