//! `POST /retrieve` finds a memory by its closest sentence: a memory of
//! several sentences is embedded whole and sentence by sentence, and its
//! closeness is the larger of its whole text's cosine and
//! `retrieval.passage_weight` of its closest sentence's. The passages'
//! vectors are cached like the whole texts' (and kept when a start
//! rewrites the cache), so a restart embeds nothing.

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::id;
use crate::helpers::{TestApp, memory, wait_until};

over_both_backends!(
    a_fact_said_in_passing_is_found_by_its_sentence,
    passages_are_embedded_once_and_a_restart_finds_them_cached,
    a_sentence_many_memories_share_is_read_from_the_cache_for_each_after_a_restart,
);

/// A turn about playlists that mentions, in passing, when the user goes
/// to Zumba; two memories whose whole texts are closer to the question
/// than that turn's whole text is (0.42 and 0.45 against 0.36 with the
/// embedded model), and the aside's own sentence closer than both (0.59).
const ASIDE: &str = "I'm looking for new workout playlists for the gym, something upbeat to \
                     keep me going. Do you have any hip hop or electronic recommendations? By the \
                     way, I go to a Zumba class every Tuesday and Thursday evening.";
const OTHERS: [&str; 3] = [
    "My sister teaches piano lessons on weekends.",
    "We have a team meeting every Monday morning.",
    "Ana prefers tabs over spaces.",
];
const QUESTION: &str = "Which days of the week do I go to my dance fitness class?";

/// The ids in the order `/retrieve` ranks them, the aside's id, and the
/// answer, at `passage_weight`.
async fn ranked(backend: &Backend, passage_weight: f64) -> (Vec<String>, String, Value) {
    let app = backend
        .builder()
        .config(|config| {
            config.retrieval.passage_weight = passage_weight;
            // One search, so that similarities are to the question itself.
            config.retrieval.feedback_weight = 0.0;
        })
        .spawn()
        .await;
    let aside = id(&app.create(memory("user", "cy", "user-facts", ASIDE)).await);
    for content in OTHERS {
        app.create(memory("user", "cy", "user-facts", content))
            .await;
    }
    app.wait_indexed().await;
    let result = app
        .retrieve(
            json!({"turn_id": "q", "user": "cy", "query": QUESTION, "top_k": 4,
            "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0, "access": 0.0}}),
        )
        .await;
    let order = result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| found["id"].as_str().unwrap().to_owned())
        .collect();
    (order, aside, result)
}

async fn a_fact_said_in_passing_is_found_by_its_sentence(backend: Backend) {
    let (order, aside, whole_only) = ranked(&backend, 0.0).await;
    assert_eq!(
        order.iter().position(|found| *found == aside),
        Some(2),
        "by whole texts, the aside ranks below both near misses: {whole_only:#}"
    );
    let (order, aside, with_passages) = ranked(&backend.another().await, 0.8).await;
    assert_eq!(order[0], aside, "{with_passages:#}");
    let similarity = with_passages["memories"][0]["scores"]["similarity"]
        .as_f64()
        .unwrap();
    assert!(
        (similarity - 0.8 * 0.591).abs() < 0.01,
        "its closeness is 0.8 of its sentence's cosine, 0.591: {similarity}"
    );
    assert_eq!(
        with_passages["memories"][0]["reason"]["passage"], true,
        "its reason says a sentence found it: {with_passages:#}"
    );
    let others = &with_passages["memories"].as_array().unwrap()[1..];
    assert!(
        others
            .iter()
            .all(|found| found["reason"].get("passage").is_none()),
        "{with_passages:#}"
    );
}

async fn passages_are_embedded_once_and_a_restart_finds_them_cached(backend: Backend) {
    let app = backend.spawn_app().await;
    app.create(memory("user", "cy", "user-facts", ASIDE)).await;
    for content in OTHERS {
        app.create(memory("user", "cy", "user-facts", content))
            .await;
    }
    let stats = app.wait_indexed().await;
    assert_eq!(
        stats["index"]["embedded"], 7,
        "four whole texts and the aside's three sentences: {stats:#}"
    );
    assert_eq!(stats["index"]["passages"], 3, "{stats:#}");
    let before = app
        .retrieve(json!({"turn_id": "q", "user": "cy", "query": QUESTION}))
        .await;

    let restarted = backend.builder().on(app.into_ground()).spawn().await;
    let stats = restarted.wait_indexed().await;
    assert_eq!(stats["index"]["embedded"], 0, "{stats:#}");
    assert_eq!(stats["index"]["cache_hits"], 7, "{stats:#}");
    assert_eq!(stats["index"]["passages"], 3, "{stats:#}");
    let after = restarted
        .retrieve(json!({"turn_id": "q2", "user": "cy", "query": QUESTION}))
        .await;
    assert_eq!(
        before["memories"][0]["scores"]["similarity"],
        after["memories"][0]["scores"]["similarity"]
    );
}

/// More memories than one indexing batch takes, each opening with the
/// same sentence: after a restart, the batch that reads the shared
/// sentence from the cache and the batches after it all find it there
/// (a cache that handed each stored vector out once embedded it again).
async fn a_sentence_many_memories_share_is_read_from_the_cache_for_each_after_a_restart(
    backend: Backend,
) {
    let app = backend.builder().embedder().spawn().await;
    let memories = engram::index::indexer::BATCH_SIZE + 2;
    for n in 0..memories {
        let content = format!("Thanks for the help! Release {n} ships on a Friday.");
        app.create(memory("user", "cy", "user-facts", &content))
            .await;
    }
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["passages"], 2 * memories, "{stats:#}");

    let restarted = backend
        .builder()
        .embedder()
        .on(app.into_ground())
        .spawn()
        .await;
    let stats = restarted.wait_indexed().await;
    assert_eq!(stats["index"]["embedded"], 0, "{stats:#}");
    assert_eq!(stats["index"]["passages"], 2 * memories, "{stats:#}");
}

/// The embedding cache file of the data directory (one per model).
fn cache_file(data_dir: &std::path::Path) -> std::path::PathBuf {
    let dir = data_dir.join(".cache/embeddings");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

fn size(file: &std::path::Path) -> u64 {
    std::fs::metadata(file).map_or(0, |metadata| metadata.len())
}

/// The embedding cache is files mode's (replicas share a table instead):
/// when a start finds a quarter of it stale, it rewrites it with the live
/// vectors, the passages' among them, so the next start embeds nothing.
#[tokio::test]
async fn the_cache_rewritten_at_start_keeps_the_passages_vectors() {
    let app = TestApp::builder().spawn().await;
    app.create(memory("user", "cy", "user-facts", ASIDE)).await;
    let mut others = Vec::new();
    for content in OTHERS {
        others.push(id(&app
            .create(memory("user", "cy", "user-facts", content))
            .await));
    }
    app.wait_indexed().await;
    for gone in &others[..2] {
        app.delete(&format!("/memories/{gone}?user=cy")).await;
    }
    app.wait_indexed().await;
    let file = cache_file(&app.data_dir);
    let before = size(&file);

    let second = TestApp::builder().on(app.into_ground()).spawn().await;
    second.wait_indexed().await;
    // Two whole texts of 384 floats, each after its 32-byte key, went.
    let record = 32 + 384 * 4;
    wait_until(
        "the cache file is rewritten without the two forgotten",
        || size(&file) == before - 2 * record,
    )
    .await;

    let third = TestApp::builder().on(second.into_ground()).spawn().await;
    let stats = third.wait_indexed().await;
    assert_eq!(stats["index"]["embedded"], 0, "{stats:#}");
    assert_eq!(stats["index"]["cache_hits"], 5, "{stats:#}");
    assert_eq!(stats["index"]["passages"], 3, "{stats:#}");
}
