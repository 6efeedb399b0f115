//! A plan made changes: each described with its reason and the
//! lifecycles it sets ([`describe`]), kept in the log of passes before
//! any is made, then made in one lifecycle write ([`apply`]). A memory
//! that changed between the plan and the write is left as it is, and its
//! part dropped from the record.

use std::collections::{HashMap, HashSet};

use crate::memory::{Lifecycle, MAX_REVIEW_REASON_CHARS, MemoryId, excerpt};
use crate::store::consolidations::{Action, Change, Edit, Pass};
use crate::store::{Store, WriteError};

use super::plan::Plan;

/// Adds `plan`'s changes to `pass`, each with the lifecycles it sets as
/// they follow from the memories' lifecycles now and the changes before it.
pub(super) fn describe(store: &Store, plan: &Plan, pass: &mut Pass) {
    let mut set: HashMap<MemoryId, Lifecycle> = HashMap::new();
    let mut edit = |id: MemoryId, to: &dyn Fn(&Lifecycle) -> Lifecycle| {
        let before = set
            .get(&id)
            .cloned()
            .or_else(|| store.get(id).map(|memory| memory.lifecycle.clone()))?;
        let after = to(&before);
        set.insert(id, after.clone());
        Some(Edit { id, before, after })
    };
    for merge in &plan.merges {
        let superseded: Vec<MemoryId> = merge.others.iter().map(|(id, _)| *id).collect();
        let edits: Vec<Edit> = superseded
            .iter()
            .filter_map(|&id| {
                edit(id, &|lifecycle| Lifecycle {
                    superseded_by: Some(merge.kept),
                    ..lifecycle.clone()
                })
            })
            .collect();
        let similarities: Vec<String> = merge
            .others
            .iter()
            .map(|(id, similarity)| format!("{id} ({similarity:.2})"))
            .collect();
        pass.changes.push(Change {
            action: Action::Merged,
            reason: format!(
                "{} say{} what memory {} says (similarity to it in brackets); it is kept as the \
                 best supported ({})",
                similarities.join(", "),
                if similarities.len() == 1 { "s" } else { "" },
                merge.kept,
                merge.support
            ),
            kept: Some(merge.kept),
            superseded,
            flagged: Vec::new(),
            edits,
            undone_at: None,
        });
    }
    for contradiction in &plan.contradictions {
        let edits: Vec<Edit> = [&contradiction.first, &contradiction.second]
            .into_iter()
            .filter_map(|(id, reason)| {
                edit(*id, &|lifecycle| Lifecycle {
                    needs_review: true,
                    review_reason: Some(excerpt(reason, MAX_REVIEW_REASON_CHARS - 1)),
                    ..lifecycle.clone()
                })
            })
            .collect();
        let (first, second) = (contradiction.first.0, contradiction.second.0);
        pass.changes.push(Change {
            action: Action::Flagged,
            reason: format!(
                "memories {first} and {second} are about one subject (similarity {:.2}) and may \
                 disagree ({}); both are put under review",
                contradiction.similarity, contradiction.disagreement
            ),
            kept: None,
            superseded: Vec::new(),
            flagged: vec![first, second],
            edits,
            undone_at: None,
        });
    }
}

/// Keeps `pass` in the log, then sets the lifecycles its changes set, in
/// one durable write; answers the pass as made.
pub(super) async fn apply(store: &Store, mut pass: Pass) -> Result<Pass, WriteError> {
    store.keep_pass(pass.clone()).await?;
    // Each memory from the lifecycle it had before the pass to the one
    // its last change leaves.
    let mut span: HashMap<MemoryId, (Lifecycle, Lifecycle)> = HashMap::new();
    for edit in pass.changes.iter().flat_map(|change| &change.edits) {
        span.entry(edit.id)
            .or_insert_with(|| (edit.before.clone(), edit.after.clone()))
            .1 = edit.after.clone();
    }
    let ids: Vec<MemoryId> = span.keys().copied().collect();
    let count = ids.len();
    let made: HashSet<MemoryId> = store
        .update_lifecycles(ids, move |memory| {
            let (before, after) = span.get(&memory.id)?;
            (memory.lifecycle == *before).then(|| after.clone())
        })
        .await?
        .iter()
        .map(|memory| memory.id)
        .collect();
    if made.len() < count {
        for change in &mut pass.changes {
            change.edits.retain(|edit| made.contains(&edit.id));
            change.superseded.retain(|id| made.contains(id));
            change.flagged.retain(|id| made.contains(id));
        }
        pass.changes.retain(|change| !change.edits.is_empty());
        store.keep_pass(pass.clone()).await?;
    }
    Ok(pass)
}
