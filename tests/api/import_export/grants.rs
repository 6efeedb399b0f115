//! `POST /memories/import` by a key limited to some namespaces, over both
//! backends: an imported memory's links are checked as `POST /memories`
//! checks a write's (a `supersedes` in the namespace written, edges to
//! memories the key sees), an id the key cannot see reads like a missing
//! one, and no answer tells that another namespace holds an id.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::{LIMITED, ROOT, root_and_limited_keys, send};
use crate::helpers::{TestApp, TestResponse, memory};

over_both_backends!(a_limited_keys_import_links_only_to_memories_it_sees_and_confirms_no_other_id,);

/// An id no memory has.
const MISSING: &str = "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d";

/// A user memory of `user` as an export writes it.
fn exported(id: &str, user: &str, content: &str) -> Value {
    json!({"id": id, "version": 1, "scope": "user", "user": user,
    "category": "user-facts", "created_at": "2026-01-02T03:04:05Z",
    "updated_at": "2026-01-02T03:04:05Z", "trigger": "manual", "content": content})
}

async fn import(app: &TestApp, memories: Value) -> TestResponse {
    let body = json!({ "memories": memories });
    send(app, Method::POST, "/memories/import", Some(body), LIMITED).await
}

async fn create(app: &TestApp, body: Value) -> String {
    let created = send(app, Method::POST, "/memories", Some(body), ROOT).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json["id"].as_str().unwrap().to_owned()
}

/// The problem's detail, with `id` written as the missing id.
fn detail_as_if_missing(problem: &TestResponse, id: &str) -> String {
    problem.json["detail"]
        .as_str()
        .unwrap()
        .replace(id, MISSING)
}

async fn a_limited_keys_import_links_only_to_memories_it_sees_and_confirms_no_other_id(
    backend: Backend,
) {
    let app = backend
        .builder()
        .embedder()
        .config(root_and_limited_keys)
        .spawn()
        .await;
    let theirs = create(
        &app,
        memory(
            "repo",
            "secret",
            "patterns",
            "Deploys use the blue pipeline.",
        ),
    )
    .await;
    let forge = create(
        &app,
        memory("repo", "forge", "patterns", "Forge deploys on Fridays."),
    )
    .await;
    let stored_before = backend.stored(&app.data_dir).await;
    let mine = "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c60";

    // `supersedes` naming their memory is refused in the words a missing
    // id gets, which are those of `POST /memories`.
    let mut claims = exported(mine, "ana", "Ana deploys with the blue pipeline.");
    claims["supersedes"] = json!(theirs);
    let refused = import(&app, json!([claims])).await;
    refused.assert_problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("memories[0].supersedes"),
    );
    claims["supersedes"] = json!(MISSING);
    let missing = import(&app, json!([claims])).await;
    missing.assert_problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("memories[0].supersedes"),
    );
    assert_eq!(
        detail_as_if_missing(&refused, &theirs),
        missing.json["detail"]
    );
    let mut update = memory("user", "ana", "user-facts", "Ana deploys with blue.");
    update["supersedes"] = json!(theirs);
    let written = send(&app, Method::POST, "/memories", Some(update), LIMITED).await;
    written.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("supersedes"));
    assert_eq!(
        refused.json["detail"],
        written.json["detail"]
            .as_str()
            .unwrap()
            .replace("`supersedes`", "`memories[0].supersedes`"),
    );

    // So is an edge to it.
    let mut links = exported(mine, "ana", "Ana knows the blue pipeline.");
    links["related"] = json!([{"id": theirs, "relationship": "related"}]);
    let refused = import(&app, json!([links])).await;
    refused.assert_problem(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("memories[0].related[0].id"),
    );
    links["related"][0]["id"] = json!(MISSING);
    let missing = import(&app, json!([links])).await;
    assert_eq!(
        detail_as_if_missing(&refused, &theirs),
        missing.json["detail"]
    );

    // Their memory's id is not confirmed as existing: it is refused as
    // the id of a memory the key sees elsewhere is, in the same words.
    let taken = import(&app, json!([exported(&theirs, "ana", "Ana's note.")])).await;
    taken.assert_problem(StatusCode::CONFLICT, Some("memories[0].id"));
    let seen = import(&app, json!([exported(&forge, "ana", "Ana's note.")])).await;
    seen.assert_problem(StatusCode::CONFLICT, Some("memories[0].id"));
    assert_eq!(
        detail_as_if_missing(&taken, &theirs),
        detail_as_if_missing(&seen, &forge)
    );
    assert_eq!(backend.stored(&app.data_dir).await, stored_before);

    // Their memory's chain is theirs to extend.
    let mut theirs_v2 = memory(
        "repo",
        "secret",
        "patterns",
        "Deploys use the green pipeline.",
    );
    theirs_v2["supersedes"] = json!(theirs);
    create(&app, theirs_v2).await;

    // What the key sees links as before: a chain of its own, an edge to
    // its repo's memory, and the same batch again is all existing.
    let first = exported(mine, "ana", "Ana deploys on Fridays.");
    let mut second = exported(
        "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c61",
        "ana",
        "Ana deploys on Fridays, after noon.",
    );
    second["version"] = json!(2);
    second["supersedes"] = json!(mine);
    second["related"] = json!([{"id": forge, "relationship": "refines"}]);
    let batch = json!([first, second]);
    let answer = import(&app, batch.clone()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.json["imported"], 2, "{}", answer.text);
    let again = import(&app, batch).await;
    assert_eq!(again.json["existing"], 2, "{}", again.text);
}
