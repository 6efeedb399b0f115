//! The log of consolidation passes: each pass over a namespace, every
//! change it made with its reason and the lifecycles it set (what an undo
//! restores), and when it was undone. It cannot be worked out again, so
//! it is kept like the memories, never under `.cache/`: in files mode one
//! JSON file per pass, `<data_dir>/consolidations/<repos|users>/<owner>/<id>.json`,
//! written atomically; in postgres mode a row of `engram_consolidations`
//! that every replica reads. What a pass decides is in `consolidate`;
//! this module only keeps it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Error, Store, atomic, confine};
use crate::blocking;
use crate::memory::{Lifecycle, MemoryId, Namespace, RepoId, Scope, UserId};

/// The directory under the data directory that holds the passes.
pub const DIR: &str = "consolidations";

/// The largest pass file read.
const MAX_PASS_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What ran a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PassTrigger {
    /// `POST /consolidate` (or `engram consolidate`).
    Request,
    /// The schedule (`consolidation.interval_hours`).
    Schedule,
}

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Near-duplicates reduced to their best-supported member (`kept`);
    /// the others are `superseded_by` it.
    Merged,
    /// Near-duplicates merged by the model into one new version (`kept`,
    /// written by the pass) that supersedes them.
    Rewritten,
    /// Two memories that seem to disagree, both put under review.
    Flagged,
    /// A contradiction the model settled for the newer fact (`kept`); the
    /// older one is `superseded_by` it.
    Settled,
}

/// One lifecycle a pass set: what it was before, and what the pass made
/// it. An undo puts `before` back where the lifecycle is still `after`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Edit {
    pub id: MemoryId,
    pub before: Lifecycle,
    pub after: Lifecycle,
}

/// One change a pass made, with its reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Change {
    pub action: Action,
    /// Why, in words.
    pub reason: String,
    /// The memory that stands for the others: the member kept, the version
    /// the model wrote, or the newer fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<MemoryId>,
    /// The memories that are no longer current because of this change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<MemoryId>,
    /// The memories put under review.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged: Vec<MemoryId>,
    /// The lifecycles it set; an undo restores them.
    pub edits: Vec<Edit>,
    /// When it was undone (`POST /consolidations/{id}/undo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_at: Option<DateTime<Utc>>,
}

/// One consolidation pass over one namespace and what it changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Pass {
    /// A UUID v7: passes sort by time.
    pub id: Uuid,
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<UserId>,
    pub at: DateTime<Utc>,
    pub trigger: PassTrigger,
    /// The chat model that merged and settled, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub changes: Vec<Change>,
}

impl Pass {
    /// A pass over `namespace` starting now, with no change yet.
    pub fn new(namespace: &Namespace, trigger: PassTrigger, model: Option<String>) -> Self {
        let (scope, repo, user) = namespace.owner_fields();
        Self {
            id: Uuid::now_v7(),
            scope,
            repo,
            user,
            at: Utc::now(),
            trigger,
            model,
            changes: Vec::new(),
        }
    }

    /// The namespace it went over; `None` for a record whose owner does
    /// not match its scope (edited by hand).
    pub fn namespace(&self) -> Option<Namespace> {
        match (self.scope, &self.repo, &self.user) {
            (Scope::Repo, Some(repo), None) => Some(Namespace::Repo(repo.clone())),
            (Scope::User, None, Some(user)) => Some(Namespace::User(user.clone())),
            _ => None,
        }
    }
}

/// This replica's turn to run a pass: in postgres mode the cluster's one
/// ([`super::postgres::passes`]); in files mode one process owns the
/// store and its own one-at-a-time is all there is.
pub struct PassTurn {
    _hold: Option<super::postgres::passes::PassHold>,
}

impl Store {
    /// Waits for this replica's turn to run a pass, on a view that holds
    /// every change committed before it.
    pub async fn pass_turn(&self) -> Result<PassTurn, Error> {
        let hold = match self.database() {
            Some(database) => Some(database.hold_passes().await.map_err(Error::Database)?),
            None => None,
        };
        Ok(PassTurn { _hold: hold })
    }

    /// Whether this replica runs the schedule's pass `name` now: always in
    /// files mode; in postgres mode when no replica ran it within the last
    /// `interval`.
    pub async fn claim_scheduled(&self, name: &str, interval: Duration) -> Result<bool, Error> {
        match self.database() {
            Some(database) => database
                .claim_scheduled(name, interval)
                .await
                .map_err(Error::Database),
            None => Ok(true),
        }
    }

    /// Keeps `pass` durably (a new one, or one with changes undone since).
    pub async fn keep_pass(&self, pass: Pass) -> Result<(), Error> {
        match self.database() {
            Some(database) => database.keep_pass(&pass).await.map_err(Error::Database),
            None => {
                let root = self.root().to_owned();
                blocking::run(move || write_file(&root, &pass)).await
            }
        }
    }

    /// Every pass kept of `namespaces`, newest first.
    pub async fn passes(&self, namespaces: Vec<Namespace>) -> Result<Vec<Pass>, Error> {
        let mut passes = match self.database() {
            Some(database) => database
                .passes(&namespaces)
                .await
                .map_err(Error::Database)?,
            None => {
                let root = self.root().to_owned();
                blocking::run(move || {
                    namespaces
                        .iter()
                        .map(|namespace| read_dir(&root, namespace))
                        .collect::<Result<Vec<_>, _>>()
                })
                .await?
                .into_iter()
                .flatten()
                .collect()
            }
        };
        passes.sort_by_key(|pass| std::cmp::Reverse(pass.id));
        Ok(passes)
    }

    /// Every namespace that holds a memory now, in order.
    pub fn namespaces_held(&self) -> Vec<Namespace> {
        let mut held: Vec<Namespace> = self.read().members.keys().cloned().collect();
        held.sort();
        held
    }

    /// The pass `id`, if one is kept.
    pub async fn pass(&self, id: Uuid) -> Result<Option<Pass>, Error> {
        match self.database() {
            Some(database) => database.pass(id).await.map_err(Error::Database),
            None => {
                let root = self.root().to_owned();
                blocking::run(move || find_file(&root, id)).await
            }
        }
    }
}

/// `<root>/consolidations/<scope dir>/<owner>`.
fn namespace_dir(root: &Path, namespace: &Namespace, create: bool) -> Result<PathBuf, Error> {
    let base = root.join(DIR);
    confine::namespace_dir(&base, namespace, create).map_err(|refusal| Error::Write {
        path: base.clone(),
        source: std::io::Error::other(refusal.to_string()),
    })
}

fn write_file(root: &Path, pass: &Pass) -> Result<(), Error> {
    let namespace = pass.namespace().ok_or_else(|| Error::Write {
        path: root.join(DIR),
        source: std::io::Error::other("a pass names no namespace"),
    })?;
    let path = namespace_dir(root, &namespace, true)?.join(format!("{}.json", pass.id));
    let bytes = serde_json::to_vec_pretty(pass).expect("a pass serializes to JSON");
    atomic::write(&path, &bytes).map_err(|source| Error::Write { path, source })
}

/// The passes kept in `namespace`'s directory; a file that does not read
/// as a pass of it is skipped with a warning.
fn read_dir(root: &Path, namespace: &Namespace) -> Result<Vec<Pass>, Error> {
    let dir = namespace_dir(root, namespace, false)?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Read { path: dir, source }),
    };
    let mut passes = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path
            .extension()
            .is_some_and(|extension| extension == "json")
            && let Some(pass) =
                read_file(&path).filter(|pass| pass.namespace().as_ref() == Some(namespace))
        {
            passes.push(pass);
        }
    }
    Ok(passes)
}

/// The pass `id` wherever its namespace is.
fn find_file(root: &Path, id: Uuid) -> Result<Option<Pass>, Error> {
    let name = format!("{id}.json");
    for scope in ["repos", "users"] {
        let dir = root.join(DIR).join(scope);
        // Nothing is followed out of the data directory.
        if std::fs::symlink_metadata(&dir).is_ok_and(|metadata| !metadata.is_dir()) {
            continue;
        }
        let owners = match std::fs::read_dir(&dir) {
            Ok(owners) => owners,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(Error::Read { path: dir, source }),
        };
        for owner in owners.flatten() {
            if !owner.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let path = owner.path().join(&name);
            if let Some(pass) = read_file(&path).filter(|pass| pass.id == id) {
                return Ok(Some(pass));
            }
        }
    }
    Ok(None)
}

fn read_file(path: &Path) -> Option<Pass> {
    let text = match confine::read_regular_file(path, MAX_PASS_FILE_BYTES) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(err) => {
            tracing::warn!(file.path = %path.display(), error = %err, "could not read a consolidation pass");
            return None;
        }
    };
    serde_json::from_str(&text)
        .inspect_err(|err| {
            tracing::warn!(file.path = %path.display(), error = %err, "skipped a consolidation pass that does not parse");
        })
        .ok()
}
