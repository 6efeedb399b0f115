//! The bounded heap both searches rank with: the `limit` best items
//! seen, by score and then by id, so results do not depend on the order
//! items arrive in.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::memory::MemoryId;

/// Something [`TopK`] can rank: by similarity, then by id.
pub(super) trait Scored {
    fn similarity(&self) -> f32;
    fn id(&self) -> MemoryId;
}

/// A bounded min-heap keeping the `limit` best items seen.
pub(super) struct TopK<T: Scored> {
    limit: usize,
    heap: BinaryHeap<WorstFirst<T>>,
}

/// Orders items so the heap's top is the one to evict: the lowest
/// similarity, and among equals the highest id (so results are
/// deterministic, whatever order items arrive in).
struct WorstFirst<T>(T);

impl<T: Scored> Ord for WorstFirst<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .similarity()
            .total_cmp(&self.0.similarity())
            .then_with(|| self.0.id().cmp(&other.0.id()))
    }
}

impl<T: Scored> PartialOrd for WorstFirst<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Scored> PartialEq for WorstFirst<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T: Scored> Eq for WorstFirst<T> {}

impl<T: Scored> TopK<T> {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit,
            heap: BinaryHeap::with_capacity(limit + 1),
        }
    }

    /// Whether an item with this similarity and id would enter (and stay):
    /// a cheap pre-check before the caller's filter runs. Exact, so that
    /// long runs of equal scores cost no pushes.
    pub(super) fn admits(&self, similarity: f32, id: MemoryId) -> bool {
        self.heap.len() < self.limit
            || self.heap.peek().is_some_and(|worst| {
                similarity
                    .total_cmp(&worst.0.similarity())
                    .then_with(|| worst.0.id().cmp(&id))
                    .is_gt()
            })
    }

    /// The lowest similarity that may still enter, whatever its id:
    /// minus infinity until the heap is full, then the worst kept. Lets a
    /// caller skip fetching the id of most items.
    pub(super) fn floor(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.limit => worst.0.similarity(),
            _ => f32::NEG_INFINITY,
        }
    }

    pub(super) fn push(&mut self, item: T) {
        self.heap.push(WorstFirst(item));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
    }

    /// Best first.
    pub(super) fn into_sorted(self) -> Vec<T> {
        // Ascending by "worst first" order is best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|WorstFirst(item)| item)
            .collect()
    }
}
