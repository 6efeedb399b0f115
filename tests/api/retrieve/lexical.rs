//! `POST /retrieve` by exact words: rare words found by the lexical
//! index, which follows deletes, and how its weight mixes with meaning.

use axum::http::StatusCode;
use serde_json::json;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::id;
use crate::helpers::{TestApp, ids, memory, spawn_app};

over_both_backends!(exact_rare_words_are_found_and_the_lexical_index_follows_deletes,);

async fn exact_rare_words_are_found_and_the_lexical_index_follows_deletes(backend: Backend) {
    let app = backend.spawn_app().await;
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
async fn bea_store() -> (TestApp, String) {
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
    // One search, so that its similarity is to the query itself.
    let app = TestApp::builder()
        .embedder()
        .config(|config| config.retrieval.feedback_weight = 0.0)
        .spawn()
        .await;
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
