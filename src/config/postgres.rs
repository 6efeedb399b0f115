//! `store.backend` and `store.postgres`: where memories are kept durably,
//! and how replicas reach the PostgreSQL database they share.

use serde::{Deserialize, Serialize};

/// Where memories are kept durably.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Markdown files under the data directory (one process).
    #[default]
    Files,
    /// A PostgreSQL database that replicas share.
    Postgres,
}

/// How a replica reaches PostgreSQL (`store.backend: postgres`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresConfig {
    /// The environment variable holding the connection string
    /// (`postgres://user:password@host:port/database`): it holds a
    /// password, so it is never a key (and so it must not start with
    /// `ENGRAM_`, the prefix of keys).
    pub url_env: String,
    /// Connections this replica keeps open for writes and reads (the
    /// follower of the change log has one more of its own).
    pub pool_size: usize,
    /// How long opening a connection, or waiting for a free one, may take,
    /// in ms.
    pub connect_timeout_ms: u64,
    /// How long one statement may run before the server cancels it, in
    /// ms; a write's transaction, from its `BEGIN`, gets as long to commit
    /// (timed by the replica too: a hung server cancels nothing) before
    /// it is abandoned, uncommitted.
    pub statement_timeout_ms: u64,
    /// How often the change log is read even without a notification, in
    /// ms: a lost notification delays a change by at most this much.
    pub catch_up_ms: u64,
    /// The connection string, read from `url_env`; never printed.
    #[serde(skip)]
    pub url: Option<DatabaseUrl>,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            url_env: "DATABASE_URL".to_owned(),
            pool_size: 8,
            connect_timeout_ms: 5_000,
            statement_timeout_ms: 10_000,
            catch_up_ms: 1_000,
            url: None,
        }
    }
}

impl PostgresConfig {
    pub fn connect_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.connect_timeout_ms)
    }

    pub fn statement_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.statement_timeout_ms)
    }

    pub fn catch_up(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.catch_up_ms)
    }
}

/// A connection string; its `Debug` form is redacted, since it holds a
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DatabaseUrl(<redacted>)")
    }
}
