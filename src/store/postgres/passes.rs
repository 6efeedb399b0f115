//! Consolidation across replicas: one pass (or undo) at a time in the
//! whole cluster, each on a view that holds every change committed before
//! it began, and the schedule's pass run by one replica per interval.
//!
//! A process runs its passes one at a time; replicas share the memories,
//! so two replicas' passes over one namespace would each find the same
//! near-duplicates and each keep a pass of the same changes. A pass holds
//! a transaction-level advisory lock ([`PassHold`]) for as long as it
//! runs, then waits until this replica's follower has applied the log up
//! to its head as read under the lock, so it weighs what the pass before
//! it (on any replica) made. The lock goes with the transaction, which
//! the hold never commits: dropped, its connection is closed and the
//! server releases the lock. The schedule's turn is a row of
//! `engram_passes`: a replica runs the scheduled pass only when it moves
//! that row's time forward past a full interval, so a cluster of N
//! replicas runs one pass per interval, not N.

use std::time::Duration;

use super::commit::Session;
use super::{Database, Error, rows};

/// The advisory lock's key ("engrampa"), in the one-key form beside the
/// migrations' ("engram"); the capture queue's sessions take the two-key
/// form, a space of its own.
const PASS_LOCK: i64 = 0x656e_6772_616d_7061;

/// How often the wait for the follower looks at its cursor.
const CATCH_UP_POLL: Duration = Duration::from_millis(10);

/// The cluster's one pass running, held until dropped.
pub struct PassHold {
    _session: Session,
}

impl Database {
    /// Waits for the pass running on any replica to end, takes the turn,
    /// and waits until this replica has applied every change committed
    /// before it (up to `store.postgres.statement_timeout_ms`; a replica
    /// further behind is refused, [`Error::Behind`]).
    pub async fn hold_passes(&self) -> Result<PassHold, Error> {
        let session = self.session().await?;
        let client = session.client();
        client.batch_execute("BEGIN").await?;
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&PASS_LOCK])
            .await?;
        let head: i64 = client
            .query_one("SELECT seq FROM engram_log_head", &[])
            .await?
            .get(0);
        let head = rows::sequence(head)?;
        let limit = self.settings.statement_timeout();
        let caught_up = async {
            while self.replication.cursor() < head {
                tokio::time::sleep(CATCH_UP_POLL).await;
            }
        };
        tokio::time::timeout(limit, caught_up)
            .await
            .map_err(|_| Error::Behind { after: limit })?;
        Ok(PassHold { _session: session })
    }

    /// Whether this replica takes the schedule's pass `name` now: true
    /// when no replica took it within the last `interval`, and then no
    /// other replica takes it until `interval` has passed.
    pub async fn claim_scheduled(&self, name: &str, interval: Duration) -> Result<bool, Error> {
        let seconds = interval.as_secs_f64();
        let claimed = self
            .answered(
                "INSERT INTO engram_passes (name, started_at) VALUES ($1, now()) \
                 ON CONFLICT (name) DO UPDATE SET started_at = now() \
                 WHERE engram_passes.started_at <= now() - make_interval(secs => $2) \
                 RETURNING 1",
                &[&name, &seconds],
            )
            .await?;
        Ok(!claimed.is_empty())
    }
}
