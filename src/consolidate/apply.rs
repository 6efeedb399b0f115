//! A plan, with what the model decided of it, made changes: each described
//! with its reason and the lifecycles it sets ([`describe`]), kept in the
//! log of passes before any is made, then made: the versions the model
//! wrote, then every lifecycle in one write ([`apply`]). A memory that
//! changed between the plan and the write is left as it is, and its part
//! dropped from the record; a version that cannot be written leaves its
//! group to the best-supported member, as with no model.

use std::collections::{HashMap, HashSet};

use crate::config::Defaults;
use crate::memory::{Confidence, Lifecycle, MAX_REVIEW_REASON_CHARS, MemoryId, Namespace, excerpt};
use crate::store::consolidations::{Action, Change, Edit, Pass};
use crate::store::{NamespacePair, NewMemory, Store, WriteError};

use super::model::{Decisions, Merged, Settled, by_age};
use super::plan::{Contradiction, Merge, Plan};

/// A version the model wrote, to be written under `id` in place of the
/// group of change `change`.
pub(super) struct Write {
    change: usize,
    id: MemoryId,
    new: NewMemory,
    /// The member kept when it cannot be written.
    fallback: MemoryId,
}

/// The lifecycles a pass sets, each from the lifecycle its memory has
/// now or the one a change before it set.
struct Edits<'a> {
    store: &'a Store,
    set: HashMap<MemoryId, Lifecycle>,
}

impl Edits<'_> {
    fn edit(&mut self, id: MemoryId, to: impl Fn(&Lifecycle) -> Lifecycle) -> Option<Edit> {
        let before = self
            .set
            .get(&id)
            .cloned()
            .or_else(|| self.store.get(id).map(|memory| memory.lifecycle.clone()))?;
        let after = to(&before);
        self.set.insert(id, after.clone());
        Some(Edit { id, before, after })
    }

    fn supersede(&mut self, ids: &[MemoryId], by: MemoryId) -> Vec<Edit> {
        ids.iter()
            .filter_map(|&id| {
                self.edit(id, |lifecycle| Lifecycle {
                    superseded_by: Some(by),
                    ..lifecycle.clone()
                })
            })
            .collect()
    }
}

/// Adds the changes of `plan` and `decisions` to `pass`, and answers the
/// versions the model wrote.
pub(super) fn describe(
    store: &Store,
    defaults: &Defaults,
    plan: &Plan,
    decisions: Decisions,
    pass: &mut Pass,
) -> Vec<Write> {
    let mut edits = Edits {
        store,
        set: HashMap::new(),
    };
    let mut writes = Vec::new();
    let merged = decisions
        .merges
        .into_iter()
        .chain(std::iter::repeat_with(|| None));
    for (merge, decision) in plan.merges.iter().zip(merged) {
        let others: Vec<MemoryId> = merge.others.iter().map(|(id, _)| *id).collect();
        let said = format!(
            "{} say{} what memory {} says (similarity to it in brackets)",
            merge
                .others
                .iter()
                .map(|(id, similarity)| format!("{id} ({similarity:.2})"))
                .collect::<Vec<_>>()
                .join(", "),
            if others.len() == 1 { "s" } else { "" },
            merge.kept,
        );
        let kept_one = |edits: &mut Edits<'_>, note: &str| Change {
            action: Action::Merged,
            reason: format!(
                "{said}; it is kept as the best supported ({}){note}",
                merge.support
            ),
            kept: Some(merge.kept),
            superseded: others.clone(),
            flagged: Vec::new(),
            edits: edits.supersede(&others, merge.kept),
            undone_at: None,
        };
        let change = match decision {
            None => kept_one(&mut edits, ""),
            Some(Merged::Declined(why)) => kept_one(&mut edits, &format!("; not rewritten: {why}")),
            Some(Merged::Rewritten(content)) => {
                match new_version(store, defaults, merge, content) {
                    Some(new) => {
                        let id = MemoryId::new();
                        writes.push(Write {
                            change: pass.changes.len(),
                            id,
                            new,
                            fallback: merge.kept,
                        });
                        Change {
                            action: Action::Rewritten,
                            reason: format!(
                                "{said}; the model wrote them as one new version, {id}, which \
                                 supersedes them all"
                            ),
                            kept: Some(id),
                            superseded: std::iter::once(merge.kept)
                                .chain(others.iter().copied())
                                .collect(),
                            flagged: Vec::new(),
                            edits: edits.supersede(&others, id),
                            undone_at: None,
                        }
                    }
                    None => kept_one(&mut edits, "; not rewritten: it is gone"),
                }
            }
        };
        pass.changes.push(change);
    }
    let settled = decisions
        .contradictions
        .into_iter()
        .chain(std::iter::repeat_with(|| None));
    for (contradiction, decision) in plan.contradictions.iter().zip(settled) {
        if let Some(change) = contradiction_change(store, &mut edits, contradiction, decision) {
            pass.changes.push(change);
        }
    }
    writes
}

/// The change a contradiction makes: settled for the newer, or both
/// flagged; none when the model is sure they agree.
fn contradiction_change(
    store: &Store,
    edits: &mut Edits<'_>,
    contradiction: &Contradiction,
    decision: Option<Settled>,
) -> Option<Change> {
    let (first, second) = (contradiction.first.0, contradiction.second.0);
    let about = format!(
        "memories {first} and {second} are about one subject (similarity {:.2}) and may \
         disagree ({})",
        contradiction.similarity, contradiction.disagreement
    );
    let note = match decision {
        Some(Settled::Agree(why)) => {
            tracing::debug!(first = %first, second = %second, why, "the model finds no contradiction");
            return None;
        }
        Some(Settled::ForNewer(why)) => {
            let (older, newer) = by_age(store.get(first)?, store.get(second)?);
            let (older, newer) = (older.id, newer.id);
            return Some(Change {
                action: Action::Settled,
                reason: format!(
                    "{about}; the model is sure they cannot both hold ({why}): the newer, \
                     {newer}, is kept and {older} superseded by it"
                ),
                kept: Some(newer),
                superseded: vec![older],
                flagged: Vec::new(),
                edits: edits.supersede(&[older], newer),
                undone_at: None,
            });
        }
        Some(Settled::Unsure(why)) => format!("; {why}"),
        None => String::new(),
    };
    let flagged: Vec<Edit> = [&contradiction.first, &contradiction.second]
        .into_iter()
        .filter_map(|(id, reason)| {
            edits.edit(*id, |lifecycle| Lifecycle {
                needs_review: true,
                review_reason: Some(excerpt(reason, MAX_REVIEW_REASON_CHARS - 1)),
                ..lifecycle.clone()
            })
        })
        .collect();
    Some(Change {
        action: Action::Flagged,
        reason: format!("{about}; both are put under review{note}"),
        kept: None,
        superseded: Vec::new(),
        flagged: vec![first, second],
        edits: flagged,
        undone_at: None,
    })
}

/// The version the model wrote of `merge`: a new version of the member
/// kept, which it supersedes, carrying its category, anchors, commit and
/// the edges the namespace may keep; provisional, as what a model writes
/// is. `None` when the member kept is gone.
fn new_version(
    store: &Store,
    defaults: &Defaults,
    merge: &Merge,
    content: String,
) -> Option<NewMemory> {
    let kept = store.get(merge.kept)?;
    let pair = pair_of(&kept.namespace, defaults);
    let importance = std::iter::once(merge.kept)
        .chain(merge.others.iter().map(|(id, _)| *id))
        .filter_map(|id| store.get(id)?.importance)
        .reduce(f64::max);
    let related = store
        .edges_within(kept.id, |namespace| pair.contains(namespace))
        .outgoing;
    Some(NewMemory {
        scope: kept.namespace.scope(),
        category: kept.category,
        content,
        importance,
        supersedes: Some(kept.id),
        related,
        session_id: kept.session_id.clone(),
        trigger: kept.trigger,
        anchors: kept.anchors.clone(),
        commit: kept.commit.clone(),
        // The merged fact was said when the one kept was.
        observed_at: Some(kept.observed()),
        confidence: Confidence::Provisional,
        pair,
    })
}

/// A (repo, user) pair holding `namespace`, the other owner the default.
fn pair_of(namespace: &Namespace, defaults: &Defaults) -> NamespacePair {
    match namespace {
        Namespace::Repo(repo) => NamespacePair {
            repo: repo.clone(),
            user: defaults.user.clone(),
        },
        Namespace::User(user) => NamespacePair {
            repo: defaults.repo.clone(),
            user: user.clone(),
        },
    }
}

/// Keeps `pass` in the log, writes the versions the model wrote, then
/// sets the lifecycles its changes set in one durable write; answers the
/// pass as made.
pub(super) async fn apply(
    store: &Store,
    mut pass: Pass,
    writes: Vec<Write>,
) -> Result<Pass, WriteError> {
    store.keep_pass(pass.clone()).await?;
    let mut amended = false;
    for write in writes {
        if let Err(err) = store.create_once(write.id, write.new).await {
            tracing::warn!(error = %crate::causes::error_chain(&err), "the model's version of a group of near-duplicates could not be written; the best supported member is kept");
            fall_back(
                &mut pass.changes[write.change],
                write.id,
                write.fallback,
                &err,
            );
            amended = true;
        }
    }
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
            change
                .superseded
                .retain(|id| made.contains(id) || change.action == Action::Rewritten);
            change.flagged.retain(|id| made.contains(id));
        }
        pass.changes
            .retain(|change| !change.edits.is_empty() || change.action == Action::Rewritten);
        amended = true;
    }
    if amended {
        store.keep_pass(pass.clone()).await?;
    }
    Ok(pass)
}

/// Turns a rewrite whose version `written` could not be written into the
/// merge into `kept` it stands for.
fn fall_back(change: &mut Change, written: MemoryId, kept: MemoryId, err: &WriteError) {
    change.action = Action::Merged;
    change.kept = Some(kept);
    change.superseded.retain(|&id| id != kept);
    for edit in &mut change.edits {
        edit.after.superseded_by = Some(kept);
    }
    change.reason = format!(
        "{}; the model's version {written} could not be written ({err}), so {kept} is kept",
        change.reason
    );
}
