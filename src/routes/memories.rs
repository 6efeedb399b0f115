//! `/memories`: write, list, read and forget memories by hand.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::config::Defaults;
use crate::error::{ApiError, Problem};
use crate::memory::{
    Category, Confidence, Memory, MemoryId, MemoryView, Namespace, RelatedEdge, RepoId, Scope,
    UserId, Validity,
};
use crate::retrieval::{Degraded, Retriever};
use crate::routes::extract::{ApiJson, ApiPath, ApiQuery, in_range};
use crate::routes::problems::{BodyProblems, NoSuchMemory, Unauthorized};
use crate::routes::writing::{CreateMemoryRequest, Writer};
use crate::store::{Cursor, ListFilter, Store};

/// The default and largest page sizes of a listing.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;
/// The longest `text` filter, in characters.
const MAX_TEXT_FILTER_CHARS: usize = 1000;

// The view itself lives beside `Memory`; trimming it to a caller needs the
// store and the key, which only the routes hold.
impl MemoryView {
    /// `memory` as `caller` sees it. A key limited to some namespaces gets
    /// in `related` only the edges to memories it can see, so an edge to a
    /// memory elsewhere is as absent as one to a memory that is gone; a
    /// caller that sees every namespace gets the list as the file has it.
    pub fn seen_by(memory: &Memory, store: &Store, caller: &Caller) -> Self {
        let mut view = Self::from(memory);
        if !caller.sees_everything() {
            view.related = store
                .edges_within(memory.id, |namespace| caller.can_see(namespace))
                .outgoing;
        }
        view
    }
}

/// Write a memory.
#[utoipa::path(
    post,
    path = "/memories",
    tag = "memories",
    request_body = CreateMemoryRequest,
    responses(
        BodyProblems,
        Unauthorized,
        (status = 201, description = "The memory, as written", body = MemoryView),
        (status = 403, description = "The API key does not hold the namespace written, or a repo or user the request names", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`supersedes` names a memory that is already superseded, or the namespace's directory in the data directory is a symbolic link (never written through), or (with `dedupe`) a current memory already says this (`urn:engram:problem:duplicate-memory`, naming it)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is invalid, or `content` or `session_id` looks like a secret (`urn:engram:problem:secret-content`, naming the field)", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "The data directory is below its free-space floor (`limits.min_free_disk_bytes`); nothing was written", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_memory(
    State(store): State<Store>,
    State(defaults): State<Defaults>,
    State(config): State<std::sync::Arc<crate::config::Config>>,
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateMemoryRequest>,
) -> Result<(StatusCode, Json<MemoryView>), ApiError> {
    let writer = Writer {
        store: &store,
        defaults: &defaults,
        config: &config,
        retriever: &retriever,
        caller: &caller,
    };
    let mut written = writer.write(vec![Ok(request)]).await?;
    let memory = written.pop().expect("one outcome for one request")?;
    Ok((StatusCode::CREATED, Json(memory)))
}

/// The namespaces a listing's `repo` and `user` name (none: every one the
/// key holds). A namespace named but not held is refused, as a retrieval
/// refuses it, rather than listed as empty.
pub fn named_namespaces(
    repo: Option<RepoId>,
    user: Option<UserId>,
    caller: &Caller,
) -> Result<Vec<Namespace>, ApiError> {
    let namespaces: Vec<Namespace> = repo
        .map(Namespace::Repo)
        .into_iter()
        .chain(user.map(Namespace::User))
        .collect();
    match namespaces.iter().find(|ns| !caller.can_see(ns)) {
        Some(namespace) => Err(ApiError::Forbidden {
            detail: format!("this API key may not use {namespace}"),
        }),
        None => Ok(namespaces),
    }
}

/// Filters and paging of a listing.
#[derive(Debug, Deserialize, Serialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListMemoriesQuery {
    /// Only `repo/<repo>` (together with `user/<user>` when `user` is also given).
    pub repo: Option<RepoId>,
    /// Only `user/<user>` (together with `repo/<repo>` when `repo` is also given).
    pub user: Option<UserId>,
    pub scope: Option<Scope>,
    pub category: Option<Category>,
    /// A case-insensitive substring of the content (at most 1,000 characters).
    pub text: Option<String>,
    /// Page size, 1–1000 (default 50).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// `true`: superseded versions too, each with its `version` and
    /// `supersedes`. By default only current memories (the newest version
    /// of each chain) are listed.
    pub all_versions: Option<bool>,
    /// Only memories whose anchors are judged so (`gone`: to review or
    /// forget).
    pub validity: Option<Validity>,
    pub confidence: Option<Confidence>,
    /// `true`: only memories a change to a linked memory put under
    /// review.
    pub needs_review: Option<bool>,
    /// `true`: only memories let go for disuse, which are otherwise never
    /// listed.
    pub archived: Option<bool>,
    /// `true`: only memories with anchors (what `engram check` judges);
    /// `false`: only those without.
    pub anchored: Option<bool>,
}

/// One page of memories, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListMemoriesResponse {
    pub memories: Vec<ListedMemory>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// A listed memory with its use count, so that a reader of every memory
/// (an export) needs no request per memory.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListedMemory {
    #[serde(flatten)]
    pub memory: MemoryView,
    /// How often retrieval has returned this memory (the `access` factor
    /// of relevance).
    pub access_count: u64,
}

/// List memories, newest first.
///
/// Current memories only, unless `all_versions=true`. Without `repo` and
/// `user`, every namespace the key holds is listed;
/// with either or both, only those namespaces, which the key must hold.
/// The other filters narrow further.
#[utoipa::path(
    get,
    path = "/memories",
    tag = "memories",
    params(ListMemoriesQuery),
    responses(
        Unauthorized,
        (status = 200, body = ListMemoriesResponse),
        (status = 403, description = "The API key does not hold the repo or user named", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A query parameter is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_memories(
    State(store): State<Store>,
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListMemoriesQuery>,
) -> Result<Json<ListMemoriesResponse>, ApiError> {
    let limit = in_range("limit", query.limit, DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    if let Some(text) = &query.text
        && text.chars().count() > MAX_TEXT_FILTER_CHARS
    {
        return Err(ApiError::invalid(
            "text",
            format!("`text` is longer than {MAX_TEXT_FILTER_CHARS} characters"),
        ));
    }
    let after = query
        .cursor
        .as_deref()
        .map(|text| {
            Cursor::decode(text).ok_or_else(|| {
                ApiError::invalid("cursor", "`cursor` is not a cursor this service returned")
            })
        })
        .transpose()?;
    let namespaces = named_namespaces(query.repo, query.user, &caller)?;
    let filter = ListFilter {
        namespaces,
        scope: query.scope,
        category: query.category,
        text: query.text.filter(|text| !text.is_empty()),
        all_versions: query.all_versions.unwrap_or(false),
        validity: query.validity,
        confidence: query.confidence,
        needs_review: query.needs_review,
        archived: query.archived.unwrap_or(false),
        anchored: query.anchored,
    };
    let page = store.list(&filter, limit, after, |namespace| caller.can_see(namespace));
    Ok(Json(ListMemoriesResponse {
        memories: page
            .memories
            .iter()
            .map(|m| ListedMemory {
                memory: MemoryView::seen_by(m, &store, &caller),
                access_count: retriever.access_counts().get(m.id),
            })
            .collect(),
        next_cursor: page.next.map(|cursor| cursor.encode()),
    }))
}

/// A memory's links, to memories that exist.
#[derive(Debug, Serialize, ToSchema)]
pub struct EdgesView {
    /// This memory's `related` edges.
    pub outgoing: Vec<RelatedEdge>,
    /// Edges of other memories that point at this one; `id` is where they start.
    pub incoming: Vec<RelatedEdge>,
}

/// A memory with its version chain and its edges.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryDetail {
    #[serde(flatten)]
    pub memory: MemoryView,
    /// How often retrieval has returned this memory (the `access` factor
    /// of relevance).
    pub access_count: u64,
    /// Every version of this memory's chain, oldest first (this one included).
    pub chain: Vec<MemoryView>,
    pub edges: EdgesView,
}

/// Read a memory with its version chain and edges.
#[utoipa::path(
    get,
    path = "/memories/{id}",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)")),
    responses(
        Unauthorized,
        (status = 200, body = MemoryDetail),
        NoSuchMemory,
        (status = 422, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_memory(
    State(store): State<Store>,
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
) -> Result<Json<MemoryDetail>, ApiError> {
    let memory = visible_memory(&store, &caller, id)?;
    let edges = store.edges_within(id, |namespace| caller.can_see(namespace));
    Ok(Json(MemoryDetail {
        memory: MemoryView::seen_by(&memory, &store, &caller),
        access_count: retriever.access_counts().get(id),
        chain: store
            .chain(id)
            .iter()
            .map(|m| MemoryView::seen_by(m, &store, &caller))
            .collect(),
        edges: EdgesView {
            outgoing: edges.outgoing,
            incoming: edges.incoming,
        },
    }))
}

/// Forget a memory: its file is removed; edges to it are ignored from then on.
#[utoipa::path(
    delete,
    path = "/memories/{id}",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)")),
    responses(
        Unauthorized,
        (status = 204, description = "The memory is gone"),
        NoSuchMemory,
        (status = 409, description = "The memory's namespace directory in the data directory has become a symbolic link (never removed through)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The id is not a UUID", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_memory(
    State(store): State<Store>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
) -> Result<StatusCode, ApiError> {
    visible_memory(&store, &caller, id)?;
    match store.delete(id).await? {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(no_such_memory(id)),
    }
}

/// How many similar memories to return.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SimilarMemoriesQuery {
    /// 1–100 (default 10).
    pub limit: Option<usize>,
}

/// A memory and how close it is.
#[derive(Debug, Serialize, ToSchema)]
pub struct SimilarMemory {
    #[serde(flatten)]
    pub memory: MemoryView,
    /// Cosine similarity of the two memories' embeddings.
    pub similarity: f32,
}

/// The memories nearest to one memory.
#[derive(Debug, Serialize, ToSchema)]
pub struct SimilarMemoriesResponse {
    pub id: MemoryId,
    /// Set when the neighbours cannot be known yet: the index is still
    /// being built, or this memory is not in it yet.
    pub degraded: Option<Degraded>,
    /// Nearest first; current versions only, never this memory's own chain.
    pub memories: Vec<SimilarMemory>,
}

const DEFAULT_SIMILAR: usize = 10;
const MAX_SIMILAR: usize = 100;

/// Find the memories nearest to this one, in its own namespace.
#[utoipa::path(
    get,
    path = "/memories/{id}/similar",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)"), SimilarMemoriesQuery),
    responses(
        Unauthorized,
        (status = 200, body = SimilarMemoriesResponse),
        NoSuchMemory,
        (status = 422, description = "The id or `limit` is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn find_similar_memories(
    State(retriever): State<Retriever>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
    ApiQuery(query): ApiQuery<SimilarMemoriesQuery>,
) -> Result<Json<SimilarMemoriesResponse>, ApiError> {
    let limit = in_range("limit", query.limit, DEFAULT_SIMILAR, 1..=MAX_SIMILAR)?;
    let memory = visible_memory(retriever.store(), &caller, id)?;
    let (degraded, memories) = match retriever.similar(&memory, limit).await {
        Ok(similar) => (
            None,
            similar
                .iter()
                .map(|(memory, similarity)| SimilarMemory {
                    memory: MemoryView::seen_by(memory, retriever.store(), &caller),
                    similarity: *similarity,
                })
                .collect(),
        ),
        Err(degraded) => (Some(degraded), Vec::new()),
    };
    Ok(Json(SimilarMemoriesResponse {
        id,
        degraded,
        memories,
    }))
}

/// The memory `id`, if it exists and the caller may see it: one that
/// exists elsewhere is as absent as one that does not exist.
pub(super) fn visible_memory(
    store: &Store,
    caller: &Caller,
    id: MemoryId,
) -> Result<std::sync::Arc<crate::memory::Memory>, ApiError> {
    store
        .get(id)
        .filter(|memory| caller.can_see(&memory.namespace))
        .ok_or_else(|| no_such_memory(id))
}

pub(super) fn no_such_memory(id: MemoryId) -> ApiError {
    ApiError::not_found(format!("no memory has the id {id}"))
}
