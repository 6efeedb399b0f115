//! A memory as a row of `engram_memories` and back: every front-matter
//! field in a column of its own, the edges as JSON. A row that does not
//! read back as a valid memory (edited by hand in the database) is skipped
//! with a warning, as a file that does not parse is.

use tokio_postgres::Row;

use super::Error;
use crate::memory::{Memory, MemoryId, Namespace, Scope, SessionId};

/// The columns every read selects, in the order [`read`] takes them.
pub(super) const COLUMNS: &str = "id, scope, owner, version, category, created_at, updated_at, \
     supersedes, related, importance, session_id, trigger, content";

/// The same columns, each qualified by `m.` (for a join).
pub(super) const JOINED_COLUMNS: &str = "m.id, m.scope, m.owner, m.version, m.category, \
     m.created_at, m.updated_at, m.supersedes, m.related, m.importance, m.session_id, \
     m.trigger, m.content";

/// `scope` and `owner` of a namespace.
pub(super) fn namespace_columns(namespace: &Namespace) -> (&'static str, &str) {
    match namespace {
        Namespace::Repo(repo) => ("repo", repo.as_str()),
        Namespace::User(user) => ("user", user.as_str()),
    }
}

pub(super) fn namespace(scope: &str, owner: &str) -> Result<Namespace, Error> {
    let invalid = |reason: String| Error::Row {
        table: "engram_memories",
        reason,
    };
    let scope: Scope = scope.parse().map_err(|err| invalid(format!("{err}")))?;
    match scope {
        Scope::Repo => owner.parse().map(Namespace::Repo),
        Scope::User => owner.parse().map(Namespace::User),
    }
    .map_err(|err| invalid(format!("{err}")))
}

/// A log number as stored (bigint) to the cursor's type.
pub(super) fn sequence(seq: i64) -> Result<u64, Error> {
    u64::try_from(seq).map_err(|_| Error::Row {
        table: "engram_log_head",
        reason: format!("a negative change number: {seq}"),
    })
}

/// Inserts `memory`'s row.
pub(super) async fn insert(client: &tokio_postgres::Client, memory: &Memory) -> Result<(), Error> {
    let (scope, owner) = namespace_columns(&memory.namespace);
    let related = serde_json::to_value(&memory.related).map_err(|err| Error::Row {
        table: "engram_memories",
        reason: format!("the edges do not serialize: {err}"),
    })?;
    client
        .execute(
            &format!(
                "INSERT INTO engram_memories ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
            ),
            &[
                &memory.id.as_uuid(),
                &scope,
                &owner,
                &i64::from(memory.version),
                &memory.category.as_str(),
                &memory.created_at,
                &memory.updated_at,
                &memory.supersedes.map(MemoryId::as_uuid),
                &related,
                &memory.importance,
                &memory.session_id.as_ref().map(SessionId::as_str),
                &memory.trigger.as_str(),
                &memory.content,
            ],
        )
        .await?;
    Ok(())
}

/// The memory of a row selected with [`COLUMNS`] (or [`JOINED_COLUMNS`]
/// from `offset` on), or why it is not one.
pub(super) fn read(row: &Row, offset: usize) -> Result<Memory, Error> {
    let invalid = |what: &str, reason: String| Error::Row {
        table: "engram_memories",
        reason: format!("{what}: {reason}"),
    };
    let at = |column: usize| offset + column;
    let id = MemoryId::from_uuid(row.try_get(at(0))?);
    let version: i64 = row.try_get(at(3))?;
    let related: serde_json::Value = row.try_get(at(8))?;
    let session_id: Option<&str> = row.try_get(at(10))?;
    Ok(Memory {
        id,
        version: u32::try_from(version)
            .ok()
            .filter(|&version| version >= 1)
            .ok_or_else(|| invalid("version", format!("{version} is not a version")))?,
        namespace: namespace(row.try_get(at(1))?, row.try_get(at(2))?)?,
        category: row
            .try_get::<_, &str>(at(4))?
            .parse()
            .map_err(|err| invalid("category", format!("{err}")))?,
        created_at: row.try_get(at(5))?,
        updated_at: row.try_get(at(6))?,
        supersedes: row
            .try_get::<_, Option<uuid::Uuid>>(at(7))?
            .map(MemoryId::from_uuid),
        related: serde_json::from_value(related)
            .map_err(|err| invalid("related", err.to_string()))?,
        importance: row.try_get(at(9))?,
        session_id: session_id
            .map(str::parse)
            .transpose()
            .map_err(|err| invalid("session_id", format!("{err}")))?,
        trigger: row
            .try_get::<_, &str>(at(11))?
            .parse()
            .map_err(|err| invalid("trigger", format!("{err}")))?,
        content: row.try_get(at(12))?,
    })
}

/// [`read`], a row that cannot be used skipped with a warning naming it.
pub(super) fn readable(row: &Row) -> Option<Memory> {
    read(row, 0)
        .inspect_err(|err| {
            let id = row.try_get::<_, uuid::Uuid>(0).ok();
            tracing::warn!(
                memory.id = ?id,
                error = %crate::causes::error_chain(err),
                "skipped a row of engram_memories that is not a valid memory"
            );
        })
        .ok()
}
