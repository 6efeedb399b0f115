//! Undoing a pass's changes, all of them or some: each lifecycle the
//! change set is put back as it was, where it is still as the pass left
//! it; one changed since (reviewed, confirmed, superseded) is left as it
//! is, and said so. A version the model wrote is taken back (removed),
//! unless it was superseded since. The change is then marked undone in the log, and later
//! passes leave its memories be ([`super::history`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::Utc;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::memory::{MemoryId, Namespace};
use crate::store::consolidations::{Action, Edit, Pass};
use crate::store::{Store, WriteError};

/// Why an undo was refused.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// No pass with this id that the caller may see.
    #[error("no consolidation pass {0}")]
    NoSuchPass(Uuid),
    /// A change index past the pass's changes.
    #[error("pass {pass} has {count} changes; there is no change {index}")]
    NoSuchChange {
        pass: Uuid,
        index: usize,
        count: usize,
    },
    /// Every change asked for is undone already.
    #[error("the changes asked for of pass {0} are undone already")]
    AlreadyUndone(Uuid),
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl From<crate::store::Error> for UndoError {
    fn from(err: crate::store::Error) -> Self {
        Self::Write(err.into())
    }
}

/// What an undo did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Undone {
    /// The pass, its changes undone now marked so.
    pub pass: Pass,
    /// The memories put back as they were before the pass.
    pub restored: Vec<MemoryId>,
    /// The memories changed since the pass, left as they are (a version
    /// the model wrote that was superseded since among them).
    pub left: Vec<MemoryId>,
    /// The versions the model wrote for the pass, removed.
    pub taken_back: Vec<MemoryId>,
}

pub(super) async fn undo(
    store: &Store,
    id: Uuid,
    changes: Option<Vec<usize>>,
    visible: impl Fn(&Namespace) -> bool,
) -> Result<Undone, UndoError> {
    let mut pass = store
        .pass(id)
        .await?
        .filter(|pass| {
            pass.namespace()
                .is_some_and(|namespace| visible(&namespace))
        })
        .ok_or(UndoError::NoSuchPass(id))?;
    let count = pass.changes.len();
    let asked = changes.unwrap_or_else(|| (0..count).collect());
    if let Some(&index) = asked.iter().find(|&&index| index >= count) {
        return Err(UndoError::NoSuchChange {
            pass: id,
            index,
            count,
        });
    }
    let mut selected: Vec<usize> = asked
        .into_iter()
        .filter(|&index| pass.changes[index].undone_at.is_none())
        .collect();
    selected.sort_unstable();
    selected.dedup();
    if selected.is_empty() {
        return Err(UndoError::AlreadyUndone(id));
    }
    // Each memory's edits, the last made first.
    let mut edits: HashMap<MemoryId, Vec<Edit>> = HashMap::new();
    for &index in selected.iter().rev() {
        for edit in pass.changes[index].edits.iter().rev() {
            edits.entry(edit.id).or_default().push(edit.clone());
        }
    }
    let ids: Vec<MemoryId> = edits.keys().copied().collect();
    let left = Arc::new(Mutex::new(Vec::new()));
    let restored = {
        let left = left.clone();
        store
            .update_lifecycles(ids, move |memory| {
                let mut lifecycle = memory.lifecycle.clone();
                for edit in edits.get(&memory.id)? {
                    if lifecycle == edit.after {
                        lifecycle = edit.before.clone();
                    } else {
                        left.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(memory.id);
                        return None;
                    }
                }
                Some(lifecycle)
            })
            .await?
    };
    // The versions the model wrote go, where nothing superseded them
    // since: the members they stood for are current again.
    let mut taken_back = Vec::new();
    for &index in &selected {
        let change = &pass.changes[index];
        let Some(written) = change.kept.filter(|_| change.action == Action::Rewritten) else {
            continue;
        };
        if store.is_current(written) {
            if store.take_back(written).await?.is_some() {
                taken_back.push(written);
            }
        } else if store.get(written).is_some() {
            left.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(written);
        }
    }
    let now = Utc::now();
    for &index in &selected {
        pass.changes[index].undone_at = Some(now);
    }
    store.keep_pass(pass.clone()).await?;
    let mut left = std::mem::take(&mut *left.lock().unwrap_or_else(PoisonError::into_inner));
    left.sort();
    let mut restored: Vec<MemoryId> = restored.iter().map(|memory| memory.id).collect();
    restored.sort();
    tracing::info!(pass = %id, changes = selected.len(), restored = restored.len(), left = left.len(), "undid a consolidation pass's changes");
    Ok(Undone {
        pass,
        restored,
        left,
        taken_back,
    })
}
