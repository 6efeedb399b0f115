//! Where the indexer finds vectors it computed before: the data
//! directory's file in files mode ([`EmbeddingCache`]), or the table all
//! replicas share in postgres mode, so that a text is embedded once for
//! all of them. Either is derived data: a lookup that fails is a miss,
//! and a store that fails costs only embedding again, never the write.

use std::collections::{HashMap, HashSet};

use super::cache::{ContentKey, EmbeddingCache, StoredVectors};
use crate::causes::error_chain;
use crate::store::postgres::Database;

/// The indexer's embedding cache, one of two.
pub enum VectorCache {
    /// Files mode: this data directory's file, the vectors it held at
    /// start, and which of those were used: a text that several memories
    /// hold (a sentence like "Thanks!") is read for each, and what was
    /// never used is stale.
    Local {
        file: EmbeddingCache,
        stored: StoredVectors,
        used: HashSet<ContentKey>,
    },
    /// Postgres mode: `engram_embeddings`, shared by every replica.
    Shared { database: Database, model: String },
}

impl VectorCache {
    /// The vectors held for these contents; a content it holds none for is
    /// absent from the answer.
    pub async fn take(&mut self, keys: &[ContentKey]) -> HashMap<ContentKey, Vec<f32>> {
        match self {
            Self::Local { stored, used, .. } => keys
                .iter()
                .filter_map(|key| {
                    let vector = stored.get(key)?;
                    used.insert(*key);
                    Some((*key, vector.clone()))
                })
                .collect(),
            Self::Shared { database, model } => shared_vectors(database, model, keys).await,
        }
    }

    /// The vectors held for these contents, as [`Self::take`] but without
    /// counting them as used: for a namespace loaded back into memory,
    /// from the file (not the vectors read at start, which are let go once
    /// the start-up pass is done) or the table.
    pub async fn find(&self, keys: &[ContentKey]) -> HashMap<ContentKey, Vec<f32>> {
        match self {
            Self::Local { file, .. } => file.read(keys),
            Self::Shared { database, model } => shared_vectors(database, model, keys).await,
        }
    }

    /// Keeps these vectors for the next time their contents are indexed
    /// (by this replica or, shared, by any).
    pub async fn put(&mut self, entries: &[(ContentKey, &[f32])]) {
        match self {
            Self::Local { file, .. } => file.append(entries.iter().copied()),
            Self::Shared { database, model } => {
                let rows: Vec<([u8; 32], &[f32])> = entries
                    .iter()
                    .map(|(key, vector)| (key.0, *vector))
                    .collect();
                if let Err(err) = database.cache_vectors(model, &rows).await {
                    tracing::warn!(error = %error_chain(&err), "could not keep vectors in the shared embedding cache");
                }
            }
        }
    }
}

async fn shared_vectors(
    database: &Database,
    model: &str,
    keys: &[ContentKey],
) -> HashMap<ContentKey, Vec<f32>> {
    let hashes: Vec<[u8; 32]> = keys.iter().map(|key| key.0).collect();
    match database.cached_vectors(model, &hashes).await {
        Ok(found) => found
            .into_iter()
            .map(|(hash, vector)| (ContentKey(hash), vector))
            .collect(),
        Err(err) => {
            tracing::warn!(error = %error_chain(&err), "the shared embedding cache cannot be read; embedding instead");
            HashMap::new()
        }
    }
}
