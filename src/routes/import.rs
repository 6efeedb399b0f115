//! `POST /memories/import`: memories brought back whole (ids, versions,
//! timestamps, links, use counts), as `engram export` writes them, for
//! `engram import jsonl` and `engram import markdown`. Each memory is
//! checked as `POST /memories` checks one (grants, content, secrets,
//! importance), its numbers bounded (timestamps against this server's
//! clock, version, use count), and the batch as a whole by the store
//! before anything is written (links, as `POST /memories` checks them);
//! ids the store holds already are skipped and counted, so importing an
//! export twice changes nothing.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiError, Problem};
use crate::memory::{
    CommitId, Confidence, Lifecycle, Memory, MemoryId, MemoryView, Namespace, RepoId, Scope,
    UserId, Validity, memory_form, parse_access_count, parse_content, parse_importance,
    parse_review_reason, parse_timestamp, parse_version, with_memory_fields,
};
use crate::retrieval::Retriever;
use crate::routes::batch::MAX_BATCH;
use crate::routes::extract::{self, ApiJson};
use crate::routes::problems::{BodyProblems, Unauthorized};
use crate::routes::writing::check_anchor_fields;
use crate::secrets;
use crate::store::MAX_RELATED;

/// Memories to bring in as they were exported.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportMemoriesRequest {
    /// 1–1000 memories. A memory's `supersedes` (of its namespace) and
    /// `related` may name memories of the store or of the same request
    /// that the key sees; a key that sees every namespace may also keep a
    /// link to a memory that exists nowhere (deleted since the export).
    pub memories: Vec<ImportedMemory>,
}

memory_form! {
    /// A whole memory, as `GET /memories` shows it, with its use count: one
    /// line of `engram export`'s JSON Lines.
    #[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct ImportedMemory {
        pub id: MemoryId,
        /// 1 to 1,000,000.
        pub version: u32,
        pub scope: Scope,
        /// The owner of a `repo` memory (and only of one).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub repo: Option<RepoId>,
        /// The owner of a `user` memory (and only of one).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub user: Option<UserId>,
        ..import,
        /// Non-empty, at most 8,000 characters; stored trimmed.
        pub content: String,
        /// The lifecycle, as `GET /memories` shows it (each part optional:
        /// `unverified`, `confirmed`, not under review, not archived when
        /// left out).
        #[serde(default = "Validity::unverified")]
        pub validity: Validity,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub checked_at: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub checked_commit: Option<CommitId>,
        #[serde(default = "Confidence::confirmed")]
        pub confidence: Confidence,
        #[serde(default)]
        pub needs_review: bool,
        /// At most 500 characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub review_reason: Option<String>,
        #[serde(default)]
        pub archived: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub used_at: Option<DateTime<Utc>>,
        /// A memory of the same namespace that a consolidation pass kept in
        /// this one's place.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub superseded_by: Option<MemoryId>,
        /// How often retrieval has returned it (the `access` factor of
        /// relevance), at most 10^12; kept only for a memory this import
        /// writes.
        #[serde(default)]
        pub access_count: u64,
    }
}

/// What the import did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportMemoriesResponse {
    /// Memories written.
    pub imported: usize,
    /// Memories skipped because a memory with their id exists already,
    /// in the namespace written.
    pub existing: usize,
    /// The ids skipped.
    pub existing_ids: Vec<MemoryId>,
}

/// Import memories whole, ids and timestamps kept.
///
/// For bringing back an export (`engram export`): unlike `POST /memories`,
/// each memory keeps its id, version, timestamps, trigger, links and use
/// count. A memory whose id exists already is skipped and counted, never
/// changed. The batch is checked whole before anything is written.
#[utoipa::path(
    post,
    path = "/memories/import",
    tag = "memories",
    request_body = ImportMemoriesRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 200, description = "What was written and what existed already", body = ImportMemoriesResponse),
        (status = 403, description = "The API key does not hold a namespace a memory belongs to", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A memory supersedes one that another memory supersedes already, or its id is that of a memory of another namespace (seen by the key or not), or a namespace's directory is a symbolic link", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid (named `memories[<index>].<field>`): a link to no memory the key sees, a timestamp, version or use count out of bounds; or a `content` or `session_id` looks like a secret", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "The data directory is below its free-space floor (`limits.min_free_disk_bytes`); nothing was written", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn import_memories(
    State(config): State<std::sync::Arc<crate::config::Config>>,
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiJson(request): ApiJson<ImportMemoriesRequest>,
) -> Result<Json<ImportMemoriesResponse>, ApiError> {
    extract::one_to("memories", request.memories.len(), MAX_BATCH, "memories")?;
    let now = Utc::now();
    let mut batch = Vec::with_capacity(request.memories.len());
    let mut counts = Vec::new();
    for (index, imported) in request.memories.into_iter().enumerate() {
        imported.check_clock_and_count(index, now)?;
        if imported.access_count > 0 {
            counts.push((imported.id, imported.access_count));
        }
        let memory = imported.into_memory(index)?;
        if !caller.can_see(&memory.namespace) {
            return Err(ApiError::Forbidden {
                detail: format!("this API key may not write to {}", memory.namespace),
            });
        }
        batch.push(memory);
    }
    crate::disk::ensure_free_space(&config.data_dir, config.limits.min_free_disk_bytes)?;
    let visible = caller.clone();
    let imported = retriever
        .store()
        .import(
            batch,
            move |namespace| visible.can_see(namespace),
            caller.sees_everything(),
        )
        .await?;
    let written: HashSet<MemoryId> = imported.written.iter().copied().collect();
    retriever
        .access_counts()
        .seed(counts.into_iter().filter(|(id, _)| written.contains(id)));
    Ok(Json(ImportMemoriesResponse {
        imported: imported.written.len(),
        existing: imported.existing.len(),
        existing_ids: imported.existing,
    }))
}

impl ImportedMemory {
    /// `memory` as an export writes it.
    pub fn from_memory(memory: &Memory, access_count: u64) -> Self {
        let view = MemoryView::from(memory);
        let lifecycle = view.lifecycle;
        with_memory_fields!(ImportedMemory {
            id: view.id,
            version: view.version,
            scope: view.scope,
            repo: view.repo,
            user: view.user,
            content: view.content,
            validity: lifecycle.validity,
            checked_at: lifecycle.checked_at,
            checked_commit: lifecycle.checked_commit,
            confidence: lifecycle.confidence,
            needs_review: lifecycle.needs_review,
            review_reason: lifecycle.review_reason,
            archived: lifecycle.archived,
            used_at: lifecycle.used_at,
            superseded_by: lifecycle.superseded_by,
            access_count,
        } from view)
    }

    /// Checks what only the server can: timestamps against its clock (a
    /// memory from the future would head every newest-first listing for
    /// good), and the use count, which [`Self::into_memory`] leaves aside.
    fn check_clock_and_count(&self, index: usize, now: DateTime<Utc>) -> Result<(), ApiError> {
        for (name, at) in [
            ("created_at", Some(self.created_at)),
            ("updated_at", Some(self.updated_at)),
            ("observed_at", self.observed_at),
            ("checked_at", self.checked_at),
            ("used_at", self.used_at),
        ] {
            if let Some(at) = at {
                parse_timestamp(at, now).map_err(|err| invalid(index, name, &err))?;
            }
        }
        parse_access_count(self.access_count)
            .map_err(|err| invalid(index, "access_count", &err))?;
        Ok(())
    }

    /// The memory, checked field by field as `POST /memories` checks a
    /// new one; `index` is its place in the request, for the field names.
    pub fn into_memory(self, index: usize) -> Result<Memory, ApiError> {
        let field = |name: &str| format!("memories[{index}].{name}");
        let namespace = match (self.scope, self.repo, self.user) {
            (Scope::Repo, Some(repo), None) => Namespace::Repo(repo),
            (Scope::User, None, Some(user)) => Namespace::User(user),
            (Scope::Repo, _, _) => {
                let reason = "must be given, and `user` not, for a repo memory";
                return Err(invalid(index, "repo", &reason));
            }
            (Scope::User, _, _) => {
                let reason = "must be given, and `repo` not, for a user memory";
                return Err(invalid(index, "user", &reason));
            }
        };
        parse_version(self.version).map_err(|err| invalid(index, "version", &err))?;
        let content = parse_content(&self.content)
            .map_err(|err| invalid(index, "content", &err))?
            .to_owned();
        secrets::ensure_no_secret(field("content"), &content)?;
        if let Some(session_id) = &self.session_id {
            secrets::ensure_no_secret(field("session_id"), session_id.as_str())?;
        }
        if let Some(importance) = self.importance {
            parse_importance(importance).map_err(|err| invalid(index, "importance", &err))?;
        }
        if self.related.len() > MAX_RELATED {
            let reason = format!(
                "has {} edges; the limit is {MAX_RELATED}",
                self.related.len()
            );
            return Err(invalid(index, "related", &reason));
        }
        let mut targets = HashSet::new();
        for (edge_index, edge) in self.related.iter().enumerate() {
            if !targets.insert(edge.id) {
                let name = format!("related[{edge_index}].id");
                return Err(invalid(index, &name, &format!("repeats {}", edge.id)));
            }
        }
        check_anchor_fields(&self.anchors, &field(""))?;
        let review_reason = self
            .review_reason
            .map(|reason| parse_review_reason(&reason).map(str::to_owned))
            .transpose()
            .map_err(|err| invalid(index, "review_reason", &err))?;
        let lifecycle = Lifecycle {
            validity: self.validity,
            checked_at: self.checked_at,
            checked_commit: self.checked_commit,
            confidence: self.confidence,
            needs_review: self.needs_review,
            review_reason,
            archived: self.archived,
            used_at: self.used_at,
            superseded_by: self.superseded_by,
        };
        Ok(with_memory_fields!(Memory {
            id: self.id,
            version: self.version,
            namespace,
            content,
            lifecycle,
        } from self))
    }
}

/// `memories[<index>].<name>` is invalid: `reason`.
fn invalid(index: usize, name: &str, reason: &dyn std::fmt::Display) -> ApiError {
    let field = format!("memories[{index}].{name}");
    ApiError::invalid(field.clone(), format!("`{field}` {reason}"))
}
