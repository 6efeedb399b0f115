//! The time a question names: memories observed in the span it names are
//! lifted and say so (`scores.time`, `reason.time_window`), a past span
//! lets the version of then answer for its chain, and a question that
//! names no time ranks exactly as with time ignored.

use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use super::{observed, supersede};
use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id};

over_both_backends!(
    the_incident_of_the_span_named_comes_first_and_says_why,
    a_past_span_lets_the_version_of_then_answer,
);

fn days_ago(days: i64) -> String {
    (Utc::now() - TimeDelta::days(days)).to_rfc3339()
}

async fn ask(app: &TestApp, turn: &str, query: &str) -> Value {
    let answer = app
        .post(
            "/retrieve",
            &json!({"turn_id": turn, "repo": "forge", "query": query, "top_k": 8}),
        )
        .await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    answer.json
}

/// Eight near-identical incident notes, one a week apart each.
async fn incidents(app: &TestApp) -> Vec<String> {
    let mut ids = Vec::new();
    for week in 0..8 {
        let note = observed(
            &format!(
                "The flaky auth tests failed in CI again (incident {}).",
                8 - week
            ),
            &days_ago(7 * week + 1),
        );
        ids.push(id(&app.create(note).await));
    }
    app.wait_indexed().await;
    ids
}

async fn the_incident_of_the_span_named_comes_first_and_says_why(backend: Backend) {
    let app = backend.spawn_app().await;
    let ids = incidents(&app).await;
    let three_weeks_ago = ask(
        &app,
        "t-1",
        "Why did the flaky auth tests fail 3 weeks ago?",
    )
    .await;
    let best = &three_weeks_ago["memories"][0];
    assert_eq!(best["id"], ids[3].as_str(), "{three_weeks_ago:#}");
    assert_eq!(best["scores"]["time"], 1.0, "{best:#}");
    assert_eq!(
        best["reason"]["time_window"]["phrase"], "3 weeks ago",
        "{best:#}"
    );
    let other = &three_weeks_ago["memories"][1];
    assert_eq!(other["scores"]["time"], 0.0, "{other:#}");
    assert!(other["reason"].get("time_window").is_none(), "{other:#}");

    let latest = ask(
        &app,
        "t-2",
        "What was the most recent flaky auth test failure?",
    )
    .await;
    assert_eq!(latest["memories"][0]["id"], ids[0].as_str(), "{latest:#}");
    let first = ask(&app, "t-3", "When did the flaky auth tests first fail?").await;
    assert_eq!(first["memories"][0]["id"], ids[7].as_str(), "{first:#}");
}

async fn a_past_span_lets_the_version_of_then_answer(backend: Backend) {
    let app = backend.spawn_app().await;
    let mysql = app
        .create(observed(
            "The orders service stores its data in MySQL.",
            &days_ago(200),
        ))
        .await;
    let postgres = supersede(
        &app,
        &mysql,
        observed(
            "The orders service stores its data in PostgreSQL.",
            &days_ago(20),
        ),
    )
    .await;
    app.wait_indexed().await;
    let today = ask(&app, "t-1", "Which database does the orders service use?").await;
    assert_eq!(today["memories"][0]["id"], postgres["id"], "{today:#}");
    let then = ask(
        &app,
        "t-2",
        "Which database did the orders service use 4 months ago?",
    )
    .await;
    assert_eq!(then["memories"][0]["id"], mysql["id"], "{then:#}");
}

/// A question that names no time ranks as it would with time ignored:
/// the same memories, the same relevance, no time score.
#[tokio::test]
async fn a_question_without_time_ranks_as_with_time_ignored() {
    let with = Backend::Files.spawn_app().await;
    let without = Backend::Files
        .builder()
        .config(|config| config.retrieval.time_weight = 0.0)
        .spawn()
        .await;
    for app in [&with, &without] {
        incidents(app).await;
    }
    let question = "Why do the flaky auth tests fail in CI?";
    let (a, b) = (
        ask(&with, "t", question).await,
        ask(&without, "t", question).await,
    );
    let ranked = |answer: &Value| -> Vec<(String, f64)> {
        answer["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|memory| {
                let content = memory["content"].as_str().unwrap().to_owned();
                (content, memory["relevance"].as_f64().unwrap())
            })
            .collect()
    };
    let (with_time, without_time) = (ranked(&a), ranked(&b));
    assert_eq!(with_time.len(), without_time.len());
    for ((one, x), (other, y)) in with_time.iter().zip(&without_time) {
        assert_eq!(one, other, "{with_time:?} {without_time:?}");
        // The two stores were written moments apart: their recencies
        // differ in the eighth decimal.
        assert!((x - y).abs() < 1e-6, "{with_time:?} {without_time:?}");
    }
    assert!(
        a["memories"]
            .as_array()
            .unwrap()
            .iter()
            .all(|memory| memory["scores"].get("time").is_none()),
        "{a:#}"
    );
}
