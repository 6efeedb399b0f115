//! `/metrics`' view of the service's own counters: at each scrape it
//! gathers the `/stats` snapshot (as a key that sees everything) and
//! encodes it as Prometheus families. What is recorded as it happens
//! (latencies, upstream errors) lives in [`crate::metrics::Metrics`].

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::{StatsResponse, StatsSources};
use crate::auth::Caller;
use crate::usage::{BudgetView, UsageView};

/// Encodes the `/stats` snapshot at scrape time.
pub struct StatsCollector(pub StatsSources);

impl fmt::Debug for StatsCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StatsCollector")
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A family of one value per label value: (name, help, type, label, values).
type Labelled<'a> = (&'a str, &'a str, MetricType, &'a str, Vec<(String, u64)>);

impl Collector for StatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        use MetricType::{Counter, Gauge};
        let stats = StatsResponse::gather(&self.0, &Caller::everything());
        let index = &stats.index;
        let mut singles = vec![
            (
                "index_pending",
                "Writes and deletes whose vectors are not yet in the index",
                Gauge,
                count(index.pending),
            ),
            (
                "index_words_only",
                "Memories found by their words alone while their vectors are pending",
                Gauge,
                count(index.words_only),
            ),
            (
                "index_embedded",
                "Texts embedded by the indexer",
                Counter,
                index.embedded.unwrap_or_default(),
            ),
            (
                "index_cache_hits",
                "Vectors taken from the on-disk embedding cache",
                Counter,
                index.cache_hits.unwrap_or_default(),
            ),
            (
                "index_failed_batches",
                "Embedding batches that failed and were retried",
                Counter,
                index.failed_batches.unwrap_or_default(),
            ),
            (
                "store_skipped_files",
                "Memory files skipped because they do not parse",
                Gauge,
                count(stats.store.skipped_files),
            ),
        ];
        let mut families: Vec<Labelled> = vec![
            (
                "memories",
                "Current memories (superseded versions not counted) in the store by namespace",
                Gauge,
                "namespace",
                stats
                    .store
                    .namespaces
                    .iter()
                    .map(|(namespace, counts)| (namespace.clone(), count(counts.memories)))
                    .collect(),
            ),
            (
                "index_memories",
                "Memories in the vector index by namespace",
                Gauge,
                "namespace",
                index
                    .namespaces
                    .iter()
                    .map(|(namespace, n)| (namespace.clone(), count(*n)))
                    .collect(),
            ),
        ];
        // Service-wide sections: always present for a key that sees everything.
        if let Some(retrieval) = &stats.retrieval {
            singles.push((
                "retrieval_requests",
                "Retrievals answered",
                Counter,
                retrieval.requests,
            ));
            singles.push((
                "retrieval_cache_hits",
                "Retrievals answered from the per-turn cache",
                Counter,
                retrieval.cache_hits,
            ));
            let degraded = retrieval
                .degraded
                .iter()
                .map(|(reason, n)| (reason.clone(), *n))
                .collect();
            families.push((
                "retrieval_degraded",
                "Degraded retrievals by reason",
                Counter,
                "reason",
                degraded,
            ));
        }
        if let Some(residency) = &index.residency {
            singles.extend([
                (
                    "index_resident_namespaces",
                    "Namespaces the index holds in memory",
                    Gauge,
                    count(residency.resident_namespaces),
                ),
                (
                    "index_evicted_namespaces",
                    "Namespaces dropped from memory, loaded again on their next read",
                    Gauge,
                    count(residency.evicted_namespaces),
                ),
                (
                    "index_resident_bytes",
                    "Bytes of the index's columns in memory",
                    Gauge,
                    count(residency.resident_bytes),
                ),
                (
                    "index_namespace_loads",
                    "Namespaces loaded back into memory",
                    Counter,
                    residency.loads,
                ),
                (
                    "index_namespace_evictions",
                    "Namespaces dropped from memory",
                    Counter,
                    residency.evictions,
                ),
            ]);
        }
        if let Some(embedding) = &stats.embedding {
            singles.push((
                "embedding_dimension_mismatches",
                "Embedding replies refused for vectors of another length",
                Counter,
                embedding.dimension_mismatches,
            ));
        }
        if let Some(capture) = &stats.capture {
            singles.push((
                "capture_queue_depth",
                "Capture triggers waiting or in flight",
                Gauge,
                count(capture.queue_depth),
            ));
            singles.push((
                "capture_queue_bytes",
                "Bytes of capture trigger files waiting or in flight",
                Gauge,
                capture.queue_bytes,
            ));
            singles.push((
                "capture_skipped_symlinks",
                "Symbolic links under queue/, never followed",
                Counter,
                capture.skipped_symlinks,
            ));
            let triggers = [
                ("accepted", capture.accepted),
                ("coalesced", capture.coalesced),
                ("dropped", capture.dropped),
                ("processed", capture.processed),
                ("retried", capture.retried),
                ("failed", capture.failed),
                ("parse_failure", capture.parse_failures),
                ("refused_over_budget", capture.refused_over_budget),
                ("refused_low_disk", capture.refused_low_disk),
            ];
            families.push((
                "capture_triggers",
                "Capture triggers by outcome",
                Counter,
                "outcome",
                owned(&triggers),
            ));
            let memories = [
                ("written", capture.written),
                ("superseded", capture.superseded),
                ("refused_secret", capture.refused_secret),
                ("refused_invalid", capture.refused_invalid),
                ("skipped_duplicate", capture.skipped_duplicate),
            ];
            families.push((
                "capture_memories",
                "Classified memories by outcome",
                Counter,
                "outcome",
                owned(&memories),
            ));
        }
        if let Some(database) = &stats.database {
            singles.push((
                "database_connected",
                "Whether this replica's connection to the database's change log is up (1)",
                Gauge,
                u64::from(database.connected),
            ));
            singles.push((
                "database_log_head",
                "The database's change log's last change, as this replica last read it",
                Gauge,
                database.log_head,
            ));
            singles.push((
                "database_cursor",
                "The last change of the log this replica has applied",
                Gauge,
                database.cursor,
            ));
            singles.push((
                "database_lag_changes",
                "Changes committed to the database and not yet applied by this replica",
                Gauge,
                database.lag_changes,
            ));
            singles.push((
                "database_lag_milliseconds",
                "How long the oldest change not yet applied here has waited (or, disconnected, since the database was last heard from), in ms",
                Gauge,
                database.lag_ms,
            ));
        }
        if let Some(models) = &stats.models {
            encode_models(&mut encoder, models)?;
        }
        for (name, help, metric_type, value) in singles {
            let metric = encoder.encode_descriptor(name, help, None, metric_type)?;
            encode_value(metric, metric_type, value)?;
        }
        for (name, help, metric_type, label, values) in families {
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for (label_value, value) in values {
                let labels = [(label, label_value.as_str())];
                let labels = labels.as_slice();
                encode_value(family.encode_family(&labels)?, metric_type, value)?;
            }
        }
        Ok(())
    }
}

/// A per-budget gauge: its name, its help and its value for one budget.
type BudgetGauge = (&'static str, &'static str, fn(&BudgetView) -> u64);

/// The model calls since start (tokens by direction, calls, cost where
/// priced) by kind and model, and the daily budgets' state.
fn encode_models(encoder: &mut DescriptorEncoder, models: &UsageView) -> Result<(), fmt::Error> {
    let mut tokens = encoder.encode_descriptor(
        "model_tokens",
        "Tokens of model calls since start by kind, model and direction (prompt or completion)",
        None,
        MetricType::Counter,
    )?;
    for row in &models.since_start {
        for (direction, value) in [
            ("prompt", row.prompt_tokens),
            ("completion", row.completion_tokens),
        ] {
            let labels = [
                ("kind", row.kind.as_str()),
                ("model", row.model.as_str()),
                ("direction", direction),
            ];
            let labels = labels.as_slice();
            ConstCounter::new(value).encode(tokens.encode_family(&labels)?)?;
        }
    }
    let mut calls = encoder.encode_descriptor(
        "model_calls",
        "Model calls since start by kind and model",
        None,
        MetricType::Counter,
    )?;
    for row in &models.since_start {
        let labels = [("kind", row.kind.as_str()), ("model", row.model.as_str())];
        let labels = labels.as_slice();
        ConstCounter::new(row.calls).encode(calls.encode_family(&labels)?)?;
    }
    let mut cost = encoder.encode_descriptor(
        "model_cost",
        "Cost of model calls since start by kind and model, in the currency of `prices` (priced models only)",
        None,
        MetricType::Counter,
    )?;
    for row in &models.since_start {
        if let Some(value) = row.cost {
            let labels = [("kind", row.kind.as_str()), ("model", row.model.as_str())];
            let labels = labels.as_slice();
            ConstCounter::new(value).encode(cost.encode_family(&labels)?)?;
        }
    }
    let budgets = [
        ("capture", &models.budgets.capture),
        ("retrieval", &models.budgets.retrieval),
    ];
    let gauges: [BudgetGauge; 2] = [
        (
            "model_budget_used_tokens",
            "Tokens counted today against each daily token budget",
            |view| view.used,
        ),
        (
            "model_budget_exhausted",
            "Whether a daily token budget is spent (1) until it renews at midnight UTC",
            |view| u64::from(view.exhausted),
        ),
    ];
    for (name, help, value_of) in gauges {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (budget, view) in budgets {
            let labels = [("budget", budget)];
            let labels = labels.as_slice();
            encode_value(
                family.encode_family(&labels)?,
                MetricType::Gauge,
                value_of(view),
            )?;
        }
    }
    Ok(())
}

fn owned(values: &[(&str, u64)]) -> Vec<(String, u64)> {
    values
        .iter()
        .map(|(label, n)| ((*label).to_owned(), *n))
        .collect()
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
