//! Links that cross namespaces: a hand-edited file's `supersedes` and
//! `related` into another user's memory are never followed. Files only:
//! hand-edited files are a files-mode feature.

use axum::http::{Method, StatusCode};
use engram::config::ApiKey;
use serde_json::json;

use super::{ROOT, grant, ids_of, send};
use crate::helpers::{Ground, TestApp};

const UA: &str = "ua-key";
const UB: &str = "ub-key";
const UB_MEMORY: &str = "0193f0c2-0000-7000-8000-0000000000b1";
const UA_MEMORY: &str = "0193f0c2-0000-7000-8000-0000000000a1";

/// A memory file of user `owner`, with extra front-matter lines.
fn user_memory_file(id: &str, version: u32, extra: &str, content: &str) -> String {
    format!(
        "---\nid: {id}\nversion: {version}\nscope: user\ncategory: patterns\n\
         created_at: 2026-11-22T10:00:00Z\nupdated_at: 2026-11-22T10:00:00Z\n\
         {extra}trigger: manual\n---\n{content}\n"
    )
}

/// users/ua holds a hand-edited file whose `supersedes` and `related` name
/// ub's memory.
async fn cross_namespace_links() -> TestApp {
    let ground = Ground::new().await;
    for user in ["ua", "ub"] {
        std::fs::create_dir_all(ground.path().join(format!("users/{user}"))).unwrap();
    }
    std::fs::write(
        ground.path().join(format!("users/ub/{UB_MEMORY}.md")),
        user_memory_file(UB_MEMORY, 1, "", "Ub deploys with the blue pipeline."),
    )
    .unwrap();
    std::fs::write(
        ground.path().join(format!("users/ua/{UA_MEMORY}.md")),
        user_memory_file(
            UA_MEMORY,
            2,
            &format!(
                "supersedes: {UB_MEMORY}\nrelated:\n- id: {UB_MEMORY}\n  relationship: refines\n"
            ),
            "Ua deploys with the green pipeline.",
        ),
    )
    .unwrap();
    let app = TestApp::builder()
        .on(ground)
        .embedder()
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![
                grant(UA, &["default"], &["ua"]),
                grant(UB, &["default"], &["ub"]),
            ];
        })
        .spawn()
        .await;
    app.wait_indexed_with(ROOT).await;
    app
}

#[tokio::test]
async fn a_hand_edited_link_into_another_namespace_is_never_followed() {
    let app = cross_namespace_links().await;

    let theirs_from_a = send(
        &app,
        Method::GET,
        &format!("/memories/{UA_MEMORY}"),
        None,
        UA,
    )
    .await;
    assert_eq!(
        theirs_from_a.status,
        StatusCode::OK,
        "{}",
        theirs_from_a.text
    );
    let detail = &theirs_from_a.json;
    assert_eq!(ids_of(&detail["chain"]), [UA_MEMORY], "{detail:#}");
    assert_eq!(detail["edges"]["outgoing"], json!([]), "{detail:#}");

    let detail = send(
        &app,
        Method::GET,
        &format!("/memories/{UB_MEMORY}"),
        None,
        UB,
    )
    .await
    .json;
    assert_eq!(ids_of(&detail["chain"]), [UB_MEMORY], "{detail:#}");
    assert_eq!(detail["edges"]["incoming"], json!([]), "{detail:#}");

    let retrieved = send(
        &app,
        Method::POST,
        "/retrieve",
        Some(json!({"turn_id": "t", "user": "ub", "query": "deploys pipeline"})),
        UB,
    )
    .await;
    assert_eq!(retrieved.status, StatusCode::OK, "{}", retrieved.text);
    assert_eq!(
        ids_of(&retrieved.json["memories"]),
        [UB_MEMORY],
        "{}",
        retrieved.text
    );

    // Both links are reported against ua's file, without naming ub.
    let stats = send(&app, Method::GET, "/stats", None, ROOT).await.json;
    assert_eq!(stats["store"]["memories"], 2);
    let reported: Vec<&str> = stats["store"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            assert_eq!(entry["path"], format!("users/ua/{UA_MEMORY}.md"));
            let reason = entry["reason"].as_str().unwrap();
            assert!(!reason.contains("ub"), "{entry}");
            reason.split(' ').next().unwrap()
        })
        .collect();
    assert_eq!(reported, ["`supersedes`", "`related[0].id`"], "{stats:#}");
    let of_a = send(&app, Method::GET, "/stats", None, UA).await.json;
    assert_eq!(of_a["store"]["skipped_files"], 2);
    let of_b = send(&app, Method::GET, "/stats", None, UB).await.json;
    assert_eq!(of_b["store"]["skipped_files"], 0);
}
