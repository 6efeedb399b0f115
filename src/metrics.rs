//! Prometheus metrics (`GET /metrics`, text format, `prometheus-client`).
//!
//! Latencies and error counts are recorded as they happen, into the
//! families of [`Metrics`]. Everything the service already counts for
//! `/stats` (retrievals, capture, index and store sizes) is read at scrape
//! time by [`StateCollector`], so each number has one source.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::capture::Capture;
use crate::embed;
use crate::index::indexer::IndexerStats;
use crate::retrieval::Retriever;
use crate::store::Store;
use crate::upstream;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    endpoint: &'static str,
    kind: &'static str,
}

/// Latency buckets in seconds: 0.25 ms to about 4 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// The metrics recorded as things happen; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    retrieval_stage: Family<StageLabels, Histogram, fn() -> Histogram>,
    classifier_duration: Histogram,
    upstream_errors: Family<UpstreamLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(latency_histogram),
            retrieval_stage: Family::new_with_constructor(latency_histogram),
            classifier_duration: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            upstream_errors: Family::default(),
        }
    }
}

impl Metrics {
    pub fn http_request(&self, route: &str, method: &str, status: u16, took: Duration) {
        self.http_requests
            .get_or_create(&HttpLabels {
                route: route.to_owned(),
                method: method.to_owned(),
                status: status.to_string(),
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                route: route.to_owned(),
                method: method.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A retrieval stage took `millis` (stages that did not run are 0 and
    /// not recorded).
    pub fn retrieval_stage(&self, stage: &'static str, millis: f64) {
        if millis > 0.0 {
            self.retrieval_stage
                .get_or_create(&StageLabels { stage })
                .observe(millis / 1000.0);
        }
    }

    pub fn classifier_call(&self, took: Duration) {
        self.classifier_duration.observe(took.as_secs_f64());
    }

    /// An OpenAI-compatible endpoint failed.
    pub fn upstream_error(&self, endpoint: &'static str, err: &upstream::Error) {
        let kind = match err {
            upstream::Error::Timeout { .. } => "timeout",
            upstream::Error::Transport { .. } => "transport",
            upstream::Error::Status { .. } => "status",
            upstream::Error::Malformed { .. } => "malformed",
            upstream::Error::TooLarge { .. } => "too_large",
        };
        self.upstream_failure(endpoint, kind);
    }

    /// An upstream call failed in a way named by `kind` (e.g. it ran out
    /// of the request's budget: `timeout`).
    pub fn upstream_failure(&self, endpoint: &'static str, kind: &'static str) {
        self.upstream_errors
            .get_or_create(&UpstreamLabels { endpoint, kind })
            .inc();
    }

    /// An embedding call failed; only the remote embedder is an upstream.
    pub fn embedding_error(&self, err: &embed::Error) {
        if let embed::Error::OpenAi(err) = err {
            self.upstream_error("embeddings", err);
        }
    }

    /// The registry to encode at `/metrics`, with `state` read at scrape.
    pub fn registry(&self, state: StateCollector) -> Registry {
        let mut registry = Registry::with_prefix("engram");
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            self.http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route and method",
            self.http_duration.clone(),
        );
        registry.register(
            "retrieval_stage_duration_seconds",
            "Retrieval latency by stage (hyde, embed, search, hops)",
            self.retrieval_stage.clone(),
        );
        registry.register(
            "capture_classifier_duration_seconds",
            "Classifier call latency",
            self.classifier_duration.clone(),
        );
        registry.register(
            "upstream_errors",
            "Failed calls to OpenAI-compatible endpoints by endpoint and kind",
            self.upstream_errors.clone(),
        );
        registry.register_collector(Box::new(state));
        registry
    }
}

/// Reads the service's own counters at scrape time.
pub struct StateCollector {
    pub store: Store,
    pub retriever: Retriever,
    pub capture: Capture,
    pub indexer: Arc<IndexerStats>,
}

impl fmt::Debug for StateCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StateCollector")
    }
}

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let store = self.store.stats(|_| true, true);
        let snapshot = self.retriever.index().snapshot();
        let retrieval = self.retriever.stats().view();
        let capture = self.capture.stats();
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);

        let memories: Vec<(String, u64)> = store
            .by_namespace
            .iter()
            .map(|(namespace, counts)| (namespace.clone(), count(counts.memories)))
            .collect();
        labelled(
            &mut encoder,
            "memories",
            "Memories in the store by namespace",
            MetricType::Gauge,
            "namespace",
            &memories,
        )?;
        let indexed: Vec<(String, u64)> = snapshot
            .namespace_sizes()
            .map(|(namespace, size)| (namespace.to_string(), count(size)))
            .collect();
        labelled(
            &mut encoder,
            "index_memories",
            "Memories in the vector index by namespace",
            MetricType::Gauge,
            "namespace",
            &indexed,
        )?;
        single(
            &mut encoder,
            "index_pending",
            "Writes and deletes not yet in the index",
            MetricType::Gauge,
            count(self.store.pending_change_count()),
        )?;
        single(
            &mut encoder,
            "index_embedded",
            "Texts embedded by the indexer",
            MetricType::Counter,
            self.indexer.embedded.load(Ordering::Relaxed),
        )?;
        single(
            &mut encoder,
            "store_skipped_files",
            "Memory files skipped because they do not parse",
            MetricType::Gauge,
            count(store.skipped.len()),
        )?;
        single(
            &mut encoder,
            "retrieval_requests",
            "Retrievals answered",
            MetricType::Counter,
            retrieval.requests,
        )?;
        single(
            &mut encoder,
            "retrieval_cache_hits",
            "Retrievals answered from the per-turn cache",
            MetricType::Counter,
            retrieval.cache_hits,
        )?;
        let degraded: Vec<(String, u64)> = retrieval.degraded.into_iter().collect();
        labelled(
            &mut encoder,
            "retrieval_degraded",
            "Degraded retrievals by reason",
            MetricType::Counter,
            "reason",
            &degraded,
        )?;
        single(
            &mut encoder,
            "capture_queue_depth",
            "Capture triggers waiting or in flight",
            MetricType::Gauge,
            count(capture.queue_depth),
        )?;
        let triggers = [
            ("accepted", capture.accepted),
            ("coalesced", capture.coalesced),
            ("dropped", capture.dropped),
            ("processed", capture.processed),
            ("retried", capture.retried),
            ("failed", capture.failed),
            ("parse_failure", capture.parse_failures),
        ]
        .map(|(outcome, n)| (outcome.to_owned(), n));
        labelled(
            &mut encoder,
            "capture_triggers",
            "Capture triggers by outcome",
            MetricType::Counter,
            "outcome",
            &triggers,
        )?;
        let memories = [
            ("written", capture.written),
            ("superseded", capture.superseded),
            ("refused_secret", capture.refused_secret),
            ("refused_invalid", capture.refused_invalid),
            ("skipped_duplicate", capture.skipped_duplicate),
        ]
        .map(|(outcome, n)| (outcome.to_owned(), n));
        labelled(
            &mut encoder,
            "capture_memories",
            "Classified memories by outcome",
            MetricType::Counter,
            "outcome",
            &memories,
        )
    }
}

/// One unlabelled value.
fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    value: u64,
) -> Result<(), fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    encode_value(metric, metric_type, value)
}

/// One value per label value, under one name.
fn labelled(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    label: &str,
    values: &[(String, u64)],
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (label_value, value) in values {
        let labels = [(label, label_value.as_str())];
        let labels = labels.as_slice();
        let metric = family.encode_family(&labels)?;
        encode_value(metric, metric_type, *value)?;
    }
    Ok(())
}

fn encode_value(
    metric: MetricEncoder,
    metric_type: MetricType,
    value: u64,
) -> Result<(), fmt::Error> {
    match metric_type {
        MetricType::Counter => ConstCounter::new(value).encode(metric),
        _ => ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(metric),
    }
}
