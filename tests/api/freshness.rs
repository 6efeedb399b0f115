//! Read-after-write while the embedder is behind: a write is found by its
//! words at once, says so in its reason, and is found by its vector once
//! that comes; deletes and supersedes in the gap; `/stats` on both sides.

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, ids, memory, postgres_decision};

over_both_backends!(
    a_write_behind_a_stalled_burst_is_found_by_its_words_at_once,
    a_memory_deleted_before_its_vector_came_is_gone_from_both_searches,
    a_new_version_stands_in_for_the_old_before_its_vector_comes,
    with_no_backlog_a_retrieval_right_after_a_write_waits_for_its_vector,
);

/// In the text of every memory whose vector the tests hold back, and in
/// no query.
const STALLED: &str = "(held)";

/// An app whose embedder is the fake upstream, which holds back the
/// vectors of every text marked [`STALLED`].
async fn app_with_stalled_embedder(backend: &Backend) -> TestApp {
    let app = backend.builder().embedder().spawn().await;
    app.upstream.stall_embeddings_of(STALLED);
    app
}

/// Writes a memory of `content` into `repo/forge`.
async fn note(app: &TestApp, content: &str) -> Value {
    app.create(memory("repo", "forge", "patterns", content))
        .await
}

async fn ask(app: &TestApp, turn: &str, query: &str) -> Value {
    app.retrieve(json!({"turn_id": turn, "repo": "forge", "query": query, "top_k": 10}))
        .await
}

async fn a_write_behind_a_stalled_burst_is_found_by_its_words_at_once(backend: Backend) {
    let app = app_with_stalled_embedder(&backend).await;
    let upstream = &app.upstream;
    for n in 0..40 {
        note(&app, &format!("Build note {n} {STALLED}.")).await;
    }
    let rare = note(
        &app,
        &format!("The zanzibar deployment key rotates on Tuesdays {STALLED}."),
    )
    .await;

    let result = ask(&app, "f1", "zanzibar deployment").await;
    assert_eq!(result["degraded"], Value::Null, "{result:#}");
    assert_eq!(result["index_catching_up"], true);
    assert_eq!(ids(&result), [id(&rare)], "{result:#}");
    let found = &result["memories"][0];
    assert_eq!(
        found["reason"],
        json!({"kind": "query", "found_by": "lexical", "vector_pending": true})
    );
    assert_eq!(found["scores"]["similarity"], 0.0, "no vector, no cosine");
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["index"]["pending_words"], 0, "{stats:#}");
    assert_eq!(stats["index"]["words_only"], 41);
    assert_eq!(stats["index"]["pending"], 41);
    assert_eq!(stats["index"]["memories"], 0);

    // The filters hold for what is found by its words alone.
    let other_category = app
        .retrieve(
            json!({"turn_id": "f2", "repo": "forge", "query": "zanzibar deployment",
            "filters": {"categories": ["corrections"]}}),
        )
        .await;
    assert_eq!(ids(&other_category), Vec::<String>::new());

    upstream.release_embeddings();
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], 41);
    assert_eq!(stats["index"]["words_only"], 0);
    let result = ask(&app, "f3", "zanzibar deployment").await;
    assert_eq!(result["index_catching_up"], false);
    // Now the burst is searched by meaning too: first is the memory
    // itself.
    assert_eq!(ids(&result)[0], id(&rare), "{result:#}");
    assert_eq!(
        result["memories"][0]["reason"],
        json!({"kind": "query", "found_by": "both"})
    );
}

async fn a_memory_deleted_before_its_vector_came_is_gone_from_both_searches(backend: Backend) {
    let app = app_with_stalled_embedder(&backend).await;
    let upstream = &app.upstream;
    let kept = note(&app, "The zanzibar runbook lives in the wiki.").await;
    let gone = note(
        &app,
        &format!("The zanzibar deployment key rotates on Tuesdays {STALLED}."),
    )
    .await;
    let result = ask(&app, "d1", "zanzibar deployment").await;
    assert!(ids(&result).contains(&id(&gone)), "{result:#}");

    let deleted = app.delete(&format!("/memories/{}", id(&gone))).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let result = ask(&app, "d2", "zanzibar deployment").await;
    assert_eq!(ids(&result), [id(&kept)], "{result:#}");

    // Its vector, should the embedder still deliver it, does not bring it
    // back.
    upstream.release_embeddings();
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], 1, "{stats:#}");
    assert_eq!(stats["index"]["words_only"], 0);
    let result = ask(&app, "d3", "zanzibar deployment").await;
    assert_eq!(ids(&result), [id(&kept)], "{result:#}");
}

async fn a_new_version_stands_in_for_the_old_before_its_vector_comes(backend: Backend) {
    let app = app_with_stalled_embedder(&backend).await;
    let upstream = &app.upstream;
    let old = app
        .create(memory(
            "repo",
            "forge",
            "project-conventions",
            "Indent Python with two spaces.",
        ))
        .await;
    app.wait_indexed().await;
    let mut newer = memory(
        "repo",
        "forge",
        "project-conventions",
        &format!("Format Python with ruff {STALLED}."),
    );
    newer["supersedes"] = old["id"].clone();
    let head = app.create(newer).await;

    // Found through the old version's vector and words: the head stands in.
    let result = ask(&app, "s1", "indent python").await;
    assert_eq!(ids(&result), [id(&head)], "{result:#}");
    assert_eq!(result["memories"][0]["version"], 2);
    // Found by its own words alone.
    let result = ask(&app, "s2", "ruff").await;
    assert_eq!(ids(&result), [id(&head)], "{result:#}");
    assert_eq!(
        result["memories"][0]["reason"],
        json!({"kind": "query", "found_by": "lexical", "vector_pending": true})
    );

    upstream.release_embeddings();
    app.wait_indexed().await;
    let result = ask(&app, "s3", "ruff").await;
    assert_eq!(ids(&result), [id(&head)]);
    assert_eq!(
        result["memories"][0]["reason"],
        json!({"kind": "query", "found_by": "both"})
    );
}

async fn with_no_backlog_a_retrieval_right_after_a_write_waits_for_its_vector(backend: Backend) {
    let app = backend.builder().embedder().spawn().await;
    let written = app.create(postgres_decision()).await;
    let result = ask(&app, "r1", "everything in postgresql").await;
    assert_eq!(result["index_catching_up"], false, "{result:#}");
    assert_eq!(ids(&result), [id(&written)]);
    assert_eq!(
        result["memories"][0]["reason"],
        json!({"kind": "query", "found_by": "both"})
    );
}
