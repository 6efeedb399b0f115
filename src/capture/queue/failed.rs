//! `queue/failed/`: the triggers that will not be tried again, each with
//! its error, listed for the operator and queued again on request.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::{fs, io};

use uuid::Uuid;

use super::state::Waiting;
use super::summary::TriggerSummary;
use super::{Error, Kind, Queue, Trigger, file_name, read_no_follow, serialize, to_json};
use crate::disk;
use crate::store::{NamespacePair, atomic};

#[derive(Debug, PartialEq, Eq)]
pub(super) enum FailedDir {
    Ready,
    Missing,
    Link,
    Other,
}

impl Queue {
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

    pub(super) fn failed_dir(&self) -> PathBuf {
        self.dir.join("failed")
    }

    /// What stands at `failed/`, without following a link there.
    pub(super) fn failed_dir_state(&self) -> FailedDir {
        match fs::symlink_metadata(self.failed_dir()) {
            Ok(meta) if meta.is_dir() => FailedDir::Ready,
            Ok(meta) if meta.file_type().is_symlink() => FailedDir::Link,
            Ok(_) => FailedDir::Other,
            Err(_) => FailedDir::Missing,
        }
    }
}

/// The trigger stored at `path`, if it is a regular file (not a link)
/// that parses as one.
fn read_trigger(path: &Path) -> Option<Trigger> {
    let bytes = read_no_follow(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}
