//! Letting go, and noting use: the current memories that stayed
//! provisional or unused too long are archived (never deleted), and the
//! memories retrieval returns are marked used, at most once a day each.
//! Both are lifecycle writes: no new version, the same on every replica.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{Store, WriteError};
use crate::memory::{LetGo, Lifecycle, MemoryId, Retention};

impl Store {
    /// Archives each current memory `retention` lets go at `now`, in one
    /// lifecycle write, and answers them with why.
    pub async fn let_go(
        &self,
        retention: Retention,
        now: DateTime<Utc>,
    ) -> Result<Vec<(MemoryId, LetGo)>, WriteError> {
        let due: HashMap<MemoryId, LetGo> = {
            let view = self.read();
            view.by_id
                .values()
                .filter(|memory| view.successor(memory.id).is_none())
                .filter_map(|memory| {
                    let why = memory
                        .lifecycle
                        .to_let_go(memory.updated_at, &retention, now)?;
                    Some((memory.id, why))
                })
                .collect()
        };
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let archived = self
            .update_lifecycles(due.keys().copied().collect(), move |memory| {
                memory
                    .lifecycle
                    .to_let_go(memory.updated_at, &retention, now)
                    .map(|_| Lifecycle {
                        archived: true,
                        ..memory.lifecycle.clone()
                    })
            })
            .await?;
        Ok(archived
            .iter()
            .filter_map(|memory| Some((memory.id, *due.get(&memory.id)?)))
            .collect())
    }

    /// Marks `ids` used at `now`, those not marked in the last day, in one
    /// lifecycle write. Blocking.
    pub fn note_used_blocking(
        &self,
        ids: &[MemoryId],
        now: DateTime<Utc>,
    ) -> Result<usize, WriteError> {
        let changed = self.update_lifecycles_blocking(ids, &|memory| memory.lifecycle.used(now))?;
        Ok(changed.len())
    }
}
