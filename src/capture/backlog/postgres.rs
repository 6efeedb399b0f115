//! The capture queue in PostgreSQL (`store.backend: postgres`): one row of
//! `engram_triggers` per trigger, shared by every replica.
//!
//! Invariants:
//! - A `202` means the trigger's row is committed. An accept locks its
//!   session (an advisory lock on the (repo, user, session) held for its
//!   short transaction), so accepts of one session see one another:
//!   coalescing and the session's byte budget are decided on its triggers
//!   as they are. Accepts of different sessions do not wait for one
//!   another: the pair's capacity and the total byte budget are checked against
//!   the queue as committed, so accepts committing at the same moment may
//!   together pass them, by at most one trigger per other accept in
//!   flight (see `docs/scaling.md`).
//! - A trigger is claimed with `FOR UPDATE SKIP LOCKED` and a lease
//!   (`claimed_by`, `claim`, `lease_until`), renewed while its pass runs;
//!   a claim whose lease has passed (its replica died) is free to take,
//!   and a replica that stops gracefully gives its claims back at once.
//! - Only the oldest live trigger of a (repo, user) pair may be claimed:
//!   a pair's triggers go in the order accepted, one at a time across
//!   replicas. Its row being locked or leased holds the pair's later ones.
//! - Finishing, retrying or failing a trigger names its claim: a replica
//!   whose lease was taken over changes nothing.

mod accept;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::capture::queue::{
    EnqueueStatus, Error, Kind, Limits, QueueState, QueuedTrigger, Trigger, admits_turn,
    check_budgets, summary::TriggerSummary, to_json,
};
use crate::causes::error_chain;
use crate::memory::{RepoId, UserId};
use crate::store::NamespacePair;
use crate::store::postgres::{self, Database};
use accept::{
    INSERT, LOCK_SESSION, Queued, READ_QUEUED, REPLACE_TURN, SESSION_LOCKS, lock_session,
    session_key,
};

/// How long a reading of the queue's depth and bytes serves `/stats`,
/// unless this replica changed the queue since.
const DEPTH_FRESH: Duration = Duration::from_secs(1);
/// How long `/stats` waits for a reading before it shows the last one.
const DEPTH_READ_TIMEOUT: Duration = Duration::from_millis(500);
/// Candidates locked at once when claiming: enough to find one the daily
/// budgets admit past a few held pairs.
const CANDIDATES: i64 = 32;
/// Rows read at once by the listings.
const PAGE: i64 = 100;

/// The rows a claim may take: live, past any backoff, unleased (or its
/// lease passed), and the oldest live one of its pair.
const CLAIMABLE: &str = "SELECT id, repo, user_id FROM engram_triggers t \
     WHERE failed_at IS NULL \
       AND (not_before IS NULL OR not_before <= now()) \
       AND (lease_until IS NULL OR lease_until < now()) \
       AND NOT EXISTS (SELECT 1 FROM engram_triggers o \
                        WHERE o.repo = t.repo AND o.user_id = t.user_id \
                          AND o.failed_at IS NULL AND o.seq < t.seq) \
     ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED";

/// The queue's table, and this replica's name in its claims.
pub struct Shared {
    database: Database,
    limits: Limits,
    lease: Duration,
    /// How often the worker looks for triggers others accepted, or whose
    /// lease passed.
    poll: Duration,
    /// `claimed_by`: which replica holds a claim (for the operator).
    replica: String,
    /// The queue's depth and bytes as last read, for `/stats`.
    depth: AtomicU64,
    bytes: AtomicU64,
    /// When they were last read, and whether this replica changed the
    /// queue since.
    read_at: Mutex<Option<Instant>>,
    changed: AtomicBool,
}

/// A claim this replica holds on a trigger, renewed until it is dropped.
pub struct Lease {
    claim: Uuid,
    renewer: JoinHandle<()>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

impl Shared {
    pub fn new(database: Database, limits: Limits, lease: Duration, poll: Duration) -> Self {
        Self {
            database,
            limits,
            lease,
            poll,
            replica: format!("{}/{}", std::process::id(), Uuid::new_v4()),
            depth: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            read_at: Mutex::new(None),
            changed: AtomicBool::new(true),
        }
    }

    pub fn poll(&self) -> Duration {
        self.poll
    }

    pub fn depth(&self) -> usize {
        usize::try_from(self.depth.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Stores `trigger` (or drops it) by files mode's rules, committed
    /// before it returns.
    pub async fn enqueue(&self, trigger: &Trigger, held: bool) -> Result<EnqueueStatus, Error> {
        let json = to_json(trigger);
        let bytes = json.len() as u64;
        let body = String::from_utf8(json).expect("JSON is UTF-8");
        let (repo, user, session) = (
            trigger.repo.as_str(),
            trigger.user.as_str(),
            trigger.session_id.as_str(),
        );
        let mut client = self.database.connection().await?;
        let tx = client.transaction().await.map_err(query)?;
        let (lock, replace, read, insert) = tokio::try_join!(
            tx.prepare_cached(LOCK_SESSION),
            tx.prepare_cached(REPLACE_TURN),
            tx.prepare_cached(READ_QUEUED),
            tx.prepare_cached(INSERT),
        )
        .map_err(query)?;
        // Sent together, run in this order: the session's lock first, so
        // the replacing and the reading see every accept of the session
        // that held it before.
        let key = session_key(trigger);
        let is_turn = trigger.kind == Kind::Turn;
        let (lock_params, session_params): ([&(dyn ToSql + Sync); 2], [&(dyn ToSql + Sync); 3]) =
            ([&SESSION_LOCKS, &key], [&repo, &user, &session]);
        let (_, replaced, queued) = tokio::try_join!(
            biased;
            tx.execute(&lock, &lock_params),
            async {
                if is_turn {
                    tx.execute(&replace, &session_params).await
                } else {
                    Ok(0)
                }
            },
            tx.query_one(&read, &session_params),
        )
        .map_err(query)?;
        let queued = Queued::of(&queued);
        // A waiting turn of the session is replaced: this one's window
        // holds its messages.
        let coalesced = replaced > 0;
        if is_turn {
            let pair_waiting = usize::try_from(queued.pair_waiting).unwrap_or(usize::MAX);
            if !coalesced
                && !admits_turn(self.limits, trigger, pair_waiting, queued.total_bytes, held)
            {
                return Ok(EnqueueStatus::Dropped);
            }
        } else {
            check_budgets(self.limits, bytes, queued.session_bytes, queued.total_bytes)?;
        }
        tx.execute(
            &insert,
            &[
                &trigger.id,
                &kind_name(trigger.kind),
                &repo,
                &user,
                &session,
                &body,
                &i64::try_from(bytes).unwrap_or(i64::MAX),
                &i32::try_from(trigger.attempts).unwrap_or(i32::MAX),
                &trigger.last_error,
            ],
        )
        .await
        .map_err(query)?;
        tx.commit().await.map_err(query)?;
        self.changed.store(true, Ordering::Relaxed);
        Ok(if coalesced {
            EnqueueStatus::Coalesced
        } else {
            EnqueueStatus::Queued
        })
    }

    /// Reads the queue's depth and bytes again for `/stats`, unless the
    /// last reading is under a second old and this replica has not changed
    /// the queue since. A reading that fails or takes too long leaves the
    /// last one in place (and is not tried again for a second).
    pub async fn refresh_if_stale(&self) {
        let now = Instant::now();
        {
            let mut read_at = self.read_at.lock().unwrap_or_else(PoisonError::into_inner);
            let fresh = read_at.is_some_and(|at| now.duration_since(at) < DEPTH_FRESH);
            if fresh && !self.changed.load(Ordering::Relaxed) {
                return;
            }
            *read_at = Some(now);
        }
        self.changed.store(false, Ordering::Relaxed);
        let failure = match tokio::time::timeout(DEPTH_READ_TIMEOUT, self.refresh()).await {
            Ok(Ok(())) => return,
            Ok(Err(err)) => error_chain(&err),
            Err(_) => "the database did not answer in time".to_owned(),
        };
        tracing::debug!(error = %failure, "could not read the shared queue's depth; showing the last reading");
    }

    /// Reads the queue's depth and bytes, all replicas' triggers.
    async fn refresh(&self) -> Result<(), Error> {
        let row = self
            .database
            .connection()
            .await?
            .query_one(
                "SELECT count(*), coalesce(sum(bytes), 0)::bigint FROM engram_triggers \
                 WHERE failed_at IS NULL",
                &[],
            )
            .await
            .map_err(query)?;
        let (depth, bytes): (i64, i64) = (row.get(0), row.get(1));
        self.depth
            .store(u64::try_from(depth).unwrap_or(0), Ordering::Relaxed);
        self.bytes
            .store(u64::try_from(bytes).unwrap_or(0), Ordering::Relaxed);
        Ok(())
    }

    /// Claims the oldest trigger that may go whose pair `admits` lets
    /// through, under a lease renewed until the [`Lease`] is dropped.
    pub async fn claim(
        &self,
        admits: impl Fn(&RepoId, &UserId) -> bool,
    ) -> Result<Option<(Trigger, Lease)>, Error> {
        let mut client = self.database.connection().await?;
        let tx = client.transaction().await.map_err(query)?;
        let candidates = tx.query(CLAIMABLE, &[&CANDIDATES]).await.map_err(query)?;
        let chosen = candidates.iter().find_map(|row| {
            let repo: RepoId = row.get::<_, &str>(1).parse().ok()?;
            let user: UserId = row.get::<_, &str>(2).parse().ok()?;
            admits(&repo, &user).then(|| row.get::<_, Uuid>(0))
        });
        let Some(id) = chosen else {
            return Ok(None);
        };
        let claim = Uuid::new_v4();
        let row = tx
            .query_one(
                "UPDATE engram_triggers \
                 SET claimed_by = $2, claim = $3, lease_until = now() + make_interval(secs => $4) \
                 WHERE id = $1 RETURNING body, attempts, last_error",
                &[&id, &self.replica, &claim, &self.lease.as_secs_f64()],
            )
            .await
            .map_err(query)?;
        tx.commit().await.map_err(query)?;
        let lease = Lease {
            claim,
            renewer: tokio::spawn(renew(self.database.clone(), id, claim, self.lease)),
        };
        match read_trigger(&row) {
            Ok(trigger) => Ok(Some((trigger, lease))),
            Err(reason) => {
                tracing::error!(trigger.id = %id, reason, "a stored trigger does not parse; it fails");
                self.settle(id, &lease, Settle::Fail(reason)).await;
                Ok(None)
            }
        }
    }

    /// Ends a claim: the trigger is done, held for a budget, tried again
    /// after a backoff, or failed for good. Errors are logged: the claim then lapses, and the
    /// trigger is taken again (and its memories not written twice).
    pub async fn settle(&self, id: Uuid, lease: &Lease, how: Settle) {
        let statement = match &how {
            Settle::Done => "DELETE FROM engram_triggers WHERE id = $1 AND claim = $2",
            Settle::Hold => {
                "UPDATE engram_triggers SET claimed_by = NULL, claim = NULL, lease_until = NULL \
                 WHERE id = $1 AND claim = $2"
            }
            Settle::Retry { .. } => {
                "UPDATE engram_triggers SET attempts = attempts + 1, last_error = $3, \
                 not_before = now() + make_interval(secs => $4), \
                 claimed_by = NULL, claim = NULL, lease_until = NULL \
                 WHERE id = $1 AND claim = $2"
            }
            Settle::Fail(_) => {
                "UPDATE engram_triggers SET attempts = attempts + 1, last_error = $3, \
                 failed_at = now(), claimed_by = NULL, claim = NULL, lease_until = NULL \
                 WHERE id = $1 AND claim = $2"
            }
        };
        let settled = async {
            let client = self.database.connection().await?;
            let changed = match &how {
                Settle::Done | Settle::Hold => {
                    client.execute(statement, &[&id, &lease.claim]).await
                }
                Settle::Retry { error, after } => {
                    client
                        .execute(statement, &[&id, &lease.claim, error, &after.as_secs_f64()])
                        .await
                }
                Settle::Fail(error) => client.execute(statement, &[&id, &lease.claim, error]).await,
            }?;
            Ok::<_, postgres::Error>(changed)
        }
        .await;
        self.changed.store(true, Ordering::Relaxed);
        match settled {
            Ok(0) => {
                tracing::warn!(trigger.id = %id, "the trigger's claim was lost (its lease passed and another replica took it); left to that replica");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(trigger.id = %id, error = %error_chain(&err), "could not record the end of a claim; the trigger is taken again once its lease passes");
            }
        }
    }

    /// Gives back every claim this replica holds (it is stopping and its
    /// passes were abandoned): the triggers are free for another replica
    /// at once, their attempts unchanged.
    pub async fn release_claims(&self) -> Result<u64, Error> {
        self.database
            .connection()
            .await?
            .execute(
                "UPDATE engram_triggers SET claimed_by = NULL, claim = NULL, lease_until = NULL \
                 WHERE claimed_by = $1",
                &[&self.replica],
            )
            .await
            .map_err(query)
    }

    /// Up to `limit` triggers waiting or in flight whose pair `visible`
    /// admits: those in flight first, then the others, oldest first.
    pub async fn queued(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<Vec<QueuedTrigger>, Error> {
        let client = self.database.connection().await?;
        let mut found = Vec::new();
        scan(
            &client,
            "SELECT body, attempts, last_error, \
                    coalesce(lease_until > now(), false) AS in_flight, \
                    coalesce(not_before > now(), false) \
             FROM engram_triggers WHERE failed_at IS NULL \
             ORDER BY in_flight DESC, seq LIMIT $1 OFFSET $2",
            |row| {
                let Some(trigger) = read_trigger(row).ok().filter(|t| visible(&t.pair())) else {
                    return true;
                };
                let state = match (row.get::<_, bool>(3), row.get::<_, bool>(4)) {
                    (true, _) => QueueState::InFlight,
                    (false, true) => QueueState::BackingOff,
                    (false, false) => QueueState::Waiting,
                };
                found.push(QueuedTrigger {
                    trigger: TriggerSummary::of(&trigger),
                    state,
                });
                found.len() < limit
            },
        )
        .await?;
        Ok(found)
    }

    /// Up to `limit` failed triggers whose pair `visible` admits, newest
    /// first, and whether there are more.
    pub async fn failed(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<(Vec<TriggerSummary>, bool), Error> {
        let client = self.database.connection().await?;
        let mut found = Vec::new();
        let more = scan(
            &client,
            "SELECT body, attempts, last_error FROM engram_triggers \
             WHERE failed_at IS NOT NULL ORDER BY seq DESC LIMIT $1 OFFSET $2",
            |row| {
                let Some(trigger) = read_trigger(row).ok().filter(|t| visible(&t.pair())) else {
                    return true;
                };
                if found.len() == limit {
                    return false;
                }
                found.push(TriggerSummary::of(&trigger));
                true
            },
        )
        .await?;
        Ok((found, more))
    }

    /// Puts the failed trigger `id` (if `visible` admits its pair) back in
    /// the queue with its attempts reset; a compaction obeys the byte
    /// budgets like a new one.
    pub async fn retry_failed(
        &self,
        id: Uuid,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<(), Error> {
        let mut client = self.database.connection().await?;
        let tx = client.transaction().await.map_err(query)?;
        let row = tx
            .query_opt(
                "SELECT body, attempts, last_error, failed_at IS NOT NULL, bytes \
                 FROM engram_triggers WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .await
            .map_err(query)?;
        let Some((row, trigger)) = row
            .and_then(|row| read_trigger(&row).ok().map(|trigger| (row, trigger)))
            .filter(|(_, trigger)| visible(&trigger.pair()))
        else {
            return Err(Error::NoSuchFailed(id));
        };
        if !row.get::<_, bool>(3) {
            return Err(Error::AlreadyQueued(id));
        }
        if trigger.kind == Kind::Compaction {
            // Its session's budget is decided as an accept's is.
            lock_session(&tx, &trigger).await?;
            let bytes = u64::try_from(row.get::<_, i64>(4)).unwrap_or(0);
            let queued = Queued::read(&tx, &trigger).await?;
            check_budgets(self.limits, bytes, queued.session_bytes, queued.total_bytes)?;
        }
        tx.execute(
            "UPDATE engram_triggers SET failed_at = NULL, attempts = 0, not_before = NULL \
             WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(query)?;
        tx.commit().await.map_err(query)?;
        self.changed.store(true, Ordering::Relaxed);
        Ok(())
    }
}

/// How a claim ends.
pub enum Settle {
    Done,
    /// Given back unchanged: a daily token budget holds the pair.
    Hold,
    Retry {
        error: String,
        after: Duration,
    },
    Fail(String),
}

/// Renews the claim every third of the lease until aborted, or until the
/// claim is found lost.
async fn renew(database: Database, id: Uuid, claim: Uuid, lease: Duration) {
    let mut every = tokio::time::interval(lease / 3);
    every.tick().await;
    loop {
        every.tick().await;
        let renewed = async {
            Ok::<_, postgres::Error>(
                database
                    .connection()
                    .await?
                    .execute(
                        "UPDATE engram_triggers \
                         SET lease_until = now() + make_interval(secs => $3) \
                         WHERE id = $1 AND claim = $2",
                        &[&id, &claim, &lease.as_secs_f64()],
                    )
                    .await?,
            )
        }
        .await;
        match renewed {
            Ok(0) => {
                tracing::warn!(trigger.id = %id, "lost the claim on a trigger (its lease passed); another replica may take it");
                return;
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(trigger.id = %id, error = %error_chain(&err), "could not renew the claim on a trigger; trying again");
            }
        }
    }
}

/// Runs `sql` (which ends in `LIMIT $1 OFFSET $2`) a page at a time,
/// handing each row to `take` until it returns `false` (then `true`: rows
/// were left) or the rows run out (`false`).
async fn scan(
    client: &tokio_postgres::Client,
    sql: &str,
    mut take: impl FnMut(&tokio_postgres::Row) -> bool,
) -> Result<bool, Error> {
    let mut offset: i64 = 0;
    loop {
        let rows = client.query(sql, &[&PAGE, &offset]).await.map_err(query)?;
        for row in &rows {
            if !take(row) {
                return Ok(true);
            }
        }
        if i64::try_from(rows.len()).unwrap_or(i64::MAX) < PAGE {
            return Ok(false);
        }
        offset += PAGE;
    }
}

/// The trigger of a row selecting `body, attempts, last_error` first.
fn read_trigger(row: &tokio_postgres::Row) -> Result<Trigger, String> {
    let mut trigger: Trigger =
        serde_json::from_str(row.get(0)).map_err(|err| format!("the stored trigger: {err}"))?;
    trigger.attempts = u32::try_from(row.get::<_, i32>(1)).unwrap_or(0);
    trigger.last_error = row.get(2);
    Ok(trigger)
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Turn => "turn",
        Kind::Compaction => "compaction",
    }
}

fn query(err: tokio_postgres::Error) -> Error {
    Error::Database(err.into())
}
