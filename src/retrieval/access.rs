//! How often each memory was retrieved (the `access` factor of relevance),
//! and which were retrieved lately (for their `used_at`, which retention
//! reads).
//!
//! Counts live in memory and are written now and then to
//! `<data_dir>/.cache/access-counts.json`, never into memory files. Losing
//! them costs only that factor's history, so writes are atomic but not
//! urgent, and an unreadable file means starting from zero. The ids
//! retrieved lately are kept until the store has marked them used.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::memory::MemoryId;
use crate::store::atomic;

pub struct AccessCounts {
    path: PathBuf,
    counts: Mutex<HashMap<MemoryId, u64>>,
    /// Whether counts changed since the last flush.
    dirty: AtomicBool,
    /// The ids retrieved since the last [`Self::take_used`].
    used: Mutex<HashSet<MemoryId>>,
}

impl AccessCounts {
    /// Loads the counts kept under `cache_dir`. Blocking.
    pub fn load(cache_dir: &Path) -> Self {
        let path = cache_dir.join("access-counts.json");
        let counts = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(file.path = %path.display(), error = %err, "ignoring unreadable access counts");
                HashMap::new()
            }),
            Err(_) => HashMap::new(),
        };
        Self {
            path,
            counts: Mutex::new(counts),
            dirty: AtomicBool::new(false),
            used: Mutex::new(HashSet::new()),
        }
    }

    pub fn get(&self, id: MemoryId) -> u64 {
        self.lock().get(&id).copied().unwrap_or(0)
    }

    /// Counts one retrieval of each of `ids`.
    pub fn record(&self, ids: impl IntoIterator<Item = MemoryId>) {
        let mut counts = self.lock();
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            *counts.entry(id).or_default() += 1;
            used.insert(id);
        }
        self.dirty.store(true, Ordering::Release);
    }

    /// The ids retrieved since the last call, for the store to mark used;
    /// those it could not mark are given back with [`Self::give_back`].
    pub fn take_used(&self) -> Vec<MemoryId> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        used.drain().collect()
    }

    /// Keeps `ids` for the next [`Self::take_used`].
    pub fn give_back(&self, ids: Vec<MemoryId>) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        used.extend(ids);
    }

    /// Sets the counts of memories brought in with theirs (an import),
    /// leaving any count already kept as it is.
    pub fn seed(&self, counts: impl IntoIterator<Item = (MemoryId, u64)>) {
        let mut kept = self.lock();
        for (id, count) in counts {
            kept.entry(id).or_insert(count);
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Writes the counts of memories that still `exist`, if anything
    /// changed. Blocking; failures are logged (the counts stay in memory).
    pub fn flush(&self, exists: impl Fn(MemoryId) -> bool) {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let bytes = {
            let mut counts = self.lock();
            counts.retain(|id, _| exists(*id));
            serde_json::to_vec(&*counts).expect("a map of ids to numbers serializes")
        };
        let written = self
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| atomic::write(&self.path, &bytes));
        if let Err(err) = written {
            self.dirty.store(true, Ordering::Release);
            tracing::warn!(file.path = %self.path.display(), error = %err, "could not save access counts");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MemoryId, u64>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_a_flush_and_reload_and_forget_the_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (kept, gone) = (MemoryId::new(), MemoryId::new());
        let counts = AccessCounts::load(dir.path());
        counts.record([kept, kept, gone]);
        counts.flush(|id| id == kept);
        let reloaded = AccessCounts::load(dir.path());
        assert_eq!((reloaded.get(kept), reloaded.get(gone)), (2, 0));
    }

    #[test]
    fn the_ids_used_are_taken_once_and_kept_when_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = (MemoryId::new(), MemoryId::new());
        let counts = AccessCounts::load(dir.path());
        counts.record([one, one, other]);
        let mut used = counts.take_used();
        used.sort();
        let mut expected = vec![one, other];
        expected.sort();
        assert_eq!(used, expected);
        assert!(counts.take_used().is_empty());
        counts.give_back(vec![one]);
        assert_eq!(counts.take_used(), vec![one]);
    }

    #[test]
    fn a_damaged_file_means_zero() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("access-counts.json"), "{not json").unwrap();
        assert_eq!(AccessCounts::load(dir.path()).get(MemoryId::new()), 0);
    }
}
