//! `observed_at`: sent with a write or a turn, shown, kept in the file and
//! the row, never carried to a new version, refused by name when out of
//! bounds.

use axum::http::StatusCode;
use chrono::SubsecRound;
use serde_json::json;

use super::{observed, supersede};
use crate::backends::{Backend, over_both_backends};
use crate::capture::{app_over, turn};
use crate::helpers::{id, memory, settled};
use crate::upstream::Behaviour;

over_both_backends!(
    observed_at_is_written_shown_kept_and_not_carried_to_a_new_version,
    a_turn_s_time_is_when_its_memories_were_observed,
);

async fn observed_at_is_written_shown_kept_and_not_carried_to_a_new_version(backend: Backend) {
    let app = backend.spawn_app().await;
    let created = app
        .create(observed(
            "We chose MySQL for the orders service.",
            "2026-03-12T09:30:15.750+01:00",
        ))
        .await;
    assert_eq!(
        created["observed_at"], "2026-03-12T08:30:15Z",
        "kept in UTC, to the second"
    );
    let first = id(&created);
    let read = app.get(&format!("/memories/{first}")).await.json;
    assert_eq!(read["observed_at"], "2026-03-12T08:30:15Z", "{read}");
    if let Backend::Files = backend {
        let text =
            std::fs::read_to_string(app.data_dir.join(format!("repos/forge/{first}.md"))).unwrap();
        assert!(
            text.contains("trigger: manual\nobserved_at: 2026-03-12T08:30:15Z\n---\n"),
            "{text}"
        );
    }

    let next = supersede(
        &app,
        &created,
        memory(
            "repo",
            "forge",
            "architectural-decisions",
            "We moved the orders service to PostgreSQL.",
        ),
    )
    .await;
    assert!(
        next.get("observed_at").is_none(),
        "a new version is a new observation: {next}"
    );
    let plain = app
        .create(memory("repo", "forge", "patterns", "Errors carry context."))
        .await;
    assert!(plain.get("observed_at").is_none(), "{plain}");
}

async fn a_turn_s_time_is_when_its_memories_were_observed(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "forge deploys on Thursdays.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let mut body = turn("s1", "forge", "We deploy on Thursdays.");
    body["observed_at"] = json!("2026-02-05T16:00:00Z");
    app.accept("/turns", &body).await;
    settled(&app, 1).await;
    let listed = app.get("/memories?repo=forge").await.json;
    let captured = &listed["memories"][0];
    assert_eq!(
        captured["content"], "forge deploys on Thursdays.",
        "{listed}"
    );
    assert_eq!(
        captured["observed_at"], "2026-02-05T16:00:00Z",
        "{captured}"
    );
}

#[tokio::test]
async fn an_observed_at_out_of_bounds_is_refused_by_name_and_queues_nothing() {
    let app = app_over(&Backend::Files, |_| {}).await;
    let next_year = (chrono::Utc::now() + chrono::TimeDelta::days(365)).to_rfc3339();
    for value in [
        json!("1969-12-31T23:59:59Z"),
        json!(next_year),
        json!("last week"),
    ] {
        let mut body = observed("We chose MySQL.", "2026-01-01T00:00:00Z");
        body["observed_at"] = value.clone();
        app.post("/memories", &body)
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("observed_at"));
    }
    for value in [json!("1969-12-31T23:59:59Z"), json!("last week")] {
        let mut body = turn("s1", "forge", "We chose MySQL.");
        body["observed_at"] = value;
        app.post("/turns", &body)
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("observed_at"));
    }
    let listed = app.get("/memories?repo=forge").await.json;
    assert_eq!(listed["memories"], json!([]), "{listed}");
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["accepted"], 0, "{stats}");
}

/// A client whose clock runs ahead loses no turn: what it says happened
/// later than the server's now happened now.
#[tokio::test]
async fn a_turn_from_a_clock_running_ahead_is_taken_as_said_now() {
    let app = app_over(&Backend::Files, |_| {}).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "forge deploys on Fridays.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let before = chrono::Utc::now().trunc_subsecs(0);
    let mut body = turn("s1", "forge", "We deploy on Fridays.");
    body["observed_at"] = json!((before + chrono::TimeDelta::hours(3)).to_rfc3339());
    app.accept("/turns", &body).await;
    settled(&app, 1).await;
    let listed = app.get("/memories?repo=forge").await.json;
    let observed: chrono::DateTime<chrono::Utc> = listed["memories"][0]["observed_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        observed >= before && observed <= chrono::Utc::now(),
        "{listed}"
    );
}
