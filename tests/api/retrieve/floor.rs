//! The vector search's floor (`retrieval.min_similarity`): in a store
//! larger than `top_k` a memory barely like the query counts as no
//! evidence; a store no larger answers with all of it, so a new user's
//! first memory comes back for an obviously related prompt that the
//! embedded model scores under the floor (here under 0).

use serde_json::{Value, json};

use crate::helpers::id;
use crate::helpers::{TestApp, memory};

/// The convention of a new user's first `remember:`, and a prompt that
/// needs it without sharing a word.
const MIGRATIONS: &str = "orchid runs database migrations with goose; file names start with a \
                          UTC timestamp and every up migration has a down migration.";
const PROMPT: &str = "add a column to invoices";
/// Other conventions of the same repository.
const OTHERS: [&str; 3] = [
    "Commit messages follow Conventional Commits because the changelog is generated from them.",
    "Styles use Tailwind utility classes; no new CSS files.",
    "The on-call engineer is paged through PagerDuty and every alert links a runbook.",
];

/// A repository of `contents`, with their ids in order.
async fn store(contents: &[&str]) -> (TestApp, Vec<String>) {
    let app = TestApp::builder().spawn().await;
    let mut ids = Vec::new();
    for content in contents {
        ids.push(id(&app
            .create(memory("repo", "orchid", "project-conventions", content))
            .await));
    }
    app.wait_indexed().await;
    (app, ids)
}

/// What `/retrieve` answers for `PROMPT` at `top_k`, by similarity alone.
async fn retrieve(app: &TestApp, top_k: usize) -> Value {
    app.retrieve(
        json!({"turn_id": format!("t{top_k}"), "repo": "orchid", "query": PROMPT,
        "top_k": top_k, "hop_depth": 0,
        "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0, "access": 0.0}}),
    )
    .await
}

/// The returned ids with their similarities, best first.
fn found(answer: &Value) -> Vec<(String, f64)> {
    answer["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| {
            (
                found["id"].as_str().unwrap().to_owned(),
                found["scores"]["similarity"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_lone_memory_comes_back_for_a_related_prompt_under_the_floor() {
    let (app, ids) = store(&[MIGRATIONS]).await;
    let answer = retrieve(&app, 5).await;
    let found = found(&answer);
    assert_eq!(found.len(), 1, "{answer:#}");
    assert_eq!(found[0].0, ids[0]);
    assert!(
        found[0].1 < 0.1,
        "the memory must score under the floor for this to test it: {answer:#}"
    );
    assert!(
        answer["injection"].as_str().unwrap().contains("goose"),
        "{answer:#}"
    );
}

#[tokio::test]
async fn a_store_no_larger_than_top_k_answers_with_all_of_it_and_a_larger_one_keeps_the_floor() {
    let contents: Vec<&str> = std::iter::once(MIGRATIONS).chain(OTHERS).collect();
    let (app, ids) = store(&contents).await;
    let whole = retrieve(&app, contents.len()).await;
    let mut returned: Vec<String> = found(&whole).into_iter().map(|(id, _)| id).collect();
    returned.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(returned, all, "{whole:#}");
    assert!(
        found(&whole)
            .iter()
            .any(|(_, similarity)| *similarity < 0.1),
        "some memory must score under the floor for this to test it: {whole:#}"
    );

    let top_k = contents.len() - 1;
    let floored = retrieve(&app, top_k).await;
    let kept = found(&floored);
    assert!(
        kept.len() < top_k,
        "the floor left nothing out: {floored:#}"
    );
    assert!(
        kept.iter().all(|(_, similarity)| *similarity >= 0.1),
        "{floored:#}"
    );
    assert!(kept.iter().all(|(id, _)| *id != ids[0]), "{floored:#}");
}
