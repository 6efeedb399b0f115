//! `GET /stats`: what the service holds, what it skipped and how far the
//! index is, for people. A key limited to some namespaces sees only
//! theirs, and no service-wide counters.
//!
//! [`StatsResponse::gather`] asks each component for its view once; the
//! same snapshot is what `/metrics` encodes ([`scrape`]), so each number
//! has one source.

pub mod scrape;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::capture::{Capture, CaptureStatsView};
use crate::embed;
use crate::index::ResidencyView;
use crate::index::indexer::IndexerStats;
use crate::readiness::Readiness;
use crate::retrieval::Retriever;
use crate::retrieval::stats::RetrievalStatsView;
use crate::routes::problems::Unauthorized;
use crate::store::postgres::ReplicationView;
use crate::store::{IndexStage, Store, SyncView};
use crate::usage::{Meter, UsageView};

/// The most skipped files listed by name; the count is always complete.
const MAX_SKIPPED_LISTED: usize = 100;

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsResponse {
    pub store: StoreStatsView,
    pub index: IndexStatsView,
    /// Service-wide counters: only for keys that see every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalStatsView>,
    /// Service-wide counters: only for keys that see every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStatsView>,
    /// The embedder's health: only for keys that see every namespace (an
    /// upstream's error may quote what it was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingStatsView>,
    /// Model calls metered (tokens and cost by kind, model and pair, today
    /// and since start) and the daily token budgets: only for keys that
    /// see every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<UsageView>,
    /// The database and this replica's place in its change log: only in
    /// postgres mode (`store.backend: postgres`), and only for keys that
    /// see every namespace (the log counts every namespace's changes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseStatsView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseStatsView {
    /// Whether this replica's connection to the change log is up.
    pub connected: bool,
    /// Whether this replica has caught up with the change log since start
    /// (`/readyz` is 503 until it has).
    pub caught_up: bool,
    /// The change log's last change, as this replica last read it.
    pub log_head: u64,
    /// The last change this replica has applied.
    pub cursor: u64,
    /// Changes committed and not yet applied here (`log_head - cursor`).
    pub lag_changes: u64,
    /// How long the oldest change not yet applied here has waited, in ms;
    /// while the connection is down, how long since this replica last
    /// heard from the database. 0 when connected and current.
    pub lag_ms: u64,
}

impl From<ReplicationView> for DatabaseStatsView {
    fn from(view: ReplicationView) -> Self {
        Self {
            connected: view.connected,
            caught_up: view.caught_up,
            log_head: view.head,
            cursor: view.cursor,
            lag_changes: view.lag_changes,
            lag_ms: u64::try_from(view.lag.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddingStatsView {
    /// The embedding model's key.
    pub model: String,
    /// The vector length: `embedding.dimensions`, or learned from the first
    /// reply; null until then.
    pub dimensions: Option<usize>,
    /// Replies refused since start for vectors of another length.
    pub dimension_mismatches: u64,
    /// The last failed embedding call since start, and when it failed.
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
}

impl From<embed::Health> for EmbeddingStatsView {
    fn from(health: embed::Health) -> Self {
        let (last_error_at, last_error) = health.last_error.unzip();
        Self {
            model: health.model,
            dimensions: health.dimensions,
            dimension_mismatches: health.dimension_mismatches,
            last_error,
            last_error_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct IndexStatsView {
    /// Whether the start-up build is done.
    pub ready: bool,
    /// The embedding model's key: its vectors are never mixed with another's.
    pub model: String,
    /// Null until learned from the embedder's first reply.
    pub dimensions: Option<usize>,
    /// Memories in the index.
    pub memories: usize,
    /// Per namespace.
    pub namespaces: BTreeMap<String, usize>,
    /// Writes and deletes whose vectors are not yet in the index (the
    /// embedder is behind or down). A written memory is found by its words
    /// meanwhile, once it is no longer counted in `pending_words`.
    pub pending: usize,
    /// Writes and deletes not yet in the index even by their words: 0 but
    /// for the moment right after a write.
    pub pending_words: usize,
    /// Memories found by their words alone for now, their vectors pending.
    pub words_only: usize,
    /// The memories' passages with a vector of their own (the sentences of
    /// memories of several; 0 with `retrieval.passage_weight` 0).
    pub passages: usize,
    /// Texts embedded since start: whole memories and passages. Counted
    /// over every namespace, so only for keys that see every namespace:
    /// with `cache_hits`, it would tell a limited key whether another
    /// namespace holds a text it writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<u64>,
    /// Vectors taken from the embedding cache instead (in postgres mode,
    /// the cache all replicas share): only for keys that see every
    /// namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hits: Option<u64>,
    /// Embedding batches that failed and were retried: only for keys that
    /// see every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_batches: Option<u64>,
    /// How long the start-up build took, in ms; null until it is done.
    pub startup_ms: Option<u64>,
    /// What the index holds in memory (`index.idle_minutes`,
    /// `index.max_memory_mb`): only for keys that see every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residency: Option<ResidencyView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StoreStatsView {
    /// Current memories across every namespace: a superseded version is
    /// not counted, as `GET /memories` does not list it by default.
    pub memories: usize,
    /// Every version loaded, superseded ones included.
    pub versions: usize,
    /// Per namespace (`repo/<repo>`, `user/<user>`).
    pub namespaces: BTreeMap<String, NamespaceStatsView>,
    /// Entries under `repos/` and `users/` that were skipped: files that do
    /// not parse (at start, or since an edit on disk: their last good
    /// version stays in service until they are fixed), symbolic links,
    /// anything that is not a memory file, and links of loaded memories
    /// that are never followed (a `supersedes` or `related` naming no
    /// memory the file's namespace may link to). Kept current by the live
    /// sync: a fixed file leaves the list.
    pub skipped_files: usize,
    /// The first 100 of them, with why.
    pub skipped: Vec<SkippedFileView>,
    /// The live sync of the data directory: only for keys that see every
    /// namespace (its counters span them all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncStatsView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SyncStatsView {
    /// Whether changes made on disk are taken in live (`store.watch`, and
    /// the watcher could start).
    pub watching: bool,
    /// Reconciliation passes since start.
    pub passes: u64,
    /// Files those passes read (a file is read again only when it changed).
    pub files_read: u64,
    /// Files read that matched the memory in service (Engram's own writes
    /// among them): nothing to do.
    pub unchanged: u64,
    /// Memories added, changed or removed on disk and taken in.
    pub applied: u64,
}

impl From<SyncView> for SyncStatsView {
    fn from(view: SyncView) -> Self {
        Self {
            watching: view.watching,
            passes: view.passes,
            files_read: view.files_read,
            unchanged: view.unchanged,
            applied: view.applied,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceStatsView {
    /// Current memories: superseded versions are not counted.
    pub memories: usize,
    /// Every version, superseded ones included.
    pub versions: usize,
    /// Current memories per category.
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
        Unauthorized,
        (status = 200, body = StatsResponse),
    )
)]
pub async fn get_stats(State(sources): State<StatsSources>, caller: Caller) -> Json<StatsResponse> {
    sources.capture.refresh_depth().await;
    Json(StatsResponse::gather(&sources, &caller))
}

/// The components `/stats` and `/metrics` ask for their views.
#[derive(Clone)]
pub struct StatsSources {
    pub store: Store,
    pub retriever: Retriever,
    pub capture: Capture,
    pub indexer: Arc<IndexerStats>,
    pub readiness: Readiness,
    pub meter: Meter,
}

impl StatsResponse {
    /// What `caller` may see of every component's current view.
    pub fn gather(sources: &StatsSources, caller: &Caller) -> Self {
        let StatsSources {
            store,
            retriever,
            capture,
            indexer,
            readiness,
            meter,
        } = sources;
        let everything = caller.sees_everything();
        let stats = store.stats(|namespace| caller.can_see(namespace), everything);
        let snapshot = retriever.index().snapshot();
        let indexer = indexer.view();
        let mut namespaces: BTreeMap<String, usize> = BTreeMap::new();
        // A namespace out of memory still holds its memories.
        let cold = retriever.index().cold_sizes();
        for (namespace, n) in snapshot
            .namespace_sizes()
            .chain(cold.iter().map(|(namespace, n)| (namespace, *n)))
            .filter(|(namespace, _)| caller.can_see(namespace))
        {
            *namespaces.entry(namespace.to_string()).or_default() += n;
        }
        let residency = everything.then(|| retriever.index().residency_view());
        let index = IndexStatsView {
            ready: readiness.is_ready(),
            model: retriever.model_key(),
            dimensions: retriever.index().dimensions(),
            memories: namespaces.values().sum(),
            namespaces,
            pending: store.pending_change_count(IndexStage::Vectors),
            pending_words: store.pending_change_count(IndexStage::Words),
            words_only: snapshot.words_only(),
            passages: snapshot.passages(),
            embedded: everything.then_some(indexer.embedded),
            cache_hits: everything.then_some(indexer.cache_hits),
            failed_batches: everything.then_some(indexer.failed_batches),
            startup_ms: indexer.startup_ms,
            residency,
        };
        Self {
            index,
            retrieval: everything.then(|| retriever.stats().view()),
            capture: everything.then(|| capture.stats()),
            embedding: everything.then(|| retriever.embedder().health().into()),
            models: everything.then(|| meter.view()),
            database: store
                .database()
                .filter(|_| everything)
                .map(|database| database.replication().view().into()),
            store: StoreStatsView {
                memories: stats.memories,
                versions: stats.versions,
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
                                versions: counts.versions,
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
                sync: stats.sync.map(SyncStatsView::from),
            },
        }
    }
}
