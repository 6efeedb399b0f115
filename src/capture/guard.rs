//! The near-duplicate guard: a classified memory that says what a current
//! memory of its namespace already says (cosine similarity at or above the
//! threshold), or what an earlier memory of the same batch says, is not
//! written again. This is also what makes re-running a trigger after a
//! crash harmless.

use std::sync::Arc;

use crate::blocking;
use crate::embed::{self, Embedder};
use crate::index::{Index, cosine};
use crate::store::{NewMemory, Store};

/// Whether a memory may be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    New,
    /// What it duplicates: a memory id, or "an earlier memory of this batch".
    Duplicate(String),
}

/// A verdict per memory, in order; one embedding call for all of them.
pub async fn near_duplicates(
    embedder: &Embedder,
    index: &Arc<Index>,
    store: &Store,
    memories: &[NewMemory],
    threshold: f64,
) -> Result<Vec<Verdict>, embed::Error> {
    let texts = memories
        .iter()
        .map(|memory| memory.content.clone())
        .collect();
    let vectors = embedder.embed(texts).await?;
    let namespaces: Vec<_> = memories
        .iter()
        .map(|memory| memory.pair.owner(memory.scope))
        .collect();
    let snapshot = index.snapshot();
    let nearest = {
        let vectors = vectors.clone();
        blocking::run(move || {
            vectors
                .iter()
                .zip(&namespaces)
                .map(|(vector, namespace)| {
                    snapshot.search(
                        std::slice::from_ref(namespace),
                        std::slice::from_ref(vector),
                        4,
                        |_, _| true,
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
    };
    let mut verdicts = Vec::with_capacity(memories.len());
    for (at, hits) in nearest.iter().enumerate() {
        let stored = hits
            .iter()
            .find(|hit| f64::from(hit.similarity) >= threshold && store.is_current(hit.id));
        let earlier = (0..at).any(|before| {
            verdicts[before] == Verdict::New
                && memories[before].pair.owner(memories[before].scope)
                    == memories[at].pair.owner(memories[at].scope)
                && f64::from(cosine(&vectors[before], &vectors[at])) >= threshold
        });
        verdicts.push(match (stored, earlier) {
            (Some(hit), _) => Verdict::Duplicate(hit.id.to_string()),
            (None, true) => Verdict::Duplicate("an earlier memory of this batch".to_owned()),
            (None, false) => Verdict::New,
        });
    }
    Ok(verdicts)
}
