//! `POST /retrieve` in query mode: search by meaning with the embedded
//! model, ranking, namespaces, version chains, filters, injection budget,
//! validation and degradation.

use std::time::Duration;

use axum::http::StatusCode;
use engram::tokens::count as count_tokens;
use serde_json::{Value, json};

use crate::helpers::{TestApp, ids, memory, spawn_app, write_through_embedder_fault};
use crate::upstream::Behaviour;

fn id(memory: &Value) -> String {
    memory["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn finds_memories_by_meaning_and_explains_each() {
    let app = spawn_app().await;
    let postgres = app
        .create(memory(
            "repo",
            "forge",
            "architectural-decisions",
            "We store everything in PostgreSQL 16.",
        ))
        .await;
    app.create(memory(
        "repo",
        "forge",
        "project-conventions",
        "Commit messages use the imperative mood.",
    ))
    .await;
    app.create(memory(
        "user",
        "ana",
        "coding-preferences",
        "Ana likes tabs over spaces.",
    ))
    .await;
    app.wait_indexed().await;

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

#[tokio::test]
async fn never_returns_another_namespace() {
    let app = spawn_app().await;
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

#[tokio::test]
async fn a_superseded_memory_is_never_current_its_head_stands_in() {
    let app = spawn_app().await;
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

#[tokio::test]
async fn filters_exclusions_top_k_and_min_relevance_narrow_the_result() {
    let app = spawn_app().await;
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

#[tokio::test]
async fn weights_from_the_request_change_the_order() {
    let app = spawn_app().await;
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

#[tokio::test]
async fn an_embedder_that_fails_or_hangs_degrades_and_writes_still_land() {
    let app = TestApp::builder().embedder().spawn().await;
    let upstream = &app.upstream;
    let query = json!({"turn_id": "t7", "repo": "forge", "query": "flaky test quarantine"});

    upstream.set(Behaviour::Fail(503));
    let result = app.retrieve(query.clone()).await;
    assert_eq!(result["degraded"], "embedding_failed");
    assert_eq!(result["memories"], json!([]));
    assert_eq!(result["injection"], "");

    upstream.set(Behaviour::Delay(Duration::from_secs(5)));
    let result = app.retrieve(query.clone()).await;
    assert_eq!(result["degraded"], "embedding_timeout");

    let written = write_through_embedder_fault(
        &app,
        upstream,
        Behaviour::Fail(500),
        "Flaky tests go into quarantine.",
    )
    .await;
    let result = app.retrieve(query).await;
    assert_eq!(result["degraded"], Value::Null);
    assert_eq!(ids(&result), [id(&written)]);
}

#[tokio::test]
async fn until_the_startup_build_is_done_the_service_is_alive_but_not_ready() {
    let ground = {
        let app = TestApp::builder().embedder().spawn().await;
        app.create(memory(
            "repo",
            "forge",
            "patterns",
            "Builds are reproducible.",
        ))
        .await;
        app.wait_indexed().await;
        app.into_ground()
    };
    // A fresh data directory copy would hit the cache; a new model name
    // must not, so the start-up build has to call the (hanging) upstream.
    ground
        .upstream
        .set(Behaviour::Delay(Duration::from_secs(30)));
    let app = TestApp::builder()
        .on(ground)
        .embedder()
        .config(|config| {
            config.embedding.model = "another-model".to_owned();
        })
        .spawn_unready()
        .await;
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    assert_eq!(
        app.get("/readyz").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let result = app
        .retrieve(json!({"turn_id": "t8", "repo": "forge", "query": "reproducible builds"}))
        .await;
    assert_eq!(result["degraded"], "index_not_ready");
}

#[tokio::test]
async fn a_restart_embeds_only_what_changed_and_a_new_model_embeds_all() {
    let contents = [
        "Tests run with cargo nextest.",
        "Docs live in docs/.",
        "CI has two cores.",
    ];
    let ground = {
        let app = TestApp::builder().embedder().spawn().await;
        for content in contents {
            app.create(memory("repo", "forge", "patterns", content))
                .await;
        }
        app.wait_indexed().await;
        app.into_ground()
    };
    let upstream = ground.upstream.clone();
    let before = upstream.embedding_calls();

    let app = TestApp::builder().on(ground).embedder().spawn().await;
    let stats = app.wait_indexed().await;
    assert_eq!(
        upstream.embedding_calls(),
        before,
        "a warm restart embeds nothing"
    );
    assert_eq!(stats["index"]["cache_hits"], 3);
    assert_eq!(stats["index"]["embedded"], 0);
    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "Releases are tagged vX.Y.Z.",
    ))
    .await;
    app.wait_indexed().await;
    assert_eq!(
        upstream.embedded_texts().last().unwrap(),
        "Releases are tagged vX.Y.Z."
    );
    let ground = app.into_ground();

    std::fs::remove_dir_all(ground.path().join(".cache")).unwrap();
    let app = TestApp::builder().on(ground).embedder().spawn().await;
    let stats = app.wait_indexed().await;
    assert_eq!(
        stats["index"]["embedded"], 4,
        "deleting .cache/ is safe: all is embedded again"
    );

    let app = TestApp::builder()
        .on(app.into_ground())
        .embedder()
        .config(|config| config.embedding.model = "another-model".to_owned())
        .spawn()
        .await;
    let stats = app.wait_indexed().await;
    assert_eq!(
        stats["index"]["cache_hits"], 0,
        "another model never reuses vectors"
    );
    assert_eq!(stats["index"]["embedded"], 4);
}

#[tokio::test]
async fn exact_rare_words_are_found_and_the_lexical_index_follows_deletes() {
    let app = spawn_app().await;
    let ticket = app
        .create(memory(
            "repo",
            "forge",
            "project-conventions",
            "The deploy key rotates every ninety days, see OPS-4721.",
        ))
        .await;
    for content in [
        "Deploys need two approvals.",
        "Keys live in the vault.",
        "Rotation reminders go to the ops channel.",
    ] {
        app.create(memory("repo", "forge", "patterns", content))
            .await;
    }
    let result = app
        .retrieve(
            json!({"turn_id": "rare", "repo": "forge", "query": "OPS-4721", "use_cache": false}),
        )
        .await;
    assert_eq!(ids(&result)[0], id(&ticket), "{result:#}");
    let reason = &result["memories"][0]["reason"];
    assert!(
        reason["found_by"] == "lexical" || reason["found_by"] == "both",
        "{reason}"
    );
    assert!(result["memories"][0]["scores"]["lexical"].as_f64().unwrap() > 0.99);

    let deleted = app.delete(&format!("/memories/{}", id(&ticket))).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let result = app
        .retrieve(
            json!({"turn_id": "rare", "repo": "forge", "query": "OPS-4721", "use_cache": false}),
        )
        .await;
    assert!(!ids(&result).contains(&id(&ticket)), "{result:#}");
}

/// Six memories with nothing configured: only one of them says where the
/// user is, in words the question does not use; another shares just the
/// common word "user" with it.
async fn bea_store() -> (crate::helpers::TestApp, String) {
    let app = spawn_app().await;
    let mut lisbon = String::new();
    for (category, content) in [
        (
            "coding-preferences",
            "The user prefers tabs over spaces for indentation.",
        ),
        (
            "user-facts",
            "Production data lives in a PostgreSQL 15 cluster.",
        ),
        (
            "project-conventions",
            "Releases are deployed every Friday afternoon.",
        ),
        (
            "user-facts",
            "Ana lives in Lisbon and works on Central European Time.",
        ),
        (
            "coding-preferences",
            "Use errors.As instead of type assertions when handling Go errors.",
        ),
        (
            "project-conventions",
            "The team writes commit messages in the Conventional Commits format.",
        ),
    ] {
        let created = app.create(memory("user", "bea", category, content)).await;
        if content.contains("Lisbon") {
            lisbon = id(&created);
        }
    }
    app.wait_indexed().await;
    (app, lisbon)
}

#[tokio::test]
async fn one_shared_common_word_does_not_outrank_a_closer_meaning() {
    let (app, lisbon) = bea_store().await;
    let question = "Where is the user based?";
    for body in [
        json!({"turn_id": "q", "user": "bea", "query": question}),
        json!({"turn_id": "m", "user": "bea",
            "messages": [{"role": "user", "content": question}]}),
    ] {
        let result = app.retrieve(body).await;
        assert_eq!(ids(&result)[0], lisbon, "{result:#}");
    }
}

#[tokio::test]
async fn a_lexical_weight_of_zero_searches_by_meaning_alone() {
    let app = TestApp::builder()
        .config(|config| {
            config.retrieval.lexical_weight = 0.0;
        })
        .spawn()
        .await;
    for content in [
        "The deploy key rotates every ninety days, see OPS-4721.",
        "Deploys need two approvals.",
        "Keys live in the vault.",
    ] {
        app.create(memory("repo", "forge", "patterns", content))
            .await;
    }
    app.wait_indexed().await;
    let result = app
        .retrieve(json!({"turn_id": "w0", "repo": "forge",
            "query": "how often does the deploy key rotate? OPS-4721", "top_k": 10}))
        .await;
    assert!(!ids(&result).is_empty(), "{result:#}");
    for found in result["memories"].as_array().unwrap() {
        assert_eq!(found["reason"]["found_by"], "vector", "{found:#}");
        assert_eq!(found["scores"]["lexical"], 0.0, "{found:#}");
    }
}

#[tokio::test]
async fn a_memory_found_by_its_words_alone_reports_its_real_cosine() {
    let app = TestApp::builder().embedder().spawn().await;
    let _upstream = &app.upstream;
    // Fifty memories closer to the query by (bag-of-words) vector fill
    // the vector search's candidate list, so the one that names the zebra
    // is found by the lexical search alone.
    for n in 0..50 {
        app.create(memory(
            "repo",
            "forge",
            "patterns",
            &format!("stripes stripes {n}"),
        ))
        .await;
    }
    let content =
        "A zebra wandered past the quarry while nobody on the night shift watched the gates.";
    let zebra = app
        .create(memory("repo", "forge", "patterns", content))
        .await;
    app.wait_indexed().await;
    let query = "zebra stripes";
    let result = app
        .retrieve(json!({"turn_id": "z", "repo": "forge", "query": query, "top_k": 5}))
        .await;
    let found = result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == zebra["id"])
        .unwrap_or_else(|| panic!("the zebra is not found: {result:#}"));
    assert_eq!(found["reason"]["found_by"], "lexical", "{found:#}");
    let expected = engram::index::cosine(
        &crate::upstream::Vectors::SMALL.of(query),
        &crate::upstream::Vectors::SMALL.of(content),
    );
    assert!(expected > 0.0);
    let similarity = found["scores"]["similarity"].as_f64().unwrap();
    // The index stores vectors in half precision: within 2⁻¹¹ of the cosine.
    assert!(
        (similarity - f64::from(expected)).abs() < 1e-3,
        "{similarity} != {expected}"
    );
}
