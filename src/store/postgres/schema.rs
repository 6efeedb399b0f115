//! The schema's migrations, embedded in the binary and numbered: at start
//! a replica applies those the database lacks, in order, and refuses a
//! database that a newer binary has migrated past what it knows.
//! `engram_schema` records each version applied.

use super::Error;

/// Every migration, oldest first; a version is never changed once
/// released, only followed by a new one.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_memories.sql")),
    (2, include_str!("migrations/0002_capture.sql")),
    (3, include_str!("migrations/0003_embeddings.sql")),
    (4, include_str!("migrations/0004_usage.sql")),
    (5, include_str!("migrations/0005_memory_over_time.sql")),
    (6, include_str!("migrations/0006_consolidation.sql")),
    (7, include_str!("migrations/0007_observed_at.sql")),
    (8, include_str!("migrations/0008_passes.sql")),
];

/// Held while migrating, so replicas starting together migrate once.
const MIGRATION_LOCK: i64 = 0x656e_6772_616d; // "engram"

/// The newest schema this binary knows.
pub fn binary_version() -> i64 {
    MIGRATIONS.last().map_or(0, |&(version, _)| version)
}

/// Brings the database's schema up to [`binary_version`], in one
/// transaction.
pub(super) async fn migrate(client: &mut tokio_postgres::Client) -> Result<(), Error> {
    let binary = binary_version();
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS engram_schema (\
             version bigint PRIMARY KEY, \
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let database: i64 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM engram_schema", &[])
        .await?
        .get(0);
    if database > binary {
        return Err(Error::SchemaTooNew { database, binary });
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > database) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO engram_schema (version) VALUES ($1)",
            &[&version],
        )
        .await?;
        tracing::info!(schema.version = version, "migrated the database's schema");
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_one_by_one_from_one() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|&(version, _)| version).collect();
        let expected: Vec<i64> = (1..=binary_version()).collect();
        assert_eq!(versions, expected);
    }
}
