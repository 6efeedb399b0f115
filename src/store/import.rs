//! Memories brought in whole, as `engram export` wrote them: ids,
//! versions, timestamps and links kept, so that a round trip gives the
//! same store. One batch is checked as a whole against the view and
//! itself before anything is written (a bad batch changes nothing); ids
//! the store holds already are skipped and counted, so importing the same
//! export again changes nothing. Each memory is then written as any other
//! write is: made durable (a file, or a row in PostgreSQL), then put in
//! the view.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::durable::Chain;
use super::{Store, WriteError, may_relate};
use crate::blocking;
use crate::memory::{Memory, MemoryId, Namespace};

/// What an import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// The memories written, in the batch's order.
    pub written: Vec<MemoryId>,
    /// The memories skipped because the store holds their id already.
    pub existing: Vec<MemoryId>,
}

impl Store {
    /// Writes the memories of `batch` whose ids are new, keeping every
    /// field. A new memory's `supersedes` may not name a memory of another
    /// namespace, nor one that something else supersedes; its `related`
    /// edges may not name a memory of a namespace it may not link to
    /// ([`may_relate`]). A link to a memory neither the store nor the batch
    /// holds in a namespace `visible` admits is kept as written, as a
    /// memory file keeps a link to a memory since deleted: the store
    /// ignores it until such a memory is there (and so an export of a
    /// store with deleted memories comes back whole). Fields are named
    /// `memories[<index>].<field>`.
    pub async fn import(
        &self,
        batch: Vec<Memory>,
        visible: impl Fn(&Namespace) -> bool + Send + 'static,
    ) -> Result<Imported, WriteError> {
        let store = self.clone();
        blocking::run(move || store.import_blocking(batch, &visible)).await
    }

    fn import_blocking(
        &self,
        batch: Vec<Memory>,
        visible: &dyn Fn(&Namespace) -> bool,
    ) -> Result<Imported, WriteError> {
        let _writer = self.lock_writer();
        let mut imported = Imported::default();
        let mut new = Vec::new();
        {
            let view = self.read();
            let mut seen = HashSet::new();
            for (index, memory) in batch.into_iter().enumerate() {
                if !seen.insert(memory.id) {
                    return Err(invalid(index, "id", format!("repeats {}", memory.id)));
                }
                if view.by_id.contains_key(&memory.id) {
                    imported.existing.push(memory.id);
                } else {
                    new.push((index, memory));
                }
            }
            let batch_owner: HashMap<MemoryId, &Namespace> = new
                .iter()
                .map(|(_, memory)| (memory.id, &memory.namespace))
                .collect();
            let owner = |id: MemoryId| {
                view.by_id
                    .get(&id)
                    .map(|memory| &memory.namespace)
                    .or_else(|| batch_owner.get(&id).copied())
                    .filter(|namespace| visible(namespace))
            };
            let mut superseded = HashSet::new();
            for (index, memory) in &new {
                if let Some(predecessor) = memory.supersedes {
                    if owner(predecessor).is_some_and(|owner| *owner != memory.namespace) {
                        return Err(invalid(
                            *index,
                            "supersedes",
                            format!("names a memory of another namespace: {predecessor}"),
                        ));
                    }
                    if view.successor(predecessor).is_some() || !superseded.insert(predecessor) {
                        return Err(WriteError::Conflict {
                            field: format!("memories[{index}].supersedes"),
                            reason: format!(
                                "names {predecessor}, which another memory supersedes already"
                            ),
                        });
                    }
                }
                for (edge_index, edge) in memory.related.iter().enumerate() {
                    if owner(edge.id).is_some_and(|target| !may_relate(&memory.namespace, target)) {
                        return Err(invalid(
                            *index,
                            &format!("related[{edge_index}].id"),
                            format!(
                                "names a memory {} may not link to: {}",
                                memory.namespace, edge.id
                            ),
                        ));
                    }
                }
            }
        }
        for (_, memory) in new {
            self.persist(&memory, Chain::AsWritten)?;
            imported.written.push(memory.id);
            self.write_view().insert(Arc::new(memory));
        }
        self.inner.changes.record(imported.written.iter().copied());
        Ok(imported)
    }
}

fn invalid(index: usize, field: &str, reason: String) -> WriteError {
    WriteError::Invalid {
        field: format!("memories[{index}].{field}"),
        reason,
    }
}
