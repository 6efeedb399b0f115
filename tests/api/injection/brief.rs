//! The session's brief: `POST /retrieve` with `session_id` and neither
//! `query` nor `messages`. It injects the pair's most important confirmed
//! memories within `inject.session_start_tokens`, counts them as injected
//! for the session's prompts, begins the session anew, and holds only
//! what the caller's key may see.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{injection, returned};
use crate::backends::{Backend, over_both_backends};
use crate::grants::{LIMITED, ROOT, root_and_limited_keys, send};
use crate::helpers::{TestApp, id, ids, memory};

over_both_backends!(
    the_brief_holds_the_most_important_confirmed_memories_once,
    the_brief_keeps_to_its_budget_most_important_first,
    a_limited_keys_brief_holds_only_what_it_may_see,
);

const DEPLOYS: &str = "forge deploys only through the release pipeline.";
const CHANGELOG: &str = "forge keeps changelog entries to one line.";
const GOFUMPT: &str = "forge formats Go with gofumpt.";

fn brief(session: &str, turn: &str) -> Value {
    json!({"turn_id": turn, "repo": "forge", "user": "ana", "session_id": session})
}

/// Writes `content` for forge with `importance`.
async fn important(app: &TestApp, content: &str, importance: f64) -> String {
    let mut body = memory("repo", "forge", "project-conventions", content);
    body["importance"] = json!(importance);
    id(&app.create(body).await)
}

/// A provisional memory of forge (as the classifier would write it, not
/// yet confirmed), as `POST /memories/import` takes it.
pub fn provisional_line(content: &str) -> Value {
    let written = chrono::Utc::now().to_rfc3339();
    json!({
        "id": uuid::Uuid::now_v7().to_string(), "version": 1, "scope": "repo",
        "repo": "forge", "category": "patterns", "created_at": written,
        "updated_at": written, "trigger": "turn", "content": content,
        "confidence": "provisional", "importance": 1.0,
    })
}

/// Imports a provisional memory of forge.
async fn provisional(app: &TestApp, content: &str) -> String {
    let line = provisional_line(content);
    let answer = app
        .post("/memories/import", &json!({"memories": [line]}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    line["id"].as_str().unwrap().to_owned()
}

async fn the_brief_holds_the_most_important_confirmed_memories_once(backend: Backend) {
    let app = backend.builder().embedder().spawn().await;
    let changelog = important(&app, CHANGELOG, 0.2).await;
    let deploys = important(&app, DEPLOYS, 0.9).await;
    let gofumpt = provisional(&app, GOFUMPT).await;
    app.wait_indexed().await;

    let start = app.retrieve(brief("s-1", "start")).await;
    assert_eq!(start["mode"], "filter", "{start:#}");
    assert_eq!(
        ids(&start),
        [deploys.as_str(), changelog.as_str()],
        "importance first; the provisional one left out: {start:#}"
    );
    assert!(injection(&start).contains(DEPLOYS) && injection(&start).contains(CHANGELOG));
    assert!(!injection(&start).contains(GOFUMPT));

    // A prompt of the session is not given the brief again; what the
    // brief left out it is.
    let prompt = json!({"turn_id": "t-1", "repo": "forge", "user": "ana",
        "session_id": "s-1", "min_relevance": 0.0,
        "query": "How does forge deploy, format Go and keep its changelog?"});
    let asked = app.retrieve(prompt.clone()).await;
    for earlier in [&deploys, &changelog] {
        assert_eq!(
            returned(&asked, earlier)["not_injected"],
            "earlier_in_session",
            "{asked:#}"
        );
    }
    assert_eq!(returned(&asked, &gofumpt)["injected"], true, "{asked:#}");

    // The session starts again (a compacted context): the brief is given
    // again, and so is what the prompts were given.
    let again = app.retrieve(brief("s-1", "start-2")).await;
    assert!(injection(&again).contains(DEPLOYS), "{again:#}");
    let mut next = prompt;
    next["turn_id"] = json!("t-2");
    let asked = app.retrieve(next).await;
    assert_eq!(returned(&asked, &gofumpt)["injected"], true, "{asked:#}");

    // Without a session, a request without a query ranks as it always did.
    let plain = app
        .retrieve(json!({"turn_id": "t-3", "repo": "forge", "user": "ana"}))
        .await;
    assert!(ids(&plain).contains(&gofumpt), "{plain:#}");
}

async fn the_brief_keeps_to_its_budget_most_important_first(backend: Backend) {
    let app = backend
        .builder()
        .embedder()
        .config(|config| config.inject.session_start_tokens = 120)
        .spawn()
        .await;
    for number in 0..8 {
        important(
            &app,
            &format!("forge convention number {number}: {CHANGELOG}"),
            0.3,
        )
        .await;
    }
    let deploys = important(&app, DEPLOYS, 1.0).await;
    app.wait_indexed().await;

    let start = app.retrieve(brief("s-1", "start")).await;
    let text = injection(&start);
    assert!(engram::tokens::count(text) <= 120, "{text}");
    assert!(text.contains(DEPLOYS), "{text}");
    let memories = start["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 9, "up to 50 considered: {start:#}");
    assert_eq!(memories[0]["id"], deploys.as_str());
    assert!(
        memories
            .iter()
            .any(|memory| memory["not_injected"] == "over_budget"),
        "{start:#}"
    );
    // A request's own budget caps the brief's.
    let mut capped = brief("s-2", "start");
    capped["token_budget"] = json!(5);
    assert_eq!(injection(&app.retrieve(capped).await), "");
}

async fn a_limited_keys_brief_holds_only_what_it_may_see(backend: Backend) {
    let app = backend
        .builder()
        .embedder()
        .config(root_and_limited_keys)
        .spawn()
        .await;
    let write = async |body: Value| {
        let answer = send(&app, Method::POST, "/memories", Some(body), ROOT).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
        id(&answer.json)
    };
    let mut secret = memory("repo", "secret", "project-conventions", DEPLOYS);
    secret["importance"] = json!(1.0);
    let secret = write(secret).await;
    let mut theirs = memory("user", "bea", "coding-preferences", CHANGELOG);
    theirs["importance"] = json!(1.0);
    let theirs = write(theirs).await;
    let mine = write(memory("repo", "forge", "project-conventions", GOFUMPT)).await;
    app.wait_indexed_with(ROOT).await;
    let retrieve =
        async |body: Value, key: &str| send(&app, Method::POST, "/retrieve", Some(body), key).await;

    // The same session id under the root key, for another repo, first.
    let mut elsewhere = brief("s-1", "start");
    elsewhere["repo"] = json!("secret");
    let root = retrieve(elsewhere.clone(), ROOT).await;
    assert_eq!(ids(&root.json), [secret.as_str()], "{}", root.text);

    let start = retrieve(brief("s-1", "start"), LIMITED).await;
    assert_eq!(start.status, StatusCode::OK, "{}", start.text);
    assert_eq!(ids(&start.json), [mine.as_str()], "{}", start.text);
    assert!(!start.text.contains(&secret) && !start.text.contains(&theirs));
    assert!(injection(&start.json).contains(GOFUMPT));
    // Its session is its pair's own: the root's brief counted nothing in it.
    let mut unnamed = brief("s-1", "start-2");
    unnamed.as_object_mut().unwrap().remove("repo");
    let user_only = retrieve(unnamed, LIMITED).await;
    assert_eq!(user_only.status, StatusCode::OK, "{}", user_only.text);
    assert!(ids(&user_only.json).is_empty(), "{}", user_only.text);

    let refused = retrieve(elsewhere, LIMITED).await;
    refused.assert_problem(StatusCode::FORBIDDEN, None);
    assert!(!refused.text.contains(DEPLOYS));
    let mut bea = brief("s-1", "start");
    bea["user"] = json!("bea");
    retrieve(bea, LIMITED)
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);
}
