//! `POST /retrieve` in query mode: search by meaning with the embedded
//! model, ranking, namespaces, version chains, filters, injection budget
//! and validation; what an upstream's failure degrades (`degradation`)
//! and the search by exact words (`lexical`) in modules of their own.

mod approximate;
mod conversation;
mod degradation;
mod feedback;
mod floor;
mod lexical;
mod passages;

use axum::http::StatusCode;
use engram::tokens::count as count_tokens;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{id, ids, memory, seed_forge_and_ana, spawn_app};

over_both_backends!(
    finds_memories_by_meaning_and_explains_each,
    never_returns_another_namespace,
    a_superseded_memory_is_never_current_its_head_stands_in,
    filters_exclusions_top_k_and_min_relevance_narrow_the_result,
    weights_from_the_request_change_the_order,
);

async fn finds_memories_by_meaning_and_explains_each(backend: Backend) {
    let app = backend.spawn_app().await;
    let postgres = seed_forge_and_ana(&app).await;

    let result = app
        .retrieve(json!({"turn_id": "t1", "repo": "forge", "user": "ana",
            "query": "which relational database do we use?"}))
        .await;
    assert_eq!(ids(&result)[0], id(&postgres), "{result:#}");
    assert_eq!(result["mode"], "query");
    assert_eq!(result["degraded"], Value::Null);
    assert_eq!(result["cached"], false);
    assert_eq!(result["query"], "which relational database do we use?");
    let first = &result["memories"][0];
    assert_eq!(
        first["reason"],
        json!({"kind": "query", "found_by": "vector"})
    );
    assert_eq!(first["injected"], true);
    assert_eq!(first["repo"], "forge");
    for factor in ["similarity", "recency", "importance", "access"] {
        let score = first["scores"][factor].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score), "{factor} = {score}");
    }
    let relevances: Vec<f64> = result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["relevance"].as_f64().unwrap())
        .collect();
    assert!(
        relevances.windows(2).all(|w| w[0] >= w[1]),
        "{relevances:?}"
    );
    let injection = result["injection"].as_str().unwrap();
    assert!(injection.starts_with("## Relevant Long-Term Memories"));
    assert!(injection.contains("> We store everything in PostgreSQL 16."));
    assert!(result["timings_ms"]["total"].as_f64().unwrap() >= 0.0);
}

async fn never_returns_another_namespace(backend: Backend) {
    let app = backend.spawn_app().await;
    let mine = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Errors are wrapped with context.",
        ))
        .await;
    app.create(memory(
        "repo",
        "other",
        "patterns",
        "Errors are wrapped with context.",
    ))
    .await;
    app.create(memory(
        "user",
        "bob",
        "patterns",
        "Errors are wrapped with context.",
    ))
    .await;
    app.wait_indexed().await;
    let result = app
        .retrieve(json!({"turn_id": "t1", "repo": "forge", "user": "ana", "query": "error wrapping", "top_k": 10}))
        .await;
    assert_eq!(ids(&result), [id(&mine)]);
}

async fn a_superseded_memory_is_never_current_its_head_stands_in(backend: Backend) {
    let app = backend.spawn_app().await;
    let old = app
        .create(memory(
            "repo",
            "forge",
            "project-conventions",
            "Indent Python with two spaces.",
        ))
        .await;
    let mut newer = memory(
        "repo",
        "forge",
        "project-conventions",
        "Format Python with black's defaults.",
    );
    newer["supersedes"] = old["id"].clone();
    let head = app.create(newer).await;
    app.wait_indexed().await;

    let result = app
        .retrieve(json!({"turn_id": "t2", "repo": "forge", "query": "how many spaces to indent python", "top_k": 10}))
        .await;
    assert_eq!(ids(&result), [id(&head)], "{result:#}");
    let only = &result["memories"][0];
    assert_eq!(only["version"], 2);
    assert_eq!(only["supersedes"], old["id"]);
    assert_eq!(
        only["reason"],
        json!({"kind": "query", "found_by": "both", "matched_version": old["id"]})
    );
    assert!(
        result["injection"]
            .as_str()
            .unwrap()
            .contains("(supersedes ")
    );
}

async fn filters_exclusions_top_k_and_min_relevance_narrow_the_result(backend: Backend) {
    let app = backend.spawn_app().await;
    let a = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Retries use exponential backoff with jitter.",
        ))
        .await;
    let b = app
        .create(memory(
            "repo",
            "forge",
            "corrections",
            "Retries must stop after five attempts.",
        ))
        .await;
    let c = app
        .create(memory(
            "user",
            "ana",
            "coding-preferences",
            "Ana wants retry loops to log each attempt.",
        ))
        .await;
    app.wait_indexed().await;
    let base = json!({"turn_id": "t3", "repo": "forge", "user": "ana", "query": "retry policy", "top_k": 10, "use_cache": false});

    let everything = app.retrieve(base.clone()).await;
    assert_eq!(ids(&everything).len(), 3);

    let mut by_category = base.clone();
    by_category["filters"] = json!({"categories": ["patterns", "corrections"]});
    let mut found = ids(&app.retrieve(by_category).await);
    found.sort();
    let mut expected = vec![id(&a), id(&b)];
    expected.sort();
    assert_eq!(found, expected);

    let mut by_scope = base.clone();
    by_scope["filters"] = json!({"scope": "user"});
    assert_eq!(ids(&app.retrieve(by_scope).await), [id(&c)]);

    let mut excluding = base.clone();
    excluding["exclude_ids"] = json!([a["id"], c["id"]]);
    assert_eq!(ids(&app.retrieve(excluding).await), [id(&b)]);

    let mut one = base.clone();
    one["top_k"] = json!(1);
    assert_eq!(ids(&app.retrieve(one).await), ids(&everything)[..1]);

    let mut strict = base.clone();
    strict["min_relevance"] = json!(1.0);
    assert!(ids(&app.retrieve(strict).await).is_empty());
}

async fn weights_from_the_request_change_the_order(backend: Backend) {
    let app = backend.spawn_app().await;
    let close = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Use structured logging with tracing spans.",
        ))
        .await;
    let mut important = memory(
        "repo",
        "forge",
        "patterns",
        "Structured release notes follow the checklist in RELEASING.md.",
    );
    important["importance"] = json!(1.0);
    let important = app.create(important).await;
    app.wait_indexed().await;
    let query = json!({"turn_id": "t4", "repo": "forge", "query": "structured logging with tracing", "top_k": 2, "use_cache": false});
    assert_eq!(ids(&app.retrieve(query.clone()).await)[0], id(&close));
    let mut by_importance = query;
    by_importance["weights"] =
        json!({"similarity": 0.01, "recency": 0.0, "importance": 1.0, "access": 0.0});
    assert_eq!(ids(&app.retrieve(by_importance).await)[0], id(&important));
}

#[tokio::test]
async fn messages_search_for_the_latest_user_message_without_tool_output() {
    let app = spawn_app().await;
    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "Migrations run with sqlx migrate.",
    ))
    .await;
    app.wait_indexed().await;
    let result = app
        .retrieve(json!({"turn_id": "t5", "repo": "forge", "messages": [
            {"role": "user", "content": "Hello there."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "1", "content": "SECRET TOOL OUTPUT"},
            {"role": "user", "content": [{"type": "text", "text": "How do I run the database migrations?"}]},
        ]}))
        .await;
    assert_eq!(result["query"], "How do I run the database migrations?");
    assert_eq!(result["memories"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_injection_never_exceeds_the_token_budget() {
    let app = spawn_app().await;
    for i in 0..6 {
        app.create(memory(
            "repo",
            "forge",
            "patterns",
            &format!(
                "Service {i} exposes health checks on /healthz and readiness on /readyz. {}",
                "detail ".repeat(20 * i)
            ),
        ))
        .await;
    }
    app.wait_indexed().await;
    for budget in [60, 120, 250, 1000] {
        let result = app
            .retrieve(json!({"turn_id": format!("t6-{budget}"), "repo": "forge", "query": "health checks", "top_k": 6, "token_budget": budget}))
            .await;
        let injection = result["injection"].as_str().unwrap();
        assert!(count_tokens(injection) <= budget, "{budget}: {injection}");
        let injected = result["memories"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["injected"] == true)
            .count();
        assert_eq!(injected == 0, injection.is_empty(), "{budget}");
    }
}

#[tokio::test]
async fn invalid_requests_name_the_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({"query": "x"}), "turn_id"),
        (json!({"turn_id": "", "query": "x"}), "turn_id"),
        (json!({"turn_id": "t", "query": "   "}), "query"),
        (
            json!({"turn_id": "t", "query": "x".repeat(10_001)}),
            "query",
        ),
        (
            json!({"turn_id": "t", "messages": [{"role": "assistant", "content": "hi"}]}),
            "messages",
        ),
        (
            json!({"turn_id": "t", "messages": [{"role": "user", "content": "hi", "mood": 1}]}),
            "messages[0].mood",
        ),
        (json!({"turn_id": "t", "query": "x", "top_k": 0}), "top_k"),
        (
            json!({"turn_id": "t", "query": "x", "top_k": 1001}),
            "top_k",
        ),
        (
            json!({"turn_id": "t", "query": "x", "token_budget": 0}),
            "token_budget",
        ),
        (
            json!({"turn_id": "t", "query": "x", "min_relevance": 1.5}),
            "min_relevance",
        ),
        (
            json!({"turn_id": "t", "query": "x", "weights": {"recency": 2.0}}),
            "weights.recency",
        ),
        (
            json!({"turn_id": "t", "query": "x", "weights": {"similarity": 0, "recency": 0, "importance": 0, "access": 0}}),
            "weights.similarity",
        ),
        (
            json!({"turn_id": "t", "query": "x", "weights": {"speed": 1}}),
            "weights.speed",
        ),
        (
            json!({"turn_id": "t", "query": "x", "filters": {"categories": []}}),
            "filters.categories",
        ),
        (
            json!({"turn_id": "t", "query": "x", "filters": {"categories": ["gossip"]}}),
            "filters.categories[0]",
        ),
        (
            json!({"turn_id": "t", "query": "x", "exclude_ids": ["not-a-uuid"]}),
            "exclude_ids[0]",
        ),
        (
            json!({"turn_id": "t", "query": "x", "repo": "../etc"}),
            "repo",
        ),
        (
            json!({"turn_id": "t", "query": "x", "hop_count": 1}),
            "hop_count",
        ),
    ];
    for (body, field) in cases {
        app.post("/retrieve", &body)
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
    }
}
