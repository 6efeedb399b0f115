//! The capture worker: takes triggers from the queue, at most one per
//! (repo, user) pair at a time and at most `max_concurrent` in all, and
//! runs each through [`Worker::step`]: the passes over its messages not
//! yet classified (see [`ledger`]), each one classify, guard, write, then
//! record them in the ledger; then it leaves the queue. A trigger with no
//! new message makes no model call. Transient classifier or embedder
//! faults are retried with backoff (the passes already recorded are not
//! run again); a trigger that keeps failing moves to `queue/failed/` (or
//! is marked failed in the shared queue).
//!
//! A pass's memories have ids derived from the trigger, the pass's first
//! message and their place in the classifier's reply ([`pass_memory_id`]),
//! and are written with [`Store::create_once`]: a pass run again (after a
//! crash before the ledger recorded it, or by another replica once the
//! lease of one that died has passed) writes into the same ids, so it
//! never writes a memory twice.
//!
//! Before every classifier call, not only before a trigger is taken, the
//! daily token budgets are checked (the whole capture's and its pair's):
//! past one, the trigger goes back to the queue with the passes it ran
//! recorded (no attempt counted), it and the others of its pair stay
//! queued (turns keep coalescing), and the worker wakes by itself when the
//! budget renews, at midnight UTC. So the call that crosses a budget
//! finishes, and the next one waits (up to `max_concurrent` calls of
//! different pairs may be in flight when it is crossed). After each
//! classifier call the day's usage is saved, before the trigger leaves the
//! queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::blocking;
use crate::capture::backlog::{Backlog, Claimed};
use crate::capture::classify::{self, Classified};
use crate::capture::guard::{self, DuplicateOf, Verdict};
use crate::capture::ledger::{self, Ledger, Session};
use crate::capture::prompt;
use crate::capture::queue::Trigger;
use crate::capture::triggers::{PassResult, RecentTriggers};
use crate::capture::{CaptureStats, Settings};
use crate::causes::error_chain;
use crate::config::CaptureConfig;
use crate::embed::Embedder;
use crate::index::Index;
use crate::llm::{Llm, Purpose};
use crate::memory::{Confidence, MemoryId, SessionId};
use crate::metrics::Metrics;
use crate::store::{IndexStage, Store, WriteError};
use crate::usage::Metered;

/// The longest wait between two attempts of one trigger.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long a finished trigger waits for its memories to become
/// searchable, so a retrieval right after capture finds them.
const INDEX_WAIT: Duration = Duration::from_secs(5);
/// How long a pass waits, before its model call, for the memories written
/// to its namespaces before it to become searchable (see
/// [`Worker::wait_for_earlier_writes`]): long enough for a loaded machine,
/// short enough that a backlog of thousands (an import) only delays
/// capture.
const EARLIER_WRITES_WAIT: Duration = Duration::from_secs(60);

/// What one step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The trigger is done: this many memories were written.
    Processed { written: usize },
    /// It failed for now and will be tried again.
    Retrying,
    /// It failed for good and was moved to `queue/failed/`.
    Failed,
    /// A daily token budget was spent before its next pass: back in the
    /// queue until it renews, the passes run so far (which wrote this many
    /// memories) recorded.
    Held { written: usize },
}

/// How a trigger's passes ended.
enum Passes {
    /// All ran; the memories written, in order.
    Done(Vec<MemoryId>),
    /// A daily token budget was spent before the next one; the memories
    /// the passes before it wrote.
    Held(Vec<MemoryId>),
}

pub struct Worker {
    deps: WorkerDeps,
    settings: Settings,
}

/// What the worker works with.
pub struct WorkerDeps {
    pub queue: Backlog,
    pub store: Store,
    pub index: Arc<Index>,
    pub embedder: Embedder,
    pub llm: Llm,
    /// Which messages of each session are classified already.
    pub ledger: Arc<Ledger>,
    pub stats: Arc<CaptureStats>,
    /// Where each finished pass is logged.
    pub recent: Arc<RecentTriggers>,
    /// Rung when a trigger arrives or a slot frees up.
    pub wake: Arc<Notify>,
    pub metrics: Metrics,
}

impl Worker {
    /// Starts the worker, which runs until `stop` is cancelled; its task is
    /// for the caller to join.
    pub fn spawn(
        config: &CaptureConfig,
        deps: WorkerDeps,
        stop: CancellationToken,
    ) -> JoinHandle<()> {
        let settings = Settings {
            max_concurrent: config.max_concurrent,
            duplicate_threshold: config.duplicate_threshold,
            max_attempts: config.max_attempts,
            retry_base: Duration::from_millis(config.retry_base_ms),
            context_tokens: config.context_tokens,
            drain: config.drain(),
        };
        tokio::spawn(Arc::new(Self { deps, settings }).run(stop))
    }

    /// Dispatches triggers until `stop` is cancelled; steps in flight then
    /// have the drain to finish (see [`Self::drain`]).
    async fn run(self: Arc<Self>, stop: CancellationToken) {
        let ledger = self.deps.ledger.clone();
        let expired = blocking::run(move || ledger.sweep()).await;
        if expired > 0 {
            tracing::info!(
                sessions = expired,
                "forgot the ledgers of sessions idle past their time"
            );
        }
        let slots = Arc::new(Semaphore::new(self.settings.max_concurrent));
        let mut steps = JoinSet::new();
        loop {
            while steps.try_join_next().is_some() {}
            let permit = tokio::select! {
                permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                () = stop.cancelled() => break,
            };
            let gate = self.deps.llm.meter().capture_gate();
            if let Some(trigger) = self
                .deps
                .queue
                .take_next(|repo, user| gate.admits(repo, user))
                .await
            {
                let worker = self.clone();
                steps.spawn(async move {
                    worker.step(trigger).await;
                    drop(permit);
                    worker.deps.wake.notify_one();
                });
                continue;
            }
            drop(permit);
            let retry = self.deps.queue.next_look_at();
            let renewal = gate.reopens_at().map(instant_of);
            let next = [retry, renewal].into_iter().flatten().min();
            tokio::select! {
                () = self.deps.wake.notified() => {}
                () = sleep_until(next) => {}
                () = stop.cancelled() => break,
            }
        }
        self.drain(steps).await;
    }

    /// Waits up to `capture.drain_ms` for the steps in flight, then
    /// abandons the rest: their triggers stay queued, run again at the
    /// next start (files), or are given back at once for another replica
    /// to take (postgres), with no attempt counted against them.
    async fn drain(&self, mut steps: JoinSet<()>) {
        let finished = async { while steps.join_next().await.is_some() {} };
        if tokio::time::timeout(self.settings.drain, finished)
            .await
            .is_err()
        {
            tracing::info!(
                passes = steps.len(),
                "capture passes still running at the end of the drain are abandoned"
            );
            // Aborted and awaited: their leases are no longer renewed.
            steps.shutdown().await;
        }
        self.deps.queue.release_claims().await;
    }

    /// Processes one trigger taken from the queue, to the end.
    pub async fn step(&self, claimed: Claimed) -> Step {
        let started = Instant::now();
        let mut usage = None;
        let trigger = claimed.trigger.clone();
        let outcome = self.passes(&trigger, &mut usage).await;
        let stats = &self.deps.stats;
        match outcome {
            Ok(Passes::Held(written)) => {
                tracing::info!(trigger.id = %trigger.id, memories.written = written.len(), "a daily token budget is spent; the trigger waits in the queue for it to renew, its passes so far kept");
                self.deps.queue.hold(claimed).await;
                let count = written.len();
                self.deps
                    .recent
                    .record(&trigger, PassResult::Held, written, None, usage);
                Step::Held { written: count }
            }
            Ok(Passes::Done(written)) => {
                self.deps.queue.finish(claimed).await;
                stats.processed.fetch_add(1, Ordering::Relaxed);
                tracing::info!(trigger.id = %trigger.id, memories.written = written.len(), duration_ms = started.elapsed().as_millis(), "capture pass finished");
                let count = written.len();
                self.deps
                    .recent
                    .record(&trigger, PassResult::Processed, written, None, usage);
                Step::Processed { written: count }
            }
            Err(fault) if fault.transient && trigger.attempts + 1 < self.settings.max_attempts => {
                let backoff = self.settings.retry_base * 2u32.saturating_pow(trigger.attempts);
                let backoff = backoff.min(MAX_BACKOFF);
                tracing::warn!(trigger.id = %trigger.id, error = %fault.message, retry_in_ms = backoff.as_millis(), "capture pass failed; retrying");
                stats.retried.fetch_add(1, Ordering::Relaxed);
                self.deps.recent.record(
                    &trigger,
                    PassResult::Retrying,
                    Vec::new(),
                    Some(fault.message.clone()),
                    usage,
                );
                self.deps
                    .queue
                    .retry_later(claimed, fault.message, backoff)
                    .await;
                Step::Retrying
            }
            Err(fault) => {
                tracing::error!(trigger.id = %trigger.id, error = %fault.message, "capture pass failed for good; moved to queue/failed/");
                stats.failed.fetch_add(1, Ordering::Relaxed);
                self.deps.recent.record(
                    &trigger,
                    PassResult::Failed,
                    Vec::new(),
                    Some(fault.message.clone()),
                    usage,
                );
                self.deps.queue.fail(claimed, fault.message).await;
                Step::Failed
            }
        }
    }

    /// Saves the day's model usage, so that a restart keeps counting it
    /// against the budgets.
    async fn save_usage(&self) {
        let meter = self.deps.llm.meter().clone();
        if let Err(err) = blocking::run(move || meter.save()).await {
            tracing::warn!(error = %err, "could not save the day's model usage; it is saved again after the next call");
        }
    }

    /// The passes over the trigger's messages not yet classified: as many
    /// as the model's context window needs, each recorded in the ledger
    /// once its memories are written, and each only while the daily token
    /// budgets admit the trigger's pair. The memories written, in order;
    /// what the passes' model calls took is summed into `usage`.
    async fn passes(
        &self,
        trigger: &Trigger,
        usage: &mut Option<Metered>,
    ) -> Result<Passes, Fault> {
        let marks = ledger::marks(&trigger.window);
        let (ledger, session) = (self.deps.ledger.clone(), Session::of(trigger));
        let mut seen = blocking::run(move || ledger.seen(&session)).await;
        let mut from = seen.first_new(&marks);
        if from == marks.len() {
            tracing::debug!(trigger.id = %trigger.id, "every message of the window is classified already; no model call");
        }
        let limits = prompt::Limits {
            context_window: self.deps.llm.context_tokens(),
            context: self.settings.context_tokens,
            system: classify::system_tokens(),
        };
        let mut written = Vec::new();
        while from < marks.len() {
            // Checked before every call: one large trigger's passes would
            // otherwise run far past a budget spent by its first.
            let gate = self.deps.llm.meter().capture_gate();
            if !gate.admits(&trigger.repo, &trigger.user) {
                return Ok(Passes::Held(written));
            }
            self.wait_for_earlier_writes(trigger).await;
            let shown = classify::existing_memories(
                &self.deps.embedder,
                &self.deps.index,
                &self.deps.store,
                &trigger.pair(),
                &trigger.window[from..],
            )
            .await;
            let prompt = prompt::build(
                trigger.kind,
                &trigger.window,
                from,
                &trigger.files,
                &shown,
                limits,
            );
            if prompt.cut {
                tracing::warn!(trigger.id = %trigger.id, "a message longer than the classifier's context was cut to fit (`llm.context_tokens`)");
            }
            let started = Instant::now();
            let classified = classify::classify(
                &self.deps.llm,
                &self.deps.store,
                trigger,
                &prompt.text,
                self.deps.llm.timeout(Purpose::Classifier),
            )
            .await;
            self.deps.metrics.classifier_call(started.elapsed());
            if let Ok(Classified {
                usage: Some(pass), ..
            }) = &classified
            {
                usage
                    .get_or_insert_with(|| Metered::none(&pass.model))
                    .add(pass);
            }
            self.save_usage().await;
            let classified = classified.map_err(|err| Fault {
                transient: matches!(&err, classify::Error::Upstream(e) if e.is_transient()),
                message: error_chain(&err),
            })?;
            written.extend(self.write(trigger, from, classified).await?);
            seen.add(&marks[..prompt.covers]);
            let (ledger, session) = (self.deps.ledger.clone(), Session::of(trigger));
            seen = blocking::run(move || {
                if let Err(err) = ledger.record(&session, &seen) {
                    tracing::warn!(error = %err, "could not record the classified messages; they will be classified again");
                }
                seen
            })
            .await;
            from = prompt.covers;
        }
        Ok(Passes::Done(written))
    }

    /// Waits until the memories written to the trigger's namespaces before
    /// this pass are searchable: a pass that ran without them would show
    /// the classifier less than is stored and let a copy of one through
    /// the duplicate guard. Past [`EARLIER_WRITES_WAIT`] the pass goes on
    /// with what is searchable (a copy it lets through is one the
    /// consolidation pass reduces later); a trigger never fails for it.
    async fn wait_for_earlier_writes(&self, trigger: &Trigger) {
        let caught_up = self
            .deps
            .store
            .wait_until_indexed(
                &trigger.pair().namespaces(),
                IndexStage::Vectors,
                EARLIER_WRITES_WAIT,
            )
            .await;
        if !caught_up {
            tracing::info!(trigger.id = %trigger.id, "memories written before this pass are still not searchable; it goes on without them");
        }
    }

    /// Guards and writes the classified memories of the pass from message
    /// `from`; the ids written, in order.
    async fn write(
        &self,
        trigger: &Trigger,
        from: usize,
        classified: Classified,
    ) -> Result<Vec<MemoryId>, Fault> {
        let stats = &self.deps.stats;
        if classified.unparseable {
            stats.parse_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(trigger.id = %trigger.id, "the classifier's reply held no JSON array; nothing to remember");
        }
        stats
            .refused_secret
            .fetch_add(classified.refused_secret as u64, Ordering::Relaxed);
        stats
            .refused_invalid
            .fetch_add(classified.refused_invalid as u64, Ordering::Relaxed);
        if classified.memories.is_empty() {
            return Ok(Vec::new());
        }
        let verdicts = guard::near_duplicates(
            &self.deps.embedder,
            &self.deps.index,
            &self.deps.store,
            &classified.memories,
            self.settings.duplicate_threshold,
        )
        .await
        .map_err(|err| {
            self.deps.metrics.embedding_error(&err);
            Fault {
                transient: true,
                message: error_chain(&err),
            }
        })?;
        let mut written = Vec::new();
        let pair = trigger.pair();
        for (place, (memory, verdict)) in classified.memories.into_iter().zip(verdicts).enumerate()
        {
            if let Verdict::Duplicate(of) = verdict {
                tracing::info!(trigger.id = %trigger.id, duplicate_of = %of, "skipped a near-duplicate memory");
                stats.skipped_duplicate.fetch_add(1, Ordering::Relaxed);
                if let DuplicateOf::Stored(existing) = of {
                    self.confirm_if_captured_again(existing, &trigger.session_id)
                        .await;
                }
                continue;
            }
            let supersedes = memory.supersedes.is_some();
            let id = pass_memory_id(trigger, from, place);
            match self.deps.store.create_once(id, memory).await {
                Ok(memory) => {
                    written.push(memory.id);
                    stats.written.fetch_add(1, Ordering::Relaxed);
                    if supersedes {
                        stats.superseded.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // This pass ran before (its replica stopped before the
                // ledger recorded it) and wrote this memory then.
                Err(WriteError::Exists(id)) => {
                    tracing::info!(trigger.id = %trigger.id, memory.id = %id, "a memory of this pass is written already; not written twice");
                    stats.skipped_duplicate.fetch_add(1, Ordering::Relaxed);
                }
                Err(WriteError::Store(err)) => {
                    return Err(Fault {
                        transient: true,
                        message: error_chain(&err),
                    });
                }
                // Another write got there first (say, the chain head moved).
                Err(err) => {
                    tracing::info!(trigger.id = %trigger.id, error = %err, "refused a classified memory");
                    stats.refused_invalid.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if !written.is_empty() {
            self.deps
                .store
                .wait_until_indexed(&pair.namespaces(), IndexStage::Vectors, INDEX_WAIT)
                .await;
        }
        Ok(written)
    }
}

/// The id of the memory at `place` in the reply of `trigger`'s pass from
/// message `from`: the same each time the pass runs. Time-ordered like
/// any memory id (a UUID v7), by the trigger's acceptance.
pub fn pass_memory_id(trigger: &Trigger, from: usize, place: usize) -> MemoryId {
    let digest = Sha256::new()
        .chain_update(trigger.id.as_bytes())
        .chain_update((from as u64).to_le_bytes())
        .chain_update((place as u64).to_le_bytes())
        .finalize();
    let random: [u8; 10] = digest[..10].try_into().expect("a digest is 32 bytes");
    let millis = u64::try_from(trigger.accepted_at.timestamp_millis()).unwrap_or(0);
    MemoryId::from_uuid(uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid())
}

/// Why a step failed, and whether trying again may help.
impl Worker {
    /// The same fact captured again in another session confirms the
    /// provisional memory that holds it: two sessions found it worth
    /// keeping. A failure is logged and the pass goes on (the memory stays
    /// provisional; nothing is lost).
    async fn confirm_if_captured_again(&self, existing: MemoryId, session: &SessionId) {
        let session = session.clone();
        let confirmed = self
            .deps
            .store
            .update_lifecycles(vec![existing], move |memory| {
                let again = memory.lifecycle.confidence == Confidence::Provisional
                    && memory.session_id.as_ref() != Some(&session);
                again.then(|| memory.lifecycle.confirmed(Utc::now()))
            })
            .await;
        match confirmed {
            Ok(changed) if !changed.is_empty() => {
                tracing::info!(memory.id = %existing, "captured again in another session: confirmed");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(memory.id = %existing, error = %error_chain(&err), "could not confirm a memory captured again");
            }
        }
    }
}

struct Fault {
    transient: bool,
    message: String,
}

/// The monotonic instant of the wall-clock time `at` (now, if it is past).
fn instant_of(at: DateTime<Utc>) -> Instant {
    Instant::now() + (at - Utc::now()).to_std().unwrap_or_default()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::queue::{Kind, StoredLine};

    fn trigger() -> Trigger {
        Trigger {
            id: uuid::Uuid::now_v7(),
            kind: Kind::Turn,
            session_id: "s1".parse().unwrap(),
            turn_id: None,
            repo: "forge".parse().unwrap(),
            user: "ana".parse().unwrap(),
            window: vec![StoredLine {
                role: "user".to_owned(),
                text: "use tabs".to_owned(),
            }],
            accepted_at: Utc::now(),
            attempts: 0,
            last_error: None,
            commit: None,
            observed_at: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn a_pass_run_again_writes_into_the_same_ids_and_no_other_pass_does() {
        let (one, other) = (trigger(), trigger());
        let id = pass_memory_id(&one, 2, 0);
        assert_eq!(id, pass_memory_id(&one, 2, 0), "the same pass, again");
        let others = [
            pass_memory_id(&one, 2, 1),
            pass_memory_id(&one, 3, 0),
            pass_memory_id(&other, 2, 0),
        ];
        assert!(!others.contains(&id), "{id} among {others:?}");
        assert_eq!(id.as_uuid().get_version_num(), 7, "time-ordered");
    }
}
