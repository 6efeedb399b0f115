//! Counters of retrievals for `/stats`: how many, how many from the cache,
//! degraded by reason, and a latency histogram.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;

/// Upper bounds of the latency buckets, in ms; the last bucket is open.
pub const LATENCY_BUCKETS_MS: [f64; 12] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0,
];

#[derive(Default)]
pub struct RetrievalStats {
    requests: AtomicU64,
    cache_hits: AtomicU64,
    degraded: Mutex<BTreeMap<&'static str, u64>>,
    /// One count per bucket of [`LATENCY_BUCKETS_MS`], then the open one.
    latency: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    latency_sum_us: AtomicU64,
}

/// The counters as JSON.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalStatsView {
    pub requests: u64,
    pub cache_hits: u64,
    /// Retrievals that came back `degraded`, by reason.
    pub degraded: BTreeMap<String, u64>,
    /// Cumulative counts: retrievals that took at most `le_ms`.
    pub latency_ms: Vec<LatencyBucket>,
    pub mean_ms: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LatencyBucket {
    /// The bucket's upper bound in ms; null for the open bucket.
    pub le_ms: Option<f64>,
    pub count: u64,
}

impl RetrievalStats {
    pub fn record(&self, took: Duration, cached: bool, degraded: Option<&'static str>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if cached {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(reason) = degraded {
            *self
                .degraded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(reason)
                .or_default() += 1;
        }
        let millis = took.as_secs_f64() * 1000.0;
        let bucket = LATENCY_BUCKETS_MS
            .iter()
            .position(|&bound| millis <= bound)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_us.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn view(&self) -> RetrievalStatsView {
        let requests = self.requests.load(Ordering::Relaxed);
        let mut cumulative = 0;
        let latency_ms = self
            .latency
            .iter()
            .enumerate()
            .map(|(bucket, count)| {
                cumulative += count.load(Ordering::Relaxed);
                LatencyBucket {
                    le_ms: LATENCY_BUCKETS_MS.get(bucket).copied(),
                    count: cumulative,
                }
            })
            .collect();
        #[expect(
            clippy::cast_precision_loss,
            reason = "sums of microseconds stay below 2^52"
        )]
        let mean_ms = if requests == 0 {
            0.0
        } else {
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / requests as f64 / 1000.0
        };
        RetrievalStatsView {
            requests,
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            degraded: self
                .degraded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .map(|(reason, n)| ((*reason).to_owned(), *n))
                .collect(),
            latency_ms,
            mean_ms,
        }
    }
}
