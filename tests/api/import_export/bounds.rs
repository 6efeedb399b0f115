//! Numbers a memory is brought in with are bounded where the import
//! parses them (timestamps against the server's clock, the version, the
//! use count), and no supersede can wrap a version, whatever a
//! hand-edited file holds.

use std::fs;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Ground, TestApp};

const ID: &str = "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d";

fn exported() -> Value {
    json!({"id": ID, "version": 1, "scope": "repo", "repo": "forge",
    "category": "patterns", "created_at": "2026-01-02T03:04:05Z",
    "updated_at": "2026-01-02T03:04:05Z", "trigger": "manual",
    "content": "Builds run in CI only."})
}

#[tokio::test]
async fn an_imported_memorys_timestamps_version_and_use_count_are_bounded() {
    let app = TestApp::builder().spawn().await;
    let in_a_day = (chrono::Utc::now() + chrono::TimeDelta::days(1)).to_rfc3339();
    for (field, value) in [
        ("created_at", json!("9999-12-31T23:59:59Z")),
        ("updated_at", json!(in_a_day)),
        ("created_at", json!("1969-12-31T23:59:59Z")),
        ("version", json!(u32::MAX)),
        ("version", json!(0)),
        ("access_count", json!(u64::MAX)),
    ] {
        let mut memory = exported();
        memory[field] = value.clone();
        let refused = app
            .post("/memories/import", &json!({"memories": [memory]}))
            .await;
        let named = format!("memories[0].{field}");
        refused.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(&named));
        assert!(
            refused.json["detail"]
                .as_str()
                .unwrap()
                .starts_with(&format!("`{named}`")),
            "{field} = {value}: {}",
            refused.text
        );
    }
    let listed = app.get("/memories?all_versions=true").await;
    assert_eq!(listed.json["memories"], json!([]), "nothing was written");

    // Within the bounds, a memory comes in, and a new version of it
    // follows.
    let mut highest = exported();
    highest["version"] = json!(1_000_000);
    highest["access_count"] = json!(1_000_000_000_000_u64);
    highest["created_at"] = json!(chrono::Utc::now().to_rfc3339());
    let answer = app
        .post("/memories/import", &json!({"memories": [highest]}))
        .await;
    assert_eq!(answer.json["imported"], 1, "{}", answer.text);
    let next = app
        .post(
            "/memories",
            &json!({"scope": "repo", "repo": "forge", "category": "patterns",
            "content": "Builds run in CI only, on main.", "supersedes": ID}),
        )
        .await;
    assert_eq!(next.status, StatusCode::CREATED, "{}", next.text);
    assert_eq!(next.json["version"], 1_000_001);
}

#[tokio::test]
async fn a_version_at_the_top_of_the_range_is_not_wrapped_by_a_supersede() {
    let ground = Ground::new().await;
    let forge = ground.path().join("repos/forge");
    fs::create_dir_all(&forge).unwrap();
    fs::write(
        forge.join(format!("{ID}.md")),
        format!(
            "---\nid: {ID}\nversion: {}\nscope: repo\ncategory: patterns\n\
             created_at: 2026-01-02T03:04:05Z\nupdated_at: 2026-01-02T03:04:05Z\n\
             trigger: manual\n---\nBuilds run in CI only.\n",
            u32::MAX
        ),
    )
    .unwrap();
    let app = TestApp::builder().on(ground).spawn().await;
    let refused = app
        .post(
            "/memories",
            &json!({"scope": "repo", "repo": "forge", "category": "patterns",
            "content": "Builds run in CI only, on main.", "supersedes": ID}),
        )
        .await;
    refused.assert_problem(StatusCode::CONFLICT, Some("supersedes"));
    let files = fs::read_dir(app.data_dir.join("repos/forge"))
        .unwrap()
        .count();
    assert_eq!(files, 1, "nothing was written");
}
