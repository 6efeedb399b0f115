//! Engram's own writes: new memories checked against the view (their
//! `supersedes` and `related`), made durable together (`store::durable`),
//! then put in the view; and deletes, made durable before the view
//! changes.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{SubsecRound, Utc};

use super::durable::Chain;
use super::{NewMemory, Reach, Store, WriteError};
use crate::blocking;
use crate::memory::{Lifecycle, Memory, MemoryId, Namespace};

impl Store {
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
        blocking::run(move || store.create_blocking(MemoryId::new(), new, reach)).await
    }

    /// [`Self::create`] under the id `id`, once: a memory with that id
    /// already written (in the view, or committed by another replica) is
    /// [`WriteError::Exists`]. A capture pass run again after a crash
    /// writes into the ids of its first run, so it never writes twice.
    pub async fn create_once(
        &self,
        id: MemoryId,
        new: NewMemory,
    ) -> Result<Arc<Memory>, WriteError> {
        let store = self.clone();
        let reach = Reach::from(new.pair.clone());
        blocking::run(move || store.create_blocking(id, new, reach)).await
    }

    /// Writes `batch`, each memory for a caller that reaches its own
    /// reach, as if one at a time in order, but made durable together:
    /// one group of files, or one transaction. Each is checked on its
    /// own, against the view and the memories before it in the batch
    /// (two that supersede the same memory: the second is refused as
    /// [`Self::create_within`] would refuse it after the first). Answers
    /// each memory's outcome in order; a refused one changes nothing.
    /// `Err` when the durable write itself failed: then none was written.
    pub async fn create_all(
        &self,
        batch: Vec<(NewMemory, Reach)>,
    ) -> Result<Vec<Result<Arc<Memory>, WriteError>>, WriteError> {
        let store = self.clone();
        let batch = batch
            .into_iter()
            .map(|(new, reach)| (MemoryId::new(), new, reach))
            .collect();
        blocking::run(move || store.create_all_blocking(batch)).await
    }

    /// Removes a memory's file. `None` when there is no such memory.
    pub async fn delete(&self, id: MemoryId) -> Result<Option<Arc<Memory>>, WriteError> {
        let store = self.clone();
        blocking::run(move || store.delete_blocking(id, true)).await
    }

    /// Removes a version a consolidation pass wrote, as the pass's undo
    /// does: like [`Self::delete`], but the memories linked to it are not
    /// put under review (what they rely on is as it was before the pass).
    pub async fn take_back(&self, id: MemoryId) -> Result<Option<Arc<Memory>>, WriteError> {
        let store = self.clone();
        blocking::run(move || store.delete_blocking(id, false)).await
    }

    fn create_blocking(
        &self,
        id: MemoryId,
        new: NewMemory,
        reach: Reach,
    ) -> Result<Arc<Memory>, WriteError> {
        let mut outcomes = self.create_all_blocking(vec![(id, new, reach)])?;
        outcomes.pop().expect("one outcome for one memory")
    }

    fn create_all_blocking(
        &self,
        batch: Vec<(MemoryId, NewMemory, Reach)>,
    ) -> Result<Vec<Result<Arc<Memory>, WriteError>>, WriteError> {
        let outcomes = self.create_all_locked(batch)?;
        for memory in outcomes.iter().flatten() {
            if let Some(old) = memory.supersedes {
                self.flag_linked(old, &format!("was superseded by {}", memory.id));
            }
        }
        Ok(outcomes)
    }

    fn create_all_locked(
        &self,
        batch: Vec<(MemoryId, NewMemory, Reach)>,
    ) -> Result<Vec<Result<Arc<Memory>, WriteError>>, WriteError> {
        let _writer = self.lock_writer();
        let now = Utc::now().trunc_subsecs(0);
        // The predecessors superseded by memories earlier in the batch.
        let mut superseded_here = HashMap::new();
        let mut outcomes = Vec::with_capacity(batch.len());
        for (id, new, reach) in batch {
            let checked = self.check_new(id, &new, &reach, &superseded_here);
            let version = match checked {
                Ok(version) => version,
                // The disk, not the memory: nothing of the batch is written.
                Err(WriteError::Store(err)) => return Err(err.into()),
                Err(refused) => {
                    outcomes.push(Err(refused));
                    continue;
                }
            };
            if let Some(old) = new.supersedes {
                superseded_here.insert(old, id);
            }
            outcomes.push(Ok(Arc::new(Memory {
                id,
                version,
                namespace: new.pair.owner(new.scope),
                category: new.category,
                created_at: now,
                updated_at: now,
                supersedes: new.supersedes,
                related: new.related,
                importance: new.importance,
                session_id: new.session_id,
                trigger: new.trigger,
                anchors: new.anchors,
                commit: new.commit,
                observed_at: new.observed_at,
                content: new.content,
                lifecycle: Lifecycle::of_new(new.confidence),
            })));
        }
        // What the database refuses (another replica changed a chain
        // meanwhile) is refused alone, and the rest written without it.
        loop {
            let accepted: Vec<&Memory> = outcomes
                .iter()
                .filter_map(|outcome| outcome.as_deref().ok())
                .collect();
            let (id, refusal) = match self.persist_all(&accepted, Chain::Checked)? {
                Ok(()) => break,
                Err((index, refusal)) => (accepted[index].id, refusal),
            };
            let slot = outcomes
                .iter_mut()
                .find(|outcome| outcome.as_ref().is_ok_and(|memory| memory.id == id))
                .expect("the refused memory is one of those accepted");
            *slot = Err(refusal);
        }
        let written: Vec<MemoryId> = {
            let mut view = self.write_view();
            outcomes
                .iter()
                .flatten()
                .map(|memory| {
                    view.insert(memory.clone());
                    memory.id
                })
                .collect()
        };
        self.inner.changes.record(written);
        Ok(outcomes)
    }

    /// Checks a new memory under the id `id` against the view and the
    /// predecessors superseded earlier in its batch (`superseded_here`,
    /// by whom), and that its namespace can be written; returns its
    /// version.
    fn check_new(
        &self,
        id: MemoryId,
        new: &NewMemory,
        reach: &Reach,
        superseded_here: &HashMap<MemoryId, MemoryId>,
    ) -> Result<u32, WriteError> {
        if self.get(id).is_some() {
            return Err(WriteError::Exists(id));
        }
        if let Some(old) = new.supersedes
            && let Some(successor) = superseded_here.get(&old)
        {
            return Err(already_superseded(old, *successor));
        }
        let namespace = new.pair.owner(new.scope);
        let version = self.check_links(new, &namespace, reach)?;
        self.check_writable(&namespace, new.scope)?;
        Ok(version)
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
                let predecessor = view
                    .by_id
                    .get(&predecessor_id)
                    .filter(|predecessor| predecessor.namespace == *namespace)
                    .ok_or_else(|| {
                        no_predecessor("supersedes".to_owned(), namespace, predecessor_id)
                    })?;
                if let Some(successor) = view.successor(predecessor_id) {
                    return Err(already_superseded(predecessor_id, successor.id));
                }
                // Only a hand-edited file can hold a version this high
                // (an import is bounded well below it); wrapping would
                // write a version 0, which no store reads back.
                predecessor
                    .version
                    .checked_add(1)
                    .ok_or_else(|| WriteError::Conflict {
                        field: "supersedes".to_owned(),
                        reason: format!(
                            "names {predecessor_id}, at version {}, the highest a chain can reach; \
                         write a new memory instead",
                            predecessor.version
                        ),
                    })?
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

    fn delete_blocking(
        &self,
        id: MemoryId,
        flag_linked: bool,
    ) -> Result<Option<Arc<Memory>>, WriteError> {
        let (removed, linked) = {
            let _writer = self.lock_writer();
            let Some(memory) = self.get(id) else {
                return Ok(None);
            };
            // Its links are read before it goes: a memory that is gone has none.
            let linked = if flag_linked {
                self.linked_heads(id)
            } else {
                Vec::new()
            };
            self.unpersist(&memory)?;
            let removed = self.write_view().remove(id);
            self.inner.changes.record([id]);
            (removed, linked)
        };
        self.flag(
            &linked,
            &format!("memory {id} it is linked to was forgotten"),
        );
        Ok(removed)
    }
}

/// A `supersedes` (named `field`) that names no memory a write to
/// `namespace` may supersede. A memory of another namespace is as absent
/// as no memory: the answer must not tell that the id exists elsewhere.
pub(super) fn no_predecessor(field: String, namespace: &Namespace, id: MemoryId) -> WriteError {
    WriteError::Invalid {
        field,
        reason: format!("names no memory of {namespace}: {id}"),
    }
}

/// A `supersedes` that names `predecessor`, which `successor` supersedes
/// already.
fn already_superseded(predecessor: MemoryId, successor: MemoryId) -> WriteError {
    WriteError::Conflict {
        field: "supersedes".to_owned(),
        reason: format!(
            "names {predecessor}, which is already superseded by {successor}; supersede the head of the chain"
        ),
    }
}
