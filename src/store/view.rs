//! The in-memory view of every loaded memory: by id, newest first, and the
//! reverse indexes (successors, incoming edges), per-namespace members and
//! generations kept beside it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet, btree_set};
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use super::{Cursor, NamespaceStats, Store};
use crate::memory::{Memory, MemoryId, Namespace, RelatedEdge};

/// The in-memory view of every loaded memory, with reverse indexes.
#[derive(Default)]
pub(super) struct View {
    pub(super) by_id: HashMap<MemoryId, Arc<Memory>>,
    pub(super) newest_first: BTreeSet<Reverse<Cursor>>,
    /// predecessor → the memories that supersede it: the versions that
    /// name it in `supersedes`, and the memory a consolidation pass kept
    /// in its place (its lifecycle's `superseded_by`).
    successors: HashMap<MemoryId, Vec<MemoryId>>,
    /// target → edges pointing at it (`id` = source).
    pub(super) incoming: HashMap<MemoryId, Vec<RelatedEdge>>,
    /// Bumped by every write and delete in a namespace, so derived data
    /// (cached retrievals, `/stats`' counts) can tell it is stale.
    pub(super) generations: HashMap<Namespace, u64>,
    /// Every version each namespace holds, newest first: a listing of a
    /// few namespaces reads theirs, not the whole store's order.
    pub(super) members: HashMap<Namespace, BTreeSet<Reverse<Cursor>>>,
    /// Postgres mode: the change number of each lifecycle this replica
    /// changed that its follower has not read back yet. A row the follower
    /// read before such a change is older than the view, and is passed over.
    own_lifecycles: HashMap<MemoryId, u64>,
}

impl View {
    /// A view of `memories`, as loaded at start.
    pub(super) fn of(memories: Vec<Memory>) -> Self {
        let mut view = Self::default();
        for memory in memories {
            view.insert(Arc::new(memory));
        }
        view
    }

    pub(super) fn insert(&mut self, memory: Arc<Memory>) {
        if let Some(predecessor) = memory.supersedes {
            self.successors
                .entry(predecessor)
                .or_default()
                .push(memory.id);
        }
        if let Some(kept) = kept_instead(&memory) {
            self.successors.entry(memory.id).or_default().push(kept);
        }
        for edge in &memory.related {
            self.incoming.entry(edge.id).or_default().push(RelatedEdge {
                id: memory.id,
                relationship: edge.relationship,
            });
        }
        self.newest_first.insert(Reverse(Cursor::of(&memory)));
        *self
            .generations
            .entry(memory.namespace.clone())
            .or_default() += 1;
        self.members
            .entry(memory.namespace.clone())
            .or_default()
            .insert(Reverse(Cursor::of(&memory)));
        self.by_id.insert(memory.id, memory);
    }

    pub(super) fn remove(&mut self, id: MemoryId) -> Option<Arc<Memory>> {
        let memory = self.by_id.remove(&id)?;
        self.newest_first.remove(&Reverse(Cursor::of(&memory)));
        if let Some(predecessor) = memory.supersedes {
            remove_from_index(&mut self.successors, predecessor, |&s| s == id);
        }
        if let Some(kept) = kept_instead(&memory) {
            remove_from_index(&mut self.successors, id, |&s| s == kept);
        }
        for edge in &memory.related {
            remove_from_index(&mut self.incoming, edge.id, |e| e.id == id);
        }
        *self
            .generations
            .entry(memory.namespace.clone())
            .or_default() += 1;
        if let Some(members) = self.members.get_mut(&memory.namespace) {
            members.remove(&Reverse(Cursor::of(&memory)));
            if members.is_empty() {
                self.members.remove(&memory.namespace);
            }
        }
        Some(memory)
    }

    /// What `namespace` holds: its versions, and its current memories
    /// by category. Only its own memories decide it (a successor is of
    /// the same namespace), so it stands while its generation does.
    pub(super) fn tally(&self, namespace: &Namespace) -> NamespaceStats {
        let mut tally = NamespaceStats::default();
        for memory in self.in_namespace(namespace) {
            tally.versions += 1;
            if self.successor(memory.id).is_none() {
                tally.memories += 1;
                *tally
                    .by_category
                    .entry(memory.category.as_str())
                    .or_default() += 1;
            }
        }
        tally
    }

    /// Every version `namespace` holds, newest first.
    pub(super) fn in_namespace<'a>(
        &'a self,
        namespace: &Namespace,
    ) -> impl Iterator<Item = &'a Arc<Memory>> {
        self.members
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|newest| self.by_id.get(&newest.0.id))
    }

    /// The versions `namespaces` hold (the whole store's when it is
    /// empty) after `after`, newest first.
    pub(super) fn newest_after<'a>(
        &'a self,
        namespaces: &[Namespace],
        after: Option<Cursor>,
    ) -> impl Iterator<Item = &'a Arc<Memory>> {
        let range = |order: &'a BTreeSet<Reverse<Cursor>>| {
            let start = after.map_or(Bound::Unbounded, |cursor| Bound::Excluded(Reverse(cursor)));
            order.range((start, Bound::Unbounded)).peekable()
        };
        let runs = if namespaces.is_empty() {
            vec![range(&self.newest_first)]
        } else {
            let distinct: HashSet<&Namespace> = namespaces.iter().collect();
            distinct
                .into_iter()
                .filter_map(|namespace| self.members.get(namespace))
                .map(range)
                .collect()
        };
        NewestFirst { runs }.filter_map(|newest| self.by_id.get(&newest.0.id))
    }

    /// Records that this replica changed `id`'s lifecycle in change `seq`.
    pub(super) fn changed_lifecycle(&mut self, id: MemoryId, seq: u64) {
        self.own_lifecycles.insert(id, seq);
    }

    /// Whether the view holds `id` as of a later change than `seq`; a
    /// change at or past the recorded one is the follower catching up,
    /// and ends the record.
    pub(super) fn holds_newer_lifecycle(&mut self, id: MemoryId, seq: u64) -> bool {
        match self.own_lifecycles.get(&id) {
            Some(&own) if own > seq => true,
            Some(_) => {
                self.own_lifecycles.remove(&id);
                false
            }
            None => false,
        }
    }

    /// Every version of the chain `id` belongs to, oldest first.
    pub(super) fn chain(&self, id: MemoryId) -> Vec<Arc<Memory>> {
        let Some(memory) = self.by_id.get(&id) else {
            return Vec::new();
        };
        let mut older = Vec::new();
        let mut seen = BTreeSet::from([id]);
        let mut cursor = memory.supersedes;
        while let Some(previous) = cursor
            .and_then(|p| self.by_id.get(&p))
            .filter(|previous| previous.namespace == memory.namespace)
        {
            if !seen.insert(previous.id) {
                break; // a hand-made cycle
            }
            older.push(previous.clone());
            cursor = previous.supersedes;
        }
        older.reverse();
        older.push(memory.clone());
        let mut current = id;
        while let Some(next) = self.successor(current) {
            if !seen.insert(next.id) {
                break;
            }
            older.push(next.clone());
            current = next.id;
        }
        older
    }

    /// The newest memory of `id`'s namespace that supersedes it, if any
    /// (chains should not fork, but hand-edited files can make them; a
    /// hand-edited `supersedes` or `superseded_by` from another namespace
    /// is never followed).
    pub(super) fn successor(&self, id: MemoryId) -> Option<&Arc<Memory>> {
        let namespace = &self.by_id.get(&id)?.namespace;
        self.successors
            .get(&id)?
            .iter()
            .filter_map(|s| self.by_id.get(s))
            // Two passes (on two replicas at once) that each kept the
            // other of a pair cancel out: both stay current.
            .filter(|successor| {
                successor.namespace == *namespace && kept_instead(successor) != Some(id)
            })
            .max_by_key(|m| Cursor::of(m))
    }
}

impl Store {
    /// Takes in memories changed outside this store's own writes (files
    /// edited on disk, another replica's writes) as one update of `view`
    /// (this store's, held by the caller with the writer lock), and
    /// records the changed ids for the index before the view is released:
    /// whoever sees the new view sees its changes pending too. The
    /// namespaces' generations move, which ends their cached retrievals.
    /// Returns the changed ids.
    pub(super) fn take_in(
        &self,
        view: &mut View,
        removals: Vec<MemoryId>,
        upserts: Vec<Memory>,
    ) -> Vec<MemoryId> {
        let mut changed: Vec<MemoryId> = removals.clone();
        changed.extend(upserts.iter().map(|memory| memory.id));
        changed.sort_unstable();
        changed.dedup();
        for id in removals {
            view.remove(id);
        }
        for memory in upserts {
            view.remove(memory.id);
            view.insert(Arc::new(memory));
        }
        if !changed.is_empty() {
            self.inner.changes.record(changed.iter().copied());
        }
        changed
    }
}

/// Runs of the newest-first order, merged into one.
struct NewestFirst<'a> {
    runs: Vec<Peekable<btree_set::Range<'a, Reverse<Cursor>>>>,
}

impl<'a> Iterator for NewestFirst<'a> {
    type Item = &'a Reverse<Cursor>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut newest: Option<(usize, &Reverse<Cursor>)> = None;
        for (at, run) in self.runs.iter_mut().enumerate() {
            if let Some(&head) = run.peek()
                && newest.is_none_or(|(_, best)| head < best)
            {
                newest = Some((at, head));
            }
        }
        self.runs[newest?.0].next()
    }
}

/// The memory a consolidation pass kept in `memory`'s place, if any (a
/// hand-edited lifecycle naming the memory itself is ignored).
fn kept_instead(memory: &Memory) -> Option<MemoryId> {
    memory
        .lifecycle
        .superseded_by
        .filter(|&kept| kept != memory.id)
}

fn remove_from_index<T>(
    index: &mut HashMap<MemoryId, Vec<T>>,
    key: MemoryId,
    matches: impl Fn(&T) -> bool,
) {
    if let Some(list) = index.get_mut(&key) {
        list.retain(|item| !matches(item));
        if list.is_empty() {
            index.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};

    use super::*;
    use crate::memory::Category;

    #[test]
    fn the_versions_of_some_namespaces_come_newest_first_as_the_whole_order_filtered() {
        let [a, b, c] = ["a", "b", "c"].map(|name| Namespace::Repo(name.parse().unwrap()));
        let start = Utc::now();
        let memories: Vec<Memory> = (0..60)
            .map(|at| {
                let namespace = [&a, &b, &c][at * 7 % 3];
                let mut memory = Memory::example(namespace.clone(), Category::Patterns, "x");
                // Some share a moment: the id breaks the tie.
                memory.created_at = start + TimeDelta::seconds(i64::try_from(at / 2).unwrap());
                memory
            })
            .collect();
        let view = View::of(memories);
        let ids = |namespaces: &[Namespace], after: Option<Cursor>| -> Vec<MemoryId> {
            view.newest_after(namespaces, after)
                .map(|memory| memory.id)
                .collect()
        };
        let whole = ids(&[], None);
        assert_eq!(whole.len(), 60);
        let cursor = Cursor::of(&view.by_id[&whole[25]]);
        for namespaces in [
            vec![a.clone()],
            vec![a.clone(), c.clone()],
            vec![b.clone(), b.clone()],
        ] {
            for after in [None, Some(cursor)] {
                let expected: Vec<MemoryId> = view
                    .newest_after(&[], after)
                    .filter(|memory| namespaces.contains(&memory.namespace))
                    .map(|memory| memory.id)
                    .collect();
                assert!(!expected.is_empty());
                assert_eq!(
                    ids(&namespaces, after),
                    expected,
                    "{namespaces:?} after {after:?}"
                );
            }
        }
        let one: Vec<MemoryId> = view.in_namespace(&b).map(|memory| memory.id).collect();
        assert_eq!(
            one,
            ids(std::slice::from_ref(&b), None),
            "one namespace alone"
        );
        let unknown = Namespace::Repo("d".parse().unwrap());
        assert!(ids(std::slice::from_ref(&unknown), None).is_empty());
        assert_eq!(view.in_namespace(&unknown).count(), 0);
    }
}
