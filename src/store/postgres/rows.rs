//! A memory as a row of `engram_memories` and back: every front-matter
//! field in a column of its own, the edges as JSON. A row that does not
//! read back as a valid memory (edited by hand in the database) is skipped
//! with a warning, as a file that does not parse is.
//!
//! [`COLUMNS`] is the one list of the columns: every select list and the
//! insert are made from it, the insert's values must match it in number
//! (the compiler checks), and [`read`] finds each column by name.

use tokio_postgres::Row;

use super::Error;
use crate::memory::{CommitId, Lifecycle, Memory, MemoryId, Namespace, Scope, SessionId};

/// The columns of a memory's row, in the order every read selects them
/// and [`insert`] writes them; `id` first, its lifecycle's last.
const COLUMNS: [&str; 25] = [
    "id",
    "scope",
    "owner",
    "version",
    "category",
    "created_at",
    "updated_at",
    "supersedes",
    "related",
    "importance",
    "session_id",
    "trigger",
    "anchors",
    "commit_id",
    "observed_at",
    "content",
    "validity",
    "checked_at",
    "checked_commit",
    "confidence",
    "needs_review",
    "review_reason",
    "archived",
    "used_at",
    "superseded_by",
];

/// How many columns a lifecycle takes: the last of [`COLUMNS`].
const LIFECYCLE_COLUMN_COUNT: usize = 9;

/// The columns of a memory's lifecycle, which [`update_in_place`]
/// changes: a lifecycle is not part of a version.
const LIFECYCLE_COLUMNS: &[&str] = COLUMNS.split_at(COLUMNS.len() - LIFECYCLE_COLUMN_COUNT).1;

type Value<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// A lifecycle as its columns' values: the one place that spells them,
/// for the insert and the update alike.
struct LifecycleValues<'a> {
    lifecycle: &'a Lifecycle,
    validity: &'static str,
    checked_commit: Option<&'a str>,
    confidence: &'static str,
    superseded_by: Option<uuid::Uuid>,
}

impl<'a> LifecycleValues<'a> {
    fn of(lifecycle: &'a Lifecycle) -> Self {
        Self {
            lifecycle,
            validity: lifecycle.validity.as_str(),
            checked_commit: lifecycle.checked_commit.as_ref().map(CommitId::as_str),
            confidence: lifecycle.confidence.as_str(),
            superseded_by: lifecycle.superseded_by.map(MemoryId::as_uuid),
        }
    }

    /// One value per column of [`LIFECYCLE_COLUMNS`], in order.
    fn values(&self) -> [Value<'_>; LIFECYCLE_COLUMN_COUNT] {
        [
            &self.validity,
            &self.lifecycle.checked_at,
            &self.checked_commit,
            &self.confidence,
            &self.lifecycle.needs_review,
            &self.lifecycle.review_reason,
            &self.lifecycle.archived,
            &self.lifecycle.used_at,
            &self.superseded_by,
        ]
    }
}

/// The select list of [`COLUMNS`], each name after `qualifier` (`""`, or
/// `"m."` for a join).
pub(super) fn select_list(qualifier: &str) -> String {
    COLUMNS
        .iter()
        .map(|column| format!("{qualifier}{column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where `column` is in a row selected with [`select_list`].
fn position(column: &str) -> usize {
    COLUMNS
        .iter()
        .position(|name| *name == column)
        .unwrap_or_else(|| panic!("{column} is not one of rows::COLUMNS"))
}

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

/// The statement [`insert`] runs, prepared once for a transaction's
/// rows.
pub(super) async fn insert_statement(
    client: &tokio_postgres::Client,
) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
    let placeholders: Vec<String> = (1..=COLUMNS.len()).map(|n| format!("${n}")).collect();
    client
        .prepare(&format!(
            "INSERT INTO engram_memories ({}) VALUES ({})",
            select_list(""),
            placeholders.join(", ")
        ))
        .await
}

/// Inserts `memory`'s row with `statement` ([`insert_statement`]).
pub(super) async fn insert(
    client: &tokio_postgres::Client,
    statement: &tokio_postgres::Statement,
    memory: &Memory,
) -> Result<(), Error> {
    let (scope, owner) = namespace_columns(&memory.namespace);
    let related = json(serde_json::to_value(&memory.related), "edges")?;
    let anchors = anchors_value(memory)?;
    // One value per column of the version, in the order of `COLUMNS`,
    // then the lifecycle's.
    let version: [Value<'_>; COLUMNS.len() - LIFECYCLE_COLUMN_COUNT] = [
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
        &anchors,
        &memory.commit.as_ref().map(CommitId::as_str),
        &memory.observed_at,
        &memory.content,
    ];
    let lifecycle = LifecycleValues::of(&memory.lifecycle);
    let lifecycle = lifecycle.values();
    let values: Vec<Value<'_>> = version.iter().chain(&lifecycle).copied().collect();
    client.execute(statement, &values).await?;
    Ok(())
}

/// Sets the lifecycle and the anchors of `memory`'s row to its own (what
/// a change in place may change); whether there was a row.
pub(super) async fn update_in_place(
    client: &tokio_postgres::Client,
    memory: &Memory,
) -> Result<bool, Error> {
    let assignments: Vec<String> = LIFECYCLE_COLUMNS
        .iter()
        .enumerate()
        .map(|(n, column)| format!("{column} = ${}", n + 3))
        .collect();
    let statement = format!(
        "UPDATE engram_memories SET anchors = $2, {} WHERE id = $1",
        assignments.join(", ")
    );
    // The id, the anchors, then the lifecycle's values.
    let id = memory.id.as_uuid();
    let anchors = anchors_value(memory)?;
    let lifecycle = LifecycleValues::of(&memory.lifecycle);
    let values: Vec<Value<'_>> = [&id as Value<'_>, &anchors]
        .into_iter()
        .chain(lifecycle.values())
        .collect();
    Ok(client.execute(&statement, &values).await? == 1)
}

/// `memory`'s anchors as their column holds them.
fn anchors_value(memory: &Memory) -> Result<serde_json::Value, Error> {
    json(serde_json::to_value(&memory.anchors), "anchors")
}

/// A JSON column's value, or why it does not serialize.
fn json(
    value: serde_json::Result<serde_json::Value>,
    what: &str,
) -> Result<serde_json::Value, Error> {
    value.map_err(|err| Error::Row {
        table: "engram_memories",
        reason: format!("the {what} do not serialize: {err}"),
    })
}

/// The memory of a row selected with [`select_list`], from `offset` on,
/// or why it is not one.
pub(super) fn read(row: &Row, offset: usize) -> Result<Memory, Error> {
    let invalid = |what: &str, reason: String| Error::Row {
        table: "engram_memories",
        reason: format!("{what}: {reason}"),
    };
    let at = |column: &str| offset + position(column);
    let id = MemoryId::from_uuid(row.try_get(at("id"))?);
    let version: i64 = row.try_get(at("version"))?;
    let related: serde_json::Value = row.try_get(at("related"))?;
    let session_id: Option<&str> = row.try_get(at("session_id"))?;
    let anchors: serde_json::Value = row.try_get(at("anchors"))?;
    let commit: Option<&str> = row.try_get(at("commit_id"))?;
    Ok(Memory {
        id,
        version: u32::try_from(version)
            .ok()
            .filter(|&version| version >= 1)
            .ok_or_else(|| invalid("version", format!("{version} is not a version")))?,
        namespace: namespace(row.try_get(at("scope"))?, row.try_get(at("owner"))?)?,
        category: row
            .try_get::<_, &str>(at("category"))?
            .parse()
            .map_err(|err| invalid("category", format!("{err}")))?,
        created_at: row.try_get(at("created_at"))?,
        updated_at: row.try_get(at("updated_at"))?,
        supersedes: row
            .try_get::<_, Option<uuid::Uuid>>(at("supersedes"))?
            .map(MemoryId::from_uuid),
        related: serde_json::from_value(related)
            .map_err(|err| invalid("related", err.to_string()))?,
        importance: row.try_get(at("importance"))?,
        session_id: session_id
            .map(str::parse)
            .transpose()
            .map_err(|err| invalid("session_id", format!("{err}")))?,
        trigger: row
            .try_get::<_, &str>(at("trigger"))?
            .parse()
            .map_err(|err| invalid("trigger", format!("{err}")))?,
        anchors: serde_json::from_value(anchors)
            .map_err(|err| invalid("anchors", err.to_string()))?,
        commit: commit
            .map(str::parse)
            .transpose()
            .map_err(|err| invalid("commit_id", format!("{err}")))?,
        observed_at: row.try_get(at("observed_at"))?,
        content: row.try_get(at("content"))?,
        lifecycle: Lifecycle {
            validity: row
                .try_get::<_, &str>(at("validity"))?
                .parse()
                .map_err(|err| invalid("validity", format!("{err}")))?,
            checked_at: row.try_get(at("checked_at"))?,
            checked_commit: row
                .try_get::<_, Option<&str>>(at("checked_commit"))?
                .map(str::parse)
                .transpose()
                .map_err(|err| invalid("checked_commit", format!("{err}")))?,
            confidence: row
                .try_get::<_, &str>(at("confidence"))?
                .parse()
                .map_err(|err| invalid("confidence", format!("{err}")))?,
            needs_review: row.try_get(at("needs_review"))?,
            review_reason: row.try_get(at("review_reason"))?,
            archived: row.try_get(at("archived"))?,
            used_at: row.try_get(at("used_at"))?,
            superseded_by: row
                .try_get::<_, Option<uuid::Uuid>>(at("superseded_by"))?
                .map(MemoryId::from_uuid),
        },
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
