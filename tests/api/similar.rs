//! `GET /memories/{id}/similar`: nearest neighbours in the memory's own
//! namespace, current versions only.

use axum::http::StatusCode;
use serde_json::json;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{memory, spawn_app};

over_both_backends!(similar_memories_come_from_the_same_namespace_nearest_first,);

async fn similar_memories_come_from_the_same_namespace_nearest_first(backend: Backend) {
    let app = backend.spawn_app().await;
    let anchor = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "HTTP handlers return problem+json errors.",
        ))
        .await;
    let near = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "API errors are RFC 9457 problem documents.",
        ))
        .await;
    let far = app
        .create(memory(
            "repo",
            "forge",
            "user-facts",
            "The team meets on Tuesdays.",
        ))
        .await;
    app.create(memory(
        "repo",
        "elsewhere",
        "patterns",
        "HTTP handlers return problem+json errors.",
    ))
    .await;
    let mut replacement = memory(
        "repo",
        "forge",
        "patterns",
        "HTTP handlers return problem+json errors with a field.",
    );
    replacement["supersedes"] = anchor["id"].clone();
    let head = app.create(replacement).await;
    app.wait_indexed().await;

    let response = app
        .get(&format!(
            "/memories/{}/similar",
            anchor["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let found: Vec<&str> = response.json["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        found,
        [near["id"].as_str().unwrap(), far["id"].as_str().unwrap()]
    );
    assert!(
        !found.contains(&head["id"].as_str().unwrap()),
        "its own chain is left out"
    );
    let similarity = response.json["memories"][0]["similarity"].as_f64().unwrap();
    assert!(similarity > 0.3 && similarity <= 1.0, "{similarity}");

    let limited = app
        .get(&format!(
            "/memories/{}/similar?limit=1",
            near["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(limited.json["memories"].as_array().unwrap().len(), 1);
    assert_eq!(limited.json["degraded"], json!(null));
}

#[tokio::test]
async fn similar_checks_the_id_and_the_limit() {
    let app = spawn_app().await;
    let anchor = app
        .create(memory("repo", "forge", "patterns", "One memory."))
        .await;
    let id = anchor["id"].as_str().unwrap();
    app.get("/memories/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d/similar")
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    app.get("/memories/nope/similar")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("id"));
    for limit in ["0", "101", "x"] {
        app.get(&format!("/memories/{id}/similar?limit={limit}"))
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("limit"));
    }
}
