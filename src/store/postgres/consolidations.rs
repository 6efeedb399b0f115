//! The log of consolidation passes in `engram_consolidations` (migration
//! 6): one row per pass, its namespace and times in columns, the pass
//! itself as JSON. Every replica reads the same rows.

use uuid::Uuid;

use super::{Database, Error, rows};
use crate::memory::Namespace;
use crate::store::consolidations::Pass;

impl Database {
    /// Inserts `pass`, or replaces the row of the same id (an undo).
    pub async fn keep_pass(&self, pass: &Pass) -> Result<(), Error> {
        let namespace = pass.namespace().ok_or_else(|| Error::Row {
            table: "engram_consolidations",
            reason: "a pass names no namespace".to_owned(),
        })?;
        let (scope, owner) = rows::namespace_columns(&namespace);
        let document = serde_json::to_value(pass).map_err(|err| Error::Row {
            table: "engram_consolidations",
            reason: format!("the pass does not serialize: {err}"),
        })?;
        self.answered(
            "INSERT INTO engram_consolidations (id, scope, owner, at, document) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (id) DO UPDATE SET document = EXCLUDED.document",
            &[&pass.id, &scope, &owner, &pass.at, &document],
        )
        .await?;
        Ok(())
    }

    /// Every pass of `namespaces`; rows that do not read as a pass are
    /// skipped with a warning.
    pub async fn passes(&self, namespaces: &[Namespace]) -> Result<Vec<Pass>, Error> {
        let (scopes, owners): (Vec<&str>, Vec<&str>) =
            namespaces.iter().map(rows::namespace_columns).unzip();
        let found = self
            .answered(
                "SELECT c.document FROM engram_consolidations c \
                 JOIN unnest($1::text[], $2::text[]) AS n(scope, owner) \
                 ON c.scope = n.scope AND c.owner = n.owner",
                &[&scopes, &owners],
            )
            .await?;
        Ok(found.iter().filter_map(readable).collect())
    }

    /// The pass `id`, if there is one.
    pub async fn pass(&self, id: Uuid) -> Result<Option<Pass>, Error> {
        let found = self
            .answered(
                "SELECT document FROM engram_consolidations WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(found.first().and_then(readable))
    }
}

fn readable(row: &tokio_postgres::Row) -> Option<Pass> {
    let document: serde_json::Value = row.get(0);
    serde_json::from_value(document)
        .inspect_err(|err| {
            tracing::warn!(error = %err, "skipped a row of engram_consolidations that is not a pass");
        })
        .ok()
}
