//! The per-turn cache: the answer for (repo, user, turn id) and the
//! request's fingerprint, so the sub-turns of one user message that ask
//! the same again cost no LLM or embedding call, while a changed query,
//! window, filter or budget within the turn is a new answer.
//!
//! An entry remembers the store generation of both its namespaces; a write
//! or delete in either bumps it, and the entry is then stale (read-after-
//! write holds). Entries also expire after a TTL. The cache is bounded twice:
//! by entries and by the bytes its answers hold (one answer with
//! `top_k: 1000` and a large `token_budget` is megabytes); past either
//! bound the least recently used entries go first, and an answer larger
//! than the whole byte budget is not cached at all.

use std::collections::{BTreeMap, HashMap};
use std::mem::size_of;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::memory::{RelatedEdge, RepoId, UserId};

use super::{Outcome, RetrievedMemory};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TurnKey {
    /// `None`: the repo was left out of the retrieval.
    pub repo: Option<RepoId>,
    /// `None`: the user was left out of the retrieval.
    pub user: Option<UserId>,
    pub turn_id: String,
    /// [`Request::fingerprint`](super::Request::fingerprint): what else the
    /// answer depends on.
    pub request: [u8; 32],
}

/// The generations of the two namespaces a result was computed from.
pub type Generations = (u64, u64);

/// The memory a cached value holds, estimated cheaply: what is counted is
/// what grows with the answer (strings, per-item structs), not allocator
/// slack, so it is a lower bound close to the truth for large answers.
pub trait Footprint {
    fn footprint(&self) -> usize;
}

/// Room for the short strings of a retrieved memory (repo or user id and
/// session id, each at most 128 bytes) besides its content.
const MEMORY_SHORT_STRINGS: usize = 2 * 128;

impl Footprint for Outcome {
    /// The answer's strings (content, injection, queries, hypotheses) by
    /// length, plus each memory's struct and edges.
    fn footprint(&self) -> usize {
        let strings = |texts: &[String]| {
            texts
                .iter()
                .map(|text| size_of::<String>() + text.len())
                .sum::<usize>()
        };
        let memories: usize = self
            .memories
            .iter()
            .map(|retrieved| {
                size_of::<RetrievedMemory>()
                    + MEMORY_SHORT_STRINGS
                    + retrieved.memory.content.len()
                    + retrieved.memory.related.len() * size_of::<RelatedEdge>()
            })
            .sum();
        size_of::<Self>()
            + self.turn_id.len()
            + self.query.as_ref().map_or(0, String::len)
            + self.expanded_query.as_ref().map_or(0, String::len)
            + strings(&self.hypotheses)
            + strings(&self.added_terms)
            + self.injection.len()
            + memories
    }
}

struct Entry<T> {
    value: T,
    generations: Generations,
    stored_at: Instant,
    /// The value's footprint plus the key's.
    bytes: usize,
    /// When it was last stored or read, on the cache's own clock.
    used: u64,
}

pub struct TurnCache<T> {
    ttl: Duration,
    capacity: usize,
    max_bytes: usize,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    entries: HashMap<TurnKey, Entry<T>>,
    /// Every entry's key by its `used` tick: the first is the least
    /// recently used.
    order: BTreeMap<u64, TurnKey>,
    /// Ticks on every store and read.
    clock: u64,
    /// The sum of the entries' `bytes`.
    bytes: usize,
    /// Entries dropped to keep within the bounds.
    evictions: u64,
}

impl<T> Inner<T> {
    fn remove(&mut self, key: &TurnKey) -> Option<Entry<T>> {
        let entry = self.entries.remove(key)?;
        self.order.remove(&entry.used);
        self.bytes -= entry.bytes;
        Some(entry)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl<T: Clone + Footprint> TurnCache<T> {
    pub fn new(ttl: Duration, capacity: usize, max_bytes: usize) -> Self {
        Self {
            ttl,
            capacity,
            max_bytes,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                order: BTreeMap::new(),
                clock: 0,
                bytes: 0,
                evictions: 0,
            }),
        }
    }

    /// The cached value, if fresh and computed from these generations; a
    /// hit makes it the most recently used.
    pub fn get(&self, key: &TurnKey, generations: Generations) -> Option<T> {
        let mut inner = self.lock();
        let entry = inner.entries.get(key)?;
        if entry.generations != generations || entry.stored_at.elapsed() >= self.ttl {
            inner.remove(key);
            return None;
        }
        let last_used = entry.used;
        let now = inner.tick();
        inner.order.remove(&last_used);
        inner.order.insert(now, key.clone());
        let entry = inner.entries.get_mut(key)?;
        entry.used = now;
        Some(entry.value.clone())
    }

    /// Stores `value`, then evicts the least recently used entries until
    /// both bounds hold. A value larger than the whole byte budget is not
    /// stored (and any older answer for the key is dropped).
    pub fn put(&self, key: TurnKey, value: T, generations: Generations) {
        let bytes = value.footprint()
            + size_of::<Entry<T>>()
            + 2 * size_of::<TurnKey>()
            + 2 * key.turn_id.len();
        let mut inner = self.lock();
        inner.remove(&key);
        if bytes > self.max_bytes {
            return;
        }
        let used = inner.tick();
        inner.order.insert(used, key.clone());
        inner.bytes += bytes;
        inner.entries.insert(
            key,
            Entry {
                value,
                generations,
                stored_at: Instant::now(),
                bytes,
                used,
            },
        );
        while inner.entries.len() > self.capacity || inner.bytes > self.max_bytes {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(entry) = inner.entries.remove(&oldest) {
                inner.bytes -= entry.bytes;
                inner.evictions += 1;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the cached values are estimated to hold ([`Footprint`]).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Entries evicted to keep within the bounds since start.
    pub fn evictions(&self) -> u64 {
        self.lock().evictions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        // Poisoned only by a panic inside these short, infallible sections.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1024 * 1024;

    impl Footprint for i32 {
        fn footprint(&self) -> usize {
            size_of::<Self>()
        }
    }

    impl Footprint for String {
        fn footprint(&self) -> usize {
            size_of::<Self>() + self.len()
        }
    }

    fn key(turn: &str) -> TurnKey {
        TurnKey {
            repo: "r".parse().ok(),
            user: "u".parse().ok(),
            turn_id: turn.to_owned(),
            request: [0; 32],
        }
    }

    #[test]
    fn a_hit_needs_the_same_generations() {
        let cache = TurnCache::new(Duration::from_secs(60), 10, MB);
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
        let cache = TurnCache::new(Duration::ZERO, 10, MB);
        cache.put(key("t1"), 7, (0, 0));
        assert_eq!(cache.get(&key("t1"), (0, 0)), None);
    }

    #[test]
    fn the_oldest_go_first_and_the_size_stays_bounded() {
        let cache = TurnCache::new(Duration::from_secs(60), 3, MB);
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

    #[test]
    fn the_byte_budget_holds_and_the_least_recently_used_go_first() {
        let answer = |c: char| c.to_string().repeat(100_000);
        // Room for three answers of 100 kB, not four.
        let cache = TurnCache::new(Duration::from_secs(60), 1000, 350_000);
        for turn in ["a", "b", "c"] {
            cache.put(key(turn), answer('x'), (0, 0));
        }
        assert_eq!(cache.len(), 3);
        let three = cache.bytes();
        assert!((300_000..350_000).contains(&three), "{three}");
        assert!(
            cache.get(&key("a"), (0, 0)).is_some(),
            "a is now the freshest"
        );

        cache.put(key("d"), answer('y'), (0, 0));
        assert_eq!(cache.evictions(), 1);
        assert_eq!(
            cache.get(&key("b"), (0, 0)),
            None,
            "b was the least recently used"
        );
        assert!(cache.get(&key("a"), (0, 0)).is_some());
        assert_eq!(cache.bytes(), three, "one in, one out");

        for turn in 0..100 {
            cache.put(key(&turn.to_string()), answer('z'), (0, 0));
            assert!(cache.bytes() <= 350_000);
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.evictions(), 101);

        // Stale entries give their bytes back as they are found.
        for turn in 97..100 {
            assert_eq!(cache.get(&key(&turn.to_string()), (1, 0)), None);
        }
        assert!(cache.is_empty());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn an_answer_larger_than_the_whole_budget_is_not_cached() {
        let cache = TurnCache::new(Duration::from_secs(60), 1000, 10_000);
        cache.put(key("t1"), "small".to_owned(), (0, 0));
        cache.put(key("t1"), "x".repeat(20_000), (0, 0));
        assert_eq!(
            cache.get(&key("t1"), (0, 0)),
            None,
            "nor is the older answer kept"
        );
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.evictions(), 0, "nothing else had to go");
    }

    #[test]
    fn an_answer_is_counted_by_its_text() {
        let empty = Outcome {
            turn_id: "t".to_owned(),
            cached: false,
            mode: super::super::Mode::Query,
            degraded: None,
            query: Some("q".to_owned()),
            hypotheses: Vec::new(),
            expanded_query: None,
            added_terms: Vec::new(),
            moved_toward: None,
            total_matches: 0,
            index_catching_up: false,
            memories: Vec::new(),
            injection: String::new(),
            timings_ms: super::super::Timings::default(),
        };
        let large = Outcome {
            hypotheses: vec!["h".repeat(1000); 3],
            injection: "i".repeat(50_000),
            ..empty.clone()
        };
        let grown = large.footprint() - empty.footprint();
        assert!((53_000..54_000).contains(&grown), "{grown}");
    }
}
