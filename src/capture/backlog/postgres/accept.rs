//! What an accept says to PostgreSQL: its statements (prepared once per
//! connection), its session's advisory lock, and the live triggers it
//! decides on.

use crate::capture::queue::{Error, Trigger};

use super::query;

/// The class of the advisory locks on sessions (the two-key form, apart
/// from the one-key locks of migrations): an accept holds its session's
/// for its transaction.
pub(super) const SESSION_LOCKS: i32 = 0x656e_6771; // "engq"
/// The statements of an accept, prepared once per connection.
pub(super) const LOCK_SESSION: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";
pub(super) const REPLACE_TURN: &str = "DELETE FROM engram_triggers \
     WHERE kind = 'turn' AND repo = $1 AND user_id = $2 AND session_id = $3 \
       AND failed_at IS NULL AND (lease_until IS NULL OR lease_until < now())";
/// The live triggers: those of the pair waiting (not leased) against its
/// capacity, and the bytes of one session and of all.
pub(super) const READ_QUEUED: &str = "SELECT count(*) FILTER \
            (WHERE repo = $1 AND user_id = $2 AND (lease_until IS NULL OR lease_until < now())), \
            coalesce(sum(bytes) FILTER \
            (WHERE repo = $1 AND user_id = $2 AND session_id = $3), 0)::bigint, \
            coalesce(sum(bytes), 0)::bigint \
     FROM engram_triggers WHERE failed_at IS NULL";
pub(super) const INSERT: &str = "INSERT INTO engram_triggers \
     (id, kind, repo, user_id, session_id, body, bytes, attempts, last_error) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
/// Takes `trigger`'s session's advisory lock until the transaction ends,
/// so accepts of one session are decided one after the other.
pub(super) async fn lock_session(
    tx: &deadpool_postgres::Transaction<'_>,
    trigger: &Trigger,
) -> Result<(), Error> {
    let lock = tx.prepare_cached(LOCK_SESSION).await.map_err(query)?;
    tx.execute(&lock, &[&SESSION_LOCKS, &session_key(trigger)])
        .await
        .map_err(query)?;
    Ok(())
}

/// The key of `trigger`'s session's lock. Ids hold no newline, so no two
/// sessions share a key (their hashes may collide: two sessions then wait
/// for one another, no more).
pub(super) fn session_key(trigger: &Trigger) -> String {
    format!(
        "{}\n{}\n{}",
        trigger.repo.as_str(),
        trigger.user.as_str(),
        trigger.session_id.as_str()
    )
}

/// The live triggers as an accept sees them (a row of [`READ_QUEUED`]).
pub(super) struct Queued {
    /// The pair's triggers waiting (not leased).
    pub(super) pair_waiting: i64,
    pub(super) session_bytes: u64,
    pub(super) total_bytes: u64,
}

impl Queued {
    pub(super) fn of(row: &tokio_postgres::Row) -> Self {
        let bytes = |at: usize| u64::try_from(row.get::<_, i64>(at)).unwrap_or(0);
        Self {
            pair_waiting: row.get(0),
            session_bytes: bytes(1),
            total_bytes: bytes(2),
        }
    }

    pub(super) async fn read(
        tx: &deadpool_postgres::Transaction<'_>,
        trigger: &Trigger,
    ) -> Result<Self, Error> {
        let read = tx.prepare_cached(READ_QUEUED).await.map_err(query)?;
        let row = tx
            .query_one(
                &read,
                &[
                    &trigger.repo.as_str(),
                    &trigger.user.as_str(),
                    &trigger.session_id.as_str(),
                ],
            )
            .await
            .map_err(query)?;
        Ok(Self::of(&row))
    }
}
