//! The durable layer under the view, the one part of the store that
//! differs between backends: a memory file written atomically under the
//! data directory (files), or a row and its change committed in one
//! transaction (postgres), and a store opened over PostgreSQL from its
//! snapshot. Everything above it (the checks, the view, the changes for
//! the index) is one implementation for both.

use std::path::{Path, PathBuf};

use super::postgres::{Database, Refusal};
use super::view::View;
use super::{Error, Reports, Store, WriteError, atomic, confine, file_name, markdown};
use crate::memory::{Memory, Namespace, Scope};

/// Whether a write re-checks, where it commits, that the memory it
/// supersedes is still there and still the head of its chain.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Chain {
    /// A new write: another replica may have changed the chain since the
    /// view allowed it.
    Checked,
    /// An import: the links are kept as the export wrote them, even to a
    /// memory deleted since (as a memory file keeps them).
    AsWritten,
}

/// Where the store's writes and deletes go before the view changes.
pub(super) enum Durable {
    Files,
    Postgres(Database),
}

impl Store {
    /// Loads every memory of `database` as of one change of its log, and
    /// returns the store with that change's number, for the follower to
    /// start after ([`super::postgres::follow::spawn`]). `root` still holds what
    /// is local to this replica (`.cache/`, `usage.json`).
    pub async fn open_postgres(root: &Path, database: Database) -> Result<(Self, u64), Error> {
        let snapshot = database.snapshot().await?;
        let view = View::of(snapshot.memories);
        tracing::info!(
            memories = view.by_id.len(),
            change = snapshot.cursor,
            "memory store loaded from PostgreSQL"
        );
        let store = Self::with(root, Durable::Postgres(database), view, Reports::default());
        Ok((store, snapshot.cursor))
    }

    /// The database this store commits to (postgres mode), for what shows
    /// the replica's state: `/readyz`, `/stats`, `/metrics`.
    pub fn database(&self) -> Option<&Database> {
        match &self.inner.durable {
            Durable::Files => None,
            Durable::Postgres(database) => Some(database),
        }
    }

    /// Refuses a write to `namespace` (of `scope`, named by the request's
    /// owner field) that could not be made: in files mode, one whose
    /// directory is a link or not a directory (made here when missing).
    pub(super) fn check_writable(
        &self,
        namespace: &Namespace,
        scope: Scope,
    ) -> Result<(), WriteError> {
        match &self.inner.durable {
            Durable::Files => self
                .namespace_dir(namespace, owner_field(scope), true)
                .map(|_| ()),
            Durable::Postgres(_) => Ok(()),
        }
    }

    /// Makes `memories` durable together, once: their files written and
    /// then made durable in one pass ([`atomic::Group`]), or their rows
    /// committed in one transaction. When the database refuses one of
    /// them (another replica changed its chain), none is written, and the
    /// refusal names it by its place. Blocking; called with the writer
    /// lock held.
    pub(super) fn persist_all(
        &self,
        memories: &[&Memory],
        chain: Chain,
    ) -> Result<Result<(), (usize, WriteError)>, WriteError> {
        match &self.inner.durable {
            Durable::Files => {
                let mut group = atomic::Group::default();
                let mut paths = Vec::with_capacity(memories.len());
                for memory in memories {
                    let field = owner_field(memory.namespace.scope());
                    let dir = self.namespace_dir(&memory.namespace, field, true)?;
                    let path = dir.join(file_name(memory.id));
                    group
                        .stage(&path, markdown::render(memory).as_bytes())
                        .map_err(|source| Error::Write {
                            path: path.clone(),
                            source,
                        })?;
                    paths.push(path);
                }
                if let Err(failed) = group.commit() {
                    // The files are new (their ids are): those in place
                    // go again, so that a write refused changes nothing,
                    // as far as the disk lets it.
                    for path in &paths[..failed.placed] {
                        let _ = atomic::remove(path);
                    }
                    return Err(Error::Write {
                        path: failed.path,
                        source: failed.source,
                    }
                    .into());
                }
                let lifecycles: Vec<_> = memories
                    .iter()
                    .filter(|memory| !memory.lifecycle.is_default())
                    .map(|memory| (&memory.namespace, memory.id, Some(&memory.lifecycle)))
                    .collect();
                if !lifecycles.is_empty() {
                    self.write_lifecycle_files(&lifecycles)?;
                }
                Ok(Ok(()))
            }
            Durable::Postgres(database) => {
                let committed = tokio::runtime::Handle::current()
                    .block_on(database.write(memories, chain == Chain::Checked))
                    .map_err(Error::Database)?;
                Ok(
                    committed
                        .map_err(|(index, refusal)| (index, refused(memories[index], refusal))),
                )
            }
        }
    }

    /// Writes `memory`'s file (files mode), replacing the one of its id
    /// atomically. Blocking; called with the writer lock held.
    pub(super) fn rewrite_file(&self, memory: &Memory) -> Result<(), WriteError> {
        let field = owner_field(memory.namespace.scope());
        let dir = self.namespace_dir(&memory.namespace, field, true)?;
        let path = dir.join(file_name(memory.id));
        atomic::write(&path, markdown::render(memory).as_bytes())
            .map_err(|source| Error::Write { path, source })?;
        Ok(())
    }

    /// Removes `memory` durably. Blocking; called with the writer lock
    /// held.
    pub(super) fn unpersist(&self, memory: &Memory) -> Result<(), WriteError> {
        match &self.inner.durable {
            Durable::Files => {
                let dir = self.namespace_dir(&memory.namespace, "id", false)?;
                let path = dir.join(file_name(memory.id));
                atomic::remove(&path).map_err(|source| Error::Remove { path, source })?;
                if !memory.lifecycle.is_default() {
                    self.write_lifecycle_files(&[(&memory.namespace, memory.id, None)])?;
                }
                Ok(())
            }
            Durable::Postgres(database) => tokio::runtime::Handle::current()
                .block_on(database.delete(memory.id))
                .map_err(|err| Error::Database(err).into()),
        }
    }

    /// The directory of `namespace`'s files, refused when it (or its scope
    /// directory) is a link or not a directory: a write or removal there
    /// would land outside the data directory. `field` is the request field
    /// that chose the namespace.
    pub(super) fn namespace_dir(
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
}

/// The answer to a write another replica's change made invalid after the
/// view allowed it: the same words as the view's own checks.
fn refused(memory: &Memory, refusal: Refusal) -> WriteError {
    let predecessor = memory
        .supersedes
        .map_or_else(String::new, |id| id.to_string());
    match refusal {
        Refusal::PredecessorGone => WriteError::Invalid {
            field: "supersedes".to_owned(),
            reason: format!("names no memory of {}: {predecessor}", memory.namespace),
        },
        Refusal::Exists => WriteError::Exists(memory.id),
        Refusal::Superseded(successor) => WriteError::Conflict {
            field: "supersedes".to_owned(),
            reason: format!(
                "names {predecessor}, which is already superseded by {successor}; supersede the head of the chain"
            ),
        },
    }
}

/// The request field that chooses a namespace of `scope`.
fn owner_field(scope: Scope) -> &'static str {
    match scope {
        Scope::Repo => "repo",
        Scope::User => "user",
    }
}
