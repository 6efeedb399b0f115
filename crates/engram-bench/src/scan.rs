//! The index's searches on their own, over the retrieve workload's corpus:
//! the vector search (one-bit codes, then the pool rescored) against the
//! full scan of the stored vectors it stands in for, its recall, the bare
//! cost of streaming the scanned bytes once (a bound no scan can beat,
//! measured in the same run), the lexical (BM25) search over the same
//! queries' words, and what the index holds in memory.

use std::hint::black_box;
use std::time::{Duration, Instant};

use engram::index::{Hit, Index, lexical};
use engram::memory::Namespace;

use crate::corpus;
use crate::measure::{self, Report, Row};
use crate::workload::Result;
use engram_fake_upstream as upstream;

/// What a retrieval of `top_k` 10 asks the vector search for (its
/// candidate count: `top_k` × 4, at least 32).
const LIMIT: usize = 40;
/// Recall is counted over the first ten.
const RECALL_AT: usize = 10;
const QUERIES: usize = 200;
/// Pools of the one-bit scan's best estimates to rescore, for recall
/// against pool size (the search's own pool is 1 % of the rows, between
/// 256 and 512, at least [`LIMIT`] × 4).
const POOLS: [usize; 4] = [128, 256, 512, 2048];
/// Passes over the streamed buffer.
const STREAM_PASSES: usize = 20;

/// Measures the scan of `size` memories: the same corpus (seed 1) and
/// vectors as the served one, in an index built here.
pub async fn scan(report: &mut Report, size: usize) -> Result {
    let table = tokio::task::spawn_blocking(move || measure(size)).await??;
    report.rows.extend(table.rows);
    report.figures.extend(table.figures);
    Ok(())
}

fn measure(size: usize) -> Result<Report> {
    let namespace = Namespace::Repo("bench".parse()?);
    // The scan it names, whatever the size: the approximate index has
    // the `scale` workload.
    let index = Index::new(upstream::Vectors::MINILM.dimensions).approximate_above(usize::MAX);
    let changes = corpus::index_changes(&namespace, size);
    index.apply(changes);
    let snapshot = index.snapshot();
    let mut report = Report::default();
    let footprint = snapshot.footprint();
    #[expect(clippy::cast_precision_loss, reason = "byte counts below 2^52")]
    let mib = |bytes: usize| bytes as f64 / f64::from(1 << 20);
    for (part, bytes) in [
        ("vectors (f16)", footprint.vectors),
        ("one-bit codes", footprint.codes),
        ("ids, categories, lengths", footprint.columns),
        ("BM25 postings", footprint.postings),
    ] {
        report.figure(format!("index of {size}: {part}"), mib(bytes), "MiB");
    }
    let namespaces = [namespace];
    let mut rng = corpus::Rng::new(4242);
    let texts: Vec<String> = (0..QUERIES).map(|_| corpus::query(&mut rng)).collect();
    let queries: Vec<Vec<f32>> = texts
        .iter()
        .map(|text| upstream::Vectors::MINILM.of(text))
        .collect();

    let detail = format!("{size} memories, limit {LIMIT}");
    let mut exact_times = Vec::with_capacity(QUERIES);
    let mut quantized_times = Vec::with_capacity(QUERIES);
    let (mut found, mut strict) = (0usize, 0usize);
    let mut pooled = [0usize; POOLS.len()];
    let started = Instant::now();
    for query in &queries {
        let query = std::slice::from_ref(query);
        let one = Instant::now();
        let exact = snapshot.exact_search(&namespaces, query, LIMIT);
        exact_times.push(one.elapsed());
        let one = Instant::now();
        let approximate = snapshot.search(&namespaces, query, LIMIT, |_, _| true);
        quantized_times.push(one.elapsed());
        let (tied, same) = recall(&exact, &approximate);
        found += tied;
        strict += same;
        for (count, pool) in pooled.iter_mut().zip(POOLS) {
            let hits = snapshot.search_in_pool(&namespaces, query, LIMIT, pool, |_, _| true);
            *count += recall(&exact, &hits).0;
        }
    }
    let wall = started.elapsed();
    report.rows.push(Row::from_samples(
        "vector search, full scan of the stored vectors",
        detail.clone(),
        &mut exact_times,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "vector search, one-bit scan + rescoring",
        detail,
        &mut quantized_times,
        wall,
    ));
    // Alone, for its CPU time: helpers' included, what a loaded server
    // pays per search.
    let before = measure::cpu_time();
    for query in &queries {
        let query = std::slice::from_ref(query);
        black_box(snapshot.search(&namespaces, query, LIMIT, |_, _| true));
    }
    report.figure(
        format!("CPU time per vector search at {size}, every thread"),
        per_query(measure::cpu_time().saturating_sub(before)),
        "ms",
    );
    let mut lexical_times = Vec::with_capacity(QUERIES);
    let before = measure::cpu_time();
    let started = Instant::now();
    for (text, query) in texts.iter().zip(&queries) {
        let terms = lexical::query_terms(text);
        let one = Instant::now();
        let hits = snapshot
            .lexical_search(
                &namespaces,
                &terms,
                std::slice::from_ref(query),
                LIMIT,
                |_, _| true,
            )
            .hits;
        lexical_times.push(one.elapsed());
        black_box(hits);
    }
    report.rows.push(Row::from_samples(
        "lexical search, BM25 over the query's words",
        format!("{size} memories, limit {LIMIT}"),
        &mut lexical_times,
        started.elapsed(),
    ));
    report.figure(
        format!("CPU time per lexical search at {size}"),
        per_query(measure::cpu_time().saturating_sub(before)),
        "ms",
    );
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let share = |hits: usize| hits as f64 / (QUERIES * RECALL_AT) as f64;
    report.figure(
        format!("recall@{RECALL_AT} of the search against the full scan at {size} (ties count)"),
        share(found),
        "",
    );
    report.figure(
        format!("… the same ids as the full scan at {size} (ties broken by id)"),
        share(strict),
        "",
    );
    for (count, pool) in pooled.into_iter().zip(POOLS) {
        report.figure(
            format!("… recall@{RECALL_AT} at {size} with a pool of {pool} rescored"),
            share(count),
            "",
        );
    }
    let dimensions = upstream::Vectors::MINILM.dimensions;
    // What each scan reads: the codes, the stored (f16) rows; and, for
    // comparison, f32 rows and 8-bit codes, what earlier scans read.
    for (what, bytes) in [
        ("the one-bit codes", footprint.codes),
        ("the f16 vectors", size * dimensions * 2),
        ("8-bit codes", size * dimensions),
        ("f32 vectors", size * dimensions * 4),
    ] {
        report.figure(
            format!("stream {what} once at {size} ({:.1} MiB)", mib(bytes)),
            millis(stream(bytes)),
            "ms",
        );
    }
    Ok(report)
}

/// Of the approximate search's first ten: how many have an exact
/// similarity at least the exact tenth best's (a tie is as good an
/// answer), and how many are the very ids the exact scan put there.
fn recall(exact: &[Hit], approximate: &[Hit]) -> (usize, usize) {
    let Some(tenth) = exact.get(RECALL_AT.min(exact.len()).saturating_sub(1)) else {
        return (0, 0);
    };
    let top: Vec<&Hit> = approximate.iter().take(RECALL_AT).collect();
    let tied = top
        .iter()
        .filter(|hit| hit.similarity >= tenth.similarity - 1e-6)
        .count();
    let same = top
        .iter()
        .filter(|hit| exact.iter().take(RECALL_AT).any(|e| e.id == hit.id))
        .count();
    (tied, same)
}

/// The median time to read `bytes` once, as 64-bit words summed: the
/// memory bandwidth bound of a scan over that many bytes.
fn stream(bytes: usize) -> Duration {
    let words: Vec<u64> = (0..bytes / 8).map(|i| i as u64).collect();
    let mut samples: Vec<Duration> = (0..STREAM_PASSES)
        .map(|_| {
            let one = Instant::now();
            let sum = words.chunks_exact(4).fold([0u64; 4], |mut sums, lanes| {
                for (sum, word) in sums.iter_mut().zip(lanes) {
                    *sum = sum.wrapping_add(*word);
                }
                sums
            });
            black_box(sum);
            one.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// `spent` over [`QUERIES`] queries, in ms per query.
fn per_query(spent: Duration) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    let queries = QUERIES as f64;
    millis(spent) / queries
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
