//! The data directory as the source of truth: hand-written files are
//! loaded, broken ones skipped and counted but never touched.
//! Files only: hand-written files are files mode's source of truth.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use engram::config::ApiKey;
use serde_json::{Value, json};

use crate::grants::grant;
use crate::helpers::{Ground, TestApp};

const HAND_WRITTEN_ID: &str = "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d";

fn hand_written(id: &str, scope: &str) -> String {
    format!(
        "---\nid: {id}\nversion: 1\nscope: {scope}\ncategory: corrections\n\
         created_at: 2026-11-22T10:00:00Z\nupdated_at: 2026-11-22T10:00:00Z\n\
         trigger: manual\n---\nThe staging database is read-only.\n"
    )
}

#[tokio::test]
async fn hand_added_files_are_loaded_and_broken_ones_skipped_untouched() {
    let ground = Ground::new().await;
    let forge = ground.path().join("repos/forge");
    fs::create_dir_all(&forge).unwrap();
    fs::create_dir_all(ground.path().join("repos/bad name")).unwrap();
    fs::write(
        forge.join(format!("{HAND_WRITTEN_ID}.md")),
        hand_written(HAND_WRITTEN_ID, "repo"),
    )
    .unwrap();
    let broken = [
        ("not-an-id.md", hand_written(HAND_WRITTEN_ID, "repo")),
        (
            "0193f0c2-0000-7000-8000-000000000001.md",
            "no front matter at all".to_owned(),
        ),
        (
            "0193f0c2-0000-7000-8000-000000000002.md",
            hand_written(HAND_WRITTEN_ID, "repo"),
        ),
        (
            "0193f0c2-0000-7000-8000-000000000003.md",
            hand_written("0193f0c2-0000-7000-8000-000000000003", "user"),
        ),
    ];
    for (name, text) in &broken {
        fs::write(forge.join(name), text).unwrap();
    }
    fs::write(forge.join("notes.txt"), "not a memory: counted, left alone").unwrap();
    fs::write(forge.join(".tmp-abc-x.md"), "an interrupted write").unwrap();

    let app = TestApp::builder().on(ground).spawn().await;

    let loaded = app.get(&format!("/memories/{HAND_WRITTEN_ID}")).await;
    assert_eq!(loaded.status, StatusCode::OK, "{}", loaded.text);
    assert_eq!(loaded.json["repo"], "forge");
    assert_eq!(loaded.json["content"], "The staging database is read-only.");
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["store"]["memories"], 1);
    // The four broken memory files, the badly named directory, notes.txt.
    assert_eq!(stats["store"]["skipped_files"], 6, "{stats}");
    let skipped: Vec<&str> = stats["store"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert!(skipped.contains(&"repos/bad name/"), "{skipped:?}");
    assert!(skipped.contains(&"repos/forge/not-an-id.md"), "{skipped:?}");
    for (name, text) in &broken {
        assert_eq!(
            &fs::read_to_string(forge.join(name)).unwrap(),
            text,
            "{name} was modified"
        );
    }
    assert!(
        !forge.join(".tmp-abc-x.md").exists(),
        "interrupted writes are swept"
    );
    assert!(forge.join("notes.txt").exists());

    // The store keeps working beside the broken files.
    let mut body = json!({"scope": "repo", "repo": "forge", "category": "corrections", "content": "Staging is writable again."});
    body["supersedes"] = json!(HAND_WRITTEN_ID);
    let created = app.post("/memories", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json["version"], 2);
}

#[tokio::test]
async fn hand_edited_files_are_picked_up_at_start() {
    let app = TestApp::builder().spawn().await;
    let created = app
        .post("/memories", &json!({"scope": "user", "user": "ana", "category": "user-facts", "content": "Ana uses vim."}))
        .await
        .json;
    let id = created["id"].as_str().unwrap();
    let path = app.data_dir.join(format!("users/ana/{id}.md"));
    let edited = fs::read_to_string(&path)
        .unwrap()
        .replace("Ana uses vim.", "Ana uses helix.");
    fs::write(&path, edited).unwrap();

    let restarted = TestApp::builder().on(app.into_ground()).spawn().await;

    let memory = restarted.get(&format!("/memories/{id}")).await.json;
    assert_eq!(memory["content"], "Ana uses helix.");
}

/// The names of the files directly in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn symbolic_links_are_never_followed_out_of_the_data_directory() {
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = outside.path().join("bob");
    fs::create_dir_all(&elsewhere).unwrap();
    let file_outside = "0193f0c2-0000-7000-8000-00000000000a";
    let dir_outside = "0193f0c2-0000-7000-8000-00000000000b";
    let passwd = "0193f0c2-0000-7000-8000-00000000000c";
    fs::write(
        outside.path().join("memory.md"),
        hand_written(file_outside, "user"),
    )
    .unwrap();
    fs::write(
        elsewhere.join(format!("{dir_outside}.md")),
        hand_written(dir_outside, "user"),
    )
    .unwrap();
    let ground = Ground::new().await;
    let users = ground.path().join("users");
    fs::create_dir_all(users.join("ana")).unwrap();
    fs::create_dir_all(ground.path().join("repos/forge")).unwrap();
    symlink(
        outside.path().join("memory.md"),
        users.join(format!("ana/{file_outside}.md")),
    )
    .unwrap();
    symlink(&elsewhere, users.join("bob")).unwrap();
    symlink(
        "/etc/passwd",
        ground.path().join(format!("repos/forge/{passwd}.md")),
    )
    .unwrap();

    let app = TestApp::builder().on(ground).spawn().await;

    for id in [file_outside, dir_outside, passwd] {
        app.get(&format!("/memories/{id}"))
            .await
            .assert_problem(StatusCode::NOT_FOUND, None);
    }
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["store"]["memories"], 0, "{stats}");
    let skipped = &stats["store"]["skipped"];
    for path in [
        format!("users/ana/{file_outside}.md"),
        "users/bob".to_owned(),
        format!("repos/forge/{passwd}.md"),
    ] {
        let entry = skipped
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{path} is not listed: {skipped}"));
        assert!(
            entry["reason"].as_str().unwrap().contains("symbolic link"),
            "{entry}"
        );
    }

    // Writing for bob would go through the link: refused, nothing written.
    let refused = app
        .post(
            "/memories",
            &json!({"scope": "user", "user": "bob", "category": "user-facts", "content": "Bob uses emacs."}),
        )
        .await;
    refused.assert_problem(StatusCode::CONFLICT, Some("user"));
    assert!(
        !refused.text.contains(&outside.path().display().to_string()),
        "{}",
        refused.text
    );
    assert_eq!(names_in(&elsewhere), [format!("{dir_outside}.md")]);
    let written = app
        .post(
            "/memories",
            &json!({"scope": "user", "user": "ana", "category": "user-facts", "content": "Ana uses vim."}),
        )
        .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.text);
}

#[tokio::test]
async fn a_namespace_directory_replaced_by_a_link_is_not_removed_from() {
    let app = TestApp::builder().spawn().await;
    let created = app
        .create(json!({"scope": "user", "user": "ana", "category": "user-facts", "content": "Ana uses vim."}))
        .await;
    let id = created["id"].as_str().unwrap();
    // After start, someone moves ana's directory away and links to it.
    let outside = tempfile::tempdir().unwrap();
    let moved = outside.path().join("ana");
    fs::rename(app.data_dir.join("users/ana"), &moved).unwrap();
    symlink(&moved, app.data_dir.join("users/ana")).unwrap();

    app.delete(&format!("/memories/{id}"))
        .await
        .assert_problem(StatusCode::CONFLICT, Some("id"));
    assert_eq!(names_in(&moved), [format!("{id}.md")]);
    app.post(
        "/memories",
        &json!({"scope": "user", "user": "ana", "category": "user-facts", "content": "Ana uses helix."}),
    )
    .await
    .assert_problem(StatusCode::CONFLICT, Some("user"));
    assert_eq!(names_in(&moved), [format!("{id}.md")]);
}

#[tokio::test]
async fn everything_in_a_namespace_that_is_not_a_memory_file_is_listed_with_why() {
    let ground = Ground::new().await;
    let forge = ground.path().join("repos/forge");
    fs::create_dir_all(forge.join("drafts")).unwrap();
    fs::create_dir_all(forge.join(".git")).unwrap();
    fs::create_dir_all(ground.path().join("users/bob")).unwrap();
    let upper = "0193f0c2-0000-7000-8000-0000000000d1";
    fs::write(
        forge.join(format!("{upper}.MD")),
        hand_written(upper, "repo"),
    )
    .unwrap();
    let nested = "0193f0c2-0000-7000-8000-0000000000d2";
    fs::write(
        forge.join(format!("drafts/{nested}.md")),
        hand_written(nested, "repo"),
    )
    .unwrap();
    let fifo = "0193f0c2-0000-7000-8000-0000000000d3";
    let made = std::process::Command::new("mkfifo")
        .arg(forge.join(format!("{fifo}.md")))
        .status()
        .unwrap();
    assert!(made.success());
    fs::write(forge.join("notes.txt"), "a stray file").unwrap();
    fs::write(forge.join(".DS_Store"), "system debris").unwrap();
    fs::write(ground.path().join("users/bob/todo.txt"), "bob's stray file").unwrap();
    fs::write(
        ground.path().join("users/README"),
        "a stray file beside the namespaces",
    )
    .unwrap();

    // Loading never opens the FIFO (opening one blocks until a writer comes).
    let app = keyed_app_on(ground).await;

    let listed = |stats: &Value| -> Vec<(String, String)> {
        stats["store"]["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["path"].as_str().unwrap().to_owned(),
                    s["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let everything = listed(&get_with(&app, "/stats", ROOT).await);
    let reason_of = |path: &str| {
        everything
            .iter()
            .find(|(listed, _)| listed == path)
            .map(|(_, reason)| reason.clone())
            .unwrap_or_else(|| panic!("{path} is not listed: {everything:?}"))
    };
    assert!(reason_of(&format!("repos/forge/{upper}.MD")).contains("lower case"));
    assert!(reason_of("repos/forge/drafts").contains("a directory"));
    assert!(reason_of("repos/forge/.git").contains("hidden directory"));
    assert!(reason_of(&format!("repos/forge/{fifo}.md")).contains("FIFO"));
    assert!(reason_of("repos/forge/notes.txt").contains("not a memory file"));
    assert!(reason_of("users/bob/todo.txt").contains("not a memory file"));
    assert!(reason_of("users/README").contains("not a directory"));
    assert_eq!(everything.len(), 7, "{everything:?}");

    // A limited key sees what is skipped in its namespaces only.
    let limited = get_with(&app, "/stats", LIMITED).await;
    let paths: Vec<String> = listed(&limited).into_iter().map(|(path, _)| path).collect();
    assert_eq!(limited["store"]["skipped_files"], 5, "{paths:?}");
    assert!(
        paths.iter().all(|path| path.starts_with("repos/forge/")),
        "{paths:?}"
    );
}

const ROOT: &str = "root-key";
const LIMITED: &str = "forge-ana-key";

/// An app on `ground` with the root key and a key limited to repo `forge`
/// and user `ana`.
async fn keyed_app_on(ground: Ground) -> TestApp {
    TestApp::builder()
        .on(ground)
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["forge"], &["ana"])];
        })
        .spawn()
        .await
}

async fn get_with(app: &TestApp, uri: &str, key: &str) -> Value {
    let request = Request::builder()
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .body(Body::empty())
        .unwrap();
    let response = app.send(request).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response.json
}

#[tokio::test]
async fn a_skipped_files_reason_never_names_another_namespace() {
    let ground = Ground::new().await;
    for dir in ["repos/secret", "users/ana"] {
        fs::create_dir_all(ground.path().join(dir)).unwrap();
    }
    fs::write(
        ground
            .path()
            .join(format!("repos/secret/{HAND_WRITTEN_ID}.md")),
        hand_written(HAND_WRITTEN_ID, "repo"),
    )
    .unwrap();
    fs::write(
        ground
            .path()
            .join(format!("users/ana/{HAND_WRITTEN_ID}.md")),
        hand_written(HAND_WRITTEN_ID, "user"),
    )
    .unwrap();
    let app = keyed_app_on(ground).await;

    let stats = get_with(&app, "/stats", LIMITED).await;
    let skipped = &stats["store"]["skipped"];
    assert_eq!(
        skipped[0]["path"],
        format!("users/ana/{HAND_WRITTEN_ID}.md"),
        "{stats}"
    );
    assert!(!skipped.to_string().contains("secret"), "{skipped}");
}
