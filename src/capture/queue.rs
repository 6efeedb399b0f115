//! The durable capture queue: every accepted trigger is a JSON file in
//! `<data_dir>/queue/` before its `202`, and leaves only once its memories
//! are written (or it is moved to `queue/failed/` with its error).
//!
//! The in-memory state mirrors the directory: triggers waiting, in flight,
//! or waiting out a retry backoff. Turn triggers coalesce (a newer one of
//! the same session replaces a waiting older one) and are dropped when the
//! queue is full; compactions are always taken.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::memory::{RepoId, SessionId, UserId};
use crate::store::{NamespacePair, atomic};
use crate::window::Speaker;

/// What fired a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// An accepted capture trigger, as stored in its queue file.
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

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the queue file {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("reading the queue directory {path}")]
    Read { path: PathBuf, source: io::Error },
}

/// The queue: its directory and the state of every trigger in it.
pub struct Queue {
    dir: PathBuf,
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Triggers not in flight, oldest first (UUID v7 ids sort by time).
    waiting: BTreeMap<Uuid, Waiting>,
    in_flight: HashSet<Uuid>,
    /// Pairs with a trigger in flight: one at a time per pair.
    busy: HashSet<NamespacePair>,
}

struct Waiting {
    trigger: Trigger,
    /// Not before this instant (a retry's backoff).
    not_before: Option<Instant>,
}

impl Queue {
    /// Opens `dir`, taking in every trigger left there (after a crash or a
    /// restart). A file that does not parse is moved to `failed/`.
    pub fn open(dir: &Path, capacity: usize) -> Result<Self, Error> {
        fs::create_dir_all(dir.join("failed")).map_err(|source| Error::Write {
            path: dir.to_owned(),
            source,
        })?;
        let mut state = State::default();
        let entries = fs::read_dir(dir).map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(atomic::TEMP_PREFIX) {
                let _ = fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".json") || !path.is_file() {
                continue;
            }
            match fs::read(&path)
                .map_err(|err| err.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<Trigger>(&bytes).map_err(|err| err.to_string())
                }) {
                Ok(trigger) if name == file_name(trigger.id) => {
                    state.waiting.insert(
                        trigger.id,
                        Waiting {
                            trigger,
                            not_before: None,
                        },
                    );
                }
                Ok(_) | Err(_) => {
                    tracing::warn!(file.path = %path.display(), "moving an unreadable trigger to queue/failed/");
                    let _ = fs::rename(&path, dir.join("failed").join(&name));
                }
            }
        }
        if !state.waiting.is_empty() {
            tracing::info!(
                triggers = state.waiting.len(),
                "resuming queued capture triggers"
            );
        }
        Ok(Self {
            dir: dir.to_owned(),
            capacity,
            state: Mutex::new(state),
        })
    }

    /// Stores `trigger` (or not) by the coalescing and capacity rules.
    /// Blocking (it writes and fsyncs a file): call it from a blocking thread.
    pub fn enqueue(&self, trigger: Trigger) -> Result<EnqueueStatus, Error> {
        let mut state = self.lock();
        let replaced = match trigger.kind {
            Kind::Turn => state
                .waiting
                .iter()
                .find(|(_, waiting)| {
                    waiting.trigger.kind == Kind::Turn
                        && waiting.trigger.session_id == trigger.session_id
                        && waiting.trigger.pair() == trigger.pair()
                })
                .map(|(id, _)| *id),
            Kind::Compaction => None,
        };
        if replaced.is_none() && trigger.kind == Kind::Turn && state.waiting.len() >= self.capacity
        {
            return Ok(EnqueueStatus::Dropped);
        }
        self.write(&trigger)?;
        if let Some(old) = replaced {
            state.waiting.remove(&old);
            self.remove_file(old);
        }
        state.waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                not_before: None,
            },
        );
        Ok(if replaced.is_some() {
            EnqueueStatus::Coalesced
        } else {
            EnqueueStatus::Queued
        })
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
                !state.busy.contains(&waiting.trigger.pair())
                    && waiting.not_before.is_none_or(|at| at <= now)
            })
            .map(|(id, _)| *id)?;
        let waiting = state.waiting.remove(&id)?;
        state.busy.insert(waiting.trigger.pair());
        state.in_flight.insert(id);
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

    /// The trigger is done: its file goes, its pair is free.
    pub fn finish(&self, trigger: &Trigger) {
        self.remove_file(trigger.id);
        self.release(trigger);
    }

    /// The trigger failed and will be tried again after `at`; its file
    /// records the attempt.
    pub fn retry_later(&self, mut trigger: Trigger, error: String, at: Instant) {
        trigger.attempts += 1;
        trigger.last_error = Some(error);
        if let Err(err) = self.write(&trigger) {
            tracing::warn!(error = %err, "could not record a failed attempt; the trigger keeps its old file");
        }
        self.release(&trigger);
        self.lock().waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                not_before: Some(at),
            },
        );
    }

    /// The trigger will not be tried again: it moves to `failed/` with its
    /// error.
    pub fn fail(&self, mut trigger: Trigger, error: String) {
        trigger.last_error = Some(error);
        let name = file_name(trigger.id);
        let failed = self.dir.join("failed").join(&name);
        let bytes = serde_json::to_vec_pretty(&trigger).expect("a trigger serializes");
        match atomic::write(&failed, &bytes) {
            Ok(()) => self.remove_file(trigger.id),
            Err(err) => {
                tracing::error!(file.path = %failed.display(), error = %err, "could not move a failed trigger; it stays queued for the next start");
            }
        }
        self.release(&trigger);
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

    fn write(&self, trigger: &Trigger) -> Result<(), Error> {
        let path = self.dir.join(file_name(trigger.id));
        let bytes = serde_json::to_vec_pretty(trigger).expect("a trigger serializes");
        atomic::write(&path, &bytes).map_err(|source| Error::Write { path, source })
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

    fn files(dir: &Path) -> usize {
        fs::read_dir(dir)
            .unwrap()
            .filter(|entry| entry.as_ref().unwrap().path().is_file())
            .count()
    }

    #[test]
    fn turns_coalesce_per_session_and_drop_when_full_but_compactions_never() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), 2).unwrap();
        let first = trigger(Kind::Turn, "s1", "r");
        assert_eq!(queue.enqueue(first).unwrap(), EnqueueStatus::Queued);
        let newer = trigger(Kind::Turn, "s1", "r");
        assert_eq!(
            queue.enqueue(newer.clone()).unwrap(),
            EnqueueStatus::Coalesced
        );
        assert_eq!(files(dir.path()), 1);
        assert_eq!(
            queue.enqueue(trigger(Kind::Turn, "s2", "r")).unwrap(),
            EnqueueStatus::Queued
        );
        assert_eq!(
            queue.enqueue(trigger(Kind::Turn, "s3", "r")).unwrap(),
            EnqueueStatus::Dropped
        );
        assert_eq!(
            queue.enqueue(trigger(Kind::Turn, "s1", "r")).unwrap(),
            EnqueueStatus::Coalesced,
            "a full queue still takes a turn that replaces one"
        );
        for _ in 0..3 {
            assert_eq!(
                queue.enqueue(trigger(Kind::Compaction, "s9", "r")).unwrap(),
                EnqueueStatus::Queued
            );
        }
        assert_eq!(queue.depth(), 5);
        assert_eq!(files(dir.path()), 5);
    }

    #[test]
    fn one_trigger_per_pair_at_a_time_and_backoff_is_respected() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::open(dir.path(), 10).unwrap();
        let a1 = trigger(Kind::Compaction, "s1", "a");
        let a2 = trigger(Kind::Compaction, "s2", "a");
        let b1 = trigger(Kind::Compaction, "s3", "b");
        for t in [&a1, &a2, &b1] {
            queue.enqueue(t.clone()).unwrap();
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
    fn a_restart_resumes_what_was_left_and_sets_aside_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let kept = trigger(Kind::Turn, "s1", "r");
        {
            let queue = Queue::open(dir.path(), 10).unwrap();
            queue.enqueue(kept.clone()).unwrap();
            let done = trigger(Kind::Turn, "s2", "other");
            queue.enqueue(done).unwrap();
            let taken = queue.take_next().unwrap();
            assert_eq!(taken.id, kept.id);
            let other = queue.take_next().unwrap();
            queue.finish(&other);
        }
        fs::write(dir.path().join("garbage.json"), "{").unwrap();
        let queue = Queue::open(dir.path(), 10).unwrap();
        assert_eq!(
            queue.take_next().unwrap(),
            kept,
            "in flight at the crash: taken again"
        );
        assert!(queue.take_next().is_none());
        assert!(dir.path().join("failed/garbage.json").exists());
    }
}
