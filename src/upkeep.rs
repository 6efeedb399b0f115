//! The work the service does now and then beside requests: saving
//! retrieval's access counts and marking what it returned used, saving the
//! day's model usage, letting go of memories that went unconfirmed or
//! unused too long, and consolidating every namespace. Each runs until
//! the service stops.

use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::blocking;
use crate::config::RetentionConfig;
use crate::consolidate::Consolidator;
use crate::memory::LetGo;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::retrieval::Retriever;
use crate::store::{self, Store};
use crate::usage::Meter;

/// How often access counts are saved (they are saved at shutdown too).
const ACCESS_SAVE_INTERVAL: Duration = Duration::from_secs(30);

/// How often the day's model usage is saved when calls were counted (the
/// capture worker saves after each pass, and it is saved at shutdown too):
/// a crash forgets at most this much of retrieval's calls.
const USAGE_SAVE_INTERVAL: Duration = Duration::from_secs(5);

/// How often a replica adds its model usage to the database's day and
/// reads back all replicas' (postgres mode): how long it may go on
/// spending past a budget that the others have spent.
const USAGE_SHARE_INTERVAL: Duration = Duration::from_secs(1);

/// Saves the retriever's access counts and marks the memories it returned
/// used, now and then, and once more when `stop` is cancelled.
pub async fn save_uses(retriever: Retriever, stop: CancellationToken) {
    every_until_stopped(ACCESS_SAVE_INTERVAL, stop, move || {
        let store = retriever.store();
        let access = retriever.access_counts();
        access.flush(|id| store.get(id).is_some());
        let used = access.take_used();
        if let Err(err) = store.note_used_blocking(&used, Utc::now()) {
            tracing::warn!(error = %err, "could not mark the memories retrieved lately as used; it is tried again");
            access.give_back(used);
        }
    })
    .await;
}

/// Saves the meter's day now and then (shares it with the other replicas,
/// in postgres mode), and once more when `stop` is cancelled.
pub async fn save_usage(meter: Meter, metrics: Metrics, shared: bool, stop: CancellationToken) {
    let period = if shared {
        USAGE_SHARE_INTERVAL
    } else {
        USAGE_SAVE_INTERVAL
    };
    every_until_stopped(period, stop, move || {
        if let Err(err) = meter.save() {
            metrics.usage_save_failure();
            tracing::warn!(error = %err, "could not save the day's model usage; it is tried again");
        }
    })
    .await;
}

/// Runs `save` on the blocking pool every `period`, and once more when
/// `stop` is cancelled.
async fn every_until_stopped(
    period: Duration,
    stop: CancellationToken,
    save: impl Fn() + Clone + Send + 'static,
) {
    let mut interval = tokio::time::interval(period);
    interval.tick().await;
    loop {
        let stopping = tokio::select! {
            _ = interval.tick() => false,
            () = stop.cancelled() => true,
        };
        blocking::run(save.clone()).await;
        if stopping {
            return;
        }
    }
}

/// How often retention looks for memories to let go: its limits are
/// days, so an hour late is nothing.
const RETENTION_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// How often the first pass asks whether start-up is done.
const READINESS_POLL: Duration = Duration::from_millis(200);

/// Archives the memories `retention` lets go, once start-up is done (the
/// view is loaded and, on a replica, caught up) and then every
/// [`RETENTION_INTERVAL`], until `stop` is cancelled. Disuse is counted
/// from no earlier than the store under `data_dir` began counting uses.
pub async fn let_go_of_unused(
    store: Store,
    readiness: Readiness,
    retention: RetentionConfig,
    data_dir: PathBuf,
    stop: CancellationToken,
) {
    if retention.provisional_days == 0 && retention.unused_days == 0 {
        return;
    }
    let counting_since = if retention.unused_days > 0 {
        blocking::run(move || store::counting_uses_since(&data_dir)).await
    } else {
        Utc::now()
    };
    let retention = retention.policy(counting_since);
    while !readiness.is_ready() {
        tokio::select! {
            () = tokio::time::sleep(READINESS_POLL) => {}
            () = stop.cancelled() => return,
        }
    }
    let mut interval = tokio::time::interval(RETENTION_INTERVAL);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = stop.cancelled() => return,
        }
        match store.let_go(retention, Utc::now()).await {
            Ok(let_go) if let_go.is_empty() => {}
            Ok(let_go) => {
                let unconfirmed = let_go
                    .iter()
                    .filter(|(_, why)| *why == LetGo::Unconfirmed)
                    .count();
                tracing::info!(
                    memories.unconfirmed = unconfirmed,
                    memories.unused = let_go.len() - unconfirmed,
                    "archived memories left unconfirmed or unused too long"
                );
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not archive the memories let go; it is tried again");
            }
        }
    }
}

/// How long after start-up the first scheduled consolidation runs, when
/// the interval is longer: a service restarted every day still
/// consolidates, and a start is never slowed by a pass.
const FIRST_CONSOLIDATION_AFTER: Duration = Duration::from_secs(60 * 60);

/// The schedule's name for its consolidation pass, in `engram_passes`.
const SCHEDULED_CONSOLIDATION: &str = "consolidation";

/// Runs a consolidation pass over every namespace every `interval_hours`
/// (the first one hour after start-up at the latest), until `stop` is
/// cancelled; 0 hours runs none. Of replicas, the one that claims the
/// interval first runs it; the others pass their turn.
pub async fn consolidate_now_and_then(
    consolidator: Consolidator,
    store: Store,
    interval_hours: u64,
    stop: CancellationToken,
) {
    if interval_hours == 0 {
        return;
    }
    let interval = Duration::from_secs(interval_hours.saturating_mul(60 * 60));
    let mut next = tokio::time::Instant::now() + interval.min(FIRST_CONSOLIDATION_AFTER);
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = stop.cancelled() => return,
        }
        match store
            .claim_scheduled(SCHEDULED_CONSOLIDATION, interval)
            .await
        {
            Ok(true) => {
                if let Err(err) = consolidator.consolidate_everything().await {
                    tracing::warn!(error = %err, "the scheduled consolidation failed; it runs again at the next interval");
                }
            }
            Ok(false) => {
                tracing::debug!("another replica ran the scheduled consolidation this interval");
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not claim the scheduled consolidation; it is tried at the next interval");
            }
        }
        next = tokio::time::Instant::now() + interval;
    }
}
