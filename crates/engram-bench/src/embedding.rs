//! The embedder alone, in process: one sentence per call, and batches.

use std::time::Instant;

use engram::embed::{Embedder, Priority};

use crate::corpus;
use crate::measure::{Report, Row};
use crate::workload::Result;

pub async fn embed(report: &mut Report, sentences: usize) -> Result {
    let embedder = engram::blocking::run(|| Embedder::from_config(&Default::default())).await?;
    let mut rng = corpus::Rng::new(7);
    let texts: Vec<String> = (0..sentences)
        .map(|i| corpus::sentence(&mut rng, i))
        .collect();
    embedder.embed(texts[..8].to_vec()).await?; // warm up

    let mut samples = Vec::with_capacity(texts.len());
    let started = Instant::now();
    for text in &texts {
        let one = Instant::now();
        embedder.embed(vec![text.clone()]).await?;
        samples.push(one.elapsed());
    }
    report.rows.push(Row::from_samples(
        "embed (local)",
        "one sentence per call",
        &mut samples,
        started.elapsed(),
    ));

    embed_in_calls(
        report,
        &embedder,
        &texts,
        32,
        Priority::Query,
        "batches of 32 (per batch)",
        "local embedder, batched",
    )
    .await?;
    // As the indexer embeds: calls of its batch size, on the backlog's
    // threads, passes side by side.
    embed_in_calls(
        report,
        &embedder,
        &texts,
        engram::index::indexer::EMBED_BATCH,
        Priority::Backlog,
        "indexer batches on the backlog threads (per batch)",
        "local embedder, backlog batches",
    )
    .await
}

/// Embeds `texts` in calls of `size` on `priority`'s threads: a row of the
/// calls' times and a figure of sentences a second.
pub async fn embed_in_calls(
    report: &mut Report,
    embedder: &Embedder,
    texts: &[String],
    size: usize,
    priority: Priority,
    calls: &str,
    figure: &str,
) -> Result {
    let mut samples = Vec::new();
    let started = Instant::now();
    for batch in texts.chunks(size) {
        let one = Instant::now();
        embedder.embed_as(batch.to_vec(), priority).await?;
        samples.push(one.elapsed());
    }
    let wall = started.elapsed();
    report.rows.push(Row::from_samples(
        "embed (local)",
        calls,
        &mut samples,
        wall,
    ));
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    let rate = texts.len() as f64 / wall.as_secs_f64();
    report.figure(figure, rate, "sentences/s");
    Ok(())
}
