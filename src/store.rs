//! The memory store: the markdown files under `<data_dir>/repos/` and
//! `<data_dir>/users/` (or, with `store.backend: postgres`, a database that
//! replicas share: [`postgres`]), and an in-memory view of them for fast
//! reads. Only the durable layer differs between the two
//! (`store::durable`); the checks, the view and the changes for the index
//! are one implementation.
//!
//! In files mode the files are the source of truth. Every namespace is loaded at start,
//! and changes made on disk afterwards (by hand, `git pull`, a sync tool)
//! are taken in live by [`watch`] and [`sync`]; a file that does not parse
//! is skipped with a warning, reported, and never written to (one that
//! stops parsing keeps its last good version in service). Writes and
//! deletes, Engram's own and those synced from disk, are serialized by one
//! writer lock; Engram's go to disk (atomically, durably) before the
//! in-memory view changes, so a reader never sees a memory that is not on
//! disk.

pub mod atomic;
mod changes;
pub mod confine;
pub mod consolidations;
mod durable;
mod import;
pub mod lifecycle;
mod links;
mod load;
pub mod markdown;
pub mod postgres;
mod retention;
mod sync;
mod view;
pub mod watch;
mod write;

pub use changes::{IndexStage, PendingChange};
pub use import::Imported;
pub use lifecycle::InPlace;
pub use load::{Fingerprint, Fingerprints};
pub use retention::{COUNTING_SINCE_FILE, counting_uses_since};

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use chrono::{DateTime, Utc};

use crate::memory::{
    Anchor, Category, CommitId, Confidence, Memory, MemoryId, Namespace, Origin, RelatedEdge,
    RepoId, Scope, SessionId, UserId, Validity,
};
use changes::ChangeLog;
use durable::Durable;
use view::View;

/// The longest list of `related` edges a new memory may carry.
pub const MAX_RELATED: usize = 64;

/// A store failure that is nobody's fault but the disk's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error("writing {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("removing {path}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("watching {path} for changes")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
    #[error("the PostgreSQL store")]
    Database(#[from] postgres::Error),
}

/// Why a new memory was refused.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The request names something that does not exist or does not fit.
    #[error("`{field}` {reason}")]
    Invalid { field: String, reason: String },
    /// The request is valid but clashes with the current state.
    #[error("`{field}` {reason}")]
    Conflict { field: String, reason: String },
    /// A memory with this id is written already ([`Store::create_once`]).
    #[error("a memory with the id {0} is written already")]
    Exists(MemoryId),
    #[error(transparent)]
    Store(#[from] Error),
}

/// The (repo, user) pair a request acts for: it sees exactly `repo/<repo>`
/// and `user/<user>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamespacePair {
    pub repo: RepoId,
    pub user: UserId,
}

impl NamespacePair {
    pub fn owner(&self, scope: Scope) -> Namespace {
        Namespace::for_scope(scope, &self.repo, &self.user)
    }

    /// `repo/<repo>` and `user/<user>`: all the pair may see.
    pub fn namespaces(&self) -> [Namespace; 2] {
        [self.owner(Scope::Repo), self.owner(Scope::User)]
    }

    pub fn contains(&self, namespace: &Namespace) -> bool {
        match namespace {
            Namespace::Repo(repo) => *repo == self.repo,
            Namespace::User(user) => *user == self.user,
        }
    }
}

/// The namespaces a read or write reaches: both of a (repo, user) pair, or
/// one of them when the request left the other owner out and the caller's
/// key does not hold that owner's default. Never empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reach {
    repo: Option<RepoId>,
    user: Option<UserId>,
}

impl Reach {
    /// `None` when both are left out: an empty reach would read as "no
    /// restriction" to a listing.
    pub fn new(repo: Option<RepoId>, user: Option<UserId>) -> Option<Self> {
        (repo.is_some() || user.is_some()).then_some(Self { repo, user })
    }

    pub fn repo(&self) -> Option<&RepoId> {
        self.repo.as_ref()
    }

    pub fn user(&self) -> Option<&UserId> {
        self.user.as_ref()
    }

    /// The namespaces reached: `repo/<repo>`, `user/<user>` or both.
    pub fn namespaces(&self) -> Vec<Namespace> {
        let repo = self.repo.clone().map(Namespace::Repo);
        let user = self.user.clone().map(Namespace::User);
        repo.into_iter().chain(user).collect()
    }

    pub fn contains(&self, namespace: &Namespace) -> bool {
        match namespace {
            Namespace::Repo(repo) => self.repo.as_ref() == Some(repo),
            Namespace::User(user) => self.user.as_ref() == Some(user),
        }
    }
}

impl From<NamespacePair> for Reach {
    fn from(pair: NamespacePair) -> Self {
        Self {
            repo: Some(pair.repo),
            user: Some(pair.user),
        }
    }
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.namespaces().iter().map(ToString::to_string).collect();
        f.write_str(&names.join(" or "))
    }
}

/// A memory to be written; the store assigns id, version and timestamps.
#[derive(Clone, Debug)]
pub struct NewMemory {
    pub pair: NamespacePair,
    pub scope: Scope,
    pub category: Category,
    /// Already checked with [`crate::memory::parse_content`].
    pub content: String,
    pub importance: Option<f64>,
    pub supersedes: Option<MemoryId>,
    pub related: Vec<RelatedEdge>,
    pub session_id: Option<SessionId>,
    pub trigger: Origin,
    pub anchors: Vec<Anchor>,
    pub commit: Option<CommitId>,
    /// When its fact was said or became true, if not now.
    pub observed_at: Option<DateTime<Utc>>,
    /// `provisional` for what the classifier wrote; `confirmed` otherwise.
    pub confidence: Confidence,
}

/// Which memories a listing returns; every field narrows it.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// Only these namespaces; empty means every namespace.
    pub namespaces: Vec<Namespace>,
    pub scope: Option<Scope>,
    pub category: Option<Category>,
    /// A case-insensitive substring of the content.
    pub text: Option<String>,
    /// Superseded versions too; by default only current memories (the
    /// heads of their chains) are listed.
    pub all_versions: bool,
    pub validity: Option<Validity>,
    pub confidence: Option<Confidence>,
    pub needs_review: Option<bool>,
    /// Archived memories only; by default they are left out.
    pub archived: bool,
    /// Only memories with anchors (`true`) or without (`false`).
    pub anchored: Option<bool>,
}

impl ListFilter {
    /// Whether `memory`'s lifecycle (and anchors) pass the filter.
    fn admits_lifecycle(&self, memory: &Memory) -> bool {
        let lifecycle = &memory.lifecycle;
        lifecycle.archived == self.archived
            && self
                .validity
                .is_none_or(|validity| lifecycle.validity == validity)
            && self
                .confidence
                .is_none_or(|confidence| lifecycle.confidence == confidence)
            && self
                .needs_review
                .is_none_or(|needs_review| lifecycle.needs_review == needs_review)
            && self
                .anchored
                .is_none_or(|anchored| memory.anchors.is_empty() != anchored)
    }
}

/// A position in the newest-first order: the listing resumes after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    created_at: DateTime<Utc>,
    id: MemoryId,
}

impl Cursor {
    fn of(memory: &Memory) -> Self {
        Self {
            created_at: memory.created_at,
            id: memory.id,
        }
    }

    /// The opaque text form clients pass back: the time to the
    /// nanosecond (an import keeps its lines' times as written; cut to
    /// the microsecond, a page ended among memories stamped within one
    /// microsecond skipped the rest of them), then the id.
    pub fn encode(&self) -> String {
        format!(
            "{}.{:09}_{}",
            self.created_at.timestamp(),
            self.created_at.timestamp_subsec_nanos(),
            self.id
        )
    }

    pub fn decode(text: &str) -> Option<Self> {
        let (at, id) = text.split_once('_')?;
        let (seconds, nanos) = at.split_once('.')?;
        Some(Self {
            created_at: DateTime::from_timestamp(seconds.parse().ok()?, nanos.parse().ok()?)?,
            id: id.parse().ok()?,
        })
    }
}

/// One page of a listing.
#[derive(Debug)]
pub struct Page {
    pub memories: Vec<Arc<Memory>>,
    pub next: Option<Cursor>,
}

/// A memory's links in both directions, to memories that exist.
#[derive(Debug, Default)]
pub struct Edges {
    pub outgoing: Vec<RelatedEdge>,
    /// Edges pointing at the memory: `id` is the memory they come from.
    pub incoming: Vec<RelatedEdge>,
}

/// An entry of the data directory the store could not use as it is: a
/// file that does not parse (at start, or since an edit), a link, a stray
/// file, or a link of a memory in service that is never followed.
#[derive(Clone, Debug, PartialEq)]
pub struct SkippedFile {
    /// Relative to the data directory.
    pub path: String,
    pub reason: String,
    /// The namespace of its directory, when the directory name is valid.
    pub namespace: Option<Namespace>,
}

/// Counts for `/stats`.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Current memories: superseded versions are not counted, as a
    /// listing leaves them out.
    pub memories: usize,
    /// Every version held, superseded ones included.
    pub versions: usize,
    pub by_namespace: BTreeMap<String, NamespaceStats>,
    pub skipped: Vec<SkippedFile>,
    /// What the live sync has done; `None` for a caller that does not see
    /// every namespace (its counters span them all).
    pub sync: Option<SyncView>,
}

#[derive(Clone, Debug, Default)]
pub struct NamespaceStats {
    /// Current memories, as [`StoreStats::memories`].
    pub memories: usize,
    pub versions: usize,
    pub by_category: BTreeMap<&'static str, usize>,
}

/// A cheap, clonable handle on the store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    durable: Durable,
    view: RwLock<View>,
    /// Serializes writes and deletes: validation, file and view change
    /// happen as one step.
    writer: Mutex<()>,
    reports: RwLock<Reports>,
    sync: SyncStats,
    changes: ChangeLog,
    /// Each namespace's counts for `/stats`, with the generation they
    /// were counted at: a namespace nobody wrote to since is not counted
    /// again.
    tallies: Mutex<HashMap<Namespace, (u64, NamespaceStats)>>,
}

/// What the store could not use, as of the last load or sync: one list
/// for both, so `/stats` and the UI show the same thing either way.
#[derive(Default)]
struct Reports {
    /// Entries of the data directory, by path relative to it: files that
    /// do not parse, links, stray files and directories.
    files: BTreeMap<String, SkippedFile>,
    /// The never-followed links of the memories in service, worked out
    /// again from the view whenever the view changes on disk's account.
    links: Vec<SkippedFile>,
}

impl Reports {
    fn all(&self) -> impl Iterator<Item = &SkippedFile> {
        self.files.values().chain(&self.links)
    }

    fn relink(&mut self, view: &View) {
        let owner = |id| view.by_id.get(&id).map(|memory| &memory.namespace);
        let mut links: Vec<SkippedFile> = view
            .by_id
            .values()
            .flat_map(|memory| load::unfollowed_links(memory, owner))
            .collect();
        links.sort_by(|a, b| a.path.cmp(&b.path));
        self.links = links;
    }
}

/// Counters of the live sync.
#[derive(Default)]
struct SyncStats {
    watching: AtomicBool,
    passes: AtomicU64,
    files_read: AtomicU64,
    unchanged: AtomicU64,
    applied: AtomicU64,
}

/// A snapshot of the live sync's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct SyncView {
    /// Whether the data directory is watched (`store.watch`, and the
    /// watcher could start).
    pub watching: bool,
    /// Reconciliation passes run since start.
    pub passes: u64,
    /// Memory files read by them.
    pub files_read: u64,
    /// Files read that matched the memory in service (Engram's own writes,
    /// a `touch`): nothing to do.
    pub unchanged: u64,
    /// Memories added, changed or removed on disk and taken in.
    pub applied: u64,
}

/// Whether a `related` edge may join memories of these namespaces: of the
/// same one, or of a repo and a user (a request acts for a repo and a user,
/// and may link the memories of both). Edges between two repos or two
/// users only come from hand edits, and are never followed.
pub fn may_relate(one: &Namespace, other: &Namespace) -> bool {
    one == other || one.scope() != other.scope()
}

impl Store {
    /// Loads every namespace under `root`, skipping (and counting) files
    /// that do not parse. Blocking: call it before serving, or on a blocking
    /// thread. Returns the store with the fingerprint of every file it
    /// loaded, for the live sync to start from ([`watch::spawn`]).
    pub fn open(root: &Path) -> Result<(Self, Fingerprints), Error> {
        let loaded = load::load(root)?;
        let view = View::of(loaded.memories);
        let mut reports = Reports::default();
        reports.relink(&view);
        for file in loaded.skipped {
            reports.files.insert(file.path.clone(), file);
        }
        for file in reports.all() {
            tracing::warn!(file.path = %file.path, reason = %file.reason, "skipped a file in the data directory");
        }
        tracing::info!(
            memories = view.by_id.len(),
            files.skipped = reports.files.len() + reports.links.len(),
            data_dir = %root.display(),
            "memory store loaded"
        );
        let store = Self::with(root, Durable::Files, view, reports);
        Ok((store, loaded.fingerprints))
    }

    /// A store over `view`, its memories all new to the index.
    fn with(root: &Path, durable: Durable, view: View, reports: Reports) -> Self {
        let changes = ChangeLog::default();
        // Everything loaded is new to the index: newest first, so that
        // the latest memories are found by meaning first, and so that the
        // backlog's words and vectors go in the same order (each vector
        // batch then takes its memories off the front of the words-only
        // side, not from every chunk of it).
        changes.record(view.newest_first.iter().map(|newest| newest.0.id));
        Self {
            inner: Arc::new(Inner {
                root: root.to_owned(),
                durable,
                view: RwLock::new(view),
                writer: Mutex::new(()),
                reports: RwLock::new(reports),
                sync: SyncStats::default(),
                changes,
                tallies: Mutex::default(),
            }),
        }
    }

    pub fn get(&self, id: MemoryId) -> Option<Arc<Memory>> {
        self.read().by_id.get(&id).cloned()
    }

    /// Memories matching `filter` in namespaces `visible` admits, newest
    /// first, `limit` at most, after `after`.
    pub fn list(
        &self,
        filter: &ListFilter,
        limit: usize,
        after: Option<Cursor>,
        visible: impl Fn(&Namespace) -> bool,
    ) -> Page {
        let text = filter.text.as_deref().map(str::to_lowercase);
        let view = self.read();
        let mut matching = view
            .newest_after(&filter.namespaces, after)
            .filter(|memory| {
                visible(&memory.namespace)
                    && (filter.all_versions || view.successor(memory.id).is_none())
                    && filter
                        .scope
                        .is_none_or(|scope| memory.namespace.scope() == scope)
                    && filter
                        .category
                        .is_none_or(|category| memory.category == category)
                    && filter.admits_lifecycle(memory)
                    && text
                        .as_deref()
                        .is_none_or(|text| memory.content.to_lowercase().contains(text))
            });
        let memories: Vec<_> = matching.by_ref().take(limit).cloned().collect();
        let next = match (memories.last(), matching.next()) {
            (Some(last), Some(_)) => Some(Cursor::of(last)),
            _ => None,
        };
        Page { memories, next }
    }

    /// Every version of the chain `id` belongs to, oldest first.
    pub fn chain(&self, id: MemoryId) -> Vec<Arc<Memory>> {
        self.read().chain(id)
    }

    /// Whether `id` exists and nothing supersedes it.
    pub fn is_current(&self, id: MemoryId) -> bool {
        let view = self.read();
        view.by_id.contains_key(&id) && view.successor(id).is_none()
    }

    /// The newest version of the chain `id` belongs to (itself if current).
    pub fn head_of(&self, id: MemoryId) -> Option<Arc<Memory>> {
        let view = self.read();
        let memory = view.by_id.get(&id)?;
        // Most memories are never superseded, and a search asks for the
        // head of every match: only a memory with a successor needs the
        // walk (which also settles hand-made cycles).
        if view.successor(id).is_none() {
            return Some(memory.clone());
        }
        view.chain(id).pop()
    }

    /// The version of `id`'s chain that stood at `at`: the newest one
    /// observed by then ([`Memory::observed`]); none when the chain began
    /// after it.
    pub fn version_at(&self, id: MemoryId, at: DateTime<Utc>) -> Option<Arc<Memory>> {
        let view = self.read();
        let memory = view.by_id.get(&id)?;
        if view.successor(id).is_none() && memory.observed() <= at {
            return Some(memory.clone());
        }
        view.chain(id)
            .into_iter()
            .rev()
            .find(|version| version.observed() <= at)
    }

    /// `id`'s edges in both directions, leaving out memories that are gone
    /// and hand-edited edges the API would not have written (see
    /// [`may_relate`]).
    pub fn edges(&self, id: MemoryId) -> Edges {
        self.edges_within(id, |_| true)
    }

    /// [`Self::edges`], leaving out memories of namespaces `visible` does
    /// not admit too: for a reader, an edge to a memory it cannot see is
    /// as absent as one to a memory that is gone.
    pub fn edges_within(&self, id: MemoryId, visible: impl Fn(&Namespace) -> bool) -> Edges {
        let view = self.read();
        let Some(memory) = view.by_id.get(&id) else {
            return Edges::default();
        };
        let exists = |edge: &&RelatedEdge| {
            view.by_id.get(&edge.id).is_some_and(|other| {
                may_relate(&memory.namespace, &other.namespace) && visible(&other.namespace)
            })
        };
        Edges {
            outgoing: memory.related.iter().filter(exists).cloned().collect(),
            incoming: view
                .incoming
                .get(&id)
                .map(|edges| edges.iter().filter(exists).cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// Counts of the memories and skipped files in namespaces `visible`
    /// admits (a skipped directory with an invalid name belongs to none,
    /// and is counted only when `visible` admits every namespace).
    pub fn stats(&self, visible: impl Fn(&Namespace) -> bool, everything: bool) -> StoreStats {
        let view = self.read();
        let mut stats = StoreStats {
            skipped: self
                .read_reports()
                .all()
                .filter(|file| file.namespace.as_ref().map_or(everything, &visible))
                .cloned()
                .collect(),
            sync: everything.then(|| self.sync_view()),
            ..StoreStats::default()
        };
        let mut tallies = self
            .inner
            .tallies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        tallies.retain(|namespace, _| view.members.contains_key(namespace));
        for namespace in view.members.keys().filter(|namespace| visible(namespace)) {
            let generation = view.generations.get(namespace).copied().unwrap_or(0);
            let tally = match tallies.get(namespace) {
                Some((counted_at, tally)) if *counted_at == generation => tally.clone(),
                _ => {
                    let tally = view.tally(namespace);
                    tallies.insert(namespace.clone(), (generation, tally.clone()));
                    tally
                }
            };
            stats.versions += tally.versions;
            stats.memories += tally.memories;
            stats.by_namespace.insert(namespace.to_string(), tally);
        }
        stats
    }

    // A poisoned lock means a panic mid-update of the view; the view is
    // only changed after the file operation succeeded, with infallible
    // map operations, so its contents are still consistent.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, View> {
        self.inner
            .view
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_view(&self) -> std::sync::RwLockWriteGuard<'_, View> {
        self.inner
            .view
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read_reports(&self) -> std::sync::RwLockReadGuard<'_, Reports> {
        self.inner
            .reports
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_reports(&self) -> std::sync::RwLockWriteGuard<'_, Reports> {
        self.inner
            .reports
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live sync's counters.
    pub fn sync_view(&self) -> SyncView {
        let sync = &self.inner.sync;
        SyncView {
            watching: sync.watching.load(Ordering::Relaxed),
            passes: sync.passes.load(Ordering::Relaxed),
            files_read: sync.files_read.load(Ordering::Relaxed),
            unchanged: sync.unchanged.load(Ordering::Relaxed),
            applied: sync.applied.load(Ordering::Relaxed),
        }
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The file name of a memory: `<id>.md`.
fn file_name(id: MemoryId) -> String {
    format!("{id}.md")
}
