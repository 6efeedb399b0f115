//! The embedding cache replicas share (`engram_embeddings`, migration 3):
//! the vector of a text, keyed by the embedding model's key and the
//! text's SHA-256, so a text is embedded once for all replicas. Vectors
//! are stored as little-endian floats. Derived data, like the files-mode
//! `.cache/`: a row that cannot be read is no hit.

use super::{Database, Error};

/// A text's SHA-256 digest, the cache's key within a model.
pub type TextHash = [u8; 32];

impl Database {
    /// The vectors of `model` the table holds for these texts; the others
    /// are simply absent.
    pub async fn cached_vectors(
        &self,
        model: &str,
        texts: &[TextHash],
    ) -> Result<Vec<(TextHash, Vec<f32>)>, Error> {
        let client = self.pool.get().await?;
        let keys: Vec<&[u8]> = texts.iter().map(<[u8; 32]>::as_slice).collect();
        let rows = client
            .query(
                "SELECT text_hash, vector FROM engram_embeddings \
                 WHERE model = $1 AND text_hash = ANY($2)",
                &[&model, &keys],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let hash: &[u8] = row.try_get(0).ok()?;
                let bytes: &[u8] = row.try_get(1).ok()?;
                Some((hash.try_into().ok()?, floats(bytes)))
            })
            .collect())
    }

    /// Stores these vectors of `model`, replacing what the table held for
    /// the same texts (a model's length changed in its configuration).
    pub async fn cache_vectors(
        &self,
        model: &str,
        entries: &[(TextHash, &[f32])],
    ) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let client = self.pool.get().await?;
        let hashes: Vec<&[u8]> = entries.iter().map(|(hash, _)| hash.as_slice()).collect();
        let vectors: Vec<Vec<u8>> = entries
            .iter()
            .map(|(_, vector)| {
                vector
                    .iter()
                    .flat_map(|value| value.to_le_bytes())
                    .collect()
            })
            .collect();
        client
            .execute(
                "INSERT INTO engram_embeddings (model, text_hash, vector) \
                 SELECT $1, hash, vector FROM unnest($2::bytea[], $3::bytea[]) AS t(hash, vector) \
                 ON CONFLICT (model, text_hash) DO UPDATE SET vector = EXCLUDED.vector",
                &[&model, &hashes, &vectors],
            )
            .await?;
        Ok(())
    }

    /// The length of `model`'s vectors in the table, if it holds any: a
    /// replica whose remote model's length is not configured learns it
    /// here, as from the files-mode cache's header.
    pub async fn cached_dimensions(&self, model: &str) -> Result<Option<usize>, Error> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT octet_length(vector) / 4 FROM engram_embeddings WHERE model = $1 LIMIT 1",
                &[&model],
            )
            .await?;
        Ok(row
            .map(|row| row.try_get::<_, i32>(0))
            .transpose()?
            .and_then(|length| usize::try_from(length).ok()))
    }
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
