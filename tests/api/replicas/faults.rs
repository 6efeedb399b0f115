//! Database faults as the API answers them, each replica a real `engram`
//! process: with the database down, capture's routes are a `503` with
//! `Retry-After`, like memory writes; content holding U+0000 is refused
//! with a `422` naming `content`, in postgres mode as in files mode.

use axum::http::StatusCode;
use reqwest::Method;
use serde_json::{Value, json};

use crate::capture::replicas::classifier;
use crate::helpers::{TestApp, call, memory};
use crate::pg_cluster;
use crate::replicas::Replica;
use crate::replicas::ops::readiness;
use crate::upstream::Vectors;

fn window(session: &str) -> Value {
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": "We deploy on Fridays now."},
        {"role": "assistant", "content": "Noted."},
    ]})
}

#[tokio::test]
async fn with_the_database_down_capture_routes_answer_503_with_retry_after() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let upstream = classifier().await;
    let yaml = format!(
        "store: {{postgres: {{catch_up_ms: 100, connect_timeout_ms: 300}}}}\n\
         embedding: {{provider: openai, base_url: '{url}', dimensions: {dimensions}}}\n\
         llm: {{base_url: '{url}'}}\n",
        url = upstream.base_url,
        dimensions = Vectors::SMALL.dimensions,
    );
    let a = Replica::start_with(&database, &yaml).await;

    cluster.stop();
    crate::helpers::wait_until_async("/readyz says the database is down", async || {
        readiness(&a).await.0 == 503
    })
    .await;

    let requests = [
        (Method::POST, "/turns", Some(window("s-turn"))),
        (Method::POST, "/compactions", Some(window("s-compaction"))),
        (Method::GET, "/triggers", None),
    ];
    for (method, path, body) in requests {
        let (status, headers, problem) = call(a.url(), method, path, None, body.as_ref()).await;
        assert_eq!(status, 503, "{path}: {problem}");
        assert_eq!(
            problem["type"], "urn:engram:problem:database-unavailable",
            "{path}: {problem}"
        );
        assert!(headers.contains_key("retry-after"), "{path}: {headers:?}");
    }

    cluster.start().await;
}

#[tokio::test]
async fn content_holding_u0000_is_refused_alike_in_both_modes() {
    let content = "Before the NUL\u{0}after it.";
    let files = TestApp::builder().spawn().await;
    files
        .post("/memories", &memory("repo", "forge", "patterns", content))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("content"));

    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let (status, _, problem) = call(
        a.url(),
        Method::POST,
        "/memories",
        None,
        Some(&memory("repo", "forge", "patterns", content)),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["field"], "content", "{problem}");
}
