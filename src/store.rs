//! The memory store: the markdown files under `<data_dir>/repos/` and
//! `<data_dir>/users/`, and an in-memory view of them for fast reads.
//!
//! The files are the source of truth. Every namespace is loaded at start,
//! and changes made on disk afterwards (by hand, `git pull`, a sync tool)
//! are taken in live by [`watch`] and [`sync`]; a file that does not parse
//! is skipped with a warning, reported, and never written to (one that
//! stops parsing keeps its last good version in service). Writes and
//! deletes, Engram's own and those synced from disk, are serialized by one
//! writer lock; Engram's go to disk (atomically, durably) before the
//! in-memory view changes, so a reader never sees a memory that is not on
//! disk.

pub mod atomic;
pub mod confine;
mod load;
pub mod markdown;
mod sync;
pub mod watch;

pub use load::{Fingerprint, Fingerprints};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};

use crate::blocking;
use crate::config::Defaults;
use crate::memory::{
    Category, Memory, MemoryId, Namespace, RelatedEdge, RepoId, Scope, SessionId, Trigger, UserId,
};

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
    /// The pair a request names, an omitted owner standing for its default.
    pub fn or_defaults(repo: Option<RepoId>, user: Option<UserId>, defaults: &Defaults) -> Self {
        Self {
            repo: repo.unwrap_or_else(|| defaults.repo.clone()),
            user: user.unwrap_or_else(|| defaults.user.clone()),
        }
    }

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
    pub trigger: Trigger,
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

    /// The opaque text form clients pass back.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created_at.timestamp_micros(), self.id)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let (micros, id) = text.split_once('_')?;
        Some(Self {
            created_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
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

#[derive(Debug, Default)]
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
    view: RwLock<View>,
    /// Serializes writes and deletes: validation, file and view change
    /// happen as one step.
    writer: Mutex<()>,
    reports: RwLock<Reports>,
    sync: SyncStats,
    changes: ChangeLog,
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

/// Memories written or deleted that the index has not yet taken in.
///
/// Each change carries a sequence number, so acknowledging a change the
/// indexer processed never drops a newer change to the same memory. The
/// index takes a change in two steps (see [`IndexStage`]); each is
/// acknowledged on its own, the words first.
#[derive(Default)]
struct ChangeLog {
    pending: Mutex<PendingChanges>,
    /// Wakes the indexer; a notification sent while nobody waits is kept.
    notify: tokio::sync::Notify,
    /// Counts acknowledgements, for those waiting for the index to catch up.
    acknowledged: tokio::sync::watch::Sender<u64>,
    /// How many are waiting for vectors right now: the indexer embeds at
    /// once for them rather than gather a fuller batch.
    awaiting_vectors: AtomicUsize,
}

#[derive(Default)]
struct PendingChanges {
    /// Every change not fully applied (its vector not in): the latest
    /// sequence of each memory.
    by_id: HashMap<MemoryId, u64>,
    /// Those of them whose words are not in either, by sequence.
    words: BTreeMap<u64, MemoryId>,
    next_sequence: u64,
}

/// How far the index has taken a change in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexStage {
    /// Its words: the memory is found by the lexical search and passes the
    /// filters (a deleted one is gone from both searches).
    Words,
    /// Its vector too: fully applied.
    Vectors,
}

/// A change to one memory: look the id up to see whether it was written
/// (present) or deleted (absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PendingChange {
    pub id: MemoryId,
    sequence: u64,
}

impl ChangeLog {
    fn record(&self, ids: impl IntoIterator<Item = MemoryId>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            let sequence = pending.next_sequence;
            pending.next_sequence += 1;
            if let Some(older) = pending.by_id.insert(id, sequence) {
                pending.words.remove(&older);
            }
            pending.words.insert(sequence, id);
        }
        drop(pending);
        self.notify.notify_one();
    }
}

/// The in-memory view of every loaded memory, with reverse indexes.
#[derive(Default)]
struct View {
    by_id: HashMap<MemoryId, Arc<Memory>>,
    newest_first: BTreeSet<std::cmp::Reverse<Cursor>>,
    /// predecessor → the memories that supersede it.
    successors: HashMap<MemoryId, Vec<MemoryId>>,
    /// target → edges pointing at it (`id` = source).
    incoming: HashMap<MemoryId, Vec<RelatedEdge>>,
    /// Bumped by every write and delete in a namespace, so derived data
    /// (cached retrievals) can tell it is stale.
    generations: HashMap<Namespace, u64>,
}

impl View {
    fn insert(&mut self, memory: Arc<Memory>) {
        if let Some(predecessor) = memory.supersedes {
            self.successors
                .entry(predecessor)
                .or_default()
                .push(memory.id);
        }
        for edge in &memory.related {
            self.incoming.entry(edge.id).or_default().push(RelatedEdge {
                id: memory.id,
                relationship: edge.relationship,
            });
        }
        self.newest_first
            .insert(std::cmp::Reverse(Cursor::of(&memory)));
        *self
            .generations
            .entry(memory.namespace.clone())
            .or_default() += 1;
        self.by_id.insert(memory.id, memory);
    }

    fn remove(&mut self, id: MemoryId) -> Option<Arc<Memory>> {
        let memory = self.by_id.remove(&id)?;
        self.newest_first
            .remove(&std::cmp::Reverse(Cursor::of(&memory)));
        if let Some(predecessor) = memory.supersedes {
            remove_from_index(&mut self.successors, predecessor, |&s| s == id);
        }
        for edge in &memory.related {
            remove_from_index(&mut self.incoming, edge.id, |e| e.id == id);
        }
        *self
            .generations
            .entry(memory.namespace.clone())
            .or_default() += 1;
        Some(memory)
    }

    /// Every version of the chain `id` belongs to, oldest first.
    fn chain(&self, id: MemoryId) -> Vec<Arc<Memory>> {
        let Some(memory) = self.by_id.get(&id) else {
            return Vec::new();
        };
        let mut older = Vec::new();
        let mut seen = BTreeSet::from([id]);
        let mut cursor = memory.supersedes;
        while let Some(previous) = cursor
            .and_then(|p| self.by_id.get(&p))
            .filter(|previous| previous.namespace == memory.namespace)
        {
            if !seen.insert(previous.id) {
                break; // a hand-made cycle
            }
            older.push(previous.clone());
            cursor = previous.supersedes;
        }
        older.reverse();
        older.push(memory.clone());
        let mut current = id;
        while let Some(next) = self.successor(current) {
            if !seen.insert(next.id) {
                break;
            }
            older.push(next.clone());
            current = next.id;
        }
        older
    }

    /// The newest memory of `id`'s namespace that supersedes it, if any
    /// (chains should not fork, but hand-edited files can make them; a
    /// hand-edited `supersedes` from another namespace is never followed).
    fn successor(&self, id: MemoryId) -> Option<&Arc<Memory>> {
        let namespace = &self.by_id.get(&id)?.namespace;
        self.successors
            .get(&id)?
            .iter()
            .filter_map(|s| self.by_id.get(s))
            .filter(|successor| successor.namespace == *namespace)
            .max_by_key(|m| Cursor::of(m))
    }
}

fn remove_from_index<T>(
    index: &mut HashMap<MemoryId, Vec<T>>,
    key: MemoryId,
    matches: impl Fn(&T) -> bool,
) {
    if let Some(list) = index.get_mut(&key) {
        list.retain(|item| !matches(item));
        if list.is_empty() {
            index.remove(&key);
        }
    }
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
        let mut view = View::default();
        for memory in loaded.memories {
            view.insert(Arc::new(memory));
        }
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
        let changes = ChangeLog::default();
        // Everything loaded is new to the index.
        changes.record(view.by_id.keys().copied());
        let store = Self {
            inner: Arc::new(Inner {
                root: root.to_owned(),
                view: RwLock::new(view),
                writer: Mutex::new(()),
                reports: RwLock::new(reports),
                sync: SyncStats::default(),
                changes,
            }),
        };
        Ok((store, loaded.fingerprints))
    }

    /// The changes whose vectors are not in yet, oldest first.
    pub fn pending_changes(&self) -> Vec<PendingChange> {
        let pending = self.lock_changes();
        let mut changes: Vec<PendingChange> = pending
            .by_id
            .iter()
            .map(|(&id, &sequence)| PendingChange { id, sequence })
            .collect();
        changes.sort_by_key(|change| change.sequence);
        changes
    }

    /// The changes whose words are not in yet, oldest first.
    pub fn pending_words(&self) -> Vec<PendingChange> {
        self.lock_changes()
            .words
            .iter()
            .map(|(&sequence, &id)| PendingChange { id, sequence })
            .collect()
    }

    /// Whether `change` is still the latest change to its memory, not yet
    /// fully acknowledged: a newer one (a delete) makes it stale.
    pub fn is_latest(&self, change: &PendingChange) -> bool {
        self.lock_changes().by_id.get(&change.id) == Some(&change.sequence)
    }

    /// Numbers that change whenever a memory of `reach`'s repo or user
    /// namespace is written or deleted (0 for one it leaves out).
    pub fn generations(&self, reach: &Reach) -> (u64, u64) {
        let view = self.read();
        let of = |namespace: Option<Namespace>| {
            namespace.map_or(0, |namespace| {
                view.generations.get(&namespace).copied().unwrap_or(0)
            })
        };
        (
            of(reach.repo.clone().map(Namespace::Repo)),
            of(reach.user.clone().map(Namespace::User)),
        )
    }

    /// Whether a change the index has not taken in up to `stage` may touch
    /// one of `namespaces` (a deleted memory's namespace is unknown: it
    /// counts).
    pub fn has_pending_in(&self, namespaces: &[Namespace], stage: IndexStage) -> bool {
        let pending: Vec<MemoryId> = {
            let changes = self.lock_changes();
            match stage {
                IndexStage::Words => changes.words.values().copied().collect(),
                IndexStage::Vectors => changes.by_id.keys().copied().collect(),
            }
        };
        let view = self.read();
        pending.iter().any(|id| {
            view.by_id
                .get(id)
                .is_none_or(|memory| namespaces.contains(&memory.namespace))
        })
    }

    /// How many changes wait for the index: their vectors (`Vectors`), or
    /// their words too (`Words`).
    pub fn pending_change_count(&self, stage: IndexStage) -> usize {
        let pending = self.lock_changes();
        match stage {
            IndexStage::Words => pending.words.len(),
            IndexStage::Vectors => pending.by_id.len(),
        }
    }

    /// Marks the words of `done` as taken in; a memory changed again since
    /// stays pending.
    pub fn acknowledge_words(&self, done: &[PendingChange]) {
        let mut pending = self.lock_changes();
        for change in done {
            pending.words.remove(&change.sequence);
        }
        drop(pending);
        self.announce_acknowledgement();
    }

    /// Marks `done` as fully taken in (words and vector); a memory changed
    /// again since stays pending.
    pub fn acknowledge(&self, done: &[PendingChange]) {
        let mut pending = self.lock_changes();
        for change in done {
            if pending.by_id.get(&change.id) == Some(&change.sequence) {
                pending.by_id.remove(&change.id);
                pending.words.remove(&change.sequence);
            }
        }
        drop(pending);
        self.announce_acknowledgement();
    }

    /// Wakes those waiting for the index to catch up.
    fn announce_acknowledgement(&self) {
        self.inner
            .changes
            .acknowledged
            .send_modify(|count| *count += 1);
    }

    /// Waits until the index has taken in, up to `stage`, every change
    /// that may touch `namespaces`, for at most `limit`; false if it has
    /// not by then.
    pub async fn wait_until_indexed(
        &self,
        namespaces: &[Namespace],
        stage: IndexStage,
        limit: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut acknowledgements = self.inner.changes.acknowledged.subscribe();
        let _awaiting = (stage == IndexStage::Vectors).then(|| AwaitingVectors::new(self));
        loop {
            if !self.has_pending_in(namespaces, stage) {
                return true;
            }
            match tokio::time::timeout_at(deadline, acknowledgements.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// Whether someone waits for vectors now (see
    /// [`Self::wait_until_indexed`]).
    pub fn vectors_awaited(&self) -> bool {
        self.inner.changes.awaiting_vectors.load(Ordering::Acquire) > 0
    }

    /// Completes when a change has been recorded since the last call
    /// completed (at once if one was recorded meanwhile), or someone began
    /// to wait for vectors.
    pub async fn changed(&self) {
        self.inner.changes.notify.notified().await;
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
        let start = after.map_or(std::ops::Bound::Unbounded, |cursor| {
            std::ops::Bound::Excluded(std::cmp::Reverse(cursor))
        });
        let mut matching = view
            .newest_first
            .range((start, std::ops::Bound::Unbounded))
            .filter_map(|std::cmp::Reverse(cursor)| view.by_id.get(&cursor.id))
            .filter(|memory| {
                (filter.namespaces.is_empty() || filter.namespaces.contains(&memory.namespace))
                    && visible(&memory.namespace)
                    && (filter.all_versions || view.successor(memory.id).is_none())
                    && filter
                        .scope
                        .is_none_or(|scope| memory.namespace.scope() == scope)
                    && filter
                        .category
                        .is_none_or(|category| memory.category == category)
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
        for memory in view
            .by_id
            .values()
            .filter(|memory| visible(&memory.namespace))
        {
            let current = view.successor(memory.id).is_none();
            stats.versions += 1;
            let namespace = stats
                .by_namespace
                .entry(memory.namespace.to_string())
                .or_default();
            namespace.versions += 1;
            if current {
                stats.memories += 1;
                namespace.memories += 1;
                *namespace
                    .by_category
                    .entry(memory.category.as_str())
                    .or_default() += 1;
            }
        }
        stats
    }

    /// Validates and durably writes a new memory; its `related` edges may
    /// name memories of both namespaces of its pair.
    pub async fn create(&self, new: NewMemory) -> Result<Arc<Memory>, WriteError> {
        let reach = Reach::from(new.pair.clone());
        self.create_within(new, reach).await
    }

    /// [`Self::create`] for a caller that reaches only `reach` (within the
    /// pair): `related` may name only memories there, and one elsewhere is
    /// refused exactly like one that does not exist.
    pub async fn create_within(
        &self,
        new: NewMemory,
        reach: Reach,
    ) -> Result<Arc<Memory>, WriteError> {
        let store = self.clone();
        blocking::run(move || store.create_blocking(new, &reach)).await
    }

    /// Removes a memory's file. `None` when there is no such memory.
    pub async fn delete(&self, id: MemoryId) -> Result<Option<Arc<Memory>>, WriteError> {
        let store = self.clone();
        blocking::run(move || store.delete_blocking(id)).await
    }

    fn create_blocking(&self, new: NewMemory, reach: &Reach) -> Result<Arc<Memory>, WriteError> {
        let _writer = self.lock_writer();
        let namespace = new.pair.owner(new.scope);
        let version = self.check_links(&new, &namespace, reach)?;
        let now = Utc::now().trunc_subsecs(0);
        let memory = Arc::new(Memory {
            id: MemoryId::new(),
            version,
            namespace,
            category: new.category,
            created_at: now,
            updated_at: now,
            supersedes: new.supersedes,
            related: new.related,
            importance: new.importance,
            session_id: new.session_id,
            trigger: new.trigger,
            content: new.content,
        });
        let owner_field = match memory.namespace.scope() {
            Scope::Repo => "repo",
            Scope::User => "user",
        };
        let dir = self.namespace_dir(&memory.namespace, owner_field, true)?;
        let path = dir.join(file_name(memory.id));
        atomic::write(&path, markdown::render(&memory).as_bytes())
            .map_err(|source| Error::Write { path, source })?;
        self.write_view().insert(memory.clone());
        self.inner.changes.record([memory.id]);
        Ok(memory)
    }

    /// Checks `supersedes` and `related` against the current view and
    /// returns the new memory's version.
    fn check_links(
        &self,
        new: &NewMemory,
        namespace: &Namespace,
        reach: &Reach,
    ) -> Result<u32, WriteError> {
        let view = self.read();
        let version = match new.supersedes {
            None => 1,
            Some(predecessor_id) => {
                let invalid = |reason: String| WriteError::Invalid {
                    field: "supersedes".to_owned(),
                    reason,
                };
                // A memory of another namespace is as absent as no memory:
                // the answer must not tell that the id exists elsewhere.
                let predecessor = view
                    .by_id
                    .get(&predecessor_id)
                    .filter(|predecessor| predecessor.namespace == *namespace)
                    .ok_or_else(|| {
                        invalid(format!("names no memory of {namespace}: {predecessor_id}"))
                    })?;
                if let Some(successor) = view.successor(predecessor_id) {
                    return Err(WriteError::Conflict {
                        field: "supersedes".to_owned(),
                        reason: format!(
                            "names {predecessor_id}, which is already superseded by {}; supersede the head of the chain",
                            successor.id
                        ),
                    });
                }
                predecessor.version + 1
            }
        };
        for (index, edge) in new.related.iter().enumerate() {
            let visible = view.by_id.get(&edge.id).is_some_and(|target| {
                new.pair.contains(&target.namespace) && reach.contains(&target.namespace)
            });
            if !visible {
                return Err(WriteError::Invalid {
                    field: format!("related[{index}].id"),
                    reason: format!("names no memory of {reach}: {}", edge.id),
                });
            }
        }
        Ok(version)
    }

    fn delete_blocking(&self, id: MemoryId) -> Result<Option<Arc<Memory>>, WriteError> {
        let _writer = self.lock_writer();
        let Some(memory) = self.get(id) else {
            return Ok(None);
        };
        let dir = self.namespace_dir(&memory.namespace, "id", false)?;
        let path = dir.join(file_name(id));
        atomic::remove(&path).map_err(|source| Error::Remove { path, source })?;
        let removed = self.write_view().remove(id);
        self.inner.changes.record([id]);
        Ok(removed)
    }

    /// The directory of `namespace`'s files, refused when it (or its scope
    /// directory) is a link or not a directory: a write or removal there
    /// would land outside the data directory. `field` is the request field
    /// that chose the namespace.
    fn namespace_dir(
        &self,
        namespace: &Namespace,
        field: &str,
        create: bool,
    ) -> Result<PathBuf, WriteError> {
        confine::namespace_dir(&self.inner.root, namespace, create).map_err(|refusal| match refusal {
            confine::Refusal::Io { path, source } => Error::Read { path, source }.into(),
            refusal => {
                tracing::warn!(namespace = %namespace, reason = %refusal, "refused to write outside the data directory");
                WriteError::Conflict {
                    field: field.to_owned(),
                    reason: format!("names {namespace}, which cannot be written: {refusal}"),
                }
            }
        })
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

    fn lock_changes(&self) -> std::sync::MutexGuard<'_, PendingChanges> {
        self.inner
            .changes
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts a wait for vectors while it lives, and wakes the indexer when it
/// begins, so that it stops gathering.
struct AwaitingVectors<'a>(&'a ChangeLog);

impl<'a> AwaitingVectors<'a> {
    fn new(store: &'a Store) -> Self {
        let changes = &store.inner.changes;
        changes.awaiting_vectors.fetch_add(1, Ordering::AcqRel);
        changes.notify.notify_one();
        Self(changes)
    }
}

impl Drop for AwaitingVectors<'_> {
    fn drop(&mut self) {
        self.0.awaiting_vectors.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The file name of a memory: `<id>.md`.
fn file_name(id: MemoryId) -> String {
    format!("{id}.md")
}
