//! Live sync: how long from a memory file changed on disk (the way a sync
//! tool or `git pull` changes it: written beside it, then renamed over
//! it) to a retrieval that finds the new text, and how long a checkout of
//! many new files, then their removal, takes to settle (every file in the
//! store and in the index, vectors included).

use std::path::Path;
use std::time::{Duration, Instant};

use engram::memory::{Memory, Namespace};
use engram::store::markdown;
use serde_json::{Value, json};

use crate::corpus;
use crate::measure::{Report, Row};
use crate::scratch::{ScratchDir, write_memories};
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};

/// Memories in the service before the workload.
const CORPUS: usize = 1000;
/// A change not taken in by then has failed (the local model embeds a
/// thousand texts in minutes on a loaded 2-core machine).
const GIVE_UP: Duration = Duration::from_secs(900);

/// Edits `rounds` files one at a time, timing each to the first retrieval
/// that finds it; then checks out `bulk` new files and removes them.
pub async fn sync(
    report: &mut Report,
    rounds: usize,
    bulk: usize,
    embedder: EmbedderChoice,
) -> Result {
    let dir = ScratchDir::new()?;
    let namespace = Namespace::Repo("bench".parse()?);
    let corpus = corpus::memories(&namespace, CORPUS, 41);
    write_memories(dir.path(), &namespace, &corpus)?;
    let (server, _) = Server::start(dir.path(), embedder).await?;
    let client = server.client();
    let folder = dir.path().join("repos/bench");

    let mut samples = Vec::with_capacity(rounds);
    let started = Instant::now();
    for (round, original) in corpus.iter().take(rounds).enumerate() {
        let word = format!("quillback{round}");
        let edited = Memory {
            content: format!("The {word} service restarts every night at two."),
            ..original.clone()
        };
        let began = Instant::now();
        replace(
            &folder.join(format!("{}.md", edited.id)),
            &markdown::render(&edited),
        )?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let answer = client
                .retrieve(
                    &json!({"turn_id": format!("sync-{round}-{attempt}"), "repo": "bench",
                    "query": format!("{word} service"), "top_k": 5, "use_cache": false}),
                )
                .await?;
            if found(&answer, &edited.id.to_string()) {
                samples.push(began.elapsed());
                break;
            }
            if began.elapsed() > GIVE_UP {
                return Err(format!("the edit of round {round} was never found: {answer}").into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    report.rows.push(Row::from_samples(
        "sync: file edited on disk → found by a retrieval",
        format!("{CORPUS} memories, {embedder:?} embedder, one edit at a time"),
        &mut samples,
        started.elapsed(),
    ));

    if bulk > 0 {
        checkout(report, &client, dir.path(), bulk, embedder).await?;
    }
    server.stop().await;
    Ok(())
}

/// Checks out `bulk` new files into a new namespace, then removes them,
/// timing each to settled.
async fn checkout(
    report: &mut Report,
    client: &Client,
    dir: &Path,
    bulk: usize,
    embedder: EmbedderChoice,
) -> Result {
    let checkout = dir.join("repos/checkout");
    std::fs::create_dir_all(&checkout)?;
    let arrivals = corpus::memories(&Namespace::Repo("checkout".parse()?), bulk, 43);
    let added = timed_settle(client, CORPUS + bulk, || {
        arrivals.iter().try_for_each(|memory| {
            std::fs::write(
                checkout.join(format!("{}.md", memory.id)),
                markdown::render(memory),
            )
        })
    })
    .await?;
    report.rows.push(Row::single(
        &format!("sync: checkout of {bulk} new files → all found by their words"),
        format!("{embedder:?} embedder; {} sync passes", added.passes),
        added.words,
    ));
    report.rows.push(Row::single(
        &format!("sync: checkout of {bulk} new files → all vectors in"),
        format!("{embedder:?} embedder"),
        added.vectors,
    ));
    let removed = timed_settle(client, CORPUS, || {
        arrivals
            .iter()
            .try_for_each(|memory| std::fs::remove_file(checkout.join(format!("{}.md", memory.id))))
    })
    .await?;
    report.rows.push(Row::single(
        &format!("sync: removal of {bulk} files → gone from store and index"),
        format!("{embedder:?} embedder; {} sync passes", removed.passes),
        removed.vectors,
    ));
    Ok(())
}

/// Writes `text` beside `path` (hidden, as sync tools do), then renames
/// it over `path`.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let beside = path.with_file_name(format!(".{name}.partial"));
    std::fs::write(&beside, text)?;
    std::fs::rename(beside, path)
}

fn found(answer: &Value, id: &str) -> bool {
    answer["memories"]
        .as_array()
        .is_some_and(|memories| memories.iter().any(|memory| memory["id"] == id))
}

async fn stats(client: &Client) -> Result<Value> {
    Ok(client.send("GET", "/stats", None).await?.1)
}

async fn passes(client: &Client) -> Result<u64> {
    Ok(stats(client).await?["store"]["sync"]["passes"]
        .as_u64()
        .unwrap_or_default())
}

/// How long a change on disk took to settle, from its start.
struct Settled {
    /// Until the store held it and the index had its words: every memory
    /// findable.
    words: Duration,
    /// Until the index had every vector too.
    vectors: Duration,
    /// Sync passes it took.
    passes: u64,
}

/// Makes `change` on disk, then waits until it settles at `memories`.
async fn timed_settle(
    client: &Client,
    memories: usize,
    change: impl FnOnce() -> std::io::Result<()>,
) -> Result<Settled> {
    let passes_before = passes(client).await?;
    let began = Instant::now();
    change()?;
    settle(client, memories, "pending_words", began).await?;
    let words = began.elapsed();
    settle(client, memories, "pending", began).await?;
    Ok(Settled {
        words,
        vectors: began.elapsed(),
        passes: passes(client).await? - passes_before,
    })
}

/// Waits until the store holds `memories` and the index's `pending`
/// counter (`pending_words` or `pending`) is 0.
async fn settle(client: &Client, memories: usize, pending: &str, since: Instant) -> Result {
    loop {
        let stats = stats(client).await?;
        if stats["store"]["memories"] == memories && stats["index"][pending] == 0 {
            return Ok(());
        }
        if since.elapsed() > GIVE_UP {
            return Err(format!("never settled at {memories} memories: {stats}").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
