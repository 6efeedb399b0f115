//! The PostgreSQL backend (`store.backend: postgres`): the durable layer
//! replicas share. A write or delete commits the memory's row and a row of
//! the change log in one transaction, before the in-memory view changes
//! (as files mode writes the file first); each replica loads a snapshot at
//! start and then follows the log ([`follow`]).
//!
//! Invariants:
//! - The log's numbers are 1, 2, 3... in commit order with no gap: each
//!   writing transaction takes its number by updating the one row of
//!   `engram_log_head`, which it holds locked until it commits. A reader
//!   that has seen change n has seen every change before it, so a cursor
//!   is all a replica needs to keep.
//! - Writes are serialized across replicas by that same row: the checks a
//!   write repeats inside its transaction (its predecessor still there and
//!   still the head of its chain) cannot race another replica's write.
//! - The connection string holds a password: it is never logged, and no
//!   error here repeats it.

mod commit;
pub mod consolidations;
pub mod embeddings;
pub mod follow;
pub mod passes;
pub mod prune;
mod rows;
pub mod schema;
pub mod usage;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use crate::config::PostgresConfig;
use crate::memory::{Memory, MemoryId};

/// The channel `NOTIFY` wakes followers on; the payload is the change's
/// number, and only a wake-up: followers read the log by cursor.
const CHANNEL: &str = "engram_changes";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection string, or one that does not parse (never repeated:
    /// it holds a password).
    #[error("the connection string in {var} is missing or is not one")]
    Url { var: String },
    #[error("setting up the connection pool")]
    PoolBuild(#[from] deadpool_postgres::BuildError),
    #[error("getting a connection to PostgreSQL")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("talking to PostgreSQL")]
    Query(#[from] tokio_postgres::Error),
    #[error("the connection to PostgreSQL closed")]
    Closed,
    #[error(
        "the database's schema is version {database}, newer than this binary's version \
         {binary}: run a newer Engram, or point this one at another database"
    )]
    SchemaTooNew { database: i64, binary: i64 },
    #[error("a row of {table} cannot be used: {reason}")]
    Row { table: &'static str, reason: String },
    /// The database did not answer a write before its commit within
    /// `statement_timeout_ms`: the transaction was abandoned uncommitted.
    #[error("PostgreSQL did not answer within {} ms; the write was abandoned, uncommitted", after.as_millis())]
    Unanswered { after: Duration },
    /// The request was answered (timed out) before its write could
    /// commit: the write was rolled back.
    #[error("the request timed out before its write committed; the write was rolled back")]
    CalledOff,
    /// This replica had not applied the other replicas' changes within
    /// `statement_timeout_ms` of a consolidation pass's turn: the pass
    /// would weigh memories as they were.
    #[error("this replica did not take in the other replicas' changes within {} ms", after.as_millis())]
    Behind { after: Duration },
    /// The database did not confirm a commit, and could not be asked
    /// whether it was made: the change may or may not be in.
    #[error("PostgreSQL did not confirm the commit of the change to memory {id}")]
    Unconfirmed { id: MemoryId },
}

impl Error {
    /// Whether the database could not be reached (down, restarting, out of
    /// connections, or the connection dropped mid-way), as opposed to a
    /// query it refused: the request may succeed if retried shortly.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Closed
            | Self::Unanswered { .. }
            | Self::Behind { .. }
            | Self::CalledOff
            | Self::Pool(deadpool_postgres::PoolError::Timeout(_)) => true,
            Self::Pool(deadpool_postgres::PoolError::Backend(err)) | Self::Query(err) => {
                unreachable(err)
            }
            _ => false,
        }
    }
}

/// A client error that says the server was not there to answer: the
/// connection closed or failed, or the server said it is shutting down,
/// starting, or out of connections.
fn unreachable(err: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if err.is_closed()
        || std::error::Error::source(err).is_some_and(<dyn std::error::Error>::is::<std::io::Error>)
    {
        return true;
    }
    err.code().is_some_and(|code| {
        code.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(code)
    })
}

/// Why the database refused a write that the view allowed: another replica
/// changed the chain meanwhile.
#[derive(Clone, Copy, Debug)]
pub enum Refusal {
    /// The predecessor was forgotten.
    PredecessorGone,
    /// The predecessor was superseded already, by this memory.
    Superseded(MemoryId),
    /// A memory with this id is committed already.
    Exists,
}

/// A cheap, clonable handle on the database: the pool for writes and
/// reads, and how to open the follower's own connection.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
    client_config: Arc<tokio_postgres::Config>,
    settings: Arc<PostgresConfig>,
    replication: Arc<Replication>,
}

/// Where this replica's follower stands, for `/readyz`, `/stats` and
/// `/metrics`: written by the follower alone, read by anyone.
pub struct Replication {
    /// The last change of the log applied to the view.
    cursor: AtomicU64,
    /// The log's head as the follower last read it.
    head: AtomicU64,
    /// Whether the follower's connection is up and listening.
    connected: AtomicBool,
    /// Whether the follower has applied, once since start, every change
    /// committed before it first read the log.
    caught_up: AtomicBool,
    /// When the follower last heard from the database, and when the
    /// oldest change it had not applied then was committed (in this
    /// process's clock), if there was one.
    heard: Mutex<Heard>,
}

#[derive(Clone, Copy)]
struct Heard {
    at: Instant,
    oldest_unapplied: Option<Instant>,
}

/// What [`Replication`] shows at one moment.
#[derive(Clone, Copy, Debug)]
pub struct ReplicationView {
    pub connected: bool,
    pub caught_up: bool,
    pub head: u64,
    pub cursor: u64,
    /// Changes committed (as far as the follower knows) and not applied.
    pub lag_changes: u64,
    /// How long the oldest unapplied change has waited, or, while the
    /// connection is down, how long since the follower last heard from the
    /// database: 0 when it is connected and current.
    pub lag: Duration,
}

impl Default for Replication {
    fn default() -> Self {
        Self {
            cursor: AtomicU64::default(),
            head: AtomicU64::default(),
            connected: AtomicBool::default(),
            caught_up: AtomicBool::default(),
            heard: Mutex::new(Heard {
                at: Instant::now(),
                oldest_unapplied: None,
            }),
        }
    }
}

impl Replication {
    pub fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Acquire)
    }

    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Whether the follower has caught up with the log once since start.
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    pub fn view(&self) -> ReplicationView {
        let connected = self.connected();
        let cursor = self.cursor();
        let head = self.head.load(Ordering::Acquire).max(cursor);
        let heard = *self.heard.lock().unwrap_or_else(PoisonError::into_inner);
        let since = if connected {
            heard.oldest_unapplied.filter(|_| head > cursor)
        } else {
            Some(heard.at)
        };
        ReplicationView {
            connected,
            caught_up: self.caught_up(),
            head,
            cursor,
            lag_changes: head - cursor,
            lag: since.map_or(Duration::ZERO, |since| since.elapsed()),
        }
    }

    /// The follower read the log's head, and the age of the first change
    /// after its cursor (`None`: there is none).
    fn heard(&self, head: u64, oldest_unapplied_age: Option<Duration>) {
        let now = Instant::now();
        self.head.store(head, Ordering::Release);
        *self.heard.lock().unwrap_or_else(PoisonError::into_inner) = Heard {
            at: now,
            oldest_unapplied: oldest_unapplied_age.and_then(|age| now.checked_sub(age)),
        };
    }

    /// The follower applied every change up to `cursor`.
    fn applied(&self, cursor: u64) {
        self.cursor.store(cursor, Ordering::Release);
    }
}

/// Every memory in the database, and the log's number they are current
/// as of: the follower starts after it.
pub struct Snapshot {
    pub memories: Vec<Memory>,
    pub cursor: u64,
}

impl Database {
    /// Connects, applies the migrations this binary has that the database
    /// lacks, and refuses a database whose schema is newer.
    pub async fn open(settings: &PostgresConfig) -> Result<Self, Error> {
        let client_config = client_config(settings)?;
        let manager = Manager::from_config(
            client_config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let timeout = Some(settings.connect_timeout());
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(timeout)
            .create_timeout(timeout)
            .recycle_timeout(timeout)
            .build()?;
        let database = Self {
            pool,
            client_config: Arc::new(client_config),
            settings: Arc::new(settings.clone()),
            replication: Arc::default(),
        };
        let mut client = database.pool.get().await?;
        schema::migrate(&mut client).await?;
        Ok(database)
    }

    /// A connection of the pool, for the tables other components keep
    /// (the capture queue's).
    pub async fn connection(&self) -> Result<deadpool_postgres::Object, Error> {
        Ok(self.pool.get().await?)
    }

    pub fn replication(&self) -> &Replication {
        &self.replication
    }

    /// Every memory, with the log's number it is current as of, read in
    /// one repeatable-read transaction so the two agree. Rows that cannot
    /// be read are skipped with a warning.
    pub async fn snapshot(&self) -> Result<Snapshot, Error> {
        let mut client = self.pool.get().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let cursor: i64 = tx
            .query_one("SELECT seq FROM engram_log_head", &[])
            .await?
            .get(0);
        let rows = tx
            .query(
                &format!("SELECT {} FROM engram_memories", rows::select_list("")),
                &[],
            )
            .await?;
        tx.commit().await?;
        let memories = rows.iter().filter_map(rows::readable).collect();
        Ok(Snapshot {
            memories,
            cursor: rows::sequence(cursor)?,
        })
    }

    /// Commits `memories` and their changes in one transaction, unless
    /// `check_chain` and another replica changed the chain of one of them
    /// meanwhile: then nothing is committed, and the refusal names the
    /// first memory refused (by its place in `memories`), for the caller
    /// to write the others without it. What it answers is what happened
    /// (see [`commit`]).
    pub async fn write(
        &self,
        memories: &[&Memory],
        check_chain: bool,
    ) -> Result<Result<(), (usize, Refusal)>, Error> {
        let Some(last) = memories.last() else {
            return Ok(Ok(()));
        };
        let writing = self.begin_write().await?;
        let client = writing.client();
        let count = i64::try_from(memories.len()).map_err(|_| Error::Row {
            table: "engram_log_head",
            reason: format!("{} changes in one transaction", memories.len()),
        })?;
        let head = writing.answered(take_sequences(client, count)).await?;
        let first = head - count + 1;
        let insert = writing.answered(rows::insert_statement(client)).await?;
        for ((index, memory), seq) in memories.iter().enumerate().zip(first..) {
            if check_chain && let Some(refusal) = chain_refusal(&writing, memory).await? {
                writing.roll_back().await?;
                return Ok(Err((index, refusal)));
            }
            match writing
                .answered(rows::insert(client, &insert, memory))
                .await
            {
                Err(Error::Query(err)) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    writing.roll_back().await?;
                    return Ok(Err((index, Refusal::Exists)));
                }
                inserted => inserted?,
            }
            writing
                .answered(log_change(
                    client,
                    seq,
                    memory.id,
                    &memory.namespace,
                    "write",
                ))
                .await?;
        }
        writing.answered(notify(client, head)).await?;
        writing.commit(head, last.id).await?;
        Ok(Ok(()))
    }

    /// Sets the lifecycle and the anchors of each of `memories` in its
    /// row, logging each as a write so every replica takes it in, in one
    /// transaction. A row deleted meanwhile is skipped. Answers each
    /// change's number.
    pub async fn update_in_place(
        &self,
        memories: &[Arc<Memory>],
    ) -> Result<Vec<(MemoryId, u64)>, Error> {
        let writing = self.begin_write().await?;
        let client = writing.client();
        let mut numbers = Vec::new();
        let mut last = None;
        for memory in memories {
            if !writing
                .answered(rows::update_in_place(client, memory))
                .await?
            {
                continue;
            }
            let seq = writing.answered(take_sequences(client, 1)).await?;
            writing
                .answered(log_change(
                    client,
                    seq,
                    memory.id,
                    &memory.namespace,
                    "write",
                ))
                .await?;
            numbers.push((memory.id, rows::sequence(seq)?));
            last = Some((seq, memory.id));
        }
        match last {
            Some((seq, id)) => {
                writing.answered(notify(client, seq)).await?;
                writing.commit(seq, id).await?;
            }
            None => writing.roll_back().await?,
        }
        Ok(numbers)
    }

    /// Which of `ids` have a row now, if the database answers within
    /// `statement_timeout_ms` (the follower asks holding the store's
    /// writer lock).
    pub async fn present(&self, ids: &[MemoryId]) -> Result<HashSet<MemoryId>, Error> {
        let ids: Vec<uuid::Uuid> = ids.iter().map(|id| id.as_uuid()).collect();
        let rows = self
            .answered("SELECT id FROM engram_memories WHERE id = ANY($1)", &[&ids])
            .await?;
        Ok(rows
            .iter()
            .map(|row| MemoryId::from_uuid(row.get(0)))
            .collect())
    }

    /// Deletes `id` and logs it; nothing to do when another replica
    /// deleted it first. What it answers is what happened (see
    /// [`commit`]).
    pub async fn delete(&self, id: MemoryId) -> Result<(), Error> {
        let writing = self.begin_write().await?;
        let client = writing.client();
        let seq = writing.answered(take_sequences(client, 1)).await?;
        let deleted = writing
            .answered(client.query_opt(
                "DELETE FROM engram_memories WHERE id = $1 RETURNING scope, owner",
                &[&id.as_uuid()],
            ))
            .await?;
        let Some(deleted) = deleted else {
            return writing.roll_back().await; // no number is used
        };
        let namespace = rows::namespace(deleted.get(0), deleted.get(1))?;
        writing
            .answered(log_change(client, seq, id, &namespace, "delete"))
            .await?;
        writing.answered(notify(client, seq)).await?;
        writing.commit(seq, id).await
    }
}

/// The client's settings: the connection string, with the configured
/// timeouts and a name the server's views show.
fn client_config(settings: &PostgresConfig) -> Result<tokio_postgres::Config, Error> {
    let invalid = || Error::Url {
        var: settings.url_env.clone(),
    };
    let url = settings.url.as_ref().ok_or_else(invalid)?;
    let mut config: tokio_postgres::Config = url.expose().parse().map_err(|_| invalid())?;
    config
        .connect_timeout(settings.connect_timeout())
        .application_name("engram")
        // A transaction whose client is gone (cut off mid-write) holds
        // the log's head, and with it every replica's writes, no longer.
        .options(format!(
            "-c statement_timeout={0} -c idle_in_transaction_session_timeout={0}",
            settings.statement_timeout_ms
        ));
    Ok(config)
}

/// Takes the log's next `count` numbers, locking its head row until the
/// transaction ends (see the module's invariants); answers the last.
async fn take_sequences(
    client: &tokio_postgres::Client,
    count: i64,
) -> Result<i64, tokio_postgres::Error> {
    client
        .query_one(
            "UPDATE engram_log_head SET seq = seq + $1 RETURNING seq",
            &[&count],
        )
        .await?
        .try_get(0)
}

/// Why the database refuses `memory` where the view allowed it: its
/// predecessor forgotten or superseded by another replica meanwhile.
async fn chain_refusal(
    writing: &commit::Writing,
    memory: &Memory,
) -> Result<Option<Refusal>, Error> {
    let Some(predecessor) = memory.supersedes else {
        return Ok(None);
    };
    let client = writing.client();
    let (scope, owner) = rows::namespace_columns(&memory.namespace);
    let present = writing
        .answered(client.query_opt(
            "SELECT 1 FROM engram_memories WHERE id = $1 AND scope = $2 AND owner = $3",
            &[&predecessor.as_uuid(), &scope, &owner],
        ))
        .await?;
    if present.is_none() {
        return Ok(Some(Refusal::PredecessorGone));
    }
    let successor = writing
        .answered(client.query_opt(
            "SELECT id FROM engram_memories WHERE supersedes = $1 LIMIT 1",
            &[&predecessor.as_uuid()],
        ))
        .await?;
    Ok(successor.map(|row| Refusal::Superseded(MemoryId::from_uuid(row.get(0)))))
}

/// Appends a change to the log.
async fn log_change(
    client: &tokio_postgres::Client,
    seq: i64,
    id: MemoryId,
    namespace: &crate::memory::Namespace,
    kind: &str,
) -> Result<(), tokio_postgres::Error> {
    let (scope, owner) = rows::namespace_columns(namespace);
    client
        .execute(
            "INSERT INTO engram_changes (seq, memory_id, scope, owner, kind) \
             VALUES ($1, $2, $3, $4, $5)",
            &[&seq, &id.as_uuid(), &scope, &owner, &kind],
        )
        .await?;
    Ok(())
}

/// Wakes the followers at commit, once per transaction: the payload is
/// only a wake-up (they read the log by cursor), so its last number does.
async fn notify(client: &tokio_postgres::Client, seq: i64) -> Result<(), tokio_postgres::Error> {
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &seq.to_string()])
        .await?;
    Ok(())
}
