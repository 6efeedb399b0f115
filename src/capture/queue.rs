//! The durable capture queue: every accepted trigger is in `<data_dir>/queue/`
//! before its `202`, and leaves only once its memories are written (or it
//! is moved to `queue/failed/` with its error).
//!
//! Accepts are appended to the queue's log (`queue/<sequence>.log`, see
//! [`log`]), where the accepts that arrive together share one write and one
//! sync. A trigger may also be a file of its own, `queue/<id>.json`: as an
//! earlier version of the queue left it, or moved out of an old segment by
//! the log's compaction. Both are read at start.
//!
//! The in-memory state mirrors the directory: triggers waiting, in flight,
//! or waiting out a retry backoff. Turn triggers coalesce (a newer one of
//! the same session replaces a waiting older one) and are dropped when the
//! queue is full. Compactions are never dropped, but they are bounded: one
//! that would take a session's or the whole queue's files past their byte
//! budget is refused ([`Error::OverBudget`]) for the client to send again
//! later, and no trigger is written while the disk is below its floor.
//!
//! Symbolic links under `queue/` are never followed: a link in place of a
//! log segment, of a trigger file or of `queue/failed/` is left alone (not read, not removed,
//! nothing written through it) and counted.

mod log;
pub mod summary;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::disk::{self, LowSpace};
use crate::memory::{RepoId, SessionId, UserId};
use crate::store::{NamespacePair, atomic};
use crate::window::Speaker;
use log::{Log, SyncFile};
use summary::TriggerSummary;

/// What fired a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Turn,
    Compaction,
}

/// One line of a stored window (tool traffic is never stored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLine {
    pub role: String,
    pub text: String,
}

impl StoredLine {
    pub fn speaker(&self) -> Speaker {
        if self.role == "user" {
            Speaker::User
        } else {
            Speaker::Assistant
        }
    }
}

/// An accepted capture trigger, as the queue stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub id: Uuid,
    pub kind: Kind,
    pub session_id: SessionId,
    pub turn_id: Option<String>,
    pub repo: RepoId,
    pub user: UserId,
    pub window: Vec<StoredLine>,
    pub accepted_at: DateTime<Utc>,
    /// Classifier attempts that failed so far.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl Trigger {
    pub fn pair(&self) -> NamespacePair {
        NamespacePair {
            repo: self.repo.clone(),
            user: self.user.clone(),
        }
    }
}

/// Where a queued trigger stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// Waiting for its turn (its pair busy, or every slot taken).
    Waiting,
    /// Waiting out the backoff after a failed attempt.
    BackingOff,
    /// Being classified now.
    InFlight,
}

/// A trigger in the queue, and where it stands.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct QueuedTrigger {
    #[serde(flatten)]
    pub trigger: TriggerSummary,
    pub state: QueueState,
}

/// What became of a trigger handed to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnqueueStatus {
    /// Stored; it will be processed.
    Queued,
    /// Stored in place of a waiting older turn of the same session (whose
    /// window this one's contains).
    Coalesced,
    /// The queue was full; this turn will not be processed.
    Dropped,
}

/// How long a client refused for the queue's byte budget should wait
/// before sending again: the classifier needs a while to work the backlog
/// down.
pub const OVER_BUDGET_RETRY_AFTER_S: u64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing to the queue in {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("reading the queue directory {path}")]
    Read { path: PathBuf, source: io::Error },
    /// Taking the trigger would pass a byte budget; it is not stored.
    #[error(
        "the capture queue holds {queued_bytes} bytes {whose}, and this {trigger_bytes}-byte trigger would pass its budget of {budget_bytes} bytes (`{key}`); send it again once the backlog is processed"
    )]
    OverBudget {
        whose: &'static str,
        key: &'static str,
        queued_bytes: u64,
        trigger_bytes: u64,
        budget_bytes: u64,
    },
    /// The trigger alone is larger than a session's whole budget, so no
    /// wait would let it in.
    #[error(
        "the trigger takes {trigger_bytes} bytes, more than a session's whole queue budget of {budget_bytes} bytes (`capture.session_queue_bytes`)"
    )]
    TooLarge {
        trigger_bytes: u64,
        budget_bytes: u64,
    },
    #[error(transparent)]
    LowSpace(#[from] LowSpace),
    /// No trigger with this id is in `queue/failed/` (for this caller).
    #[error("no failed trigger has the id {0}")]
    NoSuchFailed(Uuid),
    /// The trigger is queued or in flight already.
    #[error("the trigger {0} is queued already")]
    AlreadyQueued(Uuid),
}

/// The queue's bounds, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Turn triggers waiting beyond this many are dropped.
    pub capacity: usize,
    /// The most bytes of stored triggers one session may have queued.
    pub session_bytes: u64,
    /// The most bytes of stored triggers the whole queue may hold.
    pub total_bytes: u64,
    /// No trigger is written while the disk has less free space than this.
    pub min_free_disk_bytes: u64,
}

impl Limits {
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            capacity: config.capture.queue_capacity,
            session_bytes: config.capture.session_queue_bytes,
            total_bytes: config.capture.queue_bytes,
            min_free_disk_bytes: config.limits.min_free_disk_bytes,
        }
    }
}

/// The queue: its directory and the state of every trigger in it.
pub struct Queue {
    dir: PathBuf,
    limits: Limits,
    state: Mutex<State>,
    /// Where accepts are made durable together (group commit), outside
    /// `state`'s lock.
    log: Arc<Log>,
    /// Symbolic links found in place of a trigger file or of `failed/`.
    skipped_symlinks: AtomicU64,
}

/// Whose files a byte budget counts: one agent session of one pair.
type SessionKey = (NamespacePair, SessionId);

#[derive(Default)]
struct State {
    /// Triggers not in flight, oldest first (UUID v7 ids sort by time).
    waiting: BTreeMap<Uuid, Waiting>,
    /// Accepted triggers whose files are not durable yet: counted against
    /// the capacity and the budgets, never handed to the worker.
    pending: HashMap<Uuid, (SessionKey, Kind)>,
    /// The last acceptance number given (see `Waiting::accepted`).
    accepted: u64,
    /// Triggers being processed, as summaries (the worker holds the rest).
    in_flight: HashMap<Uuid, TriggerSummary>,
    /// Pairs with a trigger in flight: one at a time per pair.
    busy: HashSet<NamespacePair>,
    /// The file size of every trigger waiting or in flight.
    sizes: HashMap<Uuid, (SessionKey, u64)>,
    bytes_by_session: HashMap<SessionKey, u64>,
    total_bytes: u64,
}

impl State {
    fn account(&mut self, trigger: &Trigger, bytes: u64) {
        self.unaccount(trigger.id);
        let key = session_key(trigger);
        *self.bytes_by_session.entry(key.clone()).or_default() += bytes;
        self.total_bytes += bytes;
        self.sizes.insert(trigger.id, (key, bytes));
    }

    fn unaccount(&mut self, id: Uuid) {
        let Some((key, bytes)) = self.sizes.remove(&id) else {
            return;
        };
        self.total_bytes -= bytes;
        if let Some(session) = self.bytes_by_session.get_mut(&key) {
            *session -= bytes;
            if *session == 0 {
                self.bytes_by_session.remove(&key);
            }
        }
    }

    /// Takes in a trigger found at start, waiting and ready.
    fn resume(&mut self, trigger: Trigger, bytes: u64) {
        self.account(&trigger, bytes);
        self.waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted: 0,
                not_before: None,
            },
        );
    }

    fn session_bytes(&self, trigger: &Trigger) -> u64 {
        self.bytes_by_session
            .get(&session_key(trigger))
            .copied()
            .unwrap_or(0)
    }
}

fn session_key(trigger: &Trigger) -> SessionKey {
    (trigger.pair(), trigger.session_id.clone())
}

/// Whether `trigger` is of the session `key`, compared in place: the scans
/// under the queue's lock clone nothing.
fn is_of_session(trigger: &Trigger, key: &SessionKey) -> bool {
    let ((pair, session), t) = (key, trigger);
    t.session_id == *session && t.repo == pair.repo && t.user == pair.user
}

#[derive(Debug, PartialEq, Eq)]
enum FailedDir {
    Ready,
    Missing,
    Link,
    Other,
}

struct Waiting {
    trigger: Trigger,
    /// In which order the queue took triggers in: a turn accepted later
    /// replaces an earlier one of its session, whichever file is durable
    /// first. Triggers found at start or back from a retry count as 0.
    accepted: u64,
    /// Not before this instant (a retry's backoff).
    not_before: Option<Instant>,
}

impl Queue {
    /// Opens `dir`, taking in every trigger left there (after a crash or a
    /// restart). A file that does not parse is moved to `failed/`; a
    /// symbolic link is left alone and counted.
    pub fn open(dir: &Path, limits: Limits) -> Result<Self, Error> {
        Self::open_with(dir, limits, std::sync::Arc::new(File::sync_data))
    }

    /// [`Queue::open`] with the log's rounds made durable by `sync_file`
    /// (a fault, in tests).
    fn open_with(dir: &Path, limits: Limits, sync_file: SyncFile) -> Result<Self, Error> {
        fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_owned(),
            source,
        })?;
        let (log, logged) = Log::open(dir, sync_file).map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        let queue = Self {
            dir: dir.to_owned(),
            limits,
            state: Mutex::new(State::default()),
            log: Arc::new(log),
            skipped_symlinks: AtomicU64::new(0),
        };
        match queue.failed_dir_state() {
            FailedDir::Missing => {
                fs::create_dir(queue.failed_dir()).map_err(|source| Error::Write {
                    path: queue.failed_dir(),
                    source,
                })?;
            }
            FailedDir::Link => queue.skip_symlink(&queue.failed_dir()),
            FailedDir::Ready | FailedDir::Other => {}
        }
        let entries = fs::read_dir(dir).map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        let mut state = queue.lock();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            // `DirEntry::file_type` does not follow links.
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_symlink() {
                if name != "failed" {
                    queue.skip_symlink(&path);
                }
                continue;
            }
            if !file_type.is_file() {
                continue;
            }
            if name.starts_with(atomic::TEMP_PREFIX) {
                let _ = fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let read = read_no_follow(&path);
            if read.as_ref().is_err_and(|err| {
                err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
            }) {
                // Swapped for a link since the listing.
                queue.skip_symlink(&path);
                continue;
            }
            match read.map_err(|err| err.to_string()).and_then(|bytes| {
                let trigger =
                    serde_json::from_slice::<Trigger>(&bytes).map_err(|err| err.to_string())?;
                Ok((trigger, bytes.len() as u64))
            }) {
                Ok((trigger, bytes)) if name == file_name(trigger.id) => {
                    state.resume(trigger, bytes);
                }
                Ok(_) | Err(_) => {
                    if queue.failed_dir_state() == FailedDir::Ready {
                        tracing::warn!(file.path = %path.display(), "moving an unreadable trigger to queue/failed/");
                        let _ = fs::rename(&path, queue.failed_dir().join(&name));
                    }
                }
            }
        }
        for (trigger, bytes) in logged {
            queue.take_in_logged(&mut state, trigger, bytes);
        }
        if !state.waiting.is_empty() {
            tracing::info!(
                triggers = state.waiting.len(),
                queue.bytes = state.total_bytes,
                "resuming queued capture triggers"
            );
        }
        drop(state);
        Ok(queue)
    }

    /// Takes in a trigger the log held at start. Should its own file hold
    /// it too (a crash while it moved), the copy with more attempts wins,
    /// the file on a tie (the log's compaction writes equal copies).
    fn take_in_logged(&self, state: &mut State, trigger: Trigger, bytes: u64) {
        if let Some(filed) = state.waiting.get(&trigger.id)
            && filed.trigger.attempts >= trigger.attempts
        {
            self.log.forget_later(trigger.id);
            return;
        }
        if state.waiting.contains_key(&trigger.id) {
            self.remove_file(trigger.id);
        }
        state.resume(trigger, bytes);
    }

    /// Stores `trigger` (or not) by the coalescing, capacity and budget
    /// rules, and returns once it is durable.
    ///
    /// Group commit: the decision is taken under the lock, the trigger is
    /// appended to the log outside it, the accepts that arrive together
    /// share one write and one sync (run on the blocking pool by the first
    /// of them; the others wait without a thread), and only then does the
    /// trigger become visible to the worker and replace an older turn of
    /// its session.
    ///
    /// Not to be dropped half-way: a future dropped between the log's sync
    /// and the bookkeeping after it would leave the trigger durable but
    /// unseen until a restart, and its reservation held. `Capture::enqueue`
    /// runs it on a task of its own for that reason.
    pub async fn enqueue(&self, trigger: Trigger) -> Result<EnqueueStatus, Error> {
        let json = to_json(&trigger);
        let Some(accepted) = self.reserve(&trigger, json.len() as u64)? else {
            return Ok(EnqueueStatus::Dropped);
        };
        // One `statvfs`: quick enough for an async worker.
        let stored = match disk::ensure_free_space(&self.dir, self.limits.min_free_disk_bytes) {
            Ok(()) => self
                .log
                .append_durably(trigger.id, &json)
                .await
                .map_err(|source| self.write_error(source)),
            Err(err) => Err(Error::from(err)),
        };
        let mut state = self.lock();
        state.pending.remove(&trigger.id);
        if let Err(err) = stored {
            // Not acknowledged, so not kept: a record a crash keeps anyway
            // is processed once more at the next start, which is harmless.
            state.unaccount(trigger.id);
            return Err(err);
        }
        let key = session_key(&trigger);
        let same_session = |waiting: &Waiting| {
            trigger.kind == Kind::Turn
                && waiting.trigger.kind == Kind::Turn
                && is_of_session(&waiting.trigger, &key)
        };
        if state
            .waiting
            .values()
            .any(|waiting| same_session(waiting) && waiting.accepted > accepted)
        {
            // A later turn of the session got there first: its window holds
            // this one's.
            state.unaccount(trigger.id);
            drop(state);
            self.log.forget_later(trigger.id);
            return Ok(EnqueueStatus::Coalesced);
        }
        let replaced: Vec<Uuid> = state
            .waiting
            .iter()
            .filter(|(_, waiting)| same_session(waiting))
            .map(|(id, _)| *id)
            .collect();
        for old in &replaced {
            state.waiting.remove(old);
            state.unaccount(*old);
        }
        state.waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted,
                not_before: None,
            },
        );
        drop(state);
        for old in &replaced {
            self.forget_replaced(*old);
        }
        Ok(if replaced.is_empty() {
            EnqueueStatus::Queued
        } else {
            EnqueueStatus::Coalesced
        })
    }

    /// Takes `trigger` into account as pending, or refuses it: `None` is a
    /// turn dropped for a full queue; a compaction past a budget is an error.
    fn reserve(&self, trigger: &Trigger, bytes: u64) -> Result<Option<u64>, Error> {
        let mut state = self.lock();
        let key = session_key(trigger);
        let replaces = trigger.kind == Kind::Turn
            && (state.waiting.values().any(|waiting| {
                waiting.trigger.kind == Kind::Turn && is_of_session(&waiting.trigger, &key)
            }) || state
                .pending
                .values()
                .any(|(pending, kind)| *kind == Kind::Turn && *pending == key));
        if !replaces
            && trigger.kind == Kind::Turn
            && state.waiting.len() + state.pending.len() >= self.limits.capacity
        {
            return Ok(None);
        }
        if trigger.kind == Kind::Compaction {
            self.check_budgets(&state, trigger, bytes)?;
        }
        state.account(trigger, bytes);
        state.pending.insert(trigger.id, (key, trigger.kind));
        state.accepted += 1;
        Ok(Some(state.accepted))
    }

    /// Appends the trigger's JSON to the log and waits until it is durable.
    fn append(&self, id: Uuid, json: &[u8]) -> Result<(), Error> {
        self.log
            .append(id, json)
            .map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: io::Error) -> Error {
        Error::Write {
            path: self.dir.clone(),
            source,
        }
    }

    /// Forgets a trigger another one stands in for, without waiting for a
    /// sync: should a crash bring it back, it is processed once more and
    /// its memories are found already written.
    fn forget_replaced(&self, id: Uuid) {
        self.log.forget_later(id);
        let path = self.dir.join(file_name(id));
        if let Err(err) = fs::remove_file(&path)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(file.path = %path.display(), error = %err, "could not remove a coalesced trigger");
        }
    }

    /// Log rounds written and synced so far (one per group).
    pub fn sync_rounds(&self) -> u64 {
        self.log.syncs()
    }

    /// A compaction may not take its session's files, or the queue's, past
    /// their budget.
    fn check_budgets(
        &self,
        state: &State,
        trigger: &Trigger,
        trigger_bytes: u64,
    ) -> Result<(), Error> {
        let limits = self.limits;
        if trigger_bytes > limits.session_bytes {
            return Err(Error::TooLarge {
                trigger_bytes,
                budget_bytes: limits.session_bytes,
            });
        }
        let session = state.session_bytes(trigger);
        let budgets = [
            (
                "for this session",
                "capture.session_queue_bytes",
                session,
                limits.session_bytes,
            ),
            (
                "in all",
                "capture.queue_bytes",
                state.total_bytes,
                limits.total_bytes,
            ),
        ];
        for (whose, key, queued_bytes, budget_bytes) in budgets {
            if queued_bytes + trigger_bytes > budget_bytes {
                return Err(Error::OverBudget {
                    whose,
                    key,
                    queued_bytes,
                    trigger_bytes,
                    budget_bytes,
                });
            }
        }
        Ok(())
    }

    /// The oldest waiting trigger whose pair is free and whose backoff is
    /// over, now marked in flight.
    pub fn take_next(&self) -> Option<Trigger> {
        let mut state = self.lock();
        let now = Instant::now();
        let id = state
            .waiting
            .iter()
            .find(|(_, waiting)| {
                let trigger = &waiting.trigger;
                // In place, not `busy.contains(&trigger.pair())`: no clones
                // per waiting trigger under the lock.
                !state
                    .busy
                    .iter()
                    .any(|pair| pair.repo == trigger.repo && pair.user == trigger.user)
                    && waiting.not_before.is_none_or(|at| at <= now)
            })
            .map(|(id, _)| *id)?;
        let waiting = state.waiting.remove(&id)?;
        state.busy.insert(waiting.trigger.pair());
        state
            .in_flight
            .insert(id, TriggerSummary::of(&waiting.trigger));
        Some(waiting.trigger)
    }

    /// The earliest end of a retry backoff among waiting triggers.
    pub fn next_retry_at(&self) -> Option<Instant> {
        self.lock()
            .waiting
            .values()
            .filter_map(|waiting| waiting.not_before)
            .min()
    }

    /// The trigger is done: it leaves the log or its file goes, durably,
    /// and its pair is free. Blocking: call it from a blocking thread.
    pub fn finish(&self, trigger: &Trigger) {
        self.forget(trigger.id);
        self.lock().unaccount(trigger.id);
        self.release(trigger);
    }

    /// The trigger failed and will be tried again after `at`; the log
    /// records the attempt (and its own file, if it had one, goes).
    /// Blocking: call it from a blocking thread.
    pub fn retry_later(&self, mut trigger: Trigger, error: String, at: Instant) {
        trigger.attempts += 1;
        trigger.last_error = Some(error);
        let json = to_json(&trigger);
        match self.append(trigger.id, &json) {
            Ok(()) => {
                self.remove_file(trigger.id);
                self.lock().account(&trigger, json.len() as u64);
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not record a failed attempt; the trigger keeps its old record");
            }
        }
        self.release(&trigger);
        self.lock().waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted: 0,
                not_before: Some(at),
            },
        );
    }

    /// The trigger will not be tried again: it moves to `failed/` with its
    /// error. This attempt failed too, so it is counted like the others.
    /// Blocking: call it from a blocking thread.
    pub fn fail(&self, mut trigger: Trigger, error: String) {
        trigger.attempts += 1;
        trigger.last_error = Some(error);
        let failed = self.failed_dir().join(file_name(trigger.id));
        let moved = match self.failed_dir_state() {
            FailedDir::Ready | FailedDir::Missing => atomic::write(&failed, &serialize(&trigger)),
            FailedDir::Link => {
                self.skip_symlink(&self.failed_dir());
                Err(io::Error::other("queue/failed is a symbolic link"))
            }
            FailedDir::Other => Err(io::Error::other("queue/failed is not a directory")),
        };
        match moved {
            Ok(()) => {
                self.forget(trigger.id);
                self.lock().unaccount(trigger.id);
            }
            Err(err) => {
                tracing::error!(file.path = %failed.display(), error = %err, "could not move a failed trigger; it stays queued for the next start");
            }
        }
        self.release(&trigger);
    }

    /// Up to `limit` triggers waiting or in flight whose pair `visible`
    /// admits: those in flight first, then the waiting ones, oldest first.
    pub fn queued(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Vec<QueuedTrigger> {
        let state = self.lock();
        let mut in_flight: Vec<&TriggerSummary> = state.in_flight.values().collect();
        in_flight.sort_unstable_by_key(|summary| summary.id);
        let in_flight = in_flight.into_iter().map(|summary| QueuedTrigger {
            trigger: summary.clone(),
            state: QueueState::InFlight,
        });
        let waiting = state.waiting.values().map(|waiting| QueuedTrigger {
            trigger: TriggerSummary::of(&waiting.trigger),
            state: if waiting.not_before.is_some() {
                QueueState::BackingOff
            } else {
                QueueState::Waiting
            },
        });
        in_flight
            .chain(waiting)
            .filter(|queued| visible(&queued.trigger.pair()))
            .take(limit)
            .collect()
    }

    /// Up to `limit` triggers of `failed/` whose pair `visible` admits,
    /// newest first, and whether there are more. Files that do not parse
    /// as triggers, and copies of triggers queued again, are left out.
    /// Blocking (it reads every file it lists, and a limited caller's
    /// listing may read them all): call it from a blocking thread.
    pub fn failed(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<(Vec<TriggerSummary>, bool), Error> {
        if self.failed_dir_state() != FailedDir::Ready {
            return Ok((Vec::new(), false));
        }
        let dir = self.failed_dir();
        let entries = fs::read_dir(&dir).map_err(|source| Error::Read {
            path: dir.clone(),
            source,
        })?;
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".json") && !name.starts_with(atomic::TEMP_PREFIX))
            .collect();
        // UUID v7 names sort by time.
        names.sort_unstable_by(|a, b| b.cmp(a));
        let queued: HashSet<Uuid> = self.lock().sizes.keys().copied().collect();
        let mut found = Vec::new();
        for name in names {
            let Some(trigger) = read_trigger(&dir.join(&name)) else {
                continue;
            };
            if name != file_name(trigger.id)
                || queued.contains(&trigger.id)
                || !visible(&trigger.pair())
            {
                continue;
            }
            if found.len() == limit {
                return Ok((found, true));
            }
            found.push(TriggerSummary::of(&trigger));
        }
        Ok((found, false))
    }

    /// Moves the failed trigger `id` (if `visible` admits its pair) back
    /// into the queue with its attempts reset, durably: it is appended to
    /// the log and synced before its copy in `failed/` is removed, so a
    /// crash in between leaves it queued (and listed in neither place
    /// twice: [`Self::failed`] leaves out what is queued). A retried turn
    /// is never dropped for a full queue; a retried compaction obeys the
    /// byte budgets like a new one. Blocking: call it from a blocking thread.
    pub fn retry_failed(
        &self,
        id: Uuid,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<(), Error> {
        if self.failed_dir_state() != FailedDir::Ready {
            return Err(Error::NoSuchFailed(id));
        }
        let failed = self.failed_dir().join(file_name(id));
        let mut trigger = read_trigger(&failed)
            .filter(|trigger| trigger.id == id && visible(&trigger.pair()))
            .ok_or(Error::NoSuchFailed(id))?;
        trigger.attempts = 0;
        let json = to_json(&trigger);
        {
            let mut state = self.lock();
            if state.sizes.contains_key(&id) {
                return Err(Error::AlreadyQueued(id));
            }
            if trigger.kind == Kind::Compaction {
                self.check_budgets(&state, &trigger, json.len() as u64)?;
            }
            state.account(&trigger, json.len() as u64);
        }
        let stored = disk::ensure_free_space(&self.dir, self.limits.min_free_disk_bytes)
            .map_err(Error::from)
            .and_then(|()| self.append(id, &json));
        if let Err(err) = stored {
            self.lock().unaccount(id);
            return Err(err);
        }
        if let Err(err) = atomic::remove(&failed) {
            tracing::warn!(file.path = %failed.display(), error = %err, "could not remove a retried trigger from queue/failed/; it is queued all the same");
        }
        self.lock().waiting.insert(
            id,
            Waiting {
                trigger,
                accepted: 0,
                not_before: None,
            },
        );
        Ok(())
    }

    /// Triggers waiting or in flight.
    pub fn depth(&self) -> usize {
        let state = self.lock();
        state.waiting.len() + state.in_flight.len()
    }

    fn release(&self, trigger: &Trigger) {
        let mut state = self.lock();
        state.in_flight.remove(&trigger.id);
        state.busy.remove(&trigger.pair());
    }

    /// Bytes of stored triggers waiting or in flight.
    pub fn bytes(&self) -> u64 {
        self.lock().total_bytes
    }

    /// Symbolic links found in place of a trigger file or of `failed/`.
    pub fn skipped_symlinks(&self) -> u64 {
        self.skipped_symlinks.load(Ordering::Relaxed)
    }

    fn failed_dir(&self) -> PathBuf {
        self.dir.join("failed")
    }

    /// What stands at `failed/`, without following a link there.
    fn failed_dir_state(&self) -> FailedDir {
        match fs::symlink_metadata(self.failed_dir()) {
            Ok(meta) if meta.is_dir() => FailedDir::Ready,
            Ok(meta) if meta.file_type().is_symlink() => FailedDir::Link,
            Ok(_) => FailedDir::Other,
            Err(_) => FailedDir::Missing,
        }
    }

    fn skip_symlink(&self, path: &Path) {
        self.skipped_symlinks.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(file.path = %path.display(), reason = "symbolic link", "skipped a queue entry; links under queue/ are never followed");
    }

    /// The trigger leaves the log (durably) and its own file, if it has
    /// one, goes: in this order, so a file the log's compaction writes
    /// meanwhile is removed by one or the other.
    fn forget(&self, id: Uuid) {
        if let Err(err) = self.log.forget(id) {
            tracing::warn!(trigger.id = %id, error = %err, "could not record a finished trigger in the queue's log; it may be processed again after a restart");
        }
        self.remove_file(id);
    }

    fn remove_file(&self, id: Uuid) {
        let path = self.dir.join(file_name(id));
        if let Err(err) = atomic::remove(&path)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(file.path = %path.display(), error = %err, "could not remove a processed trigger");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every section under this lock leaves the state consistent before
        // anything that could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A trigger as its own file (or `failed/`) holds it.
fn serialize(trigger: &Trigger) -> Vec<u8> {
    serde_json::to_vec_pretty(trigger).expect("a trigger serializes")
}

/// A trigger as the log holds it; its length is what the byte budgets count.
fn to_json(trigger: &Trigger) -> Vec<u8> {
    serde_json::to_vec(trigger).expect("a trigger serializes")
}

/// The trigger stored at `path`, if it is a regular file (not a link)
/// that parses as one.
fn read_trigger(path: &Path) -> Option<Trigger> {
    let bytes = read_no_follow(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The file's bytes, refusing (`ELOOP`) to follow a link in its place.
fn read_no_follow(path: &Path) -> io::Result<Vec<u8>> {
    let mut file: File = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
        .open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn file_name(id: Uuid) -> String {
    format!("{id}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(kind: Kind, session: &str, repo: &str) -> Trigger {
        Trigger {
            id: Uuid::now_v7(),
            kind,
            session_id: session.parse().unwrap(),
            turn_id: None,
            repo: repo.parse().unwrap(),
            user: "ana".parse().unwrap(),
            window: vec![StoredLine {
                role: "user".into(),
                text: "hi".into(),
            }],
            accepted_at: Utc::now(),
            attempts: 0,
            last_error: None,
        }
    }

    /// Accepts `trigger` from a thread, as a request's task would.
    fn enqueue(queue: &Queue, trigger: Trigger) -> Result<EnqueueStatus, Error> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(queue.enqueue(trigger))
    }

    fn limits(capacity: usize) -> Limits {
        Limits {
            capacity,
            session_bytes: 1 << 20,
            total_bytes: 1 << 30,
            min_free_disk_bytes: 0,
        }
    }

    fn with_text(mut trigger: Trigger, bytes: usize) -> Trigger {
        trigger.window[0].text = "x".repeat(bytes);
        trigger
    }

    fn files(dir: &Path) -> usize {
        fs::read_dir(dir)
            .unwrap()
            .filter(|entry| entry.as_ref().unwrap().path().is_file())
            .count()
    }

    #[test]
    fn concurrent_accepts_are_all_on_disk_and_one_session_keeps_one_turn() {
        let dir = tempfile::tempdir().unwrap();
        let queue = std::sync::Arc::new(Queue::open(dir.path(), limits(64)).unwrap());
        let accept = |trigger: Trigger| {
            let queue = queue.clone();
            std::thread::spawn(move || (trigger.id, enqueue(&queue, trigger).unwrap()))
        };
        let compactions: Vec<_> = (0..16)
            .map(|n| accept(trigger(Kind::Compaction, &format!("c{n}"), "forge")))
            .collect();
        let turns: Vec<_> = (0..16)
            .map(|_| accept(trigger(Kind::Turn, "s1", "forge")))
            .collect();
        for handle in compactions {
            let (id, status) = handle.join().unwrap();
            assert_eq!(status, EnqueueStatus::Queued);
            assert!(
                log::live_ids(dir.path()).contains(&id),
                "acknowledged, so on disk"
            );
        }
        let statuses: Vec<_> = turns.into_iter().map(|h| h.join().unwrap().1).collect();
        assert!(
            statuses.iter().all(|s| *s != EnqueueStatus::Dropped),
            "{statuses:?}"
        );
        assert_eq!(queue.depth(), 17, "16 compactions and one turn of s1");
        assert!(queue.sync_rounds() >= 1);
        assert!(
            queue.sync_rounds() < 32,
            "accepts that arrive together share a sync"
        );
        assert_eq!(queue.bytes(), {
            let state = queue.lock();
            state.sizes.values().map(|(_, bytes)| bytes).sum::<u64>()
        });
    }

    #[test]
    fn turns_coalesce_per_session_and_drop_when_full_but_compactions_never() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), limits(2)).unwrap();
        let first = trigger(Kind::Turn, "s1", "r");
        assert_eq!(enqueue(&queue, first).unwrap(), EnqueueStatus::Queued);
        let newer = trigger(Kind::Turn, "s1", "r");
        assert_eq!(
            enqueue(&queue, newer.clone()).unwrap(),
            EnqueueStatus::Coalesced
        );
        assert_eq!(queue.depth(), 1);
        assert_eq!(
            enqueue(&queue, trigger(Kind::Turn, "s2", "r")).unwrap(),
            EnqueueStatus::Queued
        );
        assert_eq!(
            enqueue(&queue, trigger(Kind::Turn, "s3", "r")).unwrap(),
            EnqueueStatus::Dropped
        );
        assert_eq!(
            enqueue(&queue, trigger(Kind::Turn, "s1", "r")).unwrap(),
            EnqueueStatus::Coalesced,
            "a full queue still takes a turn that replaces one"
        );
        for _ in 0..3 {
            assert_eq!(
                enqueue(&queue, trigger(Kind::Compaction, "s9", "r")).unwrap(),
                EnqueueStatus::Queued
            );
        }
        assert_eq!(queue.depth(), 5);
    }

    #[test]
    fn one_trigger_per_pair_at_a_time_and_backoff_is_respected() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        let a1 = trigger(Kind::Compaction, "s1", "a");
        let a2 = trigger(Kind::Compaction, "s2", "a");
        let b1 = trigger(Kind::Compaction, "s3", "b");
        for t in [&a1, &a2, &b1] {
            enqueue(&queue, t.clone()).unwrap();
        }
        let first = queue.take_next().unwrap();
        assert_eq!(first.id, a1.id);
        assert_eq!(queue.take_next().unwrap().id, b1.id, "pair a is busy");
        assert!(queue.take_next().is_none());
        queue.retry_later(
            first,
            "timeout".into(),
            Instant::now() + std::time::Duration::from_secs(60),
        );
        assert_eq!(
            queue.take_next().unwrap().id,
            a2.id,
            "the retrying one waits"
        );
        assert!(queue.next_retry_at().is_some());
    }

    #[test]
    fn compactions_past_a_byte_budget_are_refused_until_the_backlog_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            session_bytes: 3_000,
            total_bytes: 5_500,
            ..limits(10)
        };
        let queue = Queue::open(dir.path(), limits).unwrap();
        let big = |session| with_text(trigger(Kind::Compaction, session, "r"), 1_000);
        for _ in 0..2 {
            assert_eq!(enqueue(&queue, big("s1")).unwrap(), EnqueueStatus::Queued);
        }
        let refused = enqueue(&queue, big("s1")).unwrap_err();
        assert!(
            matches!(
                refused,
                Error::OverBudget {
                    key: "capture.session_queue_bytes",
                    ..
                }
            ),
            "{refused}"
        );
        assert_eq!(enqueue(&queue, big("s2")).unwrap(), EnqueueStatus::Queued);
        assert_eq!(enqueue(&queue, big("s3")).unwrap(), EnqueueStatus::Queued);
        let refused = enqueue(&queue, big("s4")).unwrap_err();
        assert!(
            matches!(
                refused,
                Error::OverBudget {
                    key: "capture.queue_bytes",
                    ..
                }
            ),
            "{refused}"
        );
        assert_eq!(
            log::live_ids(dir.path()).len(),
            4,
            "nothing refused was written"
        );
        assert!(queue.bytes() <= 5_500);

        let done = queue.take_next().unwrap();
        queue.finish(&done);
        assert_eq!(enqueue(&queue, big("s4")).unwrap(), EnqueueStatus::Queued);
        let alone = with_text(trigger(Kind::Compaction, "s5", "r"), 4_000);
        assert!(matches!(
            enqueue(&queue, alone),
            Err(Error::TooLarge { .. })
        ));
        assert_eq!(
            enqueue(&queue, with_text(trigger(Kind::Turn, "s6", "r"), 1_000)).unwrap(),
            EnqueueStatus::Queued,
            "turns keep their own rule"
        );
    }

    #[test]
    fn nothing_is_queued_below_the_disk_floor() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            min_free_disk_bytes: u64::MAX,
            ..limits(10)
        };
        let queue = Queue::open(dir.path(), limits).unwrap();
        for kind in [Kind::Turn, Kind::Compaction] {
            let refused = enqueue(&queue, trigger(kind, "s1", "r")).unwrap_err();
            assert!(matches!(refused, Error::LowSpace(_)), "{refused}");
        }
        assert_eq!((files(dir.path()), queue.depth()), (0, 0));
    }

    #[test]
    fn links_under_the_queue_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let planted = trigger(Kind::Compaction, "s1", "r");
        let target = outside.path().join("target.json");
        fs::write(&target, serialize(&planted)).unwrap();
        let queue_dir = dir.path().join("queue");
        fs::create_dir(&queue_dir).unwrap();
        let link = queue_dir.join(file_name(planted.id));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let temp_link = queue_dir.join(format!("{}link", atomic::TEMP_PREFIX));
        std::os::unix::fs::symlink(&target, &temp_link).unwrap();
        let failed_target = outside.path().join("failed");
        fs::create_dir(&failed_target).unwrap();
        std::os::unix::fs::symlink(&failed_target, queue_dir.join("failed")).unwrap();

        let queue = Queue::open(&queue_dir, limits(10)).unwrap();
        assert_eq!(queue.depth(), 0, "a linked trigger is not read");
        assert_eq!(queue.skipped_symlinks(), 3);
        assert!(fs::symlink_metadata(&link).is_ok() && fs::symlink_metadata(&temp_link).is_ok());
        assert_eq!(fs::read(&target).unwrap(), serialize(&planted));

        let failing = trigger(Kind::Compaction, "s2", "r");
        enqueue(&queue, failing.clone()).unwrap();
        let taken = queue.take_next().unwrap();
        queue.fail(taken, "boom".into());
        assert_eq!(
            fs::read_dir(&failed_target).unwrap().count(),
            0,
            "nothing is written through a linked failed/"
        );
        assert!(
            log::live_ids(&queue_dir).contains(&failing.id),
            "kept for the next start"
        );
        assert_eq!(queue.skipped_symlinks(), 4);
        assert_eq!(
            read_no_follow(&link).unwrap_err().raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
    }

    #[test]
    fn a_failed_trigger_counts_every_attempt_including_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        let queued = trigger(Kind::Compaction, "s1", "r");
        enqueue(&queue, queued.clone()).unwrap();
        for _ in 0..2 {
            let taken = queue.take_next().unwrap();
            queue.retry_later(taken, "timeout".into(), Instant::now());
        }
        let taken = queue.take_next().unwrap();
        queue.fail(taken, "timeout".into());
        let failed = dir.path().join("failed").join(file_name(queued.id));
        let kept: Trigger = serde_json::from_slice(&fs::read(failed).unwrap()).unwrap();
        assert_eq!(kept.attempts, 3, "three tries, three failed attempts");
        assert_eq!(queue.depth(), 0);
    }

    #[test]
    fn a_failed_trigger_is_listed_and_a_retry_queues_it_again_once() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        let failing = trigger(Kind::Turn, "s1", "forge");
        let hidden = trigger(Kind::Turn, "s2", "secret");
        for queued in [&failing, &hidden] {
            enqueue(&queue, queued.clone()).unwrap();
            let taken = queue.take_next().unwrap();
            queue.fail(taken, "classifier said 503".into());
        }
        fs::write(dir.path().join("failed/garbage.json"), "{").unwrap();
        let forge = |pair: &NamespacePair| pair.repo.as_str() == "forge";
        let (listed, more) = queue.failed(10, forge).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(!more);
        assert_eq!(listed[0].id, failing.id);
        assert_eq!(listed[0].attempts, 1);
        assert_eq!(listed[0].last_error.as_deref(), Some("classifier said 503"));
        let (first, more) = queue.failed(1, |_| true).unwrap();
        assert_eq!(first[0].id, hidden.id, "newest first");
        assert!(more, "two triggers, one listed; the garbage is left out");

        assert!(matches!(
            queue.retry_failed(hidden.id, forge),
            Err(Error::NoSuchFailed(_))
        ));
        queue.retry_failed(failing.id, forge).unwrap();
        assert!(
            !dir.path()
                .join("failed")
                .join(file_name(failing.id))
                .exists()
        );
        assert!(log::live_ids(dir.path()).contains(&failing.id));
        assert_eq!(queue.depth(), 1);
        let queued = queue.queued(10, |_| true);
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].state, QueueState::Waiting);
        assert!(matches!(
            queue.retry_failed(failing.id, forge),
            Err(Error::NoSuchFailed(_))
        ));
        let taken = queue.take_next().unwrap();
        assert_eq!(
            (taken.id, taken.attempts),
            (failing.id, 0),
            "attempts start over"
        );
        assert_eq!(queue.queued(10, |_| true)[0].state, QueueState::InFlight);
    }

    #[test]
    fn a_restart_resumes_what_was_left_and_sets_aside_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let kept = trigger(Kind::Turn, "s1", "r");
        {
            let queue = Queue::open(dir.path(), limits(10)).unwrap();
            enqueue(&queue, kept.clone()).unwrap();
            let done = trigger(Kind::Turn, "s2", "other");
            enqueue(&queue, done).unwrap();
            let taken = queue.take_next().unwrap();
            assert_eq!(taken.id, kept.id);
            let other = queue.take_next().unwrap();
            queue.finish(&other);
        }
        fs::write(dir.path().join("garbage.json"), "{").unwrap();
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        assert_eq!(
            queue.take_next().unwrap(),
            kept,
            "in flight at the crash: taken again"
        );
        assert!(queue.take_next().is_none());
        assert!(dir.path().join("failed/garbage.json").exists());
    }

    #[test]
    fn a_queue_whose_sync_fails_acknowledges_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let failing: SyncFile =
            std::sync::Arc::new(|_: &File| Err(io::Error::other("injected sync failure")));
        let queue = Queue::open_with(dir.path(), limits(10), failing).unwrap();
        for kind in [Kind::Turn, Kind::Compaction] {
            let refused = enqueue(&queue, trigger(kind, "s1", "r")).unwrap_err();
            assert!(matches!(refused, Error::Write { .. }), "{refused}");
        }
        assert_eq!((queue.depth(), queue.bytes()), (0, 0));
        assert!(queue.take_next().is_none());
    }

    #[test]
    fn finished_triggers_stay_gone_and_retries_keep_their_attempts_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let kept = trigger(Kind::Compaction, "s1", "a");
        {
            let queue = Queue::open(dir.path(), limits(10)).unwrap();
            enqueue(&queue, kept.clone()).unwrap();
            for n in 0..3 {
                enqueue(&queue, trigger(Kind::Compaction, &format!("d{n}"), "b")).unwrap();
            }
            let retried = queue.take_next().unwrap();
            assert_eq!(retried.id, kept.id);
            let later = Instant::now() + std::time::Duration::from_secs(60);
            queue.retry_later(retried, "timeout".into(), later);
            while let Some(done) = queue.take_next() {
                queue.finish(&done);
            }
            assert_eq!(queue.depth(), 1);
        }
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        assert_eq!(queue.depth(), 1, "the finished ones did not come back");
        let again = queue.take_next().unwrap();
        assert_eq!(
            (again.id, again.attempts, again.last_error.as_deref()),
            (kept.id, 1, Some("timeout"))
        );
    }

    #[test]
    fn a_trigger_both_in_its_own_file_and_in_the_log_keeps_the_copy_with_more_attempts() {
        let dir = tempfile::tempdir().unwrap();
        let retried = trigger(Kind::Compaction, "s2", "b");
        let moved = trigger(Kind::Compaction, "s1", "a");
        {
            let queue = Queue::open(dir.path(), limits(10)).unwrap();
            enqueue(&queue, retried.clone()).unwrap();
            enqueue(&queue, moved.clone()).unwrap();
            let taken = queue.take_next().unwrap();
            assert_eq!(taken.id, retried.id);
            queue.retry_later(taken, "timeout".into(), Instant::now());
        }
        // As a compaction of the log leaves one, and as a retry of a
        // trigger with its own file leaves one if the crash comes before
        // the file is removed.
        fs::write(dir.path().join(file_name(moved.id)), serialize(&moved)).unwrap();
        fs::write(dir.path().join(file_name(retried.id)), serialize(&retried)).unwrap();
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        assert_eq!(queue.depth(), 2);
        let listed: HashMap<Uuid, u32> = queue
            .queued(10, |_| true)
            .into_iter()
            .map(|queued| (queued.trigger.id, queued.trigger.attempts))
            .collect();
        assert_eq!(listed, HashMap::from([(moved.id, 0), (retried.id, 1)]));
        assert!(
            !dir.path().join(file_name(retried.id)).exists(),
            "the stale file goes"
        );
        assert!(dir.path().join(file_name(moved.id)).is_file());
    }
}
