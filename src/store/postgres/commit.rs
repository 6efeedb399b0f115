//! How a write's transaction ends, so that what the write answers is what
//! happened, even when the database stops answering (hung, or cut off).
//!
//! - The transaction has `store.postgres.statement_timeout_ms` to reach
//!   its commit, timed here as well as by the server (a server that is
//!   stopped cancels nothing). Past it, before the `COMMIT` is sent, the
//!   connection is abandoned, never to return to the pool: a transaction
//!   whose `COMMIT` was never sent cannot commit, so the write is refused
//!   ([`Error::Unanswered`], a `503`) knowing nothing changed.
//! - The `COMMIT` is sent only past the request's commit point
//!   ([`crate::commit_point`]): a write whose request was answered as
//!   timed out meanwhile rolls back instead ([`Error::CalledOff`]).
//! - A `COMMIT` with no answer within the same limit, or whose connection
//!   fails, is settled on another connection: once the transaction is
//!   over (its lock on the log's head is free), its change is in the log
//!   or it is not. When the database does not answer that either within
//!   `store.postgres.connect_timeout_ms`, the outcome is unknown and said
//!   so ([`Error::Unconfirmed`], a `504`): never a `503`.

use tokio::time::Instant;

use super::{Database, Error, unreachable};
use crate::commit_point;
use crate::memory::MemoryId;

/// A connection of the pool that returns to it only once what was sent on
/// it has been answered; dropped before, it is closed instead, so that
/// nothing still queued on it is ever run for someone else.
pub(super) struct Session {
    connection: Option<deadpool_postgres::Object>,
    answered: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take()
            && !self.answered
        {
            drop(deadpool_postgres::Object::take(connection));
        }
    }
}

impl Session {
    pub(super) fn client(&self) -> &tokio_postgres::Client {
        self.connection
            .as_ref()
            .expect("a session holds its connection until dropped")
    }
}

/// A write's transaction, begun: its statements are run with
/// [`Self::run`] and it ends with [`Self::commit`] or
/// [`Self::roll_back`] (or dropped, abandoned).
pub(super) struct Writing {
    database: Database,
    session: Session,
    deadline: Instant,
}

impl Database {
    /// A connection of the pool, in a [`Session`].
    pub(super) async fn session(&self) -> Result<Session, Error> {
        Ok(Session {
            connection: Some(self.pool.get().await?),
            answered: false,
        })
    }

    /// The rows of `query`, if the database answers within
    /// `statement_timeout_ms`; a connection that did not answer is closed.
    pub(super) async fn answered(
        &self,
        query: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let limit = self.settings.statement_timeout();
        let mut session = self.session().await?;
        match tokio::time::timeout(limit, session.client().query(query, params)).await {
            Ok(rows) => {
                session.answered = true;
                Ok(rows?)
            }
            Err(_) => Err(Error::Unanswered { after: limit }),
        }
    }

    /// Begins a write's transaction, its time counted from now.
    pub(super) async fn begin_write(&self) -> Result<Writing, Error> {
        let session = self.session().await?;
        let writing = Writing {
            database: self.clone(),
            session,
            deadline: Instant::now() + self.settings.statement_timeout(),
        };
        let begin = writing.client().batch_execute("BEGIN");
        writing.answered(begin).await?;
        Ok(writing)
    }

    /// Whether the change `seq`, of memory `id`, is committed, once the
    /// transaction that took its number is over.
    async fn settle(&self, seq: i64, id: MemoryId) -> Result<(), Error> {
        let unconfirmed = || Error::Unconfirmed { id };
        let limit = self.settings.connect_timeout();
        let mut session = tokio::time::timeout(limit, self.session())
            .await
            .map_err(|_| unconfirmed())?
            .map_err(|_| unconfirmed())?;
        let check = async {
            let client = session.client();
            // The write's transaction holds this row until it ends.
            client
                .batch_execute("SELECT seq FROM engram_log_head FOR SHARE")
                .await?;
            client
                .query_opt(
                    "SELECT 1 FROM engram_changes WHERE seq = $1 AND memory_id = $2",
                    &[&seq, &id.as_uuid()],
                )
                .await
                .map(|row| row.is_some())
        };
        match tokio::time::timeout(limit, check).await {
            Ok(Ok(committed)) => {
                session.answered = true;
                tracing::info!(memory.id = %id, committed, "settled a write whose commit went unanswered");
                if committed {
                    Ok(())
                } else {
                    Err(Error::Unanswered {
                        after: self.settings.statement_timeout(),
                    })
                }
            }
            Ok(Err(_)) | Err(_) => Err(unconfirmed()),
        }
    }
}

impl Writing {
    pub(super) fn client(&self) -> &tokio_postgres::Client {
        self.session.client()
    }

    /// `statement`'s answer, if it comes before the transaction's time is
    /// up; if not, the transaction is abandoned.
    pub(super) async fn answered<T, E>(
        &self,
        statement: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error>
    where
        Error: From<E>,
    {
        match tokio::time::timeout_at(self.deadline, statement).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(Error::Unanswered {
                after: self.database.settings.statement_timeout(),
            }),
        }
    }

    /// Ends the transaction without a change.
    pub(super) async fn roll_back(mut self) -> Result<(), Error> {
        let rollback = self.session.client().batch_execute("ROLLBACK");
        match tokio::time::timeout_at(self.deadline, rollback).await {
            Ok(answer) => {
                answer?;
                self.session.answered = true;
                Ok(())
            }
            // Abandoned: the server rolls it back when it reads the
            // closed connection.
            Err(_) => Ok(()),
        }
    }

    /// Commits the transaction, which took the log's number `seq` for a
    /// change of memory `id`; see the module's header for what each
    /// outcome means.
    pub(super) async fn commit(mut self, seq: i64, id: MemoryId) -> Result<(), Error> {
        if !commit_point::pass() {
            self.roll_back().await?;
            return Err(Error::CalledOff);
        }
        let commit = self.session.client().batch_execute("COMMIT");
        match tokio::time::timeout_at(self.deadline, commit).await {
            Ok(Ok(())) => {
                self.session.answered = true;
                Ok(())
            }
            // The server refused the commit: it rolled back.
            Ok(Err(err)) if !unreachable(&err) => {
                self.session.answered = true;
                Err(err.into())
            }
            Ok(Err(_)) | Err(_) => {
                let Self {
                    database, session, ..
                } = self;
                drop(session);
                database.settle(seq, id).await
            }
        }
    }
}
