//! The secret guard at the service's edges: no fixture secret reaches an
//! upstream (classifier, HyDE, expansion, suggestions, query embeddings),
//! and every stored field is checked on every write path.

use axum::http::StatusCode;
use serde_json::json;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, memory, settled};
use crate::upstream::{Behaviour, Upstream};

over_both_backends!(
    a_memory_whose_session_id_looks_like_a_secret_is_refused_naming_the_field,
    a_secret_in_content_is_refused_naming_content,
    a_trigger_whose_session_id_looks_like_a_secret_is_refused,
    a_new_version_holding_a_secret_is_refused,
);

const SECRETS: &str = include_str!("../fixtures/secrets/secrets.txt");

/// The fixture's texts (markers out) and every value it marks as secret.
fn fixture() -> (Vec<String>, Vec<String>) {
    let mut texts = Vec::new();
    let mut values = Vec::new();
    for line in SECRETS
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
    {
        texts.push(line.replace(['«', '»'], ""));
        values.extend(
            line.split('«')
                .skip(1)
                .filter_map(|rest| rest.split_once('»'))
                .map(|(value, _)| value.to_owned()),
        );
    }
    (texts, values)
}

/// Everything the fake upstream received: every chat message and every
/// text sent for embedding.
fn received(upstream: &Upstream) -> String {
    let mut all = serde_json::to_string(&upstream.chat_requests()).unwrap();
    for text in upstream.embedded_texts() {
        all.push('\n');
        all.push_str(&text);
    }
    all
}

/// `serde_json` escapes some characters of a value (`"`, `\`); the values
/// are compared as the upstream's JSON would hold them and as plain text.
fn leaked<'v>(received: &str, values: &'v [String]) -> Vec<&'v str> {
    values
        .iter()
        .filter(|value| {
            let escaped = serde_json::to_string(value).unwrap();
            received.contains(value.as_str()) || received.contains(escaped.trim_matches('"'))
        })
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn no_fixture_secret_reaches_an_upstream() {
    let app = TestApp::builder().embedder().llm().spawn().await;
    let upstream = &app.upstream;
    let (texts, values) = fixture();
    let window = texts.join("\n");

    // Capture: the window goes to the classifier.
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept(
        "/turns",
        &json!({"session_id": "s1", "repo": "forge", "user": "ana", "messages": [
            {"role": "user", "content": window},
            {"role": "assistant", "content": "Noted."},
        ]}),
    )
    .await;
    settled(&app, 1).await;
    let classifier_prompt = received(upstream);
    assert!(
        classifier_prompt.contains("[secret: aws-access-key-id]"),
        "the classifier saw the window, redacted: {classifier_prompt}"
    );

    // Retrieval: HyDE over the window, then its hypotheses embedded.
    upstream.set_chat(Behaviour::Answer, "Deploys use helm.\nReleases are tagged.");
    let hyde = app
        .retrieve(json!({"turn_id": "t-1", "repo": "forge", "user": "ana",
            "messages": [{"role": "user", "content": window}]}))
        .await;
    assert_eq!(hyde["mode"], "hyde", "{hyde:#}");
    // Expansion by the model, and the query embedded, one secret line at a time
    // (a query is at most 10,000 characters).
    upstream.set_chat(Behaviour::Answer, "helm\nrelease");
    for (at, text) in texts.iter().enumerate() {
        app.retrieve(
            json!({"turn_id": format!("q-{at}"), "repo": "forge", "user": "ana",
            "query": text, "expand_query": true}),
        )
        .await;
    }
    // Suggestions: the HyDE hypotheses of the window.
    upstream.set_chat(Behaviour::Answer, "- Deploys use helm.");
    let suggestions = app
        .post(
            "/suggestions",
            &json!({"messages": [{"role": "user", "content": window}]}),
        )
        .await;
    assert_eq!(suggestions.status, StatusCode::OK, "{}", suggestions.text);

    let received = received(upstream);
    assert!(
        upstream.chat_requests().len() >= texts.len() + 3,
        "every path called the model"
    );
    assert!(
        upstream.embedded_texts().len() >= texts.len(),
        "every query was embedded"
    );
    let leaked = leaked(&received, &values);
    assert!(leaked.is_empty(), "reached the upstream: {leaked:#?}");
}

async fn a_memory_whose_session_id_looks_like_a_secret_is_refused_naming_the_field(
    backend: Backend,
) {
    let app = backend.spawn_app().await;
    let mut body = memory("repo", "forge", "patterns", "Deploys use helm.");
    body["session_id"] = json!("AKIAIOSFODNN7EXAMPLE");
    let before = backend.stored(&app.data_dir).await;
    let response = app.post("/memories", &body).await;
    response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("session_id"));
    assert_eq!(response.json["type"], "urn:engram:problem:secret-content");
    assert!(
        !response.text.contains("AKIAIOSFODNN7EXAMPLE"),
        "{}",
        response.text
    );
    assert_eq!(backend.stored(&app.data_dir).await, before);
}

async fn a_secret_in_content_is_refused_naming_content(backend: Backend) {
    let app = backend.spawn_app().await;
    let before = backend.stored(&app.data_dir).await;
    for content in ["Passwort: Geheim123!", "user / password: admin / hunter22"] {
        let response = app
            .post("/memories", &memory("repo", "forge", "patterns", content))
            .await;
        response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("content"));
        assert_eq!(response.json["type"], "urn:engram:problem:secret-content");
    }
    assert_eq!(backend.stored(&app.data_dir).await, before);
}

/// A GitHub token's shape, as a session id (ids allow it).
const SECRET_SESSION: &str = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5";

async fn a_trigger_whose_session_id_looks_like_a_secret_is_refused(backend: Backend) {
    let app = backend.builder().embedder().llm().spawn().await;
    for path in ["/turns", "/compactions"] {
        let response = app
            .post(
                path,
                &json!({"session_id": SECRET_SESSION, "repo": "forge",
                    "messages": [{"role": "user", "content": "Deploys use helm."}]}),
            )
            .await;
        response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("session_id"));
    }
    // Refused before the trigger is written: the queue never holds it.
    let holding = backend.holding(&app.data_dir, SECRET_SESSION).await;
    assert!(holding.is_empty(), "{holding:?}");
}

/// The browser edits through `POST /memories` with `supersedes`: a new
/// version is checked like a first one.
async fn a_new_version_holding_a_secret_is_refused(backend: Backend) {
    let app = backend.spawn_app().await;
    let first = app
        .create(memory("repo", "forge", "patterns", "Deploys use helm."))
        .await;
    let mut edit = memory(
        "repo",
        "forge",
        "patterns",
        "Deploys use helm; mot de passe : Soleil2024!",
    );
    edit["supersedes"] = first["id"].clone();
    let before = backend.stored(&app.data_dir).await;
    app.post("/memories", &edit)
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("content"));
    assert_eq!(backend.stored(&app.data_dir).await, before);
}
