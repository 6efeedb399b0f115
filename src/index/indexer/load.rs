//! The load step: a namespace dropped from memory ([`crate::index`]'s
//! residency) is read back when a reader asks for it: its memories from
//! the store, by the ids it held, and their vectors from the embedding
//! cache (a vector the cache lacks is embedded again), applied in one
//! snapshot swap. It runs in the indexer's task, between its batches, so
//! a load and the writes to the same namespace never cross.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::{Indexer, entry_of};
use crate::embed::Priority;
use crate::embed::cache::ContentKey;
use crate::index::{Change, LoadRequest, Vectors};
use crate::memory::Memory;

impl Indexer {
    /// Loads the requested namespace back, if it is still out, and
    /// answers with the snapshot that holds it.
    pub(super) async fn load(&mut self, request: LoadRequest) {
        let started = Instant::now();
        let LoadRequest { namespace, done } = request;
        let Some(ids) = self.index.cold_ids(&namespace) else {
            // Loaded by an earlier request meanwhile.
            let _ = done.send(self.index.snapshot());
            return;
        };
        let memories: Vec<Arc<Memory>> = ids
            .iter()
            .filter_map(|id| self.store.get(*id))
            .filter(|memory| memory.namespace == namespace)
            .collect();
        let (texts, keys) = self.keyed_texts(memories.iter());
        let mut found = self.cache.find(&keys).await;
        found.retain(|_, vector| Some(vector.len()) == self.embedder.dimensions());
        self.embed_missing(&keys, &texts, &mut found).await;
        let mut keys = keys.into_iter();
        let changes = memories
            .iter()
            .zip(&texts)
            .map(|(memory, texts)| {
                let vectors: Option<Vec<Vec<f32>>> = keys
                    .by_ref()
                    .take(texts.len())
                    .map(|key| found.get(&key).cloned())
                    .collect();
                match vectors {
                    Some(mut vectors) => {
                        let whole = vectors.remove(0);
                        Change::Upsert(
                            entry_of(memory),
                            Vectors {
                                whole,
                                passages: vectors,
                            },
                        )
                    }
                    // Found by its words until its vector is back.
                    None => Change::Words(entry_of(memory)),
                }
            })
            .collect();
        // Building the snapshot grows with the namespace: off the async
        // workers, as the words step is.
        let snapshot = {
            let (index, namespace) = (Arc::clone(&self.index), namespace.clone());
            crate::blocking::run(move || index.load(&namespace, changes, started)).await
        };
        tracing::debug!(
            namespace = %namespace,
            memories = memories.len(),
            duration_ms = started.elapsed().as_millis(),
            "loaded a namespace back into memory"
        );
        let _ = done.send(snapshot);
    }

    /// Embeds the texts whose vectors the cache no longer holds (its
    /// write failed, or it was deleted), at a query's priority: a reader
    /// waits. On failure they load by their words only.
    async fn embed_missing(
        &mut self,
        keys: &[ContentKey],
        texts: &[Vec<&str>],
        found: &mut HashMap<ContentKey, Vec<f32>>,
    ) {
        let mut missing: HashMap<ContentKey, String> = HashMap::new();
        for (key, text) in keys.iter().zip(texts.iter().flatten()) {
            if !found.contains_key(key) {
                missing.entry(*key).or_insert_with(|| (*text).to_owned());
            }
        }
        if missing.is_empty() {
            return;
        }
        let (keys, texts): (Vec<ContentKey>, Vec<String>) = missing.into_iter().unzip();
        match self.embedder.embed_as(texts, Priority::Query).await {
            Ok(vectors) => {
                self.stats
                    .embedded
                    .fetch_add(vectors.len() as u64, std::sync::atomic::Ordering::Relaxed);
                let entries: Vec<(ContentKey, &[f32])> = keys
                    .iter()
                    .zip(&vectors)
                    .map(|(key, vector)| (*key, vector.as_slice()))
                    .collect();
                self.cache.put(&entries).await;
                found.extend(keys.into_iter().zip(vectors));
            }
            Err(err) => {
                self.metrics.embedding_error(&err);
                tracing::warn!(
                    error = %crate::causes::error_chain(&err),
                    "could not embed a loaded namespace's missing vectors; those memories are found by their words"
                );
            }
        }
    }
}
