//! Capture: conversation windows in, memories out, off the request path.
//!
//! `POST /turns` and `POST /compactions` hand a window to [`Capture::enqueue`],
//! which redacts the secrets of its window (the guard's placeholders, as
//! on the way to a model, so no secret rests on disk), stores it durably
//! ([`backlog`]: in `queue/`, or in PostgreSQL's shared queue) and
//! answers at once; the
//! [`worker::Worker`] classifies it later with the classifier model, guards
//! what comes back (secrets, near-duplicates, limits) and writes the
//! memories. Nothing accepted is lost: a trigger leaves the queue only after
//! its memories are written. What is not accepted (a compaction past the
//! queue's byte budget, any trigger below the disk floor) is refused with
//! an error, never dropped silently. Without a classifier model (no
//! `llm`) capture is agent-driven ([`mode`]): triggers are refused, and the
//! agent writes memories itself.

pub mod backlog;
pub mod classifier_reply;
pub mod classify;
pub mod guard;
pub mod ledger;
pub mod mode;
pub mod prompt;
pub mod queue;
pub mod triggers;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use utoipa::ToSchema;

use crate::blocking;
use crate::store::NamespacePair;
use crate::usage::Meter;
use backlog::Backlog;
pub use mode::CaptureMode;
use queue::{EnqueueStatus, QueuedTrigger, Trigger};
use triggers::{PassOutcome, RecentTriggers, TriggerSummary};

/// How the worker runs, from the configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    pub max_concurrent: usize,
    pub duplicate_threshold: f64,
    pub max_attempts: u32,
    pub retry_base: Duration,
    /// The most tokens of already classified messages sent before a
    /// pass's new ones (`capture.context_tokens`).
    pub context_tokens: usize,
    /// How long a stop waits for the passes in flight (`capture.drain_ms`).
    pub drain: Duration,
}

/// Counters for `/stats`.
#[derive(Default)]
pub struct CaptureStats {
    pub accepted: AtomicU64,
    pub coalesced: AtomicU64,
    pub dropped: AtomicU64,
    pub processed: AtomicU64,
    pub written: AtomicU64,
    pub superseded: AtomicU64,
    pub refused_secret: AtomicU64,
    pub refused_invalid: AtomicU64,
    pub skipped_duplicate: AtomicU64,
    pub parse_failures: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
    pub refused_over_budget: AtomicU64,
    pub refused_low_disk: AtomicU64,
}

/// The counters as JSON.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptureStatsView {
    /// Whether the classifier runs (an `llm` is configured): `mode` is
    /// `classifier`.
    pub enabled: bool,
    /// What writes memories: the classifier, or the agent alone.
    pub mode: CaptureMode,
    /// Triggers waiting or in flight. With `store.backend: postgres`, those
    /// of the queue all replicas share, as read from the database at most
    /// a second before (at once after this replica changed the queue).
    pub queue_depth: usize,
    /// Triggers stored (queued or coalesced) since start.
    pub accepted: u64,
    pub coalesced: u64,
    pub dropped: u64,
    pub processed: u64,
    pub written: u64,
    pub superseded: u64,
    pub refused_secret: u64,
    /// Proposals refused for an unknown scope or category, bad content,
    /// or a conflicting write.
    pub refused_invalid: u64,
    pub skipped_duplicate: u64,
    /// Classifier replies with no JSON array in them.
    pub parse_failures: u64,
    pub retried: u64,
    /// Triggers moved to `queue/failed/`.
    pub failed: u64,
    /// Bytes of trigger files waiting or in flight (all replicas', as
    /// `queue_depth`, with `store.backend: postgres`).
    pub queue_bytes: u64,
    /// Compactions refused (429) for the queue's byte budget.
    pub refused_over_budget: u64,
    /// Triggers refused (507) for lack of disk space.
    pub refused_low_disk: u64,
    /// Symbolic links found under `queue/` (in place of a trigger file or
    /// of `queue/failed/`): never read, removed or written through.
    pub skipped_symlinks: u64,
}

/// The capture handle: cheap to clone.
#[derive(Clone)]
pub struct Capture {
    queue: Backlog,
    stats: Arc<CaptureStats>,
    /// The latest passes, which the worker logs.
    recent: Arc<RecentTriggers>,
    wake: Arc<Notify>,
    /// Whose triggers the daily token budgets hold: those are not dropped
    /// for their pair's capacity.
    meter: Meter,
    enabled: bool,
}

impl Capture {
    pub fn new(
        queue: Backlog,
        stats: Arc<CaptureStats>,
        recent: Arc<RecentTriggers>,
        wake: Arc<Notify>,
        meter: Meter,
        enabled: bool,
    ) -> Self {
        Self {
            queue,
            stats,
            recent,
            wake,
            meter,
            enabled,
        }
    }

    /// Whether triggers are processed (an `llm` is configured).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// What writes memories.
    pub fn mode(&self) -> CaptureMode {
        CaptureMode::with_classifier(self.enabled)
    }

    /// Stores `trigger` durably (or drops it, by the queue's rules) and
    /// wakes the worker.
    pub async fn enqueue(&self, trigger: Trigger) -> Result<EnqueueStatus, queue::Error> {
        // On its own task: a client that hangs up mid-accept must not stop
        // it between the log's sync and the queue's bookkeeping.
        let capture = self.clone();
        blocking::run_to_end(async move { capture.store(trigger).await }).await
    }

    async fn store(&self, trigger: Trigger) -> Result<EnqueueStatus, queue::Error> {
        // Before anything is written: the secret guard scans the whole
        // window, which is CPU work for a large compaction.
        let trigger = blocking::run(move || trigger.redacted()).await;
        let held = !self
            .meter
            .capture_gate()
            .admits(&trigger.repo, &trigger.user);
        let enqueued = self.queue.enqueue(trigger, held).await;
        let refusals = match &enqueued {
            Err(queue::Error::OverBudget { .. } | queue::Error::TooLarge { .. }) => {
                Some(&self.stats.refused_over_budget)
            }
            Err(queue::Error::LowSpace(_)) => Some(&self.stats.refused_low_disk),
            _ => None,
        };
        if let Some(counter) = refusals {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let status = enqueued?;
        let counter = match status {
            EnqueueStatus::Queued => &self.stats.accepted,
            EnqueueStatus::Coalesced => {
                self.stats.accepted.fetch_add(1, Ordering::Relaxed);
                &self.stats.coalesced
            }
            EnqueueStatus::Dropped => &self.stats.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if status != EnqueueStatus::Dropped {
            self.wake.notify_one();
        }
        Ok(status)
    }

    /// Up to `limit` triggers waiting or in flight whose pair `visible` admits.
    pub async fn queued(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Result<Vec<QueuedTrigger>, queue::Error> {
        self.queue.queued(limit, visible).await
    }

    /// Up to `limit` of the latest passes whose pair `visible` admits, newest first.
    pub fn recent(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool,
    ) -> Vec<PassOutcome> {
        self.recent.newest(limit, visible)
    }

    /// Up to `limit` failed triggers (`queue/failed/`, or the shared
    /// queue's) whose pair `visible` admits, newest first, and whether
    /// there are more.
    pub async fn failed(
        &self,
        limit: usize,
        visible: impl Fn(&NamespacePair) -> bool + Send + 'static,
    ) -> Result<(Vec<TriggerSummary>, bool), queue::Error> {
        self.queue.failed(limit, visible).await
    }

    /// Moves the failed trigger `id` back into the queue (see
    /// [`queue::Queue::retry_failed`]) and wakes the worker.
    pub async fn retry(
        &self,
        id: uuid::Uuid,
        visible: impl Fn(&NamespacePair) -> bool + Send + 'static,
    ) -> Result<(), queue::Error> {
        self.queue.retry_failed(id, visible).await?;
        self.wake.notify_one();
        Ok(())
    }

    /// Reads the shared queue's depth again if the last reading is stale
    /// (postgres mode), for [`Self::stats`].
    pub async fn refresh_depth(&self) {
        self.queue.refresh_depth().await;
    }

    pub fn stats(&self) -> CaptureStatsView {
        let stats = &self.stats;
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        CaptureStatsView {
            enabled: self.enabled,
            mode: self.mode(),
            queue_depth: self.queue.depth(),
            accepted: read(&stats.accepted),
            coalesced: read(&stats.coalesced),
            dropped: read(&stats.dropped),
            processed: read(&stats.processed),
            written: read(&stats.written),
            superseded: read(&stats.superseded),
            refused_secret: read(&stats.refused_secret),
            refused_invalid: read(&stats.refused_invalid),
            skipped_duplicate: read(&stats.skipped_duplicate),
            parse_failures: read(&stats.parse_failures),
            retried: read(&stats.retried),
            failed: read(&stats.failed),
            queue_bytes: self.queue.bytes(),
            refused_over_budget: read(&stats.refused_over_budget),
            refused_low_disk: read(&stats.refused_low_disk),
            skipped_symlinks: self.queue.skipped_symlinks(),
        }
    }
}
