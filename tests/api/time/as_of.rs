//! `POST /retrieve` with `as_of`: the answer as it would have been then.
//! What was observed after it is left out, each version chain answers
//! with the version that stood then (found by what it said then, not by
//! what a later version says), recency is measured from it, and a
//! malformed or future moment is refused by name.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{observed, supersede};
use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, ids};

over_both_backends!(
    as_of_answers_with_the_versions_that_stood_then,
    as_of_ranks_without_a_query_too,
);

/// The orders service's database: MySQL from January, PostgreSQL from
/// June; its deploy day, said in August; and its cache, said today.
async fn a_history(app: &TestApp) -> [String; 4] {
    let mysql = app
        .create(observed(
            "The orders service stores its data in MySQL.",
            "2026-01-10T12:00:00Z",
        ))
        .await;
    let postgres = supersede(
        app,
        &mysql,
        observed(
            "The orders service stores its data in PostgreSQL.",
            "2026-06-01T12:00:00Z",
        ),
    )
    .await;
    let deploys = app
        .create(observed(
            "The orders service deploys on Thursdays.",
            "2026-08-01T12:00:00Z",
        ))
        .await;
    let cache = app
        .create(crate::helpers::memory(
            "repo",
            "forge",
            "architectural-decisions",
            "The orders service caches its data in Redis.",
        ))
        .await;
    app.wait_indexed().await;
    [id(&mysql), id(&postgres), id(&deploys), id(&cache)]
}

async fn retrieve(app: &TestApp, turn: &str, as_of: Option<&str>, query: Option<&str>) -> Value {
    let mut body = json!({"turn_id": turn, "repo": "forge", "min_relevance": 0.0});
    if let Some(query) = query {
        body["query"] = query.into();
    }
    if let Some(as_of) = as_of {
        body["as_of"] = as_of.into();
    }
    let answer = app.post("/retrieve", &body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.json
}

async fn as_of_answers_with_the_versions_that_stood_then(backend: Backend) {
    let app = backend.spawn_app().await;
    let [mysql, postgres, deploys, cache] = a_history(&app).await;
    let question = Some("Which database does the orders service store its data in?");

    let today = retrieve(&app, "t-1", None, question).await;
    let found = ids(&today);
    assert!(
        found.contains(&postgres) && !found.contains(&mysql),
        "{today:#}"
    );
    assert!(
        found.contains(&deploys) && found.contains(&cache),
        "{today:#}"
    );

    // The same turn as of March: the cached answer of today is not reused.
    let march = retrieve(&app, "t-1", Some("2026-03-01T12:00:00Z"), question).await;
    assert_eq!(ids(&march), [mysql.as_str()], "{march:#}");
    let recency = march["memories"][0]["scores"]["recency"].as_f64().unwrap();
    let expected = 1.0 - 50.0 / 365.0;
    assert!(
        (recency - expected).abs() < 1e-3,
        "recency counts the 50 days from January 10 to March 1: {recency}"
    );

    let july = retrieve(&app, "t-2", Some("2026-07-01T00:00:00+02:00"), question).await;
    assert_eq!(ids(&july), [postgres.as_str()], "{july:#}");

    // Found by what MySQL's version said, not by what came later.
    let by_later_words = retrieve(
        &app,
        "t-3",
        Some("2026-03-01T12:00:00Z"),
        Some("PostgreSQL"),
    )
    .await;
    assert!(
        !ids(&by_later_words).contains(&postgres),
        "{by_later_words:#}"
    );

    let before_everything = retrieve(&app, "t-4", Some("2025-12-31T00:00:00Z"), question).await;
    assert_eq!(
        before_everything["memories"],
        json!([]),
        "{before_everything:#}"
    );
}

async fn as_of_ranks_without_a_query_too(backend: Backend) {
    let app = backend.spawn_app().await;
    let [mysql, postgres, deploys, _] = a_history(&app).await;
    let august = retrieve(&app, "t-1", Some("2026-09-01T00:00:00Z"), None).await;
    let mut found = ids(&august);
    found.sort();
    let mut expected = vec![postgres, deploys];
    expected.sort();
    assert_eq!(found, expected, "{august:#}");
    let march = retrieve(&app, "t-2", Some("2026-03-01T00:00:00Z"), None).await;
    assert_eq!(ids(&march), [mysql], "{march:#}");
}

#[tokio::test]
async fn a_malformed_or_future_as_of_is_refused_by_name() {
    let app = crate::helpers::spawn_app().await;
    let next_year = (chrono::Utc::now() + chrono::TimeDelta::days(365)).to_rfc3339();
    for as_of in [
        json!("March 2026"),
        json!("2026-13-01T00:00:00Z"),
        json!(7),
        json!(next_year),
    ] {
        app.post(
            "/retrieve",
            &json!({"turn_id": "t", "repo": "forge", "query": "x", "as_of": as_of}),
        )
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("as_of"));
    }
}

/// The MCP tools speak time as the API does: `remember` takes
/// `observed_at` and `recall` answers `as_of` a moment.
#[tokio::test]
async fn the_mcp_tools_take_observed_at_and_as_of() {
    let app = crate::mcp::service().await;
    let client = crate::mcp::connect(&app.base_url, crate::mcp::ROOT).await;
    let remembered = crate::mcp::ok(
        &client,
        "remember",
        json!({"scope": "repo", "repo": "forge", "category": "architectural-decisions",
               "content": "The orders service stores its data in MySQL.",
               "observed_at": "2026-01-10T12:00:00Z"}),
    )
    .await;
    assert_eq!(
        remembered["observed_at"], "2026-01-10T12:00:00Z",
        "{remembered}"
    );
    crate::mcp::recall_until_found(
        &client,
        "orders service database",
        "The orders service stores its data in MySQL.",
    )
    .await;
    let before = crate::mcp::ok(
        &client,
        "recall",
        json!({"repo": "forge", "query": "orders service database",
               "as_of": "2026-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(before["memories"], json!([]), "{before}");
}
