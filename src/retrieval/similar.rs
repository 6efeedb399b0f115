//! Similar memories: the current versions nearest to one memory in its own
//! namespace, its own chain left out. Versions of one chain collapse into
//! their head, so the scan asks for spares.

use std::collections::HashSet;
use std::sync::Arc;

use crate::blocking;
use crate::memory::{Memory, MemoryId};

use super::search::CANDIDATE_FACTOR;
use super::{Degraded, Retriever};

impl Retriever {
    /// The memories nearest to `memory` in its own namespace, current
    /// versions only, leaving out its own chain.
    pub async fn similar(
        &self,
        memory: &Memory,
        limit: usize,
    ) -> Result<Vec<(Arc<Memory>, f32)>, Degraded> {
        let inner = &self.inner;
        if !inner.index_ready.is_ready() {
            return Err(Degraded::IndexNotReady);
        }
        let snapshot = inner
            .index
            .resident(std::slice::from_ref(&memory.namespace))
            .await;
        let vector = snapshot
            .vector(&memory.namespace, memory.id)
            .ok_or(Degraded::MemoryNotIndexed)?;
        let chain: HashSet<MemoryId> = inner.store.chain(memory.id).iter().map(|m| m.id).collect();
        let namespace = memory.namespace.clone();
        // Versions of one chain collapse into its head, so ask for spares.
        let candidates = limit * CANDIDATE_FACTOR + chain.len();
        let hits = {
            let chain = chain.clone();
            blocking::run(move || {
                snapshot.search(&[namespace], &[vector], candidates, |id, _| {
                    !chain.contains(&id)
                })
            })
            .await
        };
        let mut seen = HashSet::new();
        let mut similar = Vec::new();
        for hit in hits {
            let Some(head) = inner.store.head_of(hit.id) else {
                continue;
            };
            if !chain.contains(&head.id) && seen.insert(head.id) {
                similar.push((head, hit.similarity));
            }
        }
        similar.truncate(limit);
        Ok(similar)
    }
}
