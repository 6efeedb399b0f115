//! The capture queue behind one interface, over one of two durable
//! layers: `queue/` on this replica's disk ([`Queue`], files mode), or a
//! table every replica shares ([`postgres::Shared`], postgres mode). The
//! capture handle and the worker see only this; the accept rules are the
//! same in both (the byte budgets are one function, `check_budgets`).
//!
//! A trigger is taken as a [`Claimed`]: in postgres mode it carries the
//! lease this replica holds on it, renewed until the claim is settled
//! (finished, retried later or failed) or dropped.

pub mod postgres;

use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::blocking;
use crate::capture::queue::{EnqueueStatus, Error, Queue, QueuedTrigger, Trigger};
use crate::capture::triggers::TriggerSummary;
use crate::memory::{RepoId, UserId};
use crate::store::NamespacePair;
use postgres::{Lease, Settle, Shared};

/// The queue, files or shared; cheap to clone.
#[derive(Clone)]
pub enum Backlog {
    Files(Arc<Queue>),
    Postgres(Arc<Shared>),
}

/// A trigger taken from the queue, and the claim on it (postgres mode).
pub struct Claimed {
    pub trigger: Trigger,
    lease: Option<Lease>,
}

impl Claimed {
    /// A trigger taken from files mode's queue, which needs no lease (one
    /// process owns it).
    pub fn unleased(trigger: Trigger) -> Self {
        Self {
            trigger,
            lease: None,
        }
    }
}

impl Backlog {
    /// Stores `trigger` durably (or drops it, by the queue's rules);
    /// `held`: a daily token budget holds its pair.
    pub async fn enqueue(&self, trigger: Trigger, held: bool) -> Result<EnqueueStatus, Error> {
        match self {
            Self::Files(queue) => queue.enqueue(trigger, held).await,
            Self::Postgres(shared) => shared.enqueue(&trigger, held).await,
        }
    }

    /// The oldest trigger that may go whose pair `admits` lets through
    /// (the daily budgets hold some back), now claimed. A database that
    /// cannot be reached is logged and taken for an empty queue: the
    /// worker looks again at its next poll.
    pub async fn take_next(&self, admits: impl Fn(&RepoId, &UserId) -> bool) -> Option<Claimed> {
        match self {
            Self::Files(queue) => queue
                .take_next(|trigger| admits(&trigger.repo, &trigger.user))
                .map(Claimed::unleased),
            Self::Postgres(shared) => match shared.claim(admits).await {
                Ok(claimed) => claimed.map(|(trigger, lease)| Claimed {
                    trigger,
                    lease: Some(lease),
                }),
                Err(err) => {
                    tracing::warn!(error = %crate::causes::error_chain(&err), "could not claim a capture trigger; looking again shortly");
                    None
                }
            },
        }
    }

    /// When the worker should look again without being woken: the end of
    /// the earliest backoff (files), or the next poll of the shared queue,
    /// which other replicas fill and whose leases lapse.
    pub fn next_look_at(&self) -> Option<Instant> {
        match self {
            Self::Files(queue) => queue.next_retry_at(),
            Self::Postgres(shared) => Some(Instant::now() + shared.poll()),
        }
    }

    /// The trigger is done: its memories are written.
    pub async fn finish(&self, claimed: Claimed) {
        self.settle(claimed, Settle::Done).await;
    }

    /// The trigger failed and will be tried again after `backoff`.
    pub async fn retry_later(&self, claimed: Claimed, error: String, backoff: Duration) {
        self.settle(
            claimed,
            Settle::Retry {
                error,
                after: backoff,
            },
        )
        .await;
    }

    /// A daily token budget holds the trigger's pair: it waits in the
    /// queue again, its attempts unchanged, to be taken once the budget
    /// renews.
    pub async fn hold(&self, claimed: Claimed) {
        self.settle(claimed, Settle::Hold).await;
    }

    /// The trigger will not be tried again: it joins the failed ones, with
    /// its error.
    pub async fn fail(&self, claimed: Claimed, error: String) {
        self.settle(claimed, Settle::Fail(error)).await;
    }

    async fn settle(&self, claimed: Claimed, how: Settle) {
        let Claimed { trigger, lease } = claimed;
        match self {
            Self::Postgres(shared) => {
                // Every trigger of the shared queue is taken with a lease.
                if let Some(lease) = lease {
                    shared.settle(trigger.id, &lease, how).await;
                }
            }
            Self::Files(queue) => {
                let queue = queue.clone();
                blocking::run(move || match how {
                    Settle::Done => queue.finish(&trigger),
                    Settle::Hold => queue.hold(trigger),
                    Settle::Retry { error, after } => {
                        queue.retry_later(trigger, error, Instant::now() + after);
                    }
                    Settle::Fail(error) => queue.fail(trigger, error),
                })
                .await;
            }
        }
    }

    /// Up to `limit` triggers waiting or in flight whose pair `visible`
    /// admits: those in flight first, then the waiting ones, oldest first.
    pub async fn queued(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<Vec<QueuedTrigger>, Error> {
        match self {
            Self::Files(queue) => Ok(queue.queued(limit, visible)),
            Self::Postgres(shared) => shared.queued(limit, visible).await,
        }
    }

    /// Up to `limit` failed triggers whose pair `visible` admits, newest
    /// first, and whether there are more.
    pub async fn failed(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool + Send + 'static,
    ) -> Result<(Vec<TriggerSummary>, bool), Error> {
        match self {
            Self::Files(queue) => {
                let queue = queue.clone();
                blocking::run(move || queue.failed(limit, visible)).await
            }
            Self::Postgres(shared) => shared.failed(limit, visible).await,
        }
    }

    /// Puts the failed trigger `id` back in the queue, attempts reset.
    pub async fn retry_failed(
        &self,
        id: Uuid,
        visible: impl Fn(&NamespacePair) -> bool + Send + 'static,
    ) -> Result<(), Error> {
        match self {
            Self::Files(queue) => {
                let queue = queue.clone();
                blocking::run(move || queue.retry_failed(id, visible)).await
            }
            Self::Postgres(shared) => shared.retry_failed(id, visible).await,
        }
    }

    /// Gives back the claims of the passes a stop abandoned (postgres
    /// mode; files mode's queue keeps them for the next start). A
    /// database that cannot be reached leaves them to lapse.
    pub async fn release_claims(&self) {
        let Self::Postgres(shared) = self else {
            return;
        };
        match shared.release_claims().await {
            Ok(0) => {}
            Ok(released) => {
                tracing::info!(
                    triggers = released,
                    "gave back the claims of abandoned capture passes for another replica to take"
                );
            }
            Err(err) => {
                tracing::warn!(error = %crate::causes::error_chain(&err), "could not give back the claims of abandoned capture passes; they are taken again once their lease passes");
            }
        }
    }

    /// Reads the shared queue's depth and bytes again if the last reading
    /// is stale (postgres mode; files mode's are always current).
    pub async fn refresh_depth(&self) {
        if let Self::Postgres(shared) = self {
            shared.refresh_if_stale().await;
        }
    }

    /// Triggers waiting or in flight (in postgres mode, all replicas', as
    /// last read by [`Self::refresh_depth`]).
    pub fn depth(&self) -> usize {
        match self {
            Self::Files(queue) => queue.depth(),
            Self::Postgres(shared) => shared.depth(),
        }
    }

    /// Bytes of stored triggers waiting or in flight.
    pub fn bytes(&self) -> u64 {
        match self {
            Self::Files(queue) => queue.bytes(),
            Self::Postgres(shared) => shared.bytes(),
        }
    }

    /// Symbolic links found under `queue/` (files mode only).
    pub fn skipped_symlinks(&self) -> u64 {
        match self {
            Self::Files(queue) => queue.skipped_symlinks(),
            Self::Postgres(_) => 0,
        }
    }
}
