//! The changes the index has not yet taken in: recorded by every write,
//! delete and sync, acknowledged by the indexer stage by stage, and waited
//! on by readers that need the index to have caught up.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Reach, Store};
use crate::memory::{MemoryId, Namespace};

/// Memories written or deleted that the index has not yet taken in.
///
/// Each change carries a sequence number, so acknowledging a change the
/// indexer processed never drops a newer change to the same memory. The
/// index takes a change in two steps (see [`IndexStage`]); each is
/// acknowledged on its own, the words first.
#[derive(Default)]
pub(super) struct ChangeLog {
    pending: Mutex<PendingChanges>,
    /// Wakes the indexer; a notification sent while nobody waits is kept.
    notify: tokio::sync::Notify,
    /// Counts acknowledgements, for those waiting for the index to catch up.
    acknowledged: tokio::sync::watch::Sender<u64>,
    /// How many are waiting for vectors right now: the indexer embeds at
    /// once for them rather than gather a fuller batch.
    awaiting_vectors: AtomicUsize,
}

#[derive(Default)]
struct PendingChanges {
    /// Every change not fully applied (its vector not in): the latest
    /// sequence of each memory.
    by_id: HashMap<MemoryId, u64>,
    /// The same changes by sequence, so the oldest are found without
    /// sorting them all (a start-up's backlog is every memory).
    by_sequence: BTreeMap<u64, MemoryId>,
    /// Those of them whose words are not in either, by sequence.
    words: BTreeMap<u64, MemoryId>,
    next_sequence: u64,
}

/// How far the index has taken a change in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexStage {
    /// Its words: the memory is found by the lexical search and passes the
    /// filters (a deleted one is gone from both searches).
    Words,
    /// Its vector too: fully applied.
    Vectors,
}

/// A change to one memory: look the id up to see whether it was written
/// (present) or deleted (absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PendingChange {
    pub id: MemoryId,
    sequence: u64,
}

impl ChangeLog {
    pub(super) fn record(&self, ids: impl IntoIterator<Item = MemoryId>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            let sequence = pending.next_sequence;
            pending.next_sequence += 1;
            if let Some(older) = pending.by_id.insert(id, sequence) {
                pending.words.remove(&older);
                pending.by_sequence.remove(&older);
            }
            pending.words.insert(sequence, id);
            pending.by_sequence.insert(sequence, id);
        }
        drop(pending);
        self.notify.notify_one();
    }
}

impl Store {
    /// The oldest `limit` changes whose vectors are not in yet, oldest
    /// first.
    pub fn oldest_pending(&self, limit: usize) -> Vec<PendingChange> {
        self.lock_changes()
            .by_sequence
            .iter()
            .take(limit)
            .map(|(&sequence, &id)| PendingChange { id, sequence })
            .collect()
    }

    /// The changes whose words are not in yet, oldest first.
    pub fn pending_words(&self) -> Vec<PendingChange> {
        self.lock_changes()
            .words
            .iter()
            .map(|(&sequence, &id)| PendingChange { id, sequence })
            .collect()
    }

    /// Whether `change` is still the latest change to its memory, not yet
    /// fully acknowledged: a newer one (a delete) makes it stale.
    pub fn is_latest(&self, change: &PendingChange) -> bool {
        self.lock_changes().by_id.get(&change.id) == Some(&change.sequence)
    }

    /// Numbers that change whenever a memory of `reach`'s repo or user
    /// namespace is written or deleted (0 for one it leaves out).
    pub fn generations(&self, reach: &Reach) -> (u64, u64) {
        let view = self.read();
        let of = |namespace: Option<Namespace>| {
            namespace.map_or(0, |namespace| {
                view.generations.get(&namespace).copied().unwrap_or(0)
            })
        };
        (
            of(reach.repo.clone().map(Namespace::Repo)),
            of(reach.user.clone().map(Namespace::User)),
        )
    }

    /// Whether a change the index has not taken in up to `stage` may touch
    /// one of `namespaces` (a deleted memory's namespace is unknown: it
    /// counts).
    pub fn has_pending_in(&self, namespaces: &[Namespace], stage: IndexStage) -> bool {
        let pending: Vec<MemoryId> = {
            let changes = self.lock_changes();
            match stage {
                IndexStage::Words => changes.words.values().copied().collect(),
                IndexStage::Vectors => changes.by_id.keys().copied().collect(),
            }
        };
        let view = self.read();
        pending.iter().any(|id| {
            view.by_id
                .get(id)
                .is_none_or(|memory| namespaces.contains(&memory.namespace))
        })
    }

    /// How many changes wait for the index: their vectors (`Vectors`), or
    /// their words too (`Words`).
    pub fn pending_change_count(&self, stage: IndexStage) -> usize {
        let pending = self.lock_changes();
        match stage {
            IndexStage::Words => pending.words.len(),
            IndexStage::Vectors => pending.by_id.len(),
        }
    }

    /// Marks the words of `done` as taken in; a memory changed again since
    /// stays pending.
    pub fn acknowledge_words(&self, done: &[PendingChange]) {
        let mut pending = self.lock_changes();
        for change in done {
            pending.words.remove(&change.sequence);
        }
        drop(pending);
        self.announce_acknowledgement();
    }

    /// Marks `done` as fully taken in (words and vector); a memory changed
    /// again since stays pending.
    pub fn acknowledge(&self, done: &[PendingChange]) {
        let mut pending = self.lock_changes();
        for change in done {
            if pending.by_id.get(&change.id) == Some(&change.sequence) {
                pending.by_id.remove(&change.id);
                pending.by_sequence.remove(&change.sequence);
                pending.words.remove(&change.sequence);
            }
        }
        drop(pending);
        self.announce_acknowledgement();
    }

    /// Wakes those waiting for the index to catch up.
    fn announce_acknowledgement(&self) {
        self.inner
            .changes
            .acknowledged
            .send_modify(|count| *count += 1);
    }

    /// Waits until the index has taken in, up to `stage`, every change
    /// that may touch `namespaces`, for at most `limit`; false if it has
    /// not by then.
    pub async fn wait_until_indexed(
        &self,
        namespaces: &[Namespace],
        stage: IndexStage,
        limit: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut acknowledgements = self.inner.changes.acknowledged.subscribe();
        let _awaiting = (stage == IndexStage::Vectors).then(|| AwaitingVectors::new(self));
        loop {
            if !self.has_pending_in(namespaces, stage) {
                return true;
            }
            match tokio::time::timeout_at(deadline, acknowledgements.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// Whether someone waits for vectors now (see
    /// [`Self::wait_until_indexed`]).
    pub fn vectors_awaited(&self) -> bool {
        self.inner.changes.awaiting_vectors.load(Ordering::Acquire) > 0
    }

    /// Completes when a change has been recorded since the last call
    /// completed (at once if one was recorded meanwhile), or someone began
    /// to wait for vectors.
    pub async fn changed(&self) {
        self.inner.changes.notify.notified().await;
    }
    fn lock_changes(&self) -> std::sync::MutexGuard<'_, PendingChanges> {
        self.inner
            .changes
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts a wait for vectors while it lives, and wakes the indexer when it
/// begins, so that it stops gathering.
struct AwaitingVectors<'a>(&'a ChangeLog);

impl<'a> AwaitingVectors<'a> {
    fn new(store: &'a Store) -> Self {
        let changes = &store.inner.changes;
        changes.awaiting_vectors.fetch_add(1, Ordering::AcqRel);
        changes.notify.notify_one();
        Self(changes)
    }
}

impl Drop for AwaitingVectors<'_> {
    fn drop(&mut self) {
        self.0.awaiting_vectors.fetch_sub(1, Ordering::AcqRel);
    }
}
