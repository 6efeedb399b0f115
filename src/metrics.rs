//! Prometheus metrics (`GET /metrics`, text format, `prometheus-client`).
//!
//! Latencies and error counts are recorded as they happen, into the
//! families of [`Metrics`]; components below the routes record into it and
//! it imports none of them. Everything the service already counts for
//! `/stats` (retrievals, capture, index and store sizes) is encoded at
//! scrape time by the collector handed to [`Metrics::registry`]
//! (`routes::stats::scrape`), so each number has one source.

use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::embed;
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
    usage_save_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(latency_histogram),
            retrieval_stage: Family::new_with_constructor(latency_histogram),
            classifier_duration: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            upstream_errors: Family::default(),
            usage_save_failures: Counter::default(),
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

    /// Saving the day's model usage failed (`usage.json` could not be
    /// written, or the database could not be reached); its calls are kept
    /// for the next save.
    pub fn usage_save_failure(&self) {
        self.usage_save_failures.inc();
    }

    /// The registry to encode at `/metrics`, with `state` read at scrape.
    pub fn registry(&self, state: impl Collector + 'static) -> Registry {
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
        registry.register(
            "usage_save_failures",
            "Saves of the day's model usage that failed; their calls are kept for the next",
            self.usage_save_failures.clone(),
        );
        registry.register_collector(Box::new(state));
        registry
    }
}
