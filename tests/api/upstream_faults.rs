//! Upstreams that misbehave without failing outright: replies too large to
//! hold, degenerate vectors, vectors of an unexpected length, a retrieval
//! model too slow for query expansion. Each is a failed call, never a
//! crash or a poisoned index.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{Builder, TestApp, ids, memory, settled, write_through_embedder_fault};
use crate::upstream::Behaviour;

over_both_backends!(
    zero_vectors_are_refused_and_the_memory_is_found_once_the_embedder_recovers,
    an_unconfigured_length_is_learned_and_kept_across_restarts,
);

/// The reply cap the tests configure, so that oversized replies stay cheap.
const REPLY_CAP: usize = 64 * 1024;

async fn app_with(adjust: impl FnOnce(&mut engram::config::Config)) -> TestApp {
    faulty_app(&Backend::Files).config(adjust).spawn().await
}

/// These tests' app over `backend`, before it is adjusted and spawned.
fn faulty_app(backend: &Backend) -> Builder<'_> {
    backend
        .builder()
        .embedder()
        .llm()
        .config(|config| config.capture.retry_base_ms = 10)
}

#[tokio::test]
async fn an_oversized_reply_is_a_failed_call_for_hyde_embedding_and_the_classifier() {
    let app = app_with(|config| {
        config.embedding.max_reply_bytes = REPLY_CAP;
        config.llm.as_mut().unwrap().max_reply_bytes = REPLY_CAP;
    })
    .await;
    let upstream = &app.upstream;
    let wanted = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys run the deploy script.",
        ))
        .await;
    app.wait_indexed().await;
    let window = json!([{"role": "user", "content": "How do we deploy?"}]);

    // A well-formed HyDE reply, but too large: HyDE fails, the latest user
    // message is searched for.
    upstream.set_chat(Behaviour::Oversized(4 * REPLY_CAP), "Deploys use a script.");
    let result = app
        .retrieve(json!({"turn_id": "t1", "repo": "forge", "messages": window}))
        .await;
    assert_eq!(result["degraded"], "hyde_failed", "{result:#}");
    assert_eq!(result["query"], "How do we deploy?");
    assert_eq!(ids(&result), [wanted["id"].as_str().unwrap()]);

    // A well-formed embeddings reply, but too large: nothing to search with.
    upstream.set(Behaviour::Oversized(4 * REPLY_CAP));
    let result = app
        .retrieve(json!({"turn_id": "t2", "repo": "forge", "query": "deploy"}))
        .await;
    assert_eq!(result["degraded"], "embedding_failed", "{result:#}");
    assert_eq!(result["memories"], json!([]));
    upstream.set(Behaviour::Answer);

    // A classifier reply too large fails the trigger (it is kept in
    // queue/failed/ with its error), and writes nothing.
    let classified =
        r#"[{"content": "Ana deploys on Fridays.", "scope": "user", "category": "user-facts"}]"#;
    upstream.set_chat(Behaviour::Oversized(4 * REPLY_CAP), classified);
    app.accept(
        "/turns",
        &json!({"session_id": "s1", "repo": "forge", "user": "ana",
                    "messages": [{"role": "user", "content": "I deploy on Fridays."}]}),
    )
    .await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["failed"], 1, "{stats:#}");
    assert_eq!(stats["capture"]["written"], 0, "{stats:#}");
    assert_eq!(stats["store"]["memories"], 1);
}

async fn zero_vectors_are_refused_and_the_memory_is_found_once_the_embedder_recovers(
    backend: Backend,
) {
    let app = backend.builder().embedder().spawn().await;
    let upstream = &app.upstream;
    let query =
        |turn: &str| json!({"turn_id": turn, "repo": "forge", "query": "quarantine flaky tests"});

    upstream.set(Behaviour::Zeros);
    let result = app.retrieve(query("t1")).await;
    assert_eq!(result["degraded"], "embedding_failed", "{result:#}");

    let written =
        write_through_embedder_fault(&app, Behaviour::Zeros, "Flaky tests go into quarantine.")
            .await;
    let result = app.retrieve(query("t2")).await;
    assert_eq!(result["degraded"], Value::Null, "{result:#}");
    assert_eq!(ids(&result), [written["id"].as_str().unwrap()]);
    let similarity = result["memories"][0]["scores"]["similarity"]
        .as_f64()
        .unwrap();
    assert!(
        similarity > 0.5,
        "found by its vector, not only its words: {result:#}"
    );
}

#[tokio::test]
async fn a_slow_expansion_leaves_the_search_its_share_of_the_budget() {
    let app = app_with(|config| {
        // The retrieval model may take the whole budget, as by default; a
        // roomy budget keeps the embedding's share clear of a loaded CI.
        config.retrieval.budget_ms = 4_000;
        config.llm.as_mut().unwrap().retrieval_timeout_ms = config.retrieval.budget_ms;
    })
    .await;
    let upstream = &app.upstream;
    let written = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Flaky tests go into quarantine.",
        ))
        .await;
    app.wait_indexed().await;
    let query = |turn: &str| json!({"turn_id": turn, "repo": "forge", "query": "quarantine flaky tests", "expand_query": true});

    upstream.set_chat(Behaviour::Delay(Duration::from_secs(30)), "isolation");
    let result = app.retrieve(query("t1")).await;
    assert_eq!(result["degraded"], "expansion_timeout", "{result:#}");
    assert_eq!(result["expanded_query"], Value::Null);
    assert_eq!(ids(&result), [written["id"].as_str().unwrap()]);

    upstream.set_chat(Behaviour::Fail(500), "");
    let result = app.retrieve(query("t2")).await;
    assert_eq!(result["degraded"], "expansion_failed", "{result:#}");
    assert_eq!(ids(&result), [written["id"].as_str().unwrap()]);

    upstream.set_chat(Behaviour::Answer, "isolation");
    let result = app.retrieve(query("t3")).await;
    assert_eq!(result["degraded"], Value::Null, "{result:#}");
    assert_eq!(result["added_terms"], json!(["isolation"]));
}

async fn an_unconfigured_length_is_learned_and_kept_across_restarts(backend: Backend) {
    let unset = |config: &mut engram::config::Config| config.embedding.dimensions = None;
    let app = faulty_app(&backend).config(unset).spawn().await;
    let upstream = app.upstream.clone();

    // Capture writes a memory, and retrieval finds it.
    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "The forge repo formats Go with gofumpt.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    app.accept(
        "/turns",
        &json!({"session_id": "s1", "repo": "forge", "user": "ana",
                    "messages": [{"role": "user", "content": "We run gofumpt here."}]}),
    )
    .await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["written"], 1, "{stats:#}");
    let stats = app.wait_indexed().await;
    assert_eq!(stats["embedding"]["dimensions"], 64, "{stats:#}");
    assert_eq!(stats["index"]["dimensions"], 64);
    assert_eq!(stats["embedding"]["dimension_mismatches"], 0);
    let query = json!({"turn_id": "t1", "repo": "forge", "query": "formats Go gofumpt"});
    let result = app.retrieve(query.clone()).await;
    assert_eq!(result["degraded"], Value::Null, "{result:#}");
    assert_eq!(
        result["memories"].as_array().unwrap().len(),
        1,
        "{result:#}"
    );
    let ground = app.into_ground();

    // A restart knows the length from the cache before any call.
    let calls = upstream.embedding_calls();
    let app = faulty_app(&backend).on(ground).config(unset).spawn().await;
    let stats = app.wait_indexed().await;
    assert_eq!(stats["embedding"]["dimensions"], 64, "{stats:#}");
    assert_eq!(stats["index"]["cache_hits"], 1);
    assert_eq!(
        upstream.embedding_calls(),
        calls,
        "a warm restart embeds nothing"
    );
}

#[tokio::test]
async fn a_configured_length_the_model_does_not_return_is_named_in_stats() {
    let app = app_with(|config| {
        config.embedding.dimensions = Some(32);
    })
    .await;
    let _upstream = &app.upstream;
    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "Flaky tests go into quarantine.",
    ))
    .await;
    let result = app
        .retrieve(json!({"turn_id": "t1", "repo": "forge", "query": "flaky tests"}))
        .await;
    assert_eq!(result["degraded"], "embedding_failed", "{result:#}");
    let stats = app.get("/stats").await.json;
    let embedding = &stats["embedding"];
    assert!(
        embedding["dimension_mismatches"].as_u64().unwrap() >= 1,
        "{stats:#}"
    );
    assert_eq!(embedding["dimensions"], 32);
    let last_error = embedding["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("64 dimensions") && last_error.contains("embedding.dimensions is 32"),
        "{last_error}"
    );
    assert!(embedding["last_error_at"].is_string(), "{stats:#}");
    assert_eq!(stats["index"]["memories"], 0);
}
