//! Invalidation along links: when a memory is superseded, forgotten or
//! found `gone`, every current memory linked to it by a `related` edge
//! (either way) is put under review, its `review_reason` naming the
//! memory and what happened. Unlinked memories are never touched, and the
//! flag is a lifecycle change: no new version is written.

use std::collections::{BTreeSet, HashMap};

use super::Store;
use crate::causes::error_chain;
use crate::memory::{Lifecycle, MemoryId};

impl Store {
    /// The current memories linked to `id` by a `related` edge, either
    /// way (edges the store follows only), leaving out `id`'s own chain.
    pub(super) fn linked_heads(&self, id: MemoryId) -> Vec<MemoryId> {
        let edges = self.edges(id);
        let chain: BTreeSet<MemoryId> = self.chain(id).iter().map(|memory| memory.id).collect();
        edges
            .outgoing
            .iter()
            .chain(&edges.incoming)
            .map(|edge| edge.id)
            .filter(|linked| !chain.contains(linked) && self.is_current(*linked))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Puts the memories linked to `id` under review, saying that `id`
    /// `happened` ("was superseded by …"). Blocking; called without the
    /// writer lock.
    pub(super) fn flag_linked(&self, id: MemoryId, happened: &str) {
        self.flag_linked_to_all(&[id], happened);
    }

    /// [`Self::flag_linked`] for each of `ids`, in one lifecycle write per
    /// namespace (a check may find thousands gone at once).
    pub(super) fn flag_linked_to_all(&self, ids: &[MemoryId], happened: &str) {
        let mut reasons = HashMap::new();
        for &id in ids {
            for linked in self.linked_heads(id) {
                reasons.insert(linked, format!("memory {id} it is linked to {happened}"));
            }
        }
        self.flag_for(&reasons);
    }

    /// Puts `ids` under review for `reason`.
    pub(super) fn flag(&self, ids: &[MemoryId], reason: &str) {
        self.flag_for(&ids.iter().map(|&id| (id, reason.to_owned())).collect());
    }

    /// Puts each memory of `reasons` under review for its reason. The
    /// change that caused it is durable already; a flag that cannot be
    /// written is logged, and the memories stay as they were.
    fn flag_for(&self, reasons: &HashMap<MemoryId, String>) {
        if reasons.is_empty() {
            return;
        }
        let ids: Vec<MemoryId> = reasons.keys().copied().collect();
        let flagged = self.update_lifecycles_blocking(&ids, &|memory| {
            Some(Lifecycle {
                needs_review: true,
                review_reason: Some(reasons.get(&memory.id)?.clone()),
                ..memory.lifecycle.clone()
            })
        });
        if let Err(err) = flagged {
            tracing::error!(memories = ?ids, error = %error_chain(&err), "could not put linked memories under review");
        }
    }
}
