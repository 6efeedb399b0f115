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
//! the same session replaces a waiting older one) and are dropped when
//! their pair's triggers fill its capacity (unless a daily token budget
//! holds the pair: those wait anyway) or the queue holds its byte budget
//! ([`admits_turn`]). Compactions are never dropped, but they are bounded: one
//! that would take a session's or the whole queue's files past their byte
//! budget is refused ([`Error::OverBudget`]) for the client to send again
//! later, and no trigger is written while the disk is below its floor.
//!
//! Symbolic links under `queue/` are never followed: a link in place of a
//! log segment, of a trigger file or of `queue/failed/` is left alone (not read, not removed,
//! nothing written through it) and counted.
//!
//! The parts: [`enqueue`] (the accept rules), [`replay`] (what a start
//! takes in), [`failed`] (`queue/failed/`), [`state`] (the in-memory
//! mirror) and [`log`] (group commit).

mod enqueue;
mod failed;
mod log;
mod replay;
mod state;
pub mod summary;

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
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

use crate::disk::LowSpace;
use crate::memory::{AnchorPath, CommitId, ContentHash, RepoId, SessionId, UserId};
use crate::secrets;
use crate::store::{NamespacePair, atomic};
use crate::window::Speaker;
pub(crate) use enqueue::{admits_turn, check_budgets};
use log::Log;
use state::{State, Waiting};
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

/// The most files one trigger names.
pub const MAX_TOUCHED_FILES: usize = 64;

/// A file of the repo that the window's conversation read or edited, as
/// the client found it: what the classifier may anchor a memory to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TouchedFile {
    pub path: AnchorPath,
    /// Its content hash when the window was sent: `sha256:` and 64
    /// hexadecimal digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<ContentHash>,
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
    /// The working tree's `HEAD` when the window was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitId>,
    /// The files the conversation read or edited, at most
    /// [`MAX_TOUCHED_FILES`], each path once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<TouchedFile>,
    /// When the window's conversation took place, as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<DateTime<Utc>>,
}

impl Trigger {
    pub fn pair(&self) -> NamespacePair {
        NamespacePair {
            repo: self.repo.clone(),
            user: self.user.clone(),
        }
    }

    /// The trigger with each secret of its window replaced by a
    /// placeholder naming its kind ([`secrets::redact`], the guard that
    /// text leaving for a model goes through): what the queue stores, so
    /// that a secret pasted into a conversation never rests on disk.
    pub fn redacted(mut self) -> Self {
        for line in &mut self.window {
            if let Cow::Owned(redacted) = secrets::redact(&line.text) {
                line.text = redacted;
            }
        }
        self
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
    /// Its pair's triggers filled their capacity, or the queue its byte
    /// budget; this turn will not be processed.
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
    #[error("the capture queue in PostgreSQL")]
    Database(#[from] crate::store::postgres::Error),
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
    /// Triggers of one (repo, user) pair waiting beyond which the pair's
    /// new turns are dropped, unless a daily token budget holds the pair.
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

impl Queue {
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

    /// Log rounds written and synced so far (one per group).
    pub fn sync_rounds(&self) -> u64 {
        self.log.syncs()
    }

    /// The oldest waiting trigger that `admits` lets through (the daily
    /// token budgets hold some back), whose pair is free and whose backoff
    /// is over, now marked in flight.
    pub fn take_next(&self, admits: impl Fn(&Trigger) -> bool) -> Option<Trigger> {
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
                    && admits(trigger)
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
        self.wait_again(trigger, Some(at));
    }

    /// The trigger waits again, as it was (its record in the log stands),
    /// and its pair is free: a daily token budget holds the pair, so it is
    /// not taken before the budget renews.
    pub fn hold(&self, trigger: Trigger) {
        self.wait_again(trigger, None);
    }

    /// Frees the trigger's pair and puts the trigger back among the
    /// waiting, not taken before `not_before`.
    fn wait_again(&self, trigger: Trigger, not_before: Option<Instant>) {
        self.release(&trigger);
        self.lock().waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted: 0,
                not_before,
            },
        );
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
pub(crate) fn to_json(trigger: &Trigger) -> Vec<u8> {
    serde_json::to_vec(trigger).expect("a trigger serializes")
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
mod tests;
