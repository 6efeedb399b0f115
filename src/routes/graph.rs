//! `GET /memories/{id}/graph`: a memory's neighbourhood, for drawing.
//!
//! A breadth-first walk from the memory over `related` edges (both
//! directions) and version links (`supersedes`, both directions), up to
//! `depth` hops and `limit` memories. Every edge between two memories of
//! the answer is in it, the walk's frontier included. A key limited to
//! some namespaces walks only through memories it can see.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, Problem};
use crate::memory::{Category, Memory, MemoryId, Relationship, RepoId, Scope, UserId};
use crate::routes::extract::{ApiPath, ApiQuery, in_range};
use crate::routes::memories::visible_memory;
use crate::routes::problems::{NoSuchMemory, Unauthorized};
use crate::store::Store;

const DEFAULT_DEPTH: usize = 2;
const MAX_DEPTH: usize = 4;
const DEFAULT_NODES: usize = 200;
const MAX_NODES: usize = 500;
/// The longest node label, in characters.
const LABEL_CHARS: usize = 80;

/// How far to walk.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GraphQuery {
    /// Hops from the memory, 1–4 (default 2).
    pub depth: Option<usize>,
    /// The most memories in the answer, 1–500 (default 200).
    pub limit: Option<usize>,
}

/// A memory in the graph, without its full content.
#[derive(Debug, Serialize, ToSchema)]
pub struct GraphNode {
    pub id: MemoryId,
    pub version: u32,
    pub scope: Scope,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<UserId>,
    pub category: Category,
    /// Whether no other version supersedes it.
    pub current: bool,
    /// Hops from the memory asked for (0 for itself).
    pub hops: usize,
    /// The start of the content's first line (at most 80 characters).
    pub label: String,
}

/// What links two memories of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GraphEdgeKind {
    /// `from` is a newer version of `to`.
    Supersedes,
    /// `from` has a `related` edge to `to`.
    Related,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
pub struct GraphEdge {
    pub from: MemoryId,
    pub to: MemoryId,
    pub kind: GraphEdgeKind,
    /// The relationship of a `related` edge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relationship: Option<Relationship>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GraphResponse {
    pub id: MemoryId,
    /// The memory first, then by hops.
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
    /// Whether `limit` left out memories within `depth`.
    pub truncated: bool,
}

/// A memory's neighbourhood over related edges and versions.
#[utoipa::path(
    get,
    path = "/memories/{id}/graph",
    tag = "memories",
    params(("id" = String, Path, description = "The memory id (a UUID)"), GraphQuery),
    responses(
        Unauthorized,
        (status = 200, body = GraphResponse),
        NoSuchMemory,
        (status = 422, description = "The id, `depth` or `limit` is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_memory_graph(
    State(store): State<Store>,
    caller: Caller,
    ApiPath(id): ApiPath<MemoryId>,
    ApiQuery(query): ApiQuery<GraphQuery>,
) -> Result<Json<GraphResponse>, ApiError> {
    let depth = in_range("depth", query.depth, DEFAULT_DEPTH, 1..=MAX_DEPTH)?;
    let limit = in_range("limit", query.limit, DEFAULT_NODES, 1..=MAX_NODES)?;
    let root = visible_memory(&store, &caller, id)?;
    Ok(Json(walk(&store, &caller, &root, depth, limit)))
}

/// The breadth-first walk from `root`.
fn walk(
    store: &Store,
    caller: &Caller,
    root: &Memory,
    depth: usize,
    limit: usize,
) -> GraphResponse {
    let visible = |namespace: &_| caller.can_see(namespace);
    let mut hops_of = HashMap::from([(root.id, 0)]);
    let mut frontier = VecDeque::from([(root.id, 0)]);
    let mut edges = BTreeSet::new();
    let mut truncated = false;
    let mut nodes = Vec::new();
    while let Some((id, hops)) = frontier.pop_front() {
        let Some(memory) = store.get(id) else {
            continue;
        };
        let chain = store.chain(id);
        let position = chain.iter().position(|version| version.id == id);
        let older = position
            .and_then(|at| at.checked_sub(1))
            .map(|at| chain[at].id);
        let newer = position.and_then(|at| chain.get(at + 1)).map(|m| m.id);
        let links = store.edges_within(id, visible);
        let neighbours = older
            .map(|to| (id, to, GraphEdgeKind::Supersedes, None))
            .into_iter()
            .chain(newer.map(|from| (from, id, GraphEdgeKind::Supersedes, None)))
            .chain(
                links
                    .outgoing
                    .iter()
                    .map(|edge| (id, edge.id, GraphEdgeKind::Related, Some(edge.relationship))),
            )
            .chain(
                links
                    .incoming
                    .iter()
                    .map(|edge| (edge.id, id, GraphEdgeKind::Related, Some(edge.relationship))),
            );
        for (from, to, kind, relationship) in neighbours {
            let other = if from == id { to } else { from };
            if !hops_of.contains_key(&other) {
                if hops >= depth {
                    continue;
                }
                if hops_of.len() == limit {
                    truncated = true;
                    continue;
                }
                hops_of.insert(other, hops + 1);
                frontier.push_back((other, hops + 1));
            }
            edges.insert(GraphEdge {
                from,
                to,
                kind,
                relationship,
            });
        }
        let (scope, repo, user) = memory.namespace.owner_fields();
        nodes.push(GraphNode {
            id,
            version: memory.version,
            scope,
            repo,
            user,
            category: memory.category,
            current: newer.is_none(),
            hops,
            label: label(&memory.content),
        });
    }
    // A memory deleted during the walk is left out, with its edges.
    let present: HashSet<MemoryId> = nodes.iter().map(|node| node.id).collect();
    GraphResponse {
        id: root.id,
        nodes,
        edges: edges
            .into_iter()
            .filter(|edge| present.contains(&edge.from) && present.contains(&edge.to))
            .collect(),
        truncated,
    }
}

/// The start of the first line of `content`.
fn label(content: &str) -> String {
    let line = content.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(LABEL_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
