//! The vector search at scale: one namespace of each size, searched
//! through the index directly (its build time, the approximate index's
//! latency and recall@10 against the exact full scan, at several probe
//! widths, beside the one-bit scan of every row) and, up to the sizes
//! asked, through the service (`timings_ms.search` of vector-only
//! retrievals: `retrieval.lexical_weight` 0, unless `--lexical-weight`
//! says otherwise).

use std::time::Instant;

use engram::index::{Hit, Index};
use engram::memory::Namespace;
use serde_json::{Value, json};

use crate::clients::sequential;
use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::{ScratchDir, write_corpus};
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};
use engram_fake_upstream as upstream;

/// What a retrieval of `top_k` 10 asks the vector search for.
const LIMIT: usize = 40;
/// Recall is counted over the first ten.
const RECALL_AT: usize = 10;
const QUERIES: usize = 200;
/// Rows a search probes per query, for recall against the probe's width
/// (the search's own is `probed_rows` in `src/index/partition.rs`).
const PROBES: [usize; 4] = [8192, 16_384, 32_768, 65_536];
/// Pools rescored, for recall against the pool at each probe's width.
const POOLS: [usize; 3] = [256, 512, 1024];

/// The workload's settings.
#[derive(clap::Args, Debug)]
pub struct Settings {
    /// Namespace sizes searched through the index directly.
    #[arg(long, value_delimiter = ',', default_value = "20000,200000,1000000")]
    memories: Vec<usize>,
    /// Sizes also searched through the service (loaded over its store);
    /// 0: none.
    #[arg(long, value_delimiter = ',', default_value = "20000,200000")]
    served: Vec<usize>,
    /// `index.approximate_above` for both.
    #[arg(long, default_value_t = engram::config::DEFAULT_APPROXIMATE_ABOVE)]
    approximate_above: usize,
    /// Retrievals through the service, per size.
    #[arg(long, default_value_t = 500)]
    requests: usize,
    /// `retrieval.lexical_weight` of the service: 0 searches by vector
    /// only; the service's default, 0.8, searches words too.
    #[arg(long, default_value_t = 0.0)]
    lexical_weight: f64,
}

pub async fn scale(report: &mut Report, settings: &Settings) -> Result {
    for &size in &settings.memories {
        let above = settings.approximate_above;
        let table = tokio::task::spawn_blocking(move || direct(size, above)).await??;
        report.rows.extend(table.rows);
        report.figures.extend(table.figures);
    }
    for &size in settings.served.iter().filter(|&&size| size > 0) {
        served(report, size, settings).await?;
    }
    Ok(())
}

/// The index of `size` memories (the retrieve workload's corpus, seed 1)
/// built here and searched directly.
fn direct(size: usize, approximate_above: usize) -> Result<Report> {
    let namespace = Namespace::Repo("bench".parse()?);
    let index =
        Index::new(upstream::Vectors::MINILM.dimensions).approximate_above(approximate_above);
    let changes = corpus::index_changes(&namespace, size);
    let mut report = Report::default();
    let started = Instant::now();
    index.apply(changes);
    let snapshot = index.snapshot();
    report.rows.push(Row::single(
        "index build (one batch)",
        format!("{size} memories, approximate above {approximate_above}"),
        started.elapsed(),
    ));
    let lists = snapshot
        .approximate()
        .map(|(_, lists)| lists)
        .sum::<usize>();
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    report.figure(
        format!("lists of the approximate index at {size}"),
        lists as f64,
        "",
    );
    let namespaces = [namespace];
    let mut rng = corpus::Rng::new(4242);
    let queries: Vec<Vec<f32>> = (0..QUERIES)
        .map(|_| upstream::Vectors::MINILM.of(&corpus::query(&mut rng)))
        .collect();
    let detail = format!("{size} memories, limit {LIMIT}");
    let (mut exact_times, mut search_times, mut scan_times) = (Vec::new(), Vec::new(), Vec::new());
    let (mut found, mut scanned) = (0, 0);
    let mut probed = [[0usize; POOLS.len()]; PROBES.len()];
    let started = Instant::now();
    for query in &queries {
        let query = std::slice::from_ref(query);
        let one = Instant::now();
        let exact = snapshot.exact_search(&namespaces, query, LIMIT);
        exact_times.push(one.elapsed());
        let one = Instant::now();
        let hits = snapshot.search(&namespaces, query, LIMIT, |_, _| true);
        search_times.push(one.elapsed());
        found += recall(&exact, &hits);
        let one = Instant::now();
        let hits = snapshot.search_in_pool(&namespaces, query, LIMIT, 512, |_, _| true);
        scan_times.push(one.elapsed());
        scanned += recall(&exact, &hits);
        for (counts, rows) in probed.iter_mut().zip(PROBES) {
            for (count, pool) in counts.iter_mut().zip(POOLS) {
                let hits = snapshot.search_probing_in_pool(&namespaces, query, LIMIT, rows, pool);
                *count += recall(&exact, &hits);
            }
        }
    }
    let wall = started.elapsed();
    for (name, samples) in [
        ("vector search, exact full scan", &mut exact_times),
        ("vector search, one-bit scan of every row", &mut scan_times),
        ("vector search as served", &mut search_times),
    ] {
        report
            .rows
            .push(Row::from_samples(name, detail.clone(), samples, wall));
    }
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let share = |hits: usize| hits as f64 / (QUERIES * RECALL_AT) as f64;
    report.figure(
        format!("recall@{RECALL_AT} as served at {size} (ties count)"),
        share(found),
        "",
    );
    report.figure(
        format!("recall@{RECALL_AT} of the one-bit scan of every row at {size}"),
        share(scanned),
        "",
    );
    for (counts, rows) in probed.into_iter().zip(PROBES) {
        for (count, pool) in counts.into_iter().zip(POOLS) {
            report.figure(
                format!("… recall@{RECALL_AT} at {size} probing {rows} rows, pool {pool}"),
                share(count),
                "",
            );
        }
    }
    Ok(report)
}

/// Vector-only retrievals through the service over a store of `size`.
async fn served(report: &mut Report, size: usize, settings: &Settings) -> Result {
    let dir = ScratchDir::new()?;
    let namespace = Namespace::Repo("bench".parse()?);
    write_corpus(dir.path(), &namespace, size, 1)?;
    let above = settings.approximate_above;
    let lexical_weight = settings.lexical_weight;
    let (server, ready_in) = Server::start_with(dir.path(), EmbedderChoice::Fake, |config| {
        config.retrieval.lexical_weight = lexical_weight;
        config.index.approximate_above = above;
    })
    .await?;
    let words = if lexical_weight > 0.0 {
        format!("lexical weight {lexical_weight}")
    } else {
        "vector only".to_owned()
    };
    let detail = format!("{size} memories, {words}, approximate above {above}");
    report
        .rows
        .push(Row::single("startup, cold cache", detail.clone(), ready_in));
    let client = server.client();
    let mut rng = corpus::Rng::new(99);
    let bodies: Vec<Value> = (0..settings.requests + 20)
        .map(|turn| json!({"turn_id": format!("q-{turn}"), "repo": "bench", "query": corpus::query(&mut rng)}))
        .collect();
    // The first twenty warm the caches up and are not counted.
    sequential(&client, &bodies[..20]).await?;
    let (mut total, mut search, wall) = sequential(&client, &bodies[20..]).await?;
    report.rows.push(Row::from_samples(
        "retrieve (query), end to end",
        detail.clone(),
        &mut total,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "retrieve (query), timings_ms.search",
        detail,
        &mut search,
        wall,
    ));
    server.stop().await;
    Ok(())
}

/// Of the search's first ten, how many have an exact similarity at least
/// the exact tenth best's (a tie is as good an answer).
fn recall(exact: &[Hit], approximate: &[Hit]) -> usize {
    let Some(tenth) = exact.get(RECALL_AT.min(exact.len()).saturating_sub(1)) else {
        return 0;
    };
    approximate
        .iter()
        .take(RECALL_AT)
        .filter(|hit| hit.similarity >= tenth.similarity - 1e-6)
        .count()
}
