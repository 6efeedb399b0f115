//! A namespace above `index.approximate_above`, searched through its
//! approximate index: built at start from the files, kept as memories
//! are written and forgotten, and answering as the scan does for
//! meaning, category filters and `exclude_ids`.

use std::fs;

use engram::memory::{Category, MemoryId};
use serde_json::json;

use crate::helpers::{Ground, TestApp, id, ids, memory};

/// Subjects, verbs and objects of the filler memories: 700 of them, with
/// nothing about databases or deploys.
const SUBJECTS: [&str; 7] = [
    "The billing page",
    "The search box",
    "The CLI help text",
    "The onboarding email",
    "The admin table",
    "The status badge",
    "The settings form",
];
const VERBS: [&str; 4] = ["shows", "hides", "sorts", "truncates"];
const OBJECTS: [&str; 5] = [
    "long user names",
    "invoice totals",
    "empty states",
    "error toasts",
    "keyboard shortcuts",
];

#[tokio::test]
async fn a_namespace_above_the_threshold_is_searched_as_the_scan_would() {
    let ground = Ground::new().await;
    let forge = ground.path().join("repos/forge");
    fs::create_dir_all(&forge).unwrap();
    let database = MemoryId::new();
    let mut files = vec![(
        database,
        Category::ArchitecturalDecisions,
        "We store everything in PostgreSQL 16.".to_owned(),
    )];
    for serial in 0..700 {
        let content = format!(
            "{} {} {} (ticket {serial}).",
            SUBJECTS[serial % 7],
            VERBS[serial / 7 % 4],
            OBJECTS[serial / 28 % 5]
        );
        let category = Category::ALL[serial % Category::ALL.len()];
        files.push((MemoryId::new(), category, content));
    }
    for (memory_id, category, content) in &files {
        fs::write(
            forge.join(format!("{memory_id}.md")),
            format!(
                "---\nid: {memory_id}\nversion: 1\nscope: repo\ncategory: {}\n\
                 created_at: 2026-01-02T03:04:05Z\nupdated_at: 2026-01-02T03:04:05Z\n\
                 trigger: manual\n---\n{content}\n",
                category.as_str()
            ),
        )
        .unwrap();
    }
    let app = TestApp::builder()
        .on(ground)
        .config(|config| config.index.approximate_above = 100)
        .spawn()
        .await;
    app.wait_indexed().await;
    let ask = |query: &str| json!({"turn_id": query, "repo": "forge", "query": query, "use_cache": false});

    let found = app
        .retrieve(ask("which relational database do we use?"))
        .await;
    assert_eq!(ids(&found)[0], database.to_string(), "{found:#}");

    let mut corrections = ask("which relational database do we use?");
    corrections["filters"] = json!({"categories": ["corrections"]});
    let found = app.retrieve(corrections).await;
    assert!(!ids(&found).is_empty());
    for memory in found["memories"].as_array().unwrap() {
        assert_eq!(memory["category"], "corrections", "{found:#}");
    }

    let mut excluding = ask("which relational database do we use?");
    excluding["exclude_ids"] = json!([database.to_string()]);
    let found = app.retrieve(excluding).await;
    assert!(!ids(&found).contains(&database.to_string()), "{found:#}");

    let deploys = app
        .create(memory(
            "repo",
            "forge",
            "project-conventions",
            "Deploys go out through Argo CD, never on Fridays.",
        ))
        .await;
    app.wait_indexed().await;
    let found = app.retrieve(ask("how do we deploy to production?")).await;
    assert_eq!(ids(&found)[0], id(&deploys), "{found:#}");

    app.delete(&format!("/memories/{}", id(&deploys))).await;
    app.wait_indexed().await;
    let found = app.retrieve(ask("how do we deploy to production?")).await;
    assert!(!ids(&found).contains(&id(&deploys)), "{found:#}");
}
