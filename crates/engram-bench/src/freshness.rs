//! Read-after-write under a backlog: a burst of writes, then one memory
//! holding a rare word, and retrievals of that word one after another
//! from the moment its `201` arrives. Measures how long until a retrieval
//! finds it (by its words, whatever the embedder's backlog) and until it
//! is found by its vector too, at each backlog asked for.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};

/// Writes in flight during a burst.
const BURST_CLIENTS: usize = 16;
/// Bursts per backlog: each ends with its own rare-word memory.
const ROUNDS: usize = 5;
/// A retrieval that has not found the memory by then has failed.
const GIVE_UP: Duration = Duration::from_secs(600);

/// Runs the workload at each of `backlogs` (burst sizes), each on a fresh
/// service.
pub async fn freshness(
    report: &mut Report,
    backlogs: &[usize],
    embedder: EmbedderChoice,
) -> Result {
    for &backlog in backlogs {
        let dir = ScratchDir::new()?;
        let (server, _) = Server::start(dir.path(), embedder).await?;
        let client = server.client();
        let mut rng = corpus::Rng::new(23);
        let mut by_words = Vec::with_capacity(ROUNDS);
        let mut by_vector = Vec::with_capacity(ROUNDS);
        let mut pending_at_write = Vec::with_capacity(ROUNDS);
        let mut pending_flags = 0;
        let started = Instant::now();
        for round in 0..ROUNDS {
            server.wait_indexed().await?;
            burst(&client, &mut rng, backlog, round).await?;
            let (_, stats) = client.send("GET", "/stats", None).await?;
            pending_at_write.push(stats["index"]["pending"].as_u64().unwrap_or_default());
            let word = format!("zanzibar{round}");
            let written = client
                .create(
                    &json!({"repo": "bench", "scope": "repo", "category": "patterns",
                    "content": format!("The {word} deployment key rotates on Tuesdays.")}),
                )
                .await?;
            let acknowledged = Instant::now();
            let id = written["id"]
                .as_str()
                .ok_or("a 201 without an id")?
                .to_owned();
            let found = first_found(&client, &word, &id, round, acknowledged).await?;
            by_words.push(found.took);
            pending_flags += usize::from(found.reason["vector_pending"] == true);
            by_vector.push(found_by_vector(&client, &word, &id, round, acknowledged, found).await?);
        }
        let wall = started.elapsed();
        let detail = format!(
            "burst of {backlog}, {embedder:?} embedder; vectors pending at the write: {pending_at_write:?}"
        );
        report.rows.push(Row::from_samples(
            "freshness: 201 → found by a retrieval",
            detail.clone(),
            &mut by_words,
            wall,
        ));
        report.rows.push(Row::from_samples(
            "freshness: 201 → found by its vector too",
            detail,
            &mut by_vector,
            wall,
        ));
        report.figure(
            format!("freshness, burst of {backlog}: first finds that said vector_pending"),
            pending_flags as f64,
            &format!("of {ROUNDS}"),
        );
        server.stop().await;
    }
    Ok(())
}

/// Writes `count` memories from [`BURST_CLIENTS`] clients at once.
async fn burst(client: &Client, rng: &mut corpus::Rng, count: usize, round: usize) -> Result {
    let bodies: Vec<Value> = (0..count)
        .map(|serial| {
            json!({"repo": "bench", "scope": "repo", "category": "patterns",
                "content": corpus::sentence(rng, round * count + serial)})
        })
        .collect();
    let queue = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..BURST_CLIENTS {
        let (client, queue) = (client.clone(), queue.clone());
        writers.spawn(async move {
            loop {
                let next = queue.lock().map_err(|_| "a writer panicked")?.pop();
                let Some(body) = next else {
                    return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(());
                };
                client.create(&body).await?;
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    Ok(())
}

/// The first retrieval that returned the memory: when it answered, and
/// the memory's reason.
struct Found {
    took: Duration,
    reason: Value,
}

/// Retrieves `word` back to back until the memory `id` is in the answer.
async fn first_found(
    client: &Client,
    word: &str,
    id: &str,
    round: usize,
    since: Instant,
) -> Result<Found> {
    let mut attempt = 0;
    loop {
        let answer = ask(client, word, round, &mut attempt).await?;
        if let Some(found) = memory_in(&answer, id) {
            return Ok(Found {
                took: since.elapsed(),
                reason: found["reason"].clone(),
            });
        }
        if since.elapsed() > GIVE_UP {
            return Err(format!("{word} was never found: {answer}").into());
        }
    }
}

/// Retrieves `word` until the memory is found by its vector as well.
async fn found_by_vector(
    client: &Client,
    word: &str,
    id: &str,
    round: usize,
    since: Instant,
    first: Found,
) -> Result<Duration> {
    if first.reason["found_by"] != "lexical" {
        return Ok(first.took);
    }
    let mut attempt = 1_000_000;
    loop {
        let answer = ask(client, word, round, &mut attempt).await?;
        if memory_in(&answer, id).is_some_and(|found| found["reason"]["found_by"] != "lexical") {
            return Ok(since.elapsed());
        }
        if since.elapsed() > GIVE_UP {
            return Err(format!("{word} was never found by its vector: {answer}").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One retrieval of `word`, as a new turn each time (no cached answer).
async fn ask(client: &Client, word: &str, round: usize, attempt: &mut usize) -> Result<Value> {
    *attempt += 1;
    client
        .retrieve(
            &json!({"turn_id": format!("fresh-{round}-{attempt}"), "repo": "bench",
            "query": format!("{word} deployment"), "top_k": 5, "use_cache": false}),
        )
        .await
}

fn memory_in<'a>(answer: &'a Value, id: &str) -> Option<&'a Value> {
    answer["memories"]
        .as_array()?
        .iter()
        .find(|memory| memory["id"] == id)
}
