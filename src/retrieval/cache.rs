//! The per-turn cache: the answer for (repo, user, turn id), so the
//! sub-turns of one user message cost no LLM or embedding call.
//!
//! An entry remembers the store generation of both its namespaces; a write
//! or delete in either bumps it, and the entry is then stale (read-after-
//! write holds). Entries also expire after a TTL, and the oldest go first
//! when the cache is full.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::memory::{RepoId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TurnKey {
    /// `None`: the repo was left out of the retrieval.
    pub repo: Option<RepoId>,
    /// `None`: the user was left out of the retrieval.
    pub user: Option<UserId>,
    pub turn_id: String,
}

/// The generations of the two namespaces a result was computed from.
pub type Generations = (u64, u64);

struct Entry<T> {
    value: T,
    generations: Generations,
    stored_at: Instant,
}

pub struct TurnCache<T> {
    ttl: Duration,
    capacity: usize,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    entries: HashMap<TurnKey, Entry<T>>,
    /// Keys in insertion order, for eviction; may hold keys already gone.
    order: VecDeque<TurnKey>,
}

impl<T: Clone> TurnCache<T> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    /// The cached value, if fresh and computed from these generations.
    pub fn get(&self, key: &TurnKey, generations: Generations) -> Option<T> {
        let mut inner = self.lock();
        let entry = inner.entries.get(key)?;
        if entry.generations == generations && entry.stored_at.elapsed() < self.ttl {
            return Some(entry.value.clone());
        }
        inner.entries.remove(key);
        None
    }

    pub fn put(&self, key: TurnKey, value: T, generations: Generations) {
        let mut inner = self.lock();
        let entry = Entry {
            value,
            generations,
            stored_at: Instant::now(),
        };
        if inner.entries.insert(key.clone(), entry).is_none() {
            inner.order.push_back(key);
        }
        while inner.entries.len() > self.capacity {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.entries.remove(&oldest);
        }
        // Keys whose entries went stale linger in `order`; drop them once
        // they are the bulk, so it stays bounded by the capacity.
        if inner.order.len() > 2 * self.capacity.max(inner.entries.len()) {
            let Inner { entries, order } = &mut *inner;
            order.retain(|key| entries.contains_key(key));
        }
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        // Poisoned only by a panic inside these short, infallible sections.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(turn: &str) -> TurnKey {
        TurnKey {
            repo: "r".parse().ok(),
            user: "u".parse().ok(),
            turn_id: turn.to_owned(),
        }
    }

    #[test]
    fn a_hit_needs_the_same_generations() {
        let cache = TurnCache::new(Duration::from_secs(60), 10);
        cache.put(key("t1"), 7, (1, 1));
        assert_eq!(cache.get(&key("t1"), (1, 1)), Some(7));
        assert_eq!(cache.get(&key("t2"), (1, 1)), None);
        assert_eq!(
            cache.get(&key("t1"), (1, 2)),
            None,
            "a write makes it stale"
        );
        assert_eq!(cache.get(&key("t1"), (1, 1)), None, "and it is gone");
    }

    #[test]
    fn entries_expire() {
        let cache = TurnCache::new(Duration::ZERO, 10);
        cache.put(key("t1"), 7, (0, 0));
        assert_eq!(cache.get(&key("t1"), (0, 0)), None);
    }

    #[test]
    fn the_oldest_go_first_and_the_size_stays_bounded() {
        let cache = TurnCache::new(Duration::from_secs(60), 3);
        for turn in 0..100 {
            cache.put(key(&turn.to_string()), turn, (0, 0));
            let _ = cache.get(&key(&turn.to_string()), (0, 1));
        }
        assert!(cache.is_empty());
        assert!(cache.lock().order.len() <= 6);
        for turn in 0..5 {
            cache.put(key(&turn.to_string()), turn, (0, 0));
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key("1"), (0, 0)), None);
        assert_eq!(cache.get(&key("4"), (0, 0)), Some(4));
    }
}
