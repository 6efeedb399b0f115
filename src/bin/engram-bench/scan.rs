//! The vector scan on its own, over the retrieve workload's corpus: the
//! quantized search (with its exact rescoring) against the exact `f32`
//! scan it stands in for, its recall, and the bare cost of streaming the
//! scanned bytes once, a bound no scan can beat, measured in the same run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use engram::index::{Change, Entry, Hit, Index, lexical};
use engram::memory::Namespace;

use crate::measure::{Report, Row};
use crate::{Result, corpus, upstream};

/// What a retrieval of `top_k` 10 asks the vector search for (its
/// candidate count: `top_k` × 4, at least 32).
const LIMIT: usize = 40;
/// Recall is counted over the first ten.
const RECALL_AT: usize = 10;
const QUERIES: usize = 200;
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
    let index = Index::new(upstream::Vectors::MINILM.dimensions);
    let changes = corpus::memories(&namespace, size, 1)
        .into_iter()
        .map(|memory| {
            Change::Upsert(
                Entry {
                    id: memory.id,
                    namespace: namespace.clone(),
                    category: memory.category,
                    terms: lexical::Terms::default(),
                },
                upstream::Vectors::MINILM.of(&memory.content),
            )
        })
        .collect();
    index.apply(changes);
    let snapshot = index.snapshot();
    let namespaces = [namespace];
    let mut rng = corpus::Rng::new(4242);
    let queries: Vec<Vec<f32>> = (0..QUERIES)
        .map(|_| upstream::Vectors::MINILM.of(&corpus::query(&mut rng)))
        .collect();

    let mut report = Report::default();
    let detail = format!("{size} memories, limit {LIMIT}");
    let mut exact_times = Vec::with_capacity(QUERIES);
    let mut quantized_times = Vec::with_capacity(QUERIES);
    let (mut found, mut strict) = (0usize, 0usize);
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
    }
    let wall = started.elapsed();
    report.rows.push(Row::from_samples(
        "vector search, exact f32 scan",
        detail.clone(),
        &mut exact_times,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "vector search, int8 scan + exact rescoring",
        detail,
        &mut quantized_times,
        wall,
    ));
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let share = |hits: usize| hits as f64 / (QUERIES * RECALL_AT) as f64;
    report.figure(
        format!("recall@{RECALL_AT} of the int8 scan against the exact one at {size} (ties count)"),
        share(found),
        "",
    );
    report.figure(
        format!("… the same ids as the exact scan at {size} (ties broken by id)"),
        share(strict),
        "",
    );
    let dimensions = upstream::Vectors::MINILM.dimensions;
    // What each scan reads: codes plus scale and loss per vector, and the
    // f32 rows.
    let (codes, floats) = (size * (dimensions + 8), size * dimensions * 4);
    report.figure(
        format!("stream the int8 codes once at {size} ({} MiB)", codes >> 20),
        millis(stream(codes)),
        "ms",
    );
    report.figure(
        format!(
            "stream the f32 vectors once at {size} ({} MiB)",
            floats >> 20
        ),
        millis(stream(floats)),
        "ms",
    );
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

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
