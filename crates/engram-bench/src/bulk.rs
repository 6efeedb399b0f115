//! Writing in bulk: one client writes memories one request each
//! (`POST /memories`) and in batches of 100 and 1,000
//! (`POST /memories/batch`), each answer coming once its memories are
//! durable, on a fresh service each with the fake embedder; memories per
//! second of each, and how many times one at a time each batch size is.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::ScratchDir;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

/// The batch sizes measured beside one at a time.
const BATCH_SIZES: [usize; 2] = [100, 1000];

/// Writes `memories` memories in each batch size, and `single` of them
/// (at most `memories`) one at a time, which is slower by far.
pub async fn bulk(report: &mut Report, memories: usize, single: usize) -> Result {
    // Each run's data directory stays until the end: a file system may
    // make a file created just after thousands were deleted cost far more
    // (ext4 without a journal skips every recently freed inode), and the
    // bench measures the service, not its own cleanup.
    let dirs = (0..=BATCH_SIZES.len())
        .map(|_| ScratchDir::new())
        .collect::<std::io::Result<Vec<_>>>()?;
    let one_at_a_time = write(report, &dirs[0], single.min(memories), 1).await?;
    report.figure("memories/s, one at a time", one_at_a_time, "/s");
    for (size, dir) in BATCH_SIZES.into_iter().zip(&dirs[1..]) {
        let batched = write(report, dir, memories, size).await?;
        report.figure(format!("memories/s, batches of {size}"), batched, "/s");
        report.figure(
            format!("batches of {size} over one at a time"),
            batched / one_at_a_time.max(f64::MIN_POSITIVE),
            "×",
        );
    }
    Ok(())
}

/// Writes `count` memories `size` a request on a fresh service over the
/// empty `dir`; memories per second.
async fn write(report: &mut Report, dir: &ScratchDir, count: usize, size: usize) -> Result<f64> {
    let (server, _) = Server::start(dir.path(), EmbedderChoice::Fake).await?;
    let client = server.client();
    let mut rng = corpus::Rng::new(23);
    let bodies: Vec<Value> = (0..count)
        .map(|serial| {
            json!({"repo": "bench", "scope": "repo", "category": "patterns",
                "content": corpus::sentence(&mut rng, serial)})
        })
        .collect();
    let mut samples: Vec<Duration> = Vec::with_capacity(count.div_ceil(size));
    let started = Instant::now();
    for chunk in bodies.chunks(size) {
        let one = Instant::now();
        if size == 1 {
            client.create(&chunk[0]).await?;
        } else {
            let (status, answer) = client
                .send(
                    "POST",
                    "/memories/batch",
                    Some(&json!({ "memories": chunk })),
                )
                .await?;
            let written = answer["results"].as_array().map_or(0, |results| {
                results.iter().filter(|r| r["status"] == 201).count()
            });
            if status != 200 || written != chunk.len() {
                return Err(format!("/memories/batch answered {status}: {answer}").into());
            }
        }
        samples.push(one.elapsed());
    }
    let wall = started.elapsed();
    server.stop().await;
    let (workload, detail) = if size == 1 {
        (
            "POST /memories, one at a time".to_owned(),
            format!("{count} memories, one client, each durable before its 201"),
        )
    } else {
        (
            format!("POST /memories/batch, {size} a request"),
            format!("{count} memories, one client, each batch durable before its 200"),
        )
    };
    report
        .rows
        .push(Row::from_samples(&workload, detail, &mut samples, wall));
    #[expect(clippy::cast_precision_loss, reason = "a count")]
    Ok(count as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE))
}
