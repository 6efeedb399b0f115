//! Letting go, and noting use: the current memories that stayed
//! provisional or unused too long are archived (never deleted), and the
//! memories retrieval returns are marked used, at most once a day each.
//! Both are lifecycle writes: no new version, the same on every replica.
//! Since when uses are counted is kept in the data directory
//! ([`COUNTING_SINCE_FILE`]), written at the first start that counts them.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::{Store, WriteError, atomic, confine};
use crate::memory::{LetGo, Lifecycle, MemoryId, Retention};

/// The file, in the data directory, that says since when uses are
/// counted (RFC 3339).
pub const COUNTING_SINCE_FILE: &str = ".counting-uses-since";

/// More than a timestamp is not one.
const MAX_COUNTING_SINCE_BYTES: u64 = 64;

/// Since when uses are counted in the store under `data_dir`: what its
/// [`COUNTING_SINCE_FILE`] says, else now, written there for the next
/// start. A store that began before uses were counted is thereby not let
/// go for disuse until `retention.unused_days` after its first start that
/// counts them. A file that cannot be read or written counts from now
/// (the side that archives nothing). Blocking.
pub fn counting_uses_since(data_dir: &Path) -> DateTime<Utc> {
    let path = data_dir.join(COUNTING_SINCE_FILE);
    if let Ok(text) = confine::read_regular_file(&path, MAX_COUNTING_SINCE_BYTES)
        && let Ok(since) = DateTime::parse_from_rfc3339(text.trim())
    {
        return since.to_utc();
    }
    let now = Utc::now();
    if let Err(err) = atomic::write(&path, now.to_rfc3339().as_bytes()) {
        tracing::warn!(file.path = %path.display(), error = %err, "could not note since when uses are counted");
    }
    now
}

impl Store {
    /// Archives each current memory `retention` lets go at `now`, a
    /// lifecycle write per namespace, and answers them with why.
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

    /// Marks `ids` used at `now`, those not marked in the last day: a
    /// lifecycle write per namespace. Blocking.
    pub fn note_used_blocking(
        &self,
        ids: &[MemoryId],
        now: DateTime<Utc>,
    ) -> Result<usize, WriteError> {
        let changed = self.update_lifecycles_blocking(ids, &|memory| memory.lifecycle.used(now))?;
        Ok(changed.len())
    }
}
