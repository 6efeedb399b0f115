//! Injection per agent session: `POST /retrieve` with `session_id` injects
//! a memory once per session (it is still returned, saying why it is not
//! injected again), only above `inject.min_relevance`, within
//! `inject.prompt_tokens`; a retried turn injects the same again; a
//! retrieval without a session, the MCP `recall` tool's among them, is as
//! it always was. The session's brief (`brief`) and the agents' hooks
//! that send the session (`hooks`) have modules of their own.

pub mod brief;
mod hooks;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, memory};
use crate::mcp::{ROOT, app_post, connect, ok, recall_until_found, refused, service};

over_both_backends!(
    a_session_injects_each_memory_once_and_says_why_not_again,
    without_a_session_every_turn_injects_as_before,
    a_retried_turn_injects_the_same_again_and_counts_once,
    a_cached_answer_is_injected_per_session,
    a_prompt_injects_above_the_floor_within_its_budgets,
    a_young_stores_prompt_injects_what_it_is_about_at_the_default_floor,
);

const TABS: &str = "forge indents Go code with tabs.";
const VENDOR: &str = "forge vendors no Go modules.";

/// An app whose sessions inject whatever is relevant at all (the floor
/// has a test of its own), holding [`TABS`] and [`VENDOR`].
async fn app_with_two(backend: &Backend) -> (TestApp, [String; 2]) {
    let app = backend
        .builder()
        .embedder()
        .config(|config| config.inject.min_relevance = 0.0)
        .spawn()
        .await;
    let ids = two_memories(&app).await;
    (app, ids)
}

async fn two_memories(app: &TestApp) -> [String; 2] {
    let tabs = app
        .create(memory("repo", "forge", "project-conventions", TABS))
        .await;
    let vendor = app
        .create(memory("repo", "forge", "project-conventions", VENDOR))
        .await;
    app.wait_indexed().await;
    [id(&tabs), id(&vendor)]
}

/// A prompt of `session` (none: a plain retrieval) at `turn`.
fn prompt(session: Option<&str>, turn: &str, query: &str) -> Value {
    let mut body = json!({"turn_id": turn, "repo": "forge", "user": "ana", "query": query});
    if let Some(session) = session {
        body["session_id"] = json!(session);
    }
    body
}

/// The returned memory `id` of `answer`.
fn returned<'a>(answer: &'a Value, id: &str) -> &'a Value {
    answer["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|memory| memory["id"] == id)
        .unwrap_or_else(|| panic!("{id} not returned: {answer:#}"))
}

/// Whether each memory of `answer` was injected, and why not.
fn injected(answer: &Value) -> Vec<(bool, Value)> {
    answer["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| (memory["injected"] == true, memory["not_injected"].clone()))
        .collect()
}

fn injection(answer: &Value) -> &str {
    answer["injection"].as_str().unwrap()
}

async fn a_session_injects_each_memory_once_and_says_why_not_again(backend: Backend) {
    let (app, [tabs, vendor]) = app_with_two(&backend).await;

    let first = app
        .retrieve(prompt(Some("s-1"), "t-1", "How does forge indent Go code?"))
        .await;
    assert_eq!(returned(&first, &tabs)["injected"], true, "{first:#}");
    assert!(injection(&first).contains(TABS), "{first:#}");
    assert_eq!(returned(&first, &tabs).get("not_injected"), None);

    let second = app
        .retrieve(prompt(
            Some("s-1"),
            "t-2",
            "Does forge vendor its Go modules?",
        ))
        .await;
    for id in [&tabs, &vendor] {
        let memory = returned(&second, id);
        assert_eq!(memory["injected"], false, "{second:#}");
        assert_eq!(memory["not_injected"], "earlier_in_session", "{second:#}");
    }
    assert_eq!(injection(&second), "", "nothing new to inject");

    // Another session starts with nothing in its context.
    let other = app
        .retrieve(prompt(
            Some("s-2"),
            "t-3",
            "Does forge vendor its Go modules?",
        ))
        .await;
    assert!(injection(&other).contains(VENDOR), "{other:#}");
}

async fn without_a_session_every_turn_injects_as_before(backend: Backend) {
    // Session settings that would inject nothing: a retrieval without a
    // session is not held to them.
    let app = backend
        .builder()
        .embedder()
        .config(|config| {
            config.inject.prompt_tokens = 0;
            config.inject.min_relevance = 1.0;
        })
        .spawn()
        .await;
    two_memories(&app).await;
    let query = "How does forge indent Go code?";

    let first = app.retrieve(prompt(None, "t-1", query)).await;
    let second = app.retrieve(prompt(None, "t-2", query)).await;
    for answer in [&first, &second] {
        assert_eq!(injected(answer), vec![(true, Value::Null); 2], "{answer:#}");
        assert!(injection(answer).contains(TABS) && injection(answer).contains(VENDOR));
    }
    assert_eq!(injection(&first), injection(&second));
    // Its budget is `token_budget`'s, as ever: past it is over budget.
    let mut tight = prompt(None, "t-3", query);
    tight["token_budget"] = json!(5);
    let tight = app.retrieve(tight).await;
    assert_eq!(
        injected(&tight),
        vec![(false, json!("over_budget")); 2],
        "{tight:#}"
    );

    let session = app.retrieve(prompt(Some("s-1"), "t-4", query)).await;
    assert_eq!(
        injected(&session),
        vec![(false, json!("below_min_relevance")); 2],
        "the settings are live for sessions: {session:#}"
    );
}

async fn a_retried_turn_injects_the_same_again_and_counts_once(backend: Backend) {
    let (app, [tabs, _]) = app_with_two(&backend).await;
    let body = prompt(Some("s-1"), "t-1", "How does forge indent Go code?");

    let first = app.retrieve(body.clone()).await;
    assert!(injection(&first).contains(TABS), "{first:#}");
    let retried = app.retrieve(body.clone()).await;
    assert_eq!(retried["cached"], true, "{retried:#}");
    assert_eq!(injection(&retried), injection(&first));
    assert_eq!(injected(&retried), injected(&first));
    let mut uncached = body;
    uncached["use_cache"] = json!(false);
    let fresh = app.retrieve(uncached).await;
    assert_eq!(fresh["cached"], false);
    assert_eq!(injection(&fresh), injection(&first));

    let next = app
        .retrieve(prompt(Some("s-1"), "t-2", "How does forge indent Go code?"))
        .await;
    assert_eq!(
        returned(&next, &tabs)["not_injected"],
        "earlier_in_session",
        "{next:#}"
    );
}

async fn a_cached_answer_is_injected_per_session(backend: Backend) {
    let (app, _) = app_with_two(&backend).await;
    let query = "How does forge indent Go code?";
    // A plain retrieval of the turn fills the cache.
    let plain = app.retrieve(prompt(None, "t-1", query)).await;

    // Two sessions' retrievals of the same turn share its cached answer,
    // and each is given what it has not had.
    let first = app.retrieve(prompt(Some("s-1"), "t-1", query)).await;
    assert_eq!(first["cached"], true, "{first:#}");
    assert_eq!(injection(&first), injection(&plain));
    let next = app.retrieve(prompt(Some("s-1"), "t-2", query)).await;
    assert_eq!(injection(&next), "", "{next:#}");
    let other = app.retrieve(prompt(Some("s-2"), "t-1", query)).await;
    assert_eq!(other["cached"], true);
    assert_eq!(injection(&other), injection(&plain));
}

async fn a_prompt_injects_above_the_floor_within_its_budgets(backend: Backend) {
    let long = "forge's Go style guide, at length: ".to_owned() + &"indent tabs ".repeat(150);
    let app = backend
        .builder()
        .embedder()
        .config(|config| {
            config.inject.prompt_tokens = 150;
            config.inject.min_relevance = 0.0;
        })
        .spawn()
        .await;
    let long = app
        .create(memory("repo", "forge", "project-conventions", &long))
        .await;
    let tabs = app
        .create(memory("repo", "forge", "project-conventions", TABS))
        .await;
    app.wait_indexed().await;
    let query = "How does forge indent Go code with tabs?";

    let answer = app.retrieve(prompt(Some("s-1"), "t-1", query)).await;
    assert_eq!(returned(&answer, &id(&long))["not_injected"], "over_budget");
    assert_eq!(returned(&answer, &id(&tabs))["injected"], true);
    assert!(engram::tokens::count(injection(&answer)) <= 150);
    // The request's own budget caps the session's.
    let mut capped = prompt(Some("s-2"), "t-2", query);
    capped["token_budget"] = json!(5);
    let capped = app.retrieve(capped).await;
    assert_eq!(injected(&capped), vec![(false, json!("over_budget")); 2]);

    // Below the floor: returned, not injected.
    let another = backend.another().await;
    let app = another
        .builder()
        .embedder()
        .config(|config| config.inject.min_relevance = 0.99)
        .spawn()
        .await;
    two_memories(&app).await;
    let answer = app.retrieve(prompt(Some("s-1"), "t-1", query)).await;
    assert_eq!(
        injected(&answer),
        vec![(false, json!("below_min_relevance")); 2],
        "{answer:#}"
    );
    assert_eq!(injection(&answer), "");

    let bad = app
        .post("/retrieve", &prompt(Some("../s-1"), "t-2", query))
        .await;
    bad.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("session_id"));
}

async fn a_young_stores_prompt_injects_what_it_is_about_at_the_default_floor(backend: Backend) {
    // A store of one memory and a prompt that shares one word with it:
    // there is no spread of cosines to judge the vector side by, so its
    // meaning leads the match, as it would beside a second memory.
    let app = backend.builder().embedder().spawn().await;
    let tabs = app
        .create(memory("repo", "forge", "project-conventions", TABS))
        .await;
    app.wait_indexed().await;

    let answer = app
        .retrieve(prompt(
            Some("s-1"),
            "t-1",
            "How should I format the Go files?",
        ))
        .await;
    assert_eq!(
        returned(&answer, &id(&tabs))["injected"],
        true,
        "{answer:#}"
    );
    assert!(injection(&answer).contains(TABS), "{answer:#}");
}

#[tokio::test]
async fn recall_over_mcp_answers_in_full_whatever_a_session_was_given() {
    let app = service().await;
    let client = connect(&app.base_url, ROOT).await;
    ok(
        &client,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "project-conventions",
               "content": TABS}),
    )
    .await;
    let question = "How does forge indent Go code?";
    recall_until_found(&client, question, TABS).await;
    let mut asked = prompt(Some("s-1"), "t-1", question);
    app_post(&app, "/retrieve", ROOT, &asked).await;
    asked["turn_id"] = json!("t-2");
    let (status, again) = app_post(&app, "/retrieve", ROOT, &asked).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        again["memories"][0]["not_injected"], "earlier_in_session",
        "{again:#}"
    );

    // The session has it; a question asked on purpose still gets it.
    let arguments = json!({"query": question, "repo": "forge", "user": "ana"});
    for _ in 0..2 {
        let recalled = ok(&client, "recall", arguments.clone()).await;
        assert_eq!(recalled["memories"][0]["injected"], true, "{recalled:#}");
        assert!(injection(&recalled).contains(TABS), "{recalled:#}");
    }
    let mut with_session = arguments;
    with_session["session_id"] = json!("s-1");
    refused(&client, "recall", with_session).await;
}
