//! `capture`, `retention` and `store`: how the work beside requests runs,
//! the capture queue, how long unused memories are kept, the store's
//! backend and the watch on the data directory.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::postgres::{Backend, PostgresConfig};
use crate::memory::Retention;

/// The default daily capture budget: a heavy day of agent use is about
/// 250 classifier passes (a turn every two minutes for eight hours, after
/// coalescing) of up to 8,000 tokens each (the window, the pair's memories
/// and the prompt), 2 million tokens; at a small model's prices (0.15 per
/// million in) that is about 0.30 a day, at a large model's (3 per million)
/// about 6.
const DEFAULT_CAPTURE_DAILY_TOKENS: u64 = 2_000_000;

/// How capture runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Turn triggers waiting beyond this many are dropped (compactions
    /// never are).
    pub queue_capacity: usize,
    /// Classifier calls in flight at once, across all namespace pairs.
    pub max_concurrent: usize,
    /// Cosine similarity at or above which a new memory is a duplicate of
    /// an existing one in its namespace, 0..1.
    pub duplicate_threshold: f64,
    /// Tries of one trigger before it moves to `queue/failed/`.
    pub max_attempts: u32,
    /// The first retry's delay, in ms; it doubles with each attempt.
    pub retry_base_ms: u64,
    /// Bytes of queued trigger files one session may hold; a compaction
    /// past it is refused with 429.
    pub session_queue_bytes: u64,
    /// Bytes of queued trigger files in all; a compaction past it is
    /// refused with 429.
    pub queue_bytes: u64,
    /// The classifier's tokens (prompt and completion) a UTC day; past it
    /// triggers stay queued until the next day. 0 is unlimited.
    pub daily_token_budget: u64,
    /// The same, for each (repo, user) pair; 0 is unlimited.
    pub pair_daily_token_budget: u64,
    /// The most tokens of a session's already classified messages sent
    /// before its new ones, for the model to understand them (0: none).
    pub context_tokens: usize,
    /// How long a replica's claim on a trigger lasts without renewal, in
    /// ms (`store.backend: postgres`): the claim is renewed while a pass
    /// runs, and a replica that died leaves its trigger to the others
    /// this long after its last renewal.
    pub lease_ms: u64,
    /// How long a stop waits for the capture passes in flight to finish,
    /// in ms; those still running then are abandoned, and in postgres
    /// mode their claims are given back for another replica to take at
    /// once (files mode runs them again at the next start).
    pub drain_ms: u64,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 8,
            max_concurrent: 2,
            duplicate_threshold: 0.92,
            max_attempts: 4,
            retry_base_ms: 1000,
            session_queue_bytes: 4 * 1024 * 1024,
            queue_bytes: 64 * 1024 * 1024,
            daily_token_budget: DEFAULT_CAPTURE_DAILY_TOKENS,
            pair_daily_token_budget: 0,
            // The assistant's previous answer, in most turns of a coding
            // session: what "yes, do that" answers.
            context_tokens: 1024,
            lease_ms: 30_000,
            // Well inside the 10 s a container gets between SIGTERM and
            // SIGKILL by default, beside the requests' own drain.
            drain_ms: 5_000,
        }
    }
}

/// How long memories stay in use without a sign of life before they are
/// archived (never deleted); 0 keeps them however long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Days a memory the classifier wrote stays `provisional` before it
    /// is archived unconfirmed.
    pub provisional_days: u32,
    /// Days a memory may go without being retrieved, confirmed or found
    /// `current` by a check before it is archived.
    pub unused_days: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            provisional_days: 14,
            unused_days: 180,
        }
    }
}

impl RetentionConfig {
    /// The policy these days describe, in a store that has counted uses
    /// since `counting_since`.
    pub fn policy(&self, counting_since: DateTime<Utc>) -> Retention {
        let days = |days: u32| (days > 0).then(|| TimeDelta::days(i64::from(days)));
        Retention {
            provisional: days(self.provisional_days),
            unused: days(self.unused_days),
            counting_since,
        }
    }
}

/// Where the store keeps memories, and how it follows the data directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `files` (the markdown tree under the data directory) or `postgres`
    /// (a database replicas share).
    pub backend: Backend,
    /// The database, for `backend: postgres`.
    pub postgres: PostgresConfig,
    /// Whether changes made to the files while Engram runs (by hand,
    /// `git pull`, a sync tool) are taken in live; off, only at start.
    /// Files mode only.
    pub watch: bool,
    /// How long events must be quiet before they are taken in, in ms.
    pub debounce_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Files,
            postgres: PostgresConfig::default(),
            watch: true,
            debounce_ms: 150,
        }
    }
}

impl CaptureConfig {
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms)
    }

    pub fn drain(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.drain_ms)
    }
}

impl StoreConfig {
    pub fn debounce(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.debounce_ms)
    }
}
