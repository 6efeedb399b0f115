//! The near-duplicate guard: a classified memory that says what a current
//! memory of its namespace already says (cosine similarity at or above the
//! threshold), or what an earlier memory of the same batch says, is not
//! written again. This is also what makes re-running a trigger after a
//! crash harmless. `POST /memories` with `dedupe` asks the same question
//! of one memory. A memory worded alike whose words disagree ("need one
//! approval" / "need two approvals") is not a copy but a change of fact:
//! it is written, and consolidation flags the pair.

use std::fmt;

use crate::blocking;
use crate::consolidate::disagree::disagreement;
use crate::embed::{self, Embedder};
use crate::index::{Index, cosine};
use crate::memory::MemoryId;
use crate::store::{NewMemory, Store};

/// Whether a memory may be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    New,
    Duplicate(DuplicateOf),
}

/// What a memory duplicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DuplicateOf {
    /// A current memory of its namespace.
    Stored(MemoryId),
    /// A memory earlier in the same batch.
    EarlierInBatch,
}

impl fmt::Display for DuplicateOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stored(id) => fmt::Display::fmt(id, f),
            Self::EarlierInBatch => f.write_str("an earlier memory of this batch"),
        }
    }
}

/// A verdict per memory, in order; one embedding call for all of them. A
/// memory is a duplicate of a current memory of its namespace at least
/// `threshold` alike (but the one it supersedes), or of an earlier new
/// one of the same namespace.
pub async fn near_duplicates(
    embedder: &Embedder,
    index: &Index,
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
    // A namespace out of memory is loaded back: duplicates are looked for
    // among all its memories.
    let snapshot = index.resident(&namespaces).await;
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
        // The memory a new version supersedes is what it changes, not a
        // copy of it, however alike their words.
        let content = &memories[at].content;
        let stored = hits.iter().find(|hit| {
            f64::from(hit.similarity) >= threshold
                && memories[at].supersedes != Some(hit.id)
                && store.is_current(hit.id)
                && store
                    .get(hit.id)
                    .is_some_and(|existing| disagreement(content, &existing.content).is_none())
        });
        let earlier = (0..at).any(|before| {
            verdicts[before] == Verdict::New
                && memories[before].pair.owner(memories[before].scope)
                    == memories[at].pair.owner(memories[at].scope)
                && f64::from(cosine(&vectors[before], &vectors[at])) >= threshold
                && disagreement(content, &memories[before].content).is_none()
        });
        verdicts.push(match (stored, earlier) {
            (Some(hit), _) => Verdict::Duplicate(DuplicateOf::Stored(hit.id)),
            (None, true) => Verdict::Duplicate(DuplicateOf::EarlierInBatch),
            (None, false) => Verdict::New,
        });
    }
    Ok(verdicts)
}
