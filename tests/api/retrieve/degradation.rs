//! `POST /retrieve` when the embedder fails, hangs or is still building
//! the index at start-up, and what a restart embeds again.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::id;
use crate::helpers::{
    RunningApp, get_json, ids, memory, post_json, wait_until_async, write_through_embedder_fault,
};
use crate::upstream::Behaviour;

over_both_backends!(
    an_embedder_that_fails_or_hangs_degrades_and_writes_still_land,
    until_the_startup_build_is_done_the_service_is_alive_but_not_ready,
    a_restart_embeds_only_what_changed_and_a_new_model_embeds_all,
);

async fn an_embedder_that_fails_or_hangs_degrades_and_writes_still_land(backend: Backend) {
    let app = backend
        .builder()
        .embedder()
        .config(|config| config.embedding.timeout_ms = 300)
        .spawn()
        .await;
    let upstream = &app.upstream;
    let query = json!({"turn_id": "t7", "repo": "forge", "query": "flaky test quarantine"});

    upstream.set(Behaviour::Fail(503));
    let result = app.retrieve(query.clone()).await;
    assert_eq!(result["degraded"], "embedding_failed");
    assert_eq!(result["memories"], json!([]));
    assert_eq!(result["injection"], "");

    // Past the 300 ms timeout.
    upstream.set(Behaviour::Delay(Duration::from_secs(5)));
    let result = app.retrieve(query.clone()).await;
    assert_eq!(result["degraded"], "embedding_timeout");

    let written = write_through_embedder_fault(
        &app,
        Behaviour::Fail(500),
        "Flaky tests go into quarantine.",
    )
    .await;
    let result = app.retrieve(query).await;
    assert_eq!(result["degraded"], Value::Null);
    assert_eq!(ids(&result), [id(&written)]);
}

async fn until_the_startup_build_is_done_the_service_is_alive_but_not_ready(backend: Backend) {
    let ground = {
        let app = backend.builder().embedder().spawn().await;
        app.create(memory(
            "repo",
            "forge",
            "patterns",
            "Builds are reproducible.",
        ))
        .await;
        app.wait_indexed().await;
        app.into_ground()
    };
    // A fresh data directory copy would hit the cache; a new model name
    // must not, so the start-up build has to call the (hanging) upstream.
    ground
        .upstream
        .set(Behaviour::Delay(Duration::from_secs(30)));
    let app = backend
        .builder()
        .on(ground)
        .embedder()
        .config(|config| {
            config.embedding.model = "another-model".to_owned();
        })
        .spawn_unready()
        .await;
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(
        app.get("/readyz").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let result = app
        .retrieve(json!({"turn_id": "t8", "repo": "forge", "query": "reproducible builds"}))
        .await;
    assert_eq!(result["degraded"], "index_not_ready");
}

async fn a_restart_embeds_only_what_changed_and_a_new_model_embeds_all(backend: Backend) {
    // Each app is stopped before the next starts: over PostgreSQL an app
    // left running would be another replica, filling the shared cache.
    let app = backend.builder().embedder().serve().await;
    for content in [
        "Tests run with cargo nextest.",
        "Docs live in docs/.",
        "CI has two cores.",
    ] {
        write(&app, content).await;
    }
    indexed(&app).await;
    let ground = app.stop().await;
    let upstream = ground.upstream.clone();
    let before = upstream.embedding_calls();

    let app = backend.builder().on(ground).embedder().serve().await;
    let stats = indexed(&app).await;
    assert_eq!(
        upstream.embedding_calls(),
        before,
        "a warm restart embeds nothing"
    );
    assert_eq!(stats["index"]["cache_hits"], 3);
    assert_eq!(stats["index"]["embedded"], 0);
    write(&app, "Releases are tagged vX.Y.Z.").await;
    indexed(&app).await;
    assert_eq!(
        upstream.embedded_texts().last().unwrap(),
        "Releases are tagged vX.Y.Z."
    );
    let ground = app.stop().await;

    backend.forget_embeddings(ground.path()).await;
    let app = backend.builder().on(ground).embedder().serve().await;
    let stats = indexed(&app).await;
    assert_eq!(
        stats["index"]["embedded"], 4,
        "deleting the embedding cache is safe: all is embedded again"
    );

    let app = backend
        .builder()
        .on(app.stop().await)
        .embedder()
        .config(|config| config.embedding.model = "another-model".to_owned())
        .serve()
        .await;
    let stats = indexed(&app).await;
    assert_eq!(
        stats["index"]["cache_hits"], 0,
        "another model never reuses vectors"
    );
    assert_eq!(stats["index"]["embedded"], 4);
    app.stop().await;
}

/// Writes a memory of `content` into repo/forge on `app`.
async fn write(app: &RunningApp, content: &str) {
    let created = post_json(
        &app.base_url,
        "/memories",
        &memory("repo", "forge", "patterns", content),
    )
    .await;
    assert!(created["id"].is_string(), "{created}");
}

/// `app`'s `/stats` once it is ready and its index has taken every write.
async fn indexed(app: &RunningApp) -> Value {
    wait_until_async("the index to take every write", async || {
        let stats = get_json(&app.base_url, "/stats").await;
        stats["index"]["ready"] == true && stats["index"]["pending"] == 0
    })
    .await;
    get_json(&app.base_url, "/stats").await
}
