//! `GET /stats`: what the service holds and what it skipped, for people.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::Problem;
use crate::store::Store;

/// The most skipped files listed by name; the count is always complete.
const MAX_SKIPPED_LISTED: usize = 100;

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsResponse {
    pub store: StoreStatsView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StoreStatsView {
    /// Memories loaded, across every namespace.
    pub memories: usize,
    /// Per namespace (`repo/<repo>`, `user/<user>`).
    pub namespaces: BTreeMap<String, NamespaceStatsView>,
    /// Files under the data directory that were skipped because they do not parse.
    pub skipped_files: usize,
    /// The first 100 of them, with why.
    pub skipped: Vec<SkippedFileView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceStatsView {
    pub memories: usize,
    /// Memories per category.
    pub categories: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SkippedFileView {
    /// Relative to the data directory.
    pub path: String,
    pub reason: String,
}

/// Statistics of the store.
#[utoipa::path(
    get,
    path = "/stats",
    tag = "operations",
    responses(
        (status = 200, body = StatsResponse),
        (status = 401, description = "An API key is configured and the request lacks it", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_stats(State(store): State<Store>) -> Json<StatsResponse> {
    let stats = store.stats();
    Json(StatsResponse {
        store: StoreStatsView {
            memories: stats.memories,
            namespaces: stats
                .by_namespace
                .into_iter()
                .map(|(namespace, counts)| {
                    let categories = counts
                        .by_category
                        .into_iter()
                        .map(|(category, n)| (category.to_owned(), n))
                        .collect();
                    (
                        namespace,
                        NamespaceStatsView {
                            memories: counts.memories,
                            categories,
                        },
                    )
                })
                .collect(),
            skipped_files: stats.skipped.len(),
            skipped: stats
                .skipped
                .into_iter()
                .take(MAX_SKIPPED_LISTED)
                .map(|file| SkippedFileView {
                    path: file.path,
                    reason: file.reason,
                })
                .collect(),
        },
    })
}
