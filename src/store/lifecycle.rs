//! Memories' lifecycles (validity, confidence, review, archive): changed
//! in place, never as a new version, durably before the view changes. A
//! check's change in place may also set a memory's anchors, when git found
//! the file one names renamed: the anchor follows its file, and the memory
//! (same id, same version) is rewritten, its file or its row.
//!
//! In files mode a namespace's lifecycles live in one hidden file beside
//! its memory files, `.lifecycle.json` (an object of memory id to
//! lifecycle, holding only those that differ from the default), replaced
//! atomically as a whole: a check that judges ten thousand memories writes
//! one file, not ten thousand. The loader reads it with the memory files
//! and the live sync leaves it alone (it is hidden). In postgres mode a
//! lifecycle is columns of the memory's row, and each change goes through
//! the change log like a write, so every replica takes it in. A change
//! over many namespaces is made one namespace at a time, each in its own
//! hold of the writer lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, btree_map};
use std::path::Path;
use std::sync::Arc;

use super::durable::Durable;
use super::{Error, Store, WriteError, atomic, confine};
use crate::blocking;
use crate::memory::{Anchor, Lifecycle, Memory, MemoryId, Namespace, Validity};

/// The file of a namespace's lifecycles, in its directory.
pub const LIFECYCLE_FILE: &str = ".lifecycle.json";

/// The largest lifecycle file read (about a million memories' worth).
const MAX_LIFECYCLE_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads the lifecycles kept in `dir`; none when there is no file. A file
/// that cannot be read is logged and read as none (its memories are then
/// unverified and confirmed, the safe side for a check to correct).
pub fn read_file(dir: &Path) -> HashMap<MemoryId, Lifecycle> {
    let path = dir.join(LIFECYCLE_FILE);
    let text = match confine::read_regular_file(&path, MAX_LIFECYCLE_FILE_BYTES) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(err) => {
            tracing::error!(file.path = %path.display(), error = %err, "could not read the memories' lifecycles");
            return HashMap::new();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|err| {
        tracing::error!(file.path = %path.display(), error = %err, "the memories' lifecycles do not parse");
        HashMap::new()
    })
}

/// What a change in place sets of a memory: its lifecycle, and its
/// anchors (which change only where a check follows a renamed file).
#[derive(Clone, Debug, PartialEq)]
pub struct InPlace {
    pub lifecycle: Lifecycle,
    pub anchors: Vec<Anchor>,
}

impl Store {
    /// Sets the lifecycle of each memory `change` gives one for (from the
    /// memory as it is), durably, and returns those changed. Ids of no
    /// memory are skipped. A change of a memory's lifecycle is not a new
    /// version: its id, version and file stay as they are.
    pub async fn update_lifecycles(
        &self,
        ids: Vec<MemoryId>,
        change: impl Fn(&Memory) -> Option<Lifecycle> + Send + 'static,
    ) -> Result<Vec<Arc<Memory>>, WriteError> {
        self.update_in_place(ids, move |memory| {
            change(memory).map(|lifecycle| InPlace {
                lifecycle,
                anchors: memory.anchors.clone(),
            })
        })
        .await
    }

    /// Sets the lifecycle and the anchors of each memory `change` gives
    /// them for, durably, and returns those changed: as
    /// [`Self::update_lifecycles`], and a memory whose anchors change is
    /// rewritten in place (its file, or its row), still the same version.
    pub async fn update_in_place(
        &self,
        ids: Vec<MemoryId>,
        change: impl Fn(&Memory) -> Option<InPlace> + Send + 'static,
    ) -> Result<Vec<Arc<Memory>>, WriteError> {
        let store = self.clone();
        blocking::run(move || store.update_in_place_blocking(&ids, &change)).await
    }

    pub(super) fn update_lifecycles_blocking(
        &self,
        ids: &[MemoryId],
        change: &dyn Fn(&Memory) -> Option<Lifecycle>,
    ) -> Result<Vec<Arc<Memory>>, WriteError> {
        self.update_in_place_blocking(ids, &|memory| {
            change(memory).map(|lifecycle| InPlace {
                lifecycle,
                anchors: memory.anchors.clone(),
            })
        })
    }

    /// Applies `change` one namespace at a time, each in its own hold of
    /// the writer lock: a change over many namespaces (the half-minute's
    /// uses, retention's pass) never keeps a write waiting for more than
    /// one namespace's file or rows.
    fn update_in_place_blocking(
        &self,
        ids: &[MemoryId],
        change: &dyn Fn(&Memory) -> Option<InPlace>,
    ) -> Result<Vec<Arc<Memory>>, WriteError> {
        let mut by_namespace: BTreeMap<Namespace, Vec<MemoryId>> = BTreeMap::new();
        {
            let view = self.read();
            for id in ids {
                if let Some(memory) = view.by_id.get(id) {
                    by_namespace
                        .entry(memory.namespace.clone())
                        .or_default()
                        .push(*id);
                }
            }
        }
        let mut changed = Vec::new();
        for ids in by_namespace.values() {
            let (mut applied, newly_gone) = self.apply_in_place(ids, change)?;
            self.flag_linked_to_all(
                &newly_gone,
                "was found gone: the code it describes no longer exists",
            );
            changed.append(&mut applied);
        }
        Ok(changed)
    }

    /// [`Self::update_in_place_blocking`] under the writer lock: the
    /// memories changed, and those of them found `gone` by this change.
    fn apply_in_place(
        &self,
        ids: &[MemoryId],
        change: &dyn Fn(&Memory) -> Option<InPlace>,
    ) -> Result<(Vec<Arc<Memory>>, Vec<MemoryId>), WriteError> {
        if ids.is_empty() {
            // Nothing retrieved since the last save of uses, say: no
            // reason to wait for the writer.
            return Ok((Vec::new(), Vec::new()));
        }
        let _writer = self.lock_writer();
        let mut newly_gone = Vec::new();
        let mut moved = Vec::new();
        let changed: Vec<Arc<Memory>> = {
            let view = self.read();
            ids.iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter_map(|id| view.by_id.get(id))
                .filter_map(|memory| {
                    let InPlace { lifecycle, anchors } = change(memory).filter(|new| {
                        new.lifecycle != memory.lifecycle || new.anchors != memory.anchors
                    })?;
                    if lifecycle.validity == Validity::Gone
                        && memory.lifecycle.validity != Validity::Gone
                    {
                        newly_gone.push(memory.id);
                    }
                    if anchors != memory.anchors {
                        moved.push(memory.id);
                    }
                    Some(Arc::new(Memory {
                        lifecycle,
                        anchors,
                        ..Memory::clone(memory)
                    }))
                })
                .collect()
        };
        if changed.is_empty() {
            return Ok((changed, newly_gone));
        }
        let numbers = match &self.inner.durable {
            Durable::Files => {
                for memory in changed.iter().filter(|memory| moved.contains(&memory.id)) {
                    self.rewrite_file(memory)?;
                }
                let files: Vec<_> = changed
                    .iter()
                    .map(|memory| (&memory.namespace, memory.id, Some(&memory.lifecycle)))
                    .collect();
                self.write_lifecycle_files(&files)?;
                Vec::new()
            }
            Durable::Postgres(database) => tokio::runtime::Handle::current()
                .block_on(database.update_in_place(&changed))
                .map_err(Error::Database)?,
        };
        let mut view = self.write_view();
        for (id, seq) in numbers {
            view.changed_lifecycle(id, seq);
        }
        for memory in &changed {
            view.remove(memory.id);
            view.insert(memory.clone());
        }
        Ok((changed, newly_gone))
    }

    /// Rewrites the lifecycle file of each namespace of `changes`, as the
    /// view holds it with `changes` applied: each a memory's namespace, id
    /// and lifecycle from now on (`None`: it is being deleted). Called with
    /// the writer lock held, before the view changes.
    pub(super) fn write_lifecycle_files(
        &self,
        changes: &[(&Namespace, MemoryId, Option<&Lifecycle>)],
    ) -> Result<(), WriteError> {
        let mut by_namespace: BTreeMap<&Namespace, BTreeMap<MemoryId, Lifecycle>> = BTreeMap::new();
        let view = self.read();
        for (namespace, _, _) in changes {
            if let btree_map::Entry::Vacant(entry) = by_namespace.entry(namespace) {
                entry.insert(
                    view.in_namespace(namespace)
                        .filter(|memory| !memory.lifecycle.is_default())
                        .map(|memory| (memory.id, memory.lifecycle.clone()))
                        .collect(),
                );
            }
        }
        drop(view);
        for (namespace, id, lifecycle) in changes {
            let kept = by_namespace
                .get_mut(namespace)
                .expect("every namespace changed has an entry");
            match lifecycle.filter(|lifecycle| !lifecycle.is_default()) {
                Some(lifecycle) => kept.insert(*id, lifecycle.clone()),
                None => kept.remove(id),
            };
        }
        for (namespace, kept) in by_namespace {
            let dir = self.namespace_dir(namespace, "id", false)?;
            let path = dir.join(LIFECYCLE_FILE);
            let bytes = serde_json::to_vec_pretty(&kept).expect("lifecycles serialize to JSON");
            atomic::write(&path, &bytes).map_err(|source| Error::Write { path, source })?;
        }
        Ok(())
    }
}
