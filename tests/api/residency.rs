//! Memory follows use (`index.idle_minutes`, `index.max_memory_mb`): a
//! namespace dropped from memory is loaded back by its next read, words
//! and vectors, so it answers as if it had never left; a write into it
//! meanwhile is not lost; `/stats` and `/metrics` say what is resident.
//! An idle time of 0 drops every namespace at each pass (about a second):
//! the tests wait for the passes through `/stats`, never by sleeping.

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, ids, memory, seed_forge_and_ana, wait_until_async};

over_both_backends!(
    an_idle_namespace_is_read_back_with_the_same_results,
    a_write_into_a_dropped_namespace_is_found_after_it_is_read_back,
);

async fn evicting_app(backend: &Backend) -> TestApp {
    backend
        .builder()
        .config(|config| config.index.idle_minutes = Some(0))
        .spawn()
        .await
}

/// `/stats`' residency section.
async fn residency(app: &TestApp) -> Value {
    app.get("/stats").await.json["index"]["residency"].clone()
}

/// Waits until both namespaces of the tests are out of memory, by a pass
/// after `evictions` were counted.
async fn wait_dropped(app: &TestApp, evictions: u64) {
    wait_until_async("the namespaces to be dropped from memory", async || {
        let residency = residency(app).await;
        residency["evictions"].as_u64().unwrap() > evictions
            && residency["evicted_namespaces"] == 2
            && residency["resident_namespaces"] == 0
    })
    .await;
}

/// What a retrieval found: each memory's id, similarity and how.
fn found(result: &Value) -> Vec<(String, Value, Value)> {
    result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| {
            (
                id(memory),
                memory["scores"]["similarity"].clone(),
                memory["reason"].clone(),
            )
        })
        .collect()
}

fn question(turn: &str) -> Value {
    json!({"turn_id": turn, "repo": "forge", "user": "ana", "top_k": 10,
        "query": "which relational database do we use?"})
}

async fn an_idle_namespace_is_read_back_with_the_same_results(backend: Backend) {
    let app = evicting_app(&backend).await;
    let postgres = seed_forge_and_ana(&app).await;
    let warm = app.retrieve(question("warm")).await;
    assert_eq!(ids(&warm)[0], id(&postgres), "{warm:#}");

    let before = residency(&app).await;
    wait_dropped(&app, before["evictions"].as_u64().unwrap()).await;
    let stats = app.get("/stats").await.json;
    assert_eq!(
        stats["index"]["memories"], 3,
        "a dropped namespace still counts its memories: {stats:#}"
    );
    let loads = residency(&app).await["loads"].as_u64().unwrap();

    let cold = app.retrieve(question("cold")).await;
    assert_eq!(found(&cold), found(&warm), "{cold:#}\n{warm:#}");
    assert_eq!(
        cold["memories"][0]["reason"],
        json!({"kind": "query", "found_by": "vector"}),
        "its vectors came back with its words"
    );
    let after = residency(&app).await;
    assert!(
        after["loads"].as_u64().unwrap() >= loads + 2,
        "both namespaces were loaded back: {after:#}"
    );
    assert!(after["mean_load_ms"].as_f64().unwrap() >= 0.0);

    let metrics = app.get("/metrics").await.text;
    for family in [
        "engram_index_resident_namespaces",
        "engram_index_evicted_namespaces",
        "engram_index_resident_bytes",
        "engram_index_namespace_loads_total",
        "engram_index_namespace_evictions_total",
    ] {
        assert!(metrics.contains(family), "{family} in {metrics}");
    }
}

async fn a_write_into_a_dropped_namespace_is_found_after_it_is_read_back(backend: Backend) {
    let app = evicting_app(&backend).await;
    let kept = seed_forge_and_ana(&app).await;
    let before = residency(&app).await;
    wait_dropped(&app, before["evictions"].as_u64().unwrap()).await;

    let written = app
        .create(memory(
            "repo",
            "forge",
            "architectural-decisions",
            "The read replicas run PostgreSQL too.",
        ))
        .await;
    app.wait_indexed().await;
    let result = app.retrieve(question("after-write")).await;
    let found = ids(&result);
    assert!(found.contains(&id(&kept)), "{result:#}");
    assert!(found.contains(&id(&written)), "{result:#}");
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["index"]["memories"], 4, "{stats:#}");
}
