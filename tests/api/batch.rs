//! `POST /memories/batch`: each memory written or refused on its own, in
//! order, with the problem `POST /memories` would give; those written
//! durable before the answer (both backends) and found by their words at
//! once; the memories of one batch as if sent one at a time (a second
//! `supersedes` of the same memory, a near-duplicate with `dedupe`); the
//! grants, the secret guard, the batch's bounds and the body limit; and
//! `engram import agents-md` sending its conventions through it.

use std::fmt::Write as _;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::{LIMITED, root_and_limited_keys, send};
use crate::helpers::{TestApp, TestResponse, id, ids, memory};
use crate::hooks::{Project, engram};
use crate::import_export::succeeded;

over_both_backends!(
    each_memory_gets_its_result_in_order_and_the_refused_change_nothing,
    a_batch_is_durable_before_its_answer_and_found_by_its_words_at_once,
    each_memory_of_a_batch_keeps_its_own_fields_and_observed_at,
    a_second_memory_superseding_the_same_one_is_refused_as_if_sent_after,
);

async fn batch(app: &TestApp, memories: Vec<Value>) -> TestResponse {
    app.post("/memories/batch", &json!({ "memories": memories }))
        .await
}

/// The results of a batch that must be answered `200`.
async fn answered(app: &TestApp, memories: Vec<Value>) -> Vec<Value> {
    let response = batch(app, memories).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response.json["results"].as_array().unwrap().clone()
}

fn statuses(results: &[Value]) -> Vec<u64> {
    results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect()
}

fn note(content: &str) -> Value {
    memory("repo", "forge", "patterns", content)
}

async fn listed_contents(app: &TestApp) -> Vec<String> {
    let listed = app.get("/memories?repo=forge&limit=1000").await.json;
    let mut contents: Vec<String> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    contents.sort();
    contents
}

async fn each_memory_gets_its_result_in_order_and_the_refused_change_nothing(backend: Backend) {
    let app = backend.spawn_app().await;
    let mut unknown_field = note("Refused: it has a colour (quokka).");
    unknown_field["colour"] = json!("red");
    let mut bad_category = note("Refused: no such category (quokka).");
    bad_category["category"] = json!("gossip");
    let results = answered(
        &app,
        vec![
            note("Builds run in CI only."),
            bad_category,
            note("   "),
            note("Releases are tagged from main."),
            json!(5),
            unknown_field,
        ],
    )
    .await;

    assert_eq!(statuses(&results), [201, 422, 422, 201, 422, 422]);
    assert_eq!(results[0]["memory"]["content"], "Builds run in CI only.");
    assert_eq!(results[0]["memory"]["version"], 1);
    assert_eq!(
        results[3]["memory"]["content"],
        "Releases are tagged from main."
    );
    for (index, field) in [(1, "category"), (2, "content"), (4, "body"), (5, "colour")] {
        let problem = &results[index]["problem"];
        assert_eq!(problem["status"], 422, "{problem:#}");
        assert_eq!(problem["field"], field, "{problem:#}");
        assert_eq!(problem["type"], "urn:engram:problem:invalid-field");
    }
    // The problem is the one `POST /memories` gives for the same body.
    let alone = app.post("/memories", &note("   ")).await;
    assert_eq!(results[2]["problem"], alone.json);
    assert_eq!(
        listed_contents(&app).await,
        ["Builds run in CI only.", "Releases are tagged from main."]
    );
    assert!(backend.holding(&app.data_dir, "quokka").await.is_empty());

    // A batch refused whole, or of memories all refused, changes nothing.
    let before = backend.stored(&app.data_dir).await;
    let results = results_of_refused(&app).await;
    assert_eq!(statuses(&results), [422, 422]);
    assert_eq!(backend.stored(&app.data_dir).await, before);
}

async fn results_of_refused(app: &TestApp) -> Vec<Value> {
    let mut too_important = note("Refused: too important.");
    too_important["importance"] = json!(7);
    answered(app, vec![too_important, note("")]).await
}

async fn a_batch_is_durable_before_its_answer_and_found_by_its_words_at_once(backend: Backend) {
    let app = backend.builder().embedder().spawn().await;
    // No vector comes until the test says: only the words can find them.
    app.upstream.stall_embeddings_of("(held)");
    let mut memories: Vec<Value> = (0..60)
        .map(|n| note(&format!("Build note {n} (held).")))
        .collect();
    memories.push(note(
        "The zanzibar deployment key rotates on Tuesdays (held).",
    ));
    let results = answered(&app, memories).await;
    assert!(statuses(&results).iter().all(|&status| status == 201));

    for result in &results {
        let id = id(&result["memory"]);
        assert!(
            backend.holds(&app.data_dir, "repos/forge", &id).await,
            "{id}"
        );
    }
    let found = app
        .retrieve(json!({"turn_id": "w1", "repo": "forge", "query": "zanzibar deployment"}))
        .await;
    assert_eq!(ids(&found), [id(&results[60]["memory"])], "{found:#}");
    assert_eq!(found["memories"][0]["reason"]["found_by"], "lexical");

    app.upstream.release_embeddings();
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], 61, "{stats:#}");
}

/// A backlog goes into the index in batches of up to 1,024 changes, one
/// snapshot swap each, but an embedding request carries at most 128 of
/// them, as an embedding API takes them.
#[tokio::test]
async fn a_large_batch_is_embedded_in_requests_of_at_most_128() {
    let app = TestApp::builder().embedder().spawn().await;
    let memories: Vec<Value> = (0..600)
        .map(|n| note(&format!("Build note {n}.")))
        .collect();
    let results = answered(&app, memories).await;
    assert!(statuses(&results).iter().all(|&status| status == 201));
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], 600, "{stats:#}");
    let sizes = app.upstream.embedding_request_sizes();
    assert!(sizes.iter().all(|&size| size <= 128), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 600, "{sizes:?}");
}

async fn each_memory_of_a_batch_keeps_its_own_fields_and_observed_at(backend: Backend) {
    let app = backend.spawn_app().await;
    let mut said_in_january = memory("user", "ana", "user-facts", "Moved to Porto.");
    said_in_january["observed_at"] = json!("2026-01-02T03:04:05Z");
    said_in_january["importance"] = json!(0.8);
    said_in_january["session_id"] = json!("s-7");
    let mut anchored = note("The pool is set up in connect_pool.");
    anchored["anchors"] = json!([{"path": "src/db/pool.rs", "symbol": "connect_pool"}]);
    anchored["commit"] = json!("3f9c2b7e8a1d");
    let mut too_early = note("Said before 1970.");
    too_early["observed_at"] = json!("1969-12-31T23:59:59Z");

    let results = answered(&app, vec![said_in_january, anchored, too_early]).await;

    assert_eq!(statuses(&results), [201, 201, 422]);
    let january = &results[0]["memory"];
    assert_eq!(january["observed_at"], "2026-01-02T03:04:05Z");
    assert_eq!(january["user"], "ana");
    assert_eq!(january["importance"], 0.8);
    assert_eq!(january["session_id"], "s-7");
    assert_eq!(january["trigger"], "manual");
    let anchored = &results[1]["memory"];
    assert_eq!(anchored["observed_at"], Value::Null, "{anchored:#}");
    assert_eq!(
        anchored["anchors"],
        json!([{"path": "src/db/pool.rs", "symbol": "connect_pool"}])
    );
    assert_eq!(anchored["commit"], "3f9c2b7e8a1d");
    assert_eq!(results[2]["problem"]["field"], "observed_at");
    let read = app.get(&format!("/memories/{}", id(january))).await.json;
    assert_eq!(read["observed_at"], "2026-01-02T03:04:05Z");
}

async fn a_second_memory_superseding_the_same_one_is_refused_as_if_sent_after(backend: Backend) {
    let app = backend.spawn_app().await;
    let old = app.create(note("Deploys on Fridays.")).await;
    let mut first = note("Deploys on Thursdays.");
    first["supersedes"] = json!(id(&old));
    let mut second = note("Deploys on Mondays.");
    second["supersedes"] = json!(id(&old));

    let results = answered(&app, vec![first, second]).await;

    assert_eq!(statuses(&results), [201, 409]);
    assert_eq!(results[0]["memory"]["version"], 2);
    let problem = &results[1]["problem"];
    assert_eq!(problem["field"], "supersedes", "{problem:#}");
    assert!(
        problem["detail"].as_str().unwrap().contains(&format!(
            "already superseded by {}",
            id(&results[0]["memory"])
        )),
        "{problem:#}"
    );
    assert_eq!(listed_contents(&app).await, ["Deploys on Thursdays."]);
    assert!(backend.holding(&app.data_dir, "Mondays").await.is_empty());
}

#[tokio::test]
async fn with_dedupe_a_memory_saying_what_an_earlier_one_of_the_batch_says_is_refused() {
    let app = TestApp::builder().embedder().spawn().await;
    let deduped = |content: &str| {
        let mut body = note(content);
        body["dedupe"] = json!(true);
        body
    };
    let results = answered(
        &app,
        vec![
            deduped("Run the linter before each push."),
            deduped("Run the linter before each push."),
            note("Run the linter before each push."),
            deduped("Tabs, not spaces, in the Makefile."),
        ],
    )
    .await;

    // Without `dedupe` a memory is written as it would be alone.
    assert_eq!(statuses(&results), [201, 409, 201, 201]);
    assert_eq!(
        results[1]["problem"]["type"],
        "urn:engram:problem:duplicate-memory"
    );
    app.wait_indexed().await;
    let again = answered(&app, vec![deduped("Run the linter before each push.")]).await;
    assert_eq!(statuses(&again), [409]);
    assert!(
        again[0]["problem"]["detail"]
            .as_str()
            .unwrap()
            .contains("already says this"),
        "{again:#?}"
    );
}

#[tokio::test]
async fn a_limited_key_has_the_memories_for_other_namespaces_refused_one_by_one() {
    let app = TestApp::builder()
        .config(root_and_limited_keys)
        .spawn()
        .await;
    let body = json!({"memories": [
        note("Forge builds with Bazel."),
        memory("repo", "secret", "patterns", "Secret builds with Make."),
        memory("user", "ana", "user-facts", "Ana reads Rust."),
        memory("user", "bob", "user-facts", "Bob reads Go."),
    ]});

    let response = send(&app, Method::POST, "/memories/batch", Some(body), LIMITED).await;

    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let results = response.json["results"].as_array().unwrap();
    assert_eq!(statuses(results), [201, 403, 201, 403]);
    for refused in [&results[1], &results[3]] {
        assert_eq!(refused["problem"]["type"], "urn:engram:problem:forbidden");
    }
    assert!(
        !app.files()
            .iter()
            .any(|file| file.contains("secret") || file.contains("bob"))
    );
    let without_key = batch(&app, vec![note("No key, no write.")]).await;
    without_key.assert_problem(StatusCode::UNAUTHORIZED, None);
}

#[tokio::test]
async fn the_secret_guard_refuses_each_memory_holding_a_secret() {
    let app = TestApp::builder().spawn().await;
    let mut secret_session = note("The session is named after a key.");
    secret_session["session_id"] = json!("AKIAIOSFODNN7EXAMPLE");
    let results = answered(
        &app,
        vec![
            note("The deploy key is AKIAIOSFODNN7EXAMPLE, keep it."),
            note("Keys live in the vault."),
            secret_session,
        ],
    )
    .await;

    assert_eq!(statuses(&results), [422, 201, 422]);
    for (index, field) in [(0, "content"), (2, "session_id")] {
        let problem = &results[index]["problem"];
        assert_eq!(problem["type"], "urn:engram:problem:secret-content");
        assert_eq!(problem["field"], field);
    }
    let everything = serde_json::to_string(&results).unwrap();
    assert!(!everything.contains("AKIAIOSFODNN7EXAMPLE"), "{everything}");
    assert_eq!(listed_contents(&app).await, ["Keys live in the vault."]);
}

#[tokio::test]
async fn a_batch_of_none_or_more_than_1000_or_not_one_is_refused_whole() {
    let app = TestApp::builder().spawn().await;
    batch(&app, Vec::new())
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("memories"));
    let many = (0..1001).map(|n| note(&format!("Note {n}."))).collect();
    batch(&app, many)
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("memories"));
    app.post(
        "/memories/batch",
        &json!({"memories": [note("Hi there.")], "dry_run": true}),
    )
    .await
    .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("dry_run"));
    app.post("/memories/batch", &json!({"memories": note("Not a list.")}))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("memories"));
    let not_json = app
        .send(
            axum::http::Request::post("/memories/batch")
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{\"memories\": [")) // cut off
                .unwrap(),
        )
        .await;
    not_json.assert_problem(StatusCode::BAD_REQUEST, None);
    assert_eq!(app.files(), Vec::<String>::new());

    let most = (0..1000).map(|n| note(&format!("Note {n}."))).collect();
    let results = answered(&app, most).await;
    assert_eq!(results.len(), 1000);
}

#[tokio::test]
async fn a_batch_over_the_body_limit_is_refused_whole() {
    let app = TestApp::builder()
        .config(|config| config.limits.max_body_bytes = 2048)
        .spawn()
        .await;
    let memories: Vec<Value> = (0..30)
        .map(|n| {
            note(&format!(
                "Note {n}: every build runs the whole test suite first."
            ))
        })
        .collect();
    assert!(json!({ "memories": memories }).to_string().len() > 2048);

    batch(&app, memories)
        .await
        .assert_problem(StatusCode::PAYLOAD_TOO_LARGE, None);
    assert_eq!(app.files(), Vec::<String>::new());
}

#[tokio::test]
async fn engram_import_agents_md_sends_its_conventions_in_batches() {
    // The fake embedder's few dimensions make near-duplicates of some of
    // 1,200 made-up rules: only identical ones count here.
    let app = TestApp::builder()
        .embedder()
        .config(|config| config.capture.duplicate_threshold = 1.0)
        .serve()
        .await;
    let project = Project::new("claude-code/transcript.jsonl");
    let mut agents_md = String::from("# Forge\n\n");
    for n in 0..1200 {
        writeln!(agents_md, "- {}.", words_of(n)).unwrap();
    }
    let file = project.home().join("AGENTS.md");
    std::fs::write(&file, agents_md).unwrap();
    let file = file.display().to_string();

    // Its stderr (a line per convention) is more than a pipe holds:
    // read as it comes, not after the end as `engram_against` reads it.
    let mut command = engram(&project);
    command
        .args(["import", "agents-md", "--repo", "forge", &file])
        .env("ENGRAM_URL", &app.base_url);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    let said = succeeded(&output);

    assert!(
        said.starts_with("1200 conventions for repo forge: 1200 stored, 0 skipped"),
        "{said}"
    );
    let metrics = reqwest::get(format!("{}/metrics", app.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            r#"engram_http_requests_total{route="/memories/batch",method="POST",status="200"} 2"#
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains(r#"engram_http_requests_total{route="/memories",method="POST""#),
        "{metrics}"
    );
    app.stop().await;
}

/// Words that no other `n` shares, so no two rules are near-duplicates.
fn words_of(n: usize) -> String {
    let letters = |mut k: usize| {
        let mut word = String::new();
        for _ in 0..4 {
            word.push(char::from(b'a' + u8::try_from(k % 26).unwrap()));
            k /= 26;
        }
        word
    };
    [0, 7919, 104_729, 1299, 15_485, 86_243, 224_737, 350_377]
        .iter()
        .enumerate()
        .map(|(place, offset)| letters(n * (2 * place + 1) + offset))
        .collect::<Vec<_>>()
        .join(" ")
}
