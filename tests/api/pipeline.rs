//! The full retrieval pipeline against a scripted upstream: HyDE, hops,
//! the per-turn cache, the degradation table, access counts, expansion,
//! context boost, filter-only retrieval and suggestions.

use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, TimeDelta, Utc};
use engram::tokens::count as count_tokens;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, ids, memory, post_json};
use crate::upstream::Behaviour;

over_both_backends!(
    hyde_search_hops_cache_and_budget,
    expansion_boost_filters_and_suggestions,
    a_write_ends_the_cached_turn_and_is_found_at_once,
    hops_never_leave_the_request_namespaces,
    uses_are_counted_and_dated_and_survive_a_restart,
);

/// An app over `backend` whose embedder and model are the fake upstream.
async fn app_over(backend: &Backend) -> TestApp {
    backend.builder().embedder().llm().spawn().await
}

fn window() -> Value {
    json!([
        {"role": "user", "content": "Ship the release today."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "1", "content": "TOOL OUTPUT: kubectl rollout status"},
        {"role": "user", "content": "How do we deploy this service?"},
    ])
}

/// The scenario of the retrieval design (seed 000), end to end.
async fn hyde_search_hops_cache_and_budget(backend: Backend) {
    let app = app_over(&backend).await;
    let upstream = &app.upstream;
    let rollback = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Rollbacks restore the previous container image.",
        ))
        .await;
    let mut deploys = memory(
        "repo",
        "forge",
        "project-conventions",
        "Deploys go through the blue green pipeline.",
    );
    deploys["related"] = json!([{"id": rollback["id"], "relationship": "depends-on"}]);
    let deploys = app.create(deploys).await;
    let migrations = app
        .create(memory(
            "repo",
            "forge",
            "project-conventions",
            "Database migrations run before every release.",
        ))
        .await;
    app.create(memory(
        "repo",
        "forge",
        "user-facts",
        "Team lunch is on Fridays at noon.",
    ))
    .await;
    upstream.set_chat(
        Behaviour::Answer,
        "Here are two:\n1. Deploys go through the blue green pipeline.\n2. Database migrations run before every release.",
    );

    let request = json!({"turn_id": "turn-1", "repo": "forge", "user": "ana", "messages": window(),
        "top_k": 2, "hop_depth": 1, "hypothesis_count": 2});
    let first = app.retrieve(request.clone()).await;
    assert_eq!(first["mode"], "hyde");
    assert_eq!(first["degraded"], Value::Null, "{first:#}");
    assert_eq!(
        first["hypotheses"],
        json!([
            "Deploys go through the blue green pipeline.",
            "Database migrations run before every release."
        ])
    );
    let found = ids(&first);
    assert_eq!(found.len(), 3, "two from the search, one hop: {first:#}");
    for expected in [&deploys, &migrations, &rollback] {
        assert!(found.contains(&expected["id"].as_str().unwrap().to_owned()));
    }
    let by_id = |id: &Value| {
        first["memories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == *id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        by_id(&deploys["id"])["reason"],
        json!({"kind": "hypothesis", "hypothesis": 0, "found_by": "both"})
    );
    assert_eq!(
        by_id(&migrations["id"])["reason"],
        json!({"kind": "hypothesis", "hypothesis": 1, "found_by": "both"})
    );
    let hop = by_id(&rollback["id"]);
    assert_eq!(
        hop["reason"],
        json!({"kind": "hop", "from": deploys["id"], "relationship": "depends-on", "direction": "outgoing"})
    );
    assert!(
        hop["relevance"].as_f64().unwrap() < by_id(&deploys["id"])["relevance"].as_f64().unwrap()
    );
    for stage in ["hyde", "embed", "search", "hops", "total"] {
        assert!(first["timings_ms"][stage].is_number(), "{stage}");
    }

    let prompt = upstream.chat_requests()[0][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        prompt.contains("How do we deploy this service?"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("TOOL OUTPUT"),
        "tool results never reach the model: {prompt}"
    );

    let (chats, embeddings) = (upstream.chat_requests().len(), upstream.embedding_calls());
    let again = app.retrieve(request.clone()).await;
    assert_eq!(again["cached"], true);
    assert_eq!(again["memories"], first["memories"]);
    assert_eq!(again["injection"], first["injection"]);
    assert_eq!(
        (upstream.chat_requests().len(), upstream.embedding_calls()),
        (chats, embeddings),
        "a cache hit calls no upstream"
    );

    let mut next_turn = request.clone();
    next_turn["turn_id"] = json!("turn-2");
    let next = app.retrieve(next_turn.clone()).await;
    assert_eq!(next["cached"], false);
    assert_eq!(upstream.chat_requests().len(), chats + 1);
    assert!(upstream.embedding_calls() > embeddings);

    next_turn["turn_id"] = json!("turn-3");
    next_turn["token_budget"] = json!(90);
    let tight = app.retrieve(next_turn).await;
    let injection = tight["injection"].as_str().unwrap();
    assert!(count_tokens(injection) <= 90, "{injection}");
    let injected = tight["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["injected"] == true)
        .count();
    assert!(injected < 3, "a tight budget leaves memories out");

    let stats = app.get("/stats").await.json;
    assert_eq!(stats["retrieval"]["requests"], 4);
    assert_eq!(stats["retrieval"]["cache_hits"], 1);
}

async fn a_write_ends_the_cached_turn_and_is_found_at_once(backend: Backend) {
    let app = app_over(&backend).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, "The service deploys with helm charts.");
    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "The service deploys with helm charts.",
    ))
    .await;
    let request = json!({"turn_id": "t", "repo": "forge", "messages": window(), "top_k": 10});
    let before = app.retrieve(request.clone()).await;
    assert_eq!(ids(&before).len(), 1);

    let newer = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "The service deploys with helm charts from the ops repo.",
        ))
        .await;
    let after = app.retrieve(request.clone()).await;
    assert_eq!(
        after["cached"], false,
        "a write in the namespace ends the cached answer"
    );
    assert!(
        ids(&after).contains(&newer["id"].as_str().unwrap().to_owned()),
        "{after:#}"
    );

    let mut bypass = request;
    bypass["use_cache"] = json!(false);
    assert_eq!(app.retrieve(bypass).await["cached"], false);
}

#[tokio::test]
async fn every_row_of_the_degradation_table() {
    // Calls time out after 300 ms, well before the slow upstream's 3 s.
    let app = Backend::Files
        .builder()
        .embedder()
        .llm()
        .config(|config| {
            config.embedding.timeout_ms = 300;
            config.llm.as_mut().unwrap().retrieval_timeout_ms = 300;
        })
        .spawn()
        .await;
    let upstream = &app.upstream;
    let wanted = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "How do we deploy this service? With the deploy script.",
        ))
        .await;
    let mut turn = 0;
    let mut retrieve = async |app: &TestApp| {
        turn += 1;
        app.retrieve(json!({"turn_id": format!("t{turn}"), "repo": "forge", "messages": window()}))
            .await
    };

    // HyDE slow, failing or useless: the latest user message is searched for.
    for (behaviour, reply, reason) in [
        (
            Behaviour::Delay(Duration::from_secs(3)),
            "late",
            "hyde_timeout",
        ),
        (Behaviour::Fail(500), "", "hyde_failed"),
        (Behaviour::Answer, "```\n```", "hyde_unusable"),
    ] {
        upstream.set_chat(behaviour, reply);
        let result = retrieve(&app).await;
        assert_eq!(result["degraded"], reason, "{result:#}");
        assert_eq!(result["mode"], "hyde");
        assert_eq!(result["query"], "How do we deploy this service?");
        assert_eq!(
            result["memories"][0]["id"], wanted["id"],
            "{reason}: {result:#}"
        );
        assert_eq!(result["memories"][0]["reason"]["kind"], "query");
    }

    // The embedder down or slow: nothing can be searched.
    upstream.set_chat(Behaviour::Answer, "Deploys use the deploy script.");
    for (behaviour, reason) in [
        (Behaviour::Fail(502), "embedding_failed"),
        (
            Behaviour::Delay(Duration::from_secs(3)),
            "embedding_timeout",
        ),
    ] {
        upstream.set(behaviour);
        let result = retrieve(&app).await;
        assert_eq!(result["degraded"], reason, "{result:#}");
        assert_eq!(result["memories"], json!([]));
        assert_eq!(result["injection"], "");
    }
    upstream.set(Behaviour::Answer);

    let stats = app.get("/stats").await.json;
    for reason in [
        "hyde_timeout",
        "hyde_failed",
        "hyde_unusable",
        "embedding_failed",
        "embedding_timeout",
    ] {
        assert_eq!(
            stats["retrieval"]["degraded"][reason], 1,
            "{reason}: {stats:#}"
        );
    }
}

#[tokio::test]
async fn the_budget_cuts_a_slow_model_short_and_still_answers() {
    let app = TestApp::builder()
        .embedder()
        .llm()
        .config(|config| {
            let llm = config.llm.as_mut().unwrap();
            llm.retrieval_timeout_ms = 30_000;
            config.retrieval.budget_ms = 400;
        })
        .spawn()
        .await;
    let upstream = &app.upstream;
    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "How do we deploy this service? With the deploy script.",
    ))
    .await;
    upstream.set_chat(Behaviour::Delay(Duration::from_secs(20)), "too late");
    let result = app
        .retrieve(json!({"turn_id": "t", "repo": "forge", "messages": window()}))
        .await;
    assert_eq!(
        result["degraded"], "hyde_timeout",
        "the 400 ms budget, not the 30 s timeout, ended HyDE"
    );
    assert_eq!(result["memories"].as_array().unwrap().len(), 1);
}

async fn hops_never_leave_the_request_namespaces(backend: Backend) {
    let app = app_over(&backend).await;
    let _upstream = &app.upstream;
    let shared = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "The API uses cursor pagination.",
        ))
        .await;
    let mut private = memory(
        "user",
        "ana",
        "coding-preferences",
        "Ana finds offset pagination clearer.",
    );
    private["repo"] = json!("forge");
    private["related"] = json!([{"id": shared["id"], "relationship": "contradicts"}]);
    let private = app.create(private).await;

    let as_bob = app
        .retrieve(json!({"turn_id": "bob", "repo": "forge", "user": "bob", "query": "cursor pagination", "hop_depth": 3}))
        .await;
    assert_eq!(ids(&as_bob), [shared["id"].as_str().unwrap()]);
    let as_ana = app
        .retrieve(json!({"turn_id": "ana", "repo": "forge", "user": "ana", "query": "The API uses cursor pagination.", "top_k": 1}))
        .await;
    assert_eq!(
        ids(&as_ana),
        [
            shared["id"].as_str().unwrap(),
            private["id"].as_str().unwrap()
        ]
    );
    assert_eq!(as_ana["memories"][1]["reason"]["direction"], "incoming");
}

async fn uses_are_counted_and_dated_and_survive_a_restart(backend: Backend) {
    let app = backend.builder().embedder().serve().await;
    let created = post_json(
        &app.base_url,
        "/memories",
        &memory("repo", "forge", "patterns", "Logs are JSON lines."),
    )
    .await;
    let mut access = Vec::new();
    for turn in 0..3 {
        let query = json!({"turn_id": format!("t{turn}"), "repo": "forge", "query": "JSON logs"});
        let result = post_json(&app.base_url, "/retrieve", &query).await;
        assert_eq!(result["memories"][0]["id"], created["id"], "{result:#}");
        access.push(result["memories"][0]["scores"]["access"].as_f64().unwrap());
    }
    assert_eq!(access[0], 0.0);
    assert!(access[1] > 0.0 && access[2] > access[1], "{access:?}");
    // Another namespace's use is saved in the same round, as its own write.
    let elsewhere = post_json(
        &app.base_url,
        "/memories",
        &memory("repo", "anvil", "patterns", "Logs are JSON lines."),
    )
    .await;
    let query = json!({"turn_id": "anvil", "repo": "anvil", "query": "JSON logs"});
    let result = post_json(&app.base_url, "/retrieve", &query).await;
    assert_eq!(result["memories"][0]["id"], elsewhere["id"], "{result:#}");
    let ground = app.stop().await;

    let app = backend.builder().on(ground).embedder().spawn().await;
    let result = app
        .retrieve(json!({"turn_id": "after", "repo": "forge", "query": "JSON logs"}))
        .await;
    let remembered = result["memories"][0]["scores"]["access"].as_f64().unwrap();
    assert!(
        remembered > access[2],
        "three retrievals were remembered: {result:#}"
    );
    for used in [&created, &elsewhere] {
        let read = app
            .get(&format!("/memories/{}", used["id"].as_str().unwrap()))
            .await
            .json;
        let used_at: DateTime<Utc> = read["used_at"]
            .as_str()
            .unwrap_or_else(|| panic!("dated when it was retrieved: {read}"))
            .parse()
            .unwrap();
        assert!(Utc::now() - used_at < TimeDelta::hours(1), "{read}");
        assert_eq!(read["version"], 1, "a use is no new version: {read}");
    }
}

async fn expansion_boost_filters_and_suggestions(backend: Backend) {
    let plain = backend.builder().embedder().spawn().await;
    let old = plain
        .create(memory(
            "repo",
            "forge",
            "corrections",
            "Never log tokens; redact them in middleware.",
        ))
        .await;
    let mut important = memory(
        "repo",
        "forge",
        "architectural-decisions",
        "The gateway terminates TLS.",
    );
    important["importance"] = json!(0.95);
    let important = plain.create(important).await;

    // Expansion without a model: words of the best matches.
    let expanded = plain
        .retrieve(
            json!({"turn_id": "e", "repo": "forge", "query": "log tokens", "expand_query": true}),
        )
        .await;
    assert!(
        expanded["expanded_query"]
            .as_str()
            .unwrap()
            .starts_with("log tokens "),
        "{expanded:#}"
    );
    assert!(
        expanded["added_terms"]
            .as_array()
            .unwrap()
            .contains(&json!("redact"))
    );

    // A context boost lifts what resembles it.
    let boosted = plain
        .retrieve(json!({"turn_id": "b", "repo": "forge", "query": "gateway tokens", "context_boost": "TLS gateway", "top_k": 2}))
        .await;
    let gateway = boosted["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == important["id"])
        .unwrap();
    assert!(
        gateway["scores"]["context_boost"].as_f64().unwrap() > 0.3,
        "{boosted:#}"
    );

    // No query: the filters' memories by recency, importance and use.
    let filtered = plain
        .retrieve(json!({"turn_id": "f", "repo": "forge", "weights": {"importance": 1.0, "recency": 0.0, "access": 0.0}}))
        .await;
    assert_eq!(filtered["mode"], "filter");
    assert_eq!(filtered["total_matches"], 2);
    assert_eq!(
        ids(&filtered),
        [
            important["id"].as_str().unwrap(),
            old["id"].as_str().unwrap()
        ]
    );
    assert_eq!(filtered["memories"][0]["reason"], json!({"kind": "filter"}));
    let corrections = plain
        .retrieve(
            json!({"turn_id": "c", "repo": "forge", "filters": {"categories": ["corrections"]}}),
        )
        .await;
    assert_eq!(ids(&corrections), [old["id"].as_str().unwrap()]);

    // Suggestions need a model; without one, the latest user message.
    let suggestions = plain
        .post("/suggestions", &json!({"messages": window()}))
        .await;
    assert_eq!(suggestions.status, StatusCode::OK);
    assert_eq!(suggestions.json["degraded"], "llm_not_configured");
    assert_eq!(
        suggestions.json["suggestions"],
        json!(["How do we deploy this service?"])
    );
    let ground = plain.into_ground();

    let with_model = backend.builder().on(ground).embedder().llm().spawn().await;
    with_model.upstream.set_chat(
        Behaviour::Answer,
        "- Deploys use helm.\n- Releases are tagged.\n- Rollbacks are manual.",
    );
    let suggestions = with_model
        .post("/suggestions", &json!({"messages": window(), "count": 2}))
        .await;
    assert_eq!(
        suggestions.json,
        json!({"suggestions": ["Deploys use helm.", "Releases are tagged."], "degraded": null})
    );
    with_model
        .post("/suggestions", &json!({"messages": [], "count": 2}))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("messages"));
    with_model
        .post("/suggestions", &json!({"messages": window(), "count": 11}))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("count"));

    with_model
        .upstream
        .set_chat(Behaviour::Answer, "TLS\ncertificates");
    let expanded = with_model
        .retrieve(json!({"turn_id": "m", "repo": "forge", "query": "who terminates https", "expand_query": true}))
        .await;
    assert_eq!(expanded["added_terms"], json!(["TLS", "certificates"]));
    assert_eq!(expanded["memories"][0]["id"], important["id"]);
}

#[tokio::test]
async fn a_changed_request_within_a_turn_is_a_new_answer_and_the_same_one_a_hit() {
    let app = TestApp::builder().embedder().spawn().await;
    let ana = app
        .create(memory(
            "user",
            "ana",
            "coding-preferences",
            "Ana prefers errors.As over type assertions in Go.",
        ))
        .await;
    // The README's two examples: one turn, a query, then the window.
    let by_query = json!({"turn_id": "t-17", "repo": "forge", "user": "ana",
        "query": "how should errors be handled in Go?", "top_k": 5, "token_budget": 1000});
    let by_window = json!({"turn_id": "t-17", "repo": "forge", "user": "ana", "hop_depth": 1,
        "messages": [{"role": "user", "content": "Refactor the error handling in the Go client."}]});
    let first = app.retrieve(by_query.clone()).await;
    assert_eq!(first["cached"], false);
    let second = app.retrieve(by_window.clone()).await;
    assert_eq!(second["cached"], false, "{second:#}");
    assert_eq!(
        second["query"], "Refactor the error handling in the Go client.",
        "the answer is to the window, not the earlier query"
    );
    let again = app.retrieve(by_window.clone()).await;
    assert_eq!(again["cached"], true, "the same request again is a hit");
    assert_eq!(again["query"], second["query"]);

    for (field, value) in [
        ("query", json!("which error wrapping does forge use?")),
        ("token_budget", json!(200)),
        ("top_k", json!(1)),
        ("filters", json!({"scope": "repo"})),
        ("exclude_ids", json!([ana["id"]])),
        ("min_relevance", json!(0.5)),
    ] {
        let mut changed = by_query.clone();
        changed[field] = value;
        assert_eq!(
            app.retrieve(changed).await["cached"],
            false,
            "a changed `{field}` is a miss"
        );
    }
    assert_eq!(app.retrieve(by_query).await["cached"], true);
}
