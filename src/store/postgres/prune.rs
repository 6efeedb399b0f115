//! Keeping the change log bounded. A replica reads the log only after its
//! cursor, and a replica that starts reads a snapshot, not the log: a
//! change older than [`CHANGE_LOG_TTL`] is needed only by a replica cut
//! off from the database for that long, which reloads the snapshot
//! instead (see [`super::follow`]). Each replica's follower deletes such
//! changes when it connects and every [`PRUNE_EVERY`] after; replicas
//! deleting the same rows at once is harmless.
//!
//! The other tables that grow: `engram_classified` is swept by capture
//! (a session idle for 30 days goes), and `engram_embeddings` is derived
//! data, kept whole (a vector no memory holds any more costs only its
//! row; docs/scaling.md says how to empty it safely).

use std::time::Duration;

use super::Error;

/// How long a change stays in the log.
pub const CHANGE_LOG_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a replica prunes the log.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Deletes the changes older than [`CHANGE_LOG_TTL`]; how many went.
pub(super) async fn prune_change_log(client: &tokio_postgres::Client) -> Result<u64, Error> {
    Ok(client
        .execute(
            "DELETE FROM engram_changes WHERE at < now() - make_interval(secs => $1)",
            &[&CHANGE_LOG_TTL.as_secs_f64()],
        )
        .await?)
}
