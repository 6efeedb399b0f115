//! Invalidation along links: when a memory is superseded, forgotten or
//! found `gone`, every current memory linked to it by a `related` edge
//! (either way) is put under review, its `review_reason` naming the
//! memory and what happened. Unlinked memories are never touched, and the
//! flag is a lifecycle change: no new version is written.

use std::collections::BTreeSet;

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
        let linked = self.linked_heads(id);
        self.flag(&linked, &format!("memory {id} it is linked to {happened}"));
    }

    /// Puts `ids` under review for `reason`. The change that caused it is
    /// durable already; a flag that cannot be written is logged, and the
    /// memories stay as they were.
    pub(super) fn flag(&self, ids: &[MemoryId], reason: &str) {
        if ids.is_empty() {
            return;
        }
        let reason = reason.to_owned();
        let flagged = self.update_lifecycles_blocking(ids, &|memory| {
            Some(Lifecycle {
                needs_review: true,
                review_reason: Some(reason.clone()),
                ..memory.lifecycle.clone()
            })
        });
        if let Err(err) = flagged {
            tracing::error!(memories = ?ids, error = %error_chain(&err), "could not put linked memories under review");
        }
    }
}
