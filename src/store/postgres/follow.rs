//! The follower: one task per replica that keeps the in-memory view
//! current with the change log, from the snapshot's cursor on.
//!
//! It holds a connection of its own, `LISTEN`s on the log's channel and
//! reads every change after its cursor whenever a notification wakes it,
//! and every `store.postgres.catch_up_ms` regardless: a notification is
//! only a wake-up, so one lost (or sent while the connection was down)
//! delays a change by at most that long and never loses it. Changes are
//! read with the memory's current row, so applying them is idempotent:
//! this replica's own writes come back equal to what the view holds and
//! change nothing, and a memory written then deleted is simply gone. What
//! did change goes into the view and the index by the path synced file
//! changes take ([`Store::take_in`]), which also ends the cached
//! retrievals of its namespaces. When the connection drops (the database
//! restarted), or the database stops answering (a read of the log gets no
//! answer within its limit), the follower marks itself disconnected
//! (`/readyz` answers `503`), reconnects by itself, with backoff, and goes
//! on from its cursor. A replica cut off so long that the log was pruned
//! past its cursor ([`prune`]) takes in the database's snapshot instead,
//! as a replica starting does; and the follower prunes the log itself
//! (on connecting, then hourly).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use super::{CHANNEL, Database, Error, prune, rows};
use crate::blocking;
use crate::memory::{Memory, MemoryId};
use crate::store::Store;

/// Changes read in one query; more wait for the next, at once.
const BATCH: i64 = 1_000;

/// The first wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// One change of the log: the memory's row now, or `None` once it is
/// deleted.
struct Change {
    seq: u64,
    id: MemoryId,
    current: Option<Memory>,
}

/// Follows the log from `cursor` (the snapshot's) until `stop`.
pub fn spawn(
    store: Store,
    database: Database,
    cursor: u64,
    stop: CancellationToken,
) -> JoinHandle<()> {
    database.replication.applied(cursor);
    let follower = Follower {
        store,
        database,
        cursor,
        pruned_at: None,
    };
    tokio::spawn(follower.run(stop))
}

struct Follower {
    store: Store,
    database: Database,
    cursor: u64,
    /// When this replica last pruned the change log.
    pruned_at: Option<Instant>,
}

impl Follower {
    async fn run(mut self, stop: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let result = self.session(&stop, &mut backoff).await;
            self.database
                .replication
                .connected
                .store(false, Ordering::Release);
            match result {
                Ok(()) => return,
                Err(err) => tracing::warn!(
                    error = %crate::causes::error_chain(&err),
                    retry_in_ms = backoff.as_millis(),
                    "lost the database's change log; reconnecting"
                ),
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One connection: listen, catch up, then wait for a wake-up or the
    /// period, until `stop` (`Ok`) or the connection fails (`Err`).
    async fn session(
        &mut self,
        stop: &CancellationToken,
        backoff: &mut Duration,
    ) -> Result<(), Error> {
        let settings = &self.database.settings;
        let (client, mut connection) = answered_within(
            settings.connect_timeout(),
            self.database.client_config.connect(NoTls),
        )
        .await?;
        let wake = Arc::new(Notify::new());
        let closed = CancellationToken::new();
        // The connection's messages (notifications among them) arrive
        // only while something polls it.
        let driver = tokio::spawn({
            let wake = wake.clone();
            let closed = closed.clone();
            async move {
                while let Some(message) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    match message {
                        Ok(AsyncMessage::Notification(_)) => wake.notify_one(),
                        Ok(_) => {}
                        Err(err) => {
                            tracing::debug!(error = %err, "the change log's connection failed");
                            break;
                        }
                    }
                }
                closed.cancel();
            }
        });
        let result = self
            .listen_and_follow(&client, stop, &wake, &closed, backoff)
            .await;
        drop(client);
        // A server that does not answer never ends the connection: it is
        // closed here, whatever it still waits for.
        if result.is_err() {
            driver.abort();
        }
        if let Err(err) = driver.await
            && !err.is_cancelled()
        {
            tracing::error!(error = %err, "the change log's connection task failed");
        }
        result
    }

    async fn listen_and_follow(
        &mut self,
        client: &tokio_postgres::Client,
        stop: &CancellationToken,
        wake: &Notify,
        closed: &CancellationToken,
        backoff: &mut Duration,
    ) -> Result<(), Error> {
        answered_within(
            self.database.settings.connect_timeout(),
            client.batch_execute(&format!("LISTEN {CHANNEL}")),
        )
        .await?;
        self.database
            .replication
            .connected
            .store(true, Ordering::Release);
        *backoff = FIRST_BACKOFF;
        let period = self.database.settings.catch_up();
        loop {
            self.catch_up(client).await?;
            self.prune_when_due(client).await;
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(period) => {}
                () = closed.cancelled() => return Err(Error::Closed),
                () = stop.cancelled() => return Ok(()),
            }
        }
    }

    /// Reads and applies every change after the cursor; the first time it
    /// is done, the replica has caught up with the log.
    async fn catch_up(&mut self, client: &tokio_postgres::Client) -> Result<(), Error> {
        let settings = self.database.settings.clone();
        // The head is read at least every `catch_up_ms`, in no time: an
        // answer that does not come within `connect_timeout_ms` is a
        // database that does not answer, which `/readyz` then says.
        let (head, oldest_unapplied_age) =
            answered_within(settings.connect_timeout(), read_head(client, self.cursor)).await?;
        self.database.replication.heard(head, oldest_unapplied_age);
        // The change after the cursor is committed (the head is past it)
        // but gone from the log: pruned while this replica was cut off.
        if head > self.cursor && oldest_unapplied_age.is_none() {
            self.reload().await?;
        }
        loop {
            let changes = answered_within(
                settings.statement_timeout(),
                read_changes(client, self.cursor),
            )
            .await?;
            let Some(last) = changes.last().map(|change| change.seq) else {
                break;
            };
            let full = changes.len() == usize::try_from(BATCH).unwrap_or(usize::MAX);
            let (store, database) = (self.store.clone(), self.database.clone());
            blocking::run(move || apply(&store, &database, changes)).await?;
            self.cursor = last;
            self.database.replication.applied(last);
            if !full {
                break;
            }
        }
        if !self
            .database
            .replication
            .caught_up
            .swap(true, Ordering::AcqRel)
        {
            tracing::info!(
                change = self.cursor,
                "caught up with the database's change log"
            );
        }
        Ok(())
    }
}

impl Follower {
    /// Takes in the database's snapshot, as a replica starting would, when
    /// the log no longer holds the changes after the cursor.
    async fn reload(&mut self) -> Result<(), Error> {
        let settings = &self.database.settings;
        let snapshot =
            answered_within(settings.statement_timeout(), self.database.snapshot()).await?;
        tracing::warn!(
            change = self.cursor,
            head = snapshot.cursor,
            "the change log no longer holds the changes after this replica's cursor (pruned while it was cut off); took in the database's snapshot instead"
        );
        let store = self.store.clone();
        blocking::run(move || take_in_snapshot(&store, snapshot.memories)).await;
        self.cursor = snapshot.cursor;
        self.database.replication.applied(snapshot.cursor);
        Ok(())
    }

    /// Prunes the change log when it is time ([`prune::PRUNE_EVERY`]); a
    /// failure is logged and tried again next time.
    async fn prune_when_due(&mut self, client: &tokio_postgres::Client) {
        if self
            .pruned_at
            .is_some_and(|at| at.elapsed() < prune::PRUNE_EVERY)
        {
            return;
        }
        self.pruned_at = Some(Instant::now());
        let limit = self.database.settings.statement_timeout();
        match answered_within(limit, prune::prune_change_log(client)).await {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(changes = pruned, "pruned the change log"),
            Err(err) => tracing::warn!(
                error = %crate::causes::error_chain(&err),
                "could not prune the change log; tried again in an hour"
            ),
        }
    }
}

/// Makes the view hold exactly `memories` (blocking: it takes the store's
/// writer lock).
fn take_in_snapshot(store: &Store, memories: Vec<Memory>) {
    let _writer = store.lock_writer();
    let current: HashSet<MemoryId> = memories.iter().map(|memory| memory.id).collect();
    let removals: Vec<MemoryId> = store
        .read()
        .by_id
        .keys()
        .filter(|id| !current.contains(id))
        .copied()
        .collect();
    let upserts: Vec<Memory> = memories
        .into_iter()
        .filter(|memory| store.get(memory.id).as_deref() != Some(memory))
        .collect();
    store.take_in(&mut store.write_view(), removals, upserts);
}

/// `query`'s answer, or [`Error::Unanswered`] once `limit` has passed.
async fn answered_within<T, E>(
    limit: Duration,
    query: impl Future<Output = Result<T, E>>,
) -> Result<T, Error>
where
    Error: From<E>,
{
    match tokio::time::timeout(limit, query).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(Error::Unanswered { after: limit }),
    }
}

/// The log's head, and how long ago the first change after `cursor` was
/// written (measured by the database's clock, so the two clocks need not
/// agree), if there is one.
async fn read_head(
    client: &tokio_postgres::Client,
    cursor: u64,
) -> Result<(u64, Option<Duration>), Error> {
    let after = i64::try_from(cursor).unwrap_or(i64::MAX);
    let row = client
        .query_one(
            "SELECT h.seq, (SELECT (extract(epoch FROM clock_timestamp() - c.at) * 1000)::bigint \
             FROM engram_changes c WHERE c.seq = $1::bigint + 1) FROM engram_log_head h",
            &[&after],
        )
        .await?;
    let head = rows::sequence(row.try_get(0)?)?;
    let age_ms: Option<i64> = row.try_get(1)?;
    let age = age_ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
    Ok((head, age))
}

/// The changes after `cursor`, oldest first, each with its memory's row
/// now.
async fn read_changes(client: &tokio_postgres::Client, cursor: u64) -> Result<Vec<Change>, Error> {
    let after = i64::try_from(cursor).unwrap_or(i64::MAX);
    let query = format!(
        "SELECT c.seq, c.memory_id, {} FROM engram_changes c \
         LEFT JOIN engram_memories m ON m.id = c.memory_id \
         WHERE c.seq > $1 ORDER BY c.seq LIMIT $2",
        rows::select_list("m.")
    );
    let mut changes = Vec::new();
    for row in client.query(&query, &[&after, &BATCH]).await? {
        let seq = rows::sequence(row.try_get(0)?)?;
        let id = MemoryId::from_uuid(row.try_get(1)?);
        let present = row.try_get::<_, Option<uuid::Uuid>>(2)?.is_some();
        let current = if present {
            match rows::read(&row, 2) {
                Ok(memory) => Some(memory),
                Err(err) => {
                    // Like a file that stops parsing: the last good
                    // version stays in service.
                    tracing::warn!(
                        memory.id = %id,
                        error = %crate::causes::error_chain(&err),
                        "a changed row of engram_memories is not a valid memory; it is left as it was"
                    );
                    continue;
                }
            }
        } else {
            None
        };
        changes.push(Change { seq, id, current });
    }
    Ok(changes)
}

/// Puts what changed into the view (blocking: it takes the store's writer
/// lock, so it never sees one of this replica's writes half done).
///
/// A memory the view does not hold is taken in only if its row is still
/// there once the lock is held: its change may have been read just before
/// this replica deleted it, and taking it in now would bring a forgotten
/// memory back until the delete's own change is read.
fn apply(store: &Store, database: &Database, changes: Vec<Change>) -> Result<(), Error> {
    let mut latest: HashMap<MemoryId, (u64, Option<Memory>)> = HashMap::new();
    for change in changes {
        latest.insert(change.id, (change.seq, change.current));
    }
    let _writer = store.lock_writer();
    let mut removals = Vec::new();
    let mut upserts = Vec::new();
    let mut arriving = Vec::new();
    for (id, (seq, current)) in latest {
        // A row read before this replica changed the memory's lifecycle
        // is older than what the view holds.
        if store.write_view().holds_newer_lifecycle(id, seq) {
            continue;
        }
        let held = store.get(id);
        match current {
            Some(memory) if held.as_deref() != Some(&memory) => {
                if held.is_none() {
                    arriving.push(id);
                }
                upserts.push(memory);
            }
            None if held.is_some() => removals.push(id),
            _ => {}
        }
    }
    if !arriving.is_empty() {
        let present = tokio::runtime::Handle::current().block_on(database.present(&arriving))?;
        let gone: HashSet<MemoryId> = arriving
            .into_iter()
            .filter(|id| !present.contains(id))
            .collect();
        upserts.retain(|memory| !gone.contains(&memory.id));
    }
    if removals.is_empty() && upserts.is_empty() {
        return Ok(());
    }
    let (removed, written) = (removals.len(), upserts.len());
    store.take_in(&mut store.write_view(), removals, upserts);
    tracing::debug!(
        memories.written = written,
        memories.removed = removed,
        "took in another replica's changes"
    );
    Ok(())
}
