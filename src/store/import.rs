//! Memories brought in whole, as `engram export` wrote them: ids,
//! versions, timestamps and links kept, so that a round trip gives the
//! same store. One batch is checked as a whole against the view and
//! itself before anything is written (a bad batch changes nothing); ids
//! the store holds already are skipped and counted, so importing the same
//! export again changes nothing. The batch is then written as a batch of
//! `POST /memories/batch` is: made durable together (a group of files, or
//! one transaction), then put in the view.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::durable::Chain;
use super::write::no_predecessor;
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
    /// field, for a caller that sees the namespaces `visible` admits
    /// (every one when `sees_everything`). The links are checked as
    /// `POST /memories` checks them: a `supersedes` names a memory of the
    /// namespace written that nothing else supersedes, and a `related`
    /// edge a memory that namespace may link to ([`may_relate`]), held by
    /// the store or the batch; one the caller cannot see reads as one
    /// that does not exist. A caller that sees everything may also keep a
    /// link to a memory that exists nowhere, as a memory file keeps a link
    /// to a memory since deleted (the store ignores it until such a
    /// memory is there), so an export of a whole store comes back whole;
    /// for any other caller that would tell an id it cannot see from a
    /// missing one. An id the store holds in the namespace written is
    /// skipped as existing; one it holds elsewhere is refused, saying no
    /// more than that the id is taken. Fields are named
    /// `memories[<index>].<field>`.
    pub async fn import(
        &self,
        batch: Vec<Memory>,
        visible: impl Fn(&Namespace) -> bool + Send + 'static,
        sees_everything: bool,
    ) -> Result<Imported, WriteError> {
        let store = self.clone();
        blocking::run(move || store.import_blocking(batch, &visible, sees_everything)).await
    }

    fn import_blocking(
        &self,
        batch: Vec<Memory>,
        visible: &dyn Fn(&Namespace) -> bool,
        sees_everything: bool,
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
                match view.by_id.get(&memory.id) {
                    None => new.push((index, memory)),
                    Some(held) if held.namespace == memory.namespace => {
                        imported.existing.push(memory.id);
                    }
                    // Whether the caller may see the memory that holds it
                    // or not: the answer must not say where it is.
                    Some(_) => {
                        return Err(WriteError::Conflict {
                            field: format!("memories[{index}].id"),
                            reason: format!(
                                "{} is the id of another memory; an import keeps ids, so this \
                                 memory cannot come in under it",
                                memory.id
                            ),
                        });
                    }
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
            };
            let target = |id: MemoryId| match owner(id) {
                Some(namespace) if visible(namespace) => Target::Seen(namespace),
                None if sees_everything => Target::Nowhere,
                _ => Target::Unseen,
            };
            let mut superseded = HashSet::new();
            for (index, memory) in &new {
                if let Some(predecessor) = memory.supersedes {
                    let field = format!("memories[{index}].supersedes");
                    match target(predecessor) {
                        Target::Seen(namespace) if *namespace == memory.namespace => {}
                        Target::Nowhere => {}
                        _ => return Err(no_predecessor(field, &memory.namespace, predecessor)),
                    }
                    if view.successor(predecessor).is_some() || !superseded.insert(predecessor) {
                        return Err(WriteError::Conflict {
                            field,
                            reason: format!(
                                "names {predecessor}, which another memory supersedes already"
                            ),
                        });
                    }
                }
                if let Some(kept) = memory.lifecycle.superseded_by {
                    match target(kept) {
                        _ if kept == memory.id => {
                            return Err(invalid(
                                *index,
                                "superseded_by",
                                "names the memory itself".to_owned(),
                            ));
                        }
                        Target::Seen(namespace) if *namespace == memory.namespace => {}
                        Target::Nowhere => {}
                        _ => {
                            return Err(invalid(
                                *index,
                                "superseded_by",
                                format!("names no memory of {}: {kept}", memory.namespace),
                            ));
                        }
                    }
                }
                for (edge_index, edge) in memory.related.iter().enumerate() {
                    let linkable = match target(edge.id) {
                        Target::Seen(namespace) => may_relate(&memory.namespace, namespace),
                        Target::Nowhere => true,
                        Target::Unseen => false,
                    };
                    if !linkable {
                        return Err(invalid(
                            *index,
                            &format!("related[{edge_index}].id"),
                            format!(
                                "names no memory {} may link to: {}",
                                memory.namespace, edge.id
                            ),
                        ));
                    }
                }
            }
        }
        let memories: Vec<&Memory> = new.iter().map(|(_, memory)| memory).collect();
        if let Err((index, refused)) = self.persist_all(&memories, Chain::AsWritten)? {
            tracing::warn!(memory.id = %memories[index].id, "the database refused an imported memory; nothing of the batch was written");
            return Err(refused);
        }
        let mut view = self.write_view();
        for (_, memory) in new {
            imported.written.push(memory.id);
            view.insert(Arc::new(memory));
        }
        drop(view);
        self.inner.changes.record(imported.written.iter().copied());
        Ok(imported)
    }
}

/// Where a link of an imported memory leads, as the caller may know it.
enum Target<'a> {
    /// To a memory of this namespace, which the caller sees.
    Seen(&'a Namespace),
    /// To no memory anywhere, for a caller that sees everything: kept as
    /// written.
    Nowhere,
    /// To no memory the caller sees: missing, or in a namespace it does
    /// not hold; the two read alike.
    Unseen,
}

fn invalid(index: usize, field: &str, reason: String) -> WriteError {
    WriteError::Invalid {
        field: format!("memories[{index}].{field}"),
        reason,
    }
}
