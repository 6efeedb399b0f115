//! `/triggers`: the queue, the latest passes and what they wrote, the
//! failed triggers with their errors, and the retry that queues one again;
//! a limited key sees and retries only its pairs' triggers. The queue's
//! tests run over both backends (`queue/`, and PostgreSQL's shared queue).

use std::time::Duration;

use axum::http::{Method, StatusCode};
use engram::config::ApiKey;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::{grant, send};
use crate::helpers::{TestApp, spawn_app, wait_until_async};
use crate::upstream::Behaviour;

const ROOT: &str = "root-key";
const LIMITED: &str = "forge-ana-key";

async fn app_on(backend: &Backend) -> TestApp {
    backend
        .builder()
        .embedder()
        .llm()
        .config(|config| {
            config.capture.max_attempts = 1;
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["forge"], &["ana"])];
        })
        .spawn()
        .await
}

fn turn(session: &str, repo: &str, text: &str) -> Value {
    json!({"session_id": session, "repo": repo, "user": "ana",
        "messages": [{"role": "user", "content": text}]})
}

async fn accept(app: &TestApp, body: &Value) -> String {
    let response = send(app, Method::POST, "/turns", Some(body.clone()), ROOT).await;
    assert_eq!(response.status, StatusCode::ACCEPTED, "{}", response.text);
    response.json["trigger_id"].as_str().unwrap().to_owned()
}

async fn triggers(app: &TestApp, key: &str) -> Value {
    let response = send(app, Method::GET, "/triggers", None, key).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response.json
}

/// Waits until `/triggers` (as root) shows `done` finished passes and an
/// empty queue.
async fn passes(app: &TestApp, done: usize) -> Value {
    let mut listed = Value::Null;
    wait_until_async("the capture passes", async || {
        listed = triggers(app, ROOT).await;
        listed["recent"].as_array().unwrap().len() >= done
            && listed["queued"].as_array().unwrap().is_empty()
    })
    .await;
    listed
}

over_both_backends!(
    a_failed_trigger_shows_its_error_and_a_retry_writes_its_memories,
    the_queue_shows_what_is_in_flight_and_what_waits,
    a_limited_key_sees_and_retries_only_its_pairs_triggers,
);

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|trigger| trigger["id"].as_str().unwrap())
        .collect()
}

async fn a_failed_trigger_shows_its_error_and_a_retry_writes_its_memories(backend: Backend) {
    let app = app_on(&backend).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Fail(503), "");
    let id = accept(&app, &turn("s1", "forge", "We deploy with Helm.")).await;
    let listed = passes(&app, 1).await;
    assert_eq!(listed["enabled"], true);
    assert_eq!(listed["mode"], "classifier");
    assert_eq!(ids(&listed["failed"]), [id.as_str()], "{listed:#}");
    let failed = &listed["failed"][0];
    assert!(
        failed["last_error"].as_str().unwrap().contains("503"),
        "{failed}"
    );
    assert_eq!(
        (
            &failed["kind"],
            &failed["repo"],
            &failed["user"],
            &failed["attempts"]
        ),
        (&json!("turn"), &json!("forge"), &json!("ana"), &json!(1))
    );
    assert_eq!(failed["preview"], "We deploy with Helm.");
    let pass = &listed["recent"][0];
    assert_eq!(
        (&pass["result"], &pass["attempts"]),
        (&json!("failed"), &json!(1))
    );
    assert!(pass["error"].as_str().unwrap().contains("503"), "{pass}");
    assert_eq!(listed["failed_more"], false);

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Deploys go through Helm.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let path = format!("/triggers/{id}/retry");
    let retried = send(&app, Method::POST, &path, None, ROOT).await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.text);
    assert_eq!(retried.json, json!({"trigger_id": id, "status": "queued"}));
    let listed = passes(&app, 2).await;
    assert!(
        listed["failed"].as_array().unwrap().is_empty(),
        "{listed:#}"
    );
    let pass = &listed["recent"][0];
    assert_eq!(
        (&pass["id"], &pass["result"]),
        (&json!(id), &json!("processed"))
    );
    let written = pass["written"].as_array().unwrap();
    assert_eq!(written.len(), 1, "{pass}");
    let memory = send(
        &app,
        Method::GET,
        &format!("/memories/{}", written[0].as_str().unwrap()),
        None,
        ROOT,
    )
    .await;
    assert_eq!(memory.json["content"], "Deploys go through Helm.");
    if let Backend::Files = backend {
        assert!(
            std::fs::read_dir(app.data_dir.join("queue/failed"))
                .unwrap()
                .next()
                .is_none(),
            "the failed copy is gone"
        );
    }

    let again = send(&app, Method::POST, &path, None, ROOT).await;
    again.assert_problem(StatusCode::NOT_FOUND, None);
}

async fn the_queue_shows_what_is_in_flight_and_what_waits(backend: Backend) {
    let app = app_on(&backend).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Delay(Duration::from_millis(500)), "[]");
    let first = accept(&app, &turn("s1", "forge", "first")).await;
    let second = accept(&app, &turn("s2", "forge", "second")).await;
    let mut listed = Value::Null;
    wait_until_async("the first trigger in flight", async || {
        listed = triggers(&app, ROOT).await;
        listed["queued"][0]["state"] == "in_flight"
    })
    .await;
    assert_eq!(ids(&listed["queued"]), [first.as_str(), second.as_str()]);
    assert_eq!(listed["queued"][1]["state"], "waiting", "its pair is busy");
    let listed = passes(&app, 2).await;
    assert_eq!(ids(&listed["recent"]), [second.as_str(), first.as_str()]);
    assert_eq!(listed["recent"][0]["written"], json!([]));
}

async fn a_limited_key_sees_and_retries_only_its_pairs_triggers(backend: Backend) {
    let app = app_on(&backend).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Fail(503), "");
    let mine = accept(&app, &turn("s1", "forge", "mine")).await;
    let theirs = accept(&app, &turn("s2", "secret", "theirs")).await;
    let all = passes(&app, 2).await;
    assert_eq!(all["failed"].as_array().unwrap().len(), 2);

    let limited = triggers(&app, LIMITED).await;
    assert_eq!(ids(&limited["failed"]), [mine.as_str()]);
    assert_eq!(ids(&limited["recent"]), [mine.as_str()]);
    let retry = |id: &str| format!("/triggers/{id}/retry");
    send(&app, Method::POST, &retry(&theirs), None, LIMITED)
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    upstream.set_chat(Behaviour::Answer, "[]");
    let retried = send(&app, Method::POST, &retry(&mine), None, LIMITED).await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.text);
    let all = passes(&app, 3).await;
    assert_eq!(
        ids(&all["failed"]),
        [theirs.as_str()],
        "theirs stays failed"
    );
    send(&app, Method::GET, "/triggers", None, "wrong")
        .await
        .assert_problem(StatusCode::UNAUTHORIZED, None);
}

#[tokio::test]
async fn trigger_requests_are_checked() {
    let app = spawn_app().await;
    app.get("/triggers?limit=0")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("limit"));
    app.get("/triggers?limit=201")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("limit"));
    app.get("/triggers?state=failed")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("state"));
    let mut listed = app.get("/triggers").await;
    assert_eq!(listed.status, StatusCode::OK);
    let summary = listed.json["mode_summary"].take();
    assert_eq!(
        listed.json,
        json!({"enabled": false, "mode": "agent", "mode_summary": null,
               "queued": [], "recent": [], "failed": [], "failed_more": false})
    );
    assert_described_as_agent_driven(summary.as_str().unwrap());
    app.post("/triggers/not-a-uuid/retry", &json!({}))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("id"));
    app.request(
        Method::POST,
        "/triggers/0193f0c2-0000-7000-8000-000000000001/retry",
        None,
    )
    .await
    .assert_problem(StatusCode::CONFLICT, None);
}

#[tokio::test]
async fn an_unknown_failed_trigger_is_not_found() {
    let app = app_on(&Backend::Files).await;
    let _upstream = &app.upstream;
    send(
        &app,
        Method::POST,
        "/triggers/0193f0c2-0000-7000-8000-000000000001/retry",
        None,
        ROOT,
    )
    .await
    .assert_problem(StatusCode::NOT_FOUND, None);
}

/// What agent-driven capture is said to be: the agent's writes capture,
/// turns and compactions are not classified.
fn assert_described_as_agent_driven(text: &str) {
    for said in [
        "remember tool",
        "remember: prompts",
        "POST /memories",
        "not classified",
    ] {
        assert!(text.contains(said), "{said:?} missing from {text}");
    }
}

#[tokio::test]
async fn with_no_llm_capture_is_agent_driven_and_turns_are_refused_saying_so() {
    let app = spawn_app().await;
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["mode"], "agent", "{stats:#}");
    assert_eq!(stats["capture"]["enabled"], false);
    for path in ["/turns", "/compactions"] {
        let refused = app
            .post(path, &turn("s1", "forge", "We deploy with Helm."))
            .await;
        refused.assert_problem(StatusCode::CONFLICT, None);
        assert_eq!(refused.json["type"], "urn:engram:problem:capture-disabled");
        let detail = refused.json["detail"].as_str().unwrap();
        assert!(detail.contains("agent-driven"), "{detail}");
        assert!(detail.contains("`remember`"), "{detail}");
    }
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["accepted"], 0, "nothing was queued");
}

#[tokio::test]
async fn with_an_llm_capture_is_by_the_classifier() {
    let app = app_on(&Backend::Files).await;
    let _upstream = &app.upstream;
    let stats = send(&app, Method::GET, "/stats", None, ROOT).await.json;
    assert_eq!(stats["capture"]["mode"], "classifier", "{stats:#}");
    let listed = send(&app, Method::GET, "/triggers", None, ROOT).await.json;
    assert_eq!(listed["mode"], "classifier");
    let summary = listed["mode_summary"].as_str().unwrap();
    assert!(
        summary.contains("classifier model reads every turn"),
        "{summary}"
    );
}
