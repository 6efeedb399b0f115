//! Live sync: files added, edited, broken, renamed and removed on disk
//! while the service runs reach the API and retrieval without a restart;
//! Engram's own writes are not taken in twice. Every wait polls for the
//! state with a deadline; none measures time.
//! Files only: live sync of hand edits is a files-mode feature.

use std::fs;
use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use engram::memory::MemoryId;
use serde_json::{Value, json};

use crate::helpers::{TestApp, ids, memory, wait_until_async};

/// A memory file as a person would write it.
pub fn memory_file(id: &str, scope: &str, content: &str) -> String {
    format!(
        "---\nid: {id}\nversion: 1\nscope: {scope}\ncategory: corrections\n\
         created_at: 2026-11-22T10:00:00Z\nupdated_at: 2026-11-22T10:00:00Z\n\
         trigger: manual\n---\n{content}\n"
    )
}

/// An app whose embedder is the fake upstream, over a fresh directory.
async fn app() -> TestApp {
    TestApp::builder().embedder().spawn().await
}

/// Writes a memory through the API; its id.
async fn write(app: &TestApp, scope: &str, owner: &str, content: &str) -> String {
    let written = app.create(memory(scope, owner, "patterns", content)).await;
    written["id"].as_str().unwrap().to_owned()
}

fn path_of(app: &TestApp, namespace: &str, id: &str) -> PathBuf {
    app.data_dir.join(namespace).join(format!("{id}.md"))
}

/// Writes `text` at `path` the way a sync tool does: beside it (hidden),
/// then renamed over it.
fn put(path: &Path, text: &str) {
    let dir = path.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    let temp = dir.join(format!(
        ".{}.partial",
        path.file_name().unwrap().to_string_lossy()
    ));
    fs::write(&temp, text).unwrap();
    fs::rename(temp, path).unwrap();
}

async fn content_of(app: &TestApp, id: &str) -> Option<String> {
    let response = app.get(&format!("/memories/{id}")).await;
    match response.status {
        StatusCode::OK => Some(response.json["content"].as_str().unwrap().to_owned()),
        StatusCode::NOT_FOUND => None,
        status => panic!("GET /memories/{id}: {status} {}", response.text),
    }
}

async fn wait_for_content(app: &TestApp, id: &str, expected: Option<&str>) {
    wait_until_async(&format!("{id} to read {expected:?}"), async || {
        content_of(app, id).await.as_deref() == expected
    })
    .await;
}

async fn ask(app: &TestApp, repo: &str, turn: &str, query: &str) -> Value {
    app.retrieve(json!({"turn_id": turn, "repo": repo, "query": query, "top_k": 10}))
        .await
}

async fn skipped_paths(app: &TestApp) -> Vec<String> {
    app.get("/stats").await.json["store"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap().to_owned())
        .collect()
}

/// Why `/stats` (`stats`) says the file at `relative` was skipped.
fn skipped_reason(stats: &Value, relative: &str) -> String {
    stats["store"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|file| file["path"] == relative)
        .unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn sync_stats(app: &TestApp) -> Value {
    app.get("/stats").await.json["store"]["sync"].clone()
}

/// Waits until the watcher has run a pass that began after this call: it
/// adds (or removes) a stray file beside the namespaces and waits for its
/// report to appear (or go).
async fn wait_for_a_pass(app: &TestApp) {
    const STRAY: &str = "repos/stray.txt";
    let present = skipped_paths(app).await.iter().any(|path| path == STRAY);
    let stray = app.data_dir.join(STRAY);
    if present {
        fs::remove_file(stray).unwrap();
    } else {
        fs::write(stray, "not a namespace").unwrap();
    }
    wait_until_async("a sync pass", async || {
        skipped_paths(app).await.iter().any(|path| path == STRAY) != present
    })
    .await;
}

#[tokio::test]
async fn a_file_edited_on_disk_is_served_and_retrieved_as_edited() {
    let app = app().await;
    let id = &write(&app, "repo", "forge", "Deploys go out on Mondays.").await;
    let first = ask(&app, "forge", "t-1", "quokka deploys").await;
    assert_eq!(ids(&first), [id.as_str()], "{first:#}");

    let path = path_of(&app, "repos/forge", id);
    let edited = fs::read_to_string(&path).unwrap().replace(
        "Deploys go out on Mondays.",
        "Quokka deploys go out on Fridays.",
    );
    fs::write(&path, &edited).unwrap();
    wait_for_content(&app, id, Some("Quokka deploys go out on Fridays.")).await;
    app.wait_indexed().await;

    // The same turn again: the cached answer is stale, so it is not used.
    let again = ask(&app, "forge", "t-1", "quokka deploys").await;
    assert_eq!(again["cached"], false, "{again:#}");
    assert_eq!(
        again["memories"][0]["content"],
        "Quokka deploys go out on Fridays."
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        edited,
        "Engram never rewrites a file it took in"
    );
}

#[tokio::test]
async fn files_added_and_removed_on_disk_in_a_new_namespace_are_found_then_gone() {
    let app = app().await;
    let id = MemoryId::new().to_string();
    let path = path_of(&app, "repos/handmade", &id);
    put(
        &path,
        &memory_file(&id, "repo", "The wombat cluster runs on ARM."),
    );
    wait_for_content(&app, &id, Some("The wombat cluster runs on ARM.")).await;
    app.wait_indexed().await;
    let found = ask(&app, "handmade", "t-1", "wombat cluster").await;
    assert_eq!(ids(&found), [id.as_str()], "{found:#}");

    fs::remove_file(&path).unwrap();
    wait_for_content(&app, &id, None).await;
    app.wait_indexed().await;
    let gone = ask(&app, "handmade", "t-2", "wombat cluster").await;
    assert!(ids(&gone).is_empty(), "{gone:#}");
    assert_eq!(app.get("/stats").await.json["store"]["memories"], 0);
}

#[tokio::test]
async fn a_broken_edit_keeps_the_last_good_version_and_is_reported_until_fixed() {
    let app = app().await;
    let id = &write(&app, "user", "ana", "Ana reviews on Tuesdays.").await;
    let path = path_of(&app, "users/ana", id);
    let relative = format!("users/ana/{id}.md");

    let broken = "---\nid: [this is not\n---\nhalf an edit";
    fs::write(&path, broken).unwrap();
    wait_until_async("the broken file to be reported", async || {
        skipped_paths(&app).await.contains(&relative)
    })
    .await;
    let stats = app.get("/stats").await.json;
    let reason = skipped_reason(&stats, &relative);
    assert!(
        reason.contains("last good version stays in service"),
        "{reason}"
    );
    assert_eq!(stats["store"]["memories"], 1);
    assert_eq!(
        content_of(&app, id).await.as_deref(),
        Some("Ana reviews on Tuesdays.")
    );
    app.wait_indexed().await;
    let retrieved = app
        .retrieve(json!({"turn_id": "t-1", "user": "ana", "query": "Ana reviews", "top_k": 5}))
        .await;
    assert_eq!(
        ids(&retrieved),
        [id.as_str()],
        "still retrieved: {retrieved:#}"
    );
    wait_for_a_pass(&app).await;
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        broken,
        "never overwritten"
    );

    put(&path, &memory_file(id, "user", "Ana reviews on Thursdays."));
    wait_for_content(&app, id, Some("Ana reviews on Thursdays.")).await;
    wait_until_async("the report to clear", async || {
        !skipped_paths(&app).await.contains(&relative)
    })
    .await;
}

#[tokio::test]
async fn a_file_moved_to_another_namespace_moves_its_memory() {
    let app = app().await;
    let id = &write(&app, "user", "ana", "Prefers tabs over spaces.").await;
    let text = fs::read_to_string(path_of(&app, "users/ana", id)).unwrap();
    fs::create_dir_all(app.data_dir.join("users/bob")).unwrap();
    fs::rename(
        path_of(&app, "users/ana", id),
        path_of(&app, "users/bob", id),
    )
    .unwrap();

    wait_until_async("the memory to move to bob", async || {
        app.get(&format!("/memories/{id}")).await.json["user"] == "bob"
    })
    .await;
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["store"]["memories"], 1, "{stats:#}");
    assert_eq!(stats["store"]["skipped_files"], 0, "{stats:#}");
    let of_ana = app.get("/memories?user=ana&scope=user").await.json;
    assert_eq!(of_ana["memories"], json!([]));
    assert_eq!(
        fs::read_to_string(path_of(&app, "users/bob", id)).unwrap(),
        text
    );
}

#[tokio::test]
async fn a_move_done_as_copy_then_delete_moves_the_memory() {
    let app = app().await;
    let id = &write(&app, "user", "ana", "Prefers small pull requests.").await;
    let text = fs::read_to_string(path_of(&app, "users/ana", id)).unwrap();
    put(&path_of(&app, "users/bob", id), &text);
    let copy = format!("users/bob/{id}.md");
    wait_until_async("the copy to be refused", async || {
        skipped_paths(&app).await.contains(&copy)
    })
    .await;
    assert_eq!(
        app.get(&format!("/memories/{id}")).await.json["user"],
        "ana"
    );

    fs::remove_file(path_of(&app, "users/ana", id)).unwrap();
    wait_until_async("the memory to move to bob", async || {
        app.get(&format!("/memories/{id}")).await.json["user"] == "bob"
    })
    .await;
    wait_until_async("the report to clear", async || {
        !skipped_paths(&app).await.contains(&copy)
    })
    .await;
}

#[tokio::test]
async fn a_bulk_change_of_many_files_settles_to_what_is_on_disk() {
    const FILES: usize = 300;
    let app = app().await;
    let ids: Vec<String> = (0..FILES).map(|_| MemoryId::new().to_string()).collect();
    // A checkout: the whole directory appears at once.
    let staging = app.data_dir.join("staging");
    for (n, id) in ids.iter().enumerate() {
        put(
            &staging.join(format!("{id}.md")),
            &memory_file(id, "repo", &format!("Bulk note number {n}.")),
        );
    }
    fs::rename(&staging, app.data_dir.join("repos/bulk")).unwrap();
    wait_until_async("every file to be in", async || {
        app.get("/stats").await.json["store"]["memories"] == FILES
    })
    .await;

    // Another checkout: a third edited, a third deleted, all at once.
    for (n, id) in ids.iter().enumerate() {
        let path = path_of(&app, "repos/bulk", id);
        match n % 3 {
            0 => put(
                &path,
                &memory_file(id, "repo", &format!("Edited note {n}.")),
            ),
            1 => fs::remove_file(&path).unwrap(),
            _ => {}
        }
    }
    wait_until_async("the edits and deletes to be in", async || {
        app.get("/stats").await.json["store"]["memories"] == FILES - FILES / 3
    })
    .await;
    wait_for_a_pass(&app).await;
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], FILES - FILES / 3, "{stats:#}");
    for (n, id) in ids.iter().enumerate() {
        let expected = match n % 3 {
            0 => Some(format!("Edited note {n}.")),
            1 => None,
            _ => Some(format!("Bulk note number {n}.")),
        };
        assert_eq!(content_of(&app, id).await, expected, "memory {n}");
    }
}

#[tokio::test]
async fn engrams_own_writes_are_not_taken_in_twice() {
    let app = app().await;
    let upstream = &app.upstream;
    let content = "Lint runs before every commit.";
    let id = &write(&app, "repo", "forge", content).await;
    wait_until_async("the watcher to read the new file", async || {
        sync_stats(&app).await["files_read"].as_u64().unwrap() >= 1
    })
    .await;
    app.wait_indexed().await;
    let sync = sync_stats(&app).await;
    assert_eq!(sync["watching"], true, "{sync}");
    assert_eq!(sync["applied"], 0, "nothing to take in: {sync}");
    assert!(
        sync["unchanged"].as_u64().unwrap() >= 1,
        "read back, found equal: {sync}"
    );
    let embedded = upstream.embedded_texts();
    assert_eq!(
        embedded.iter().filter(|text| *text == content).count(),
        1,
        "embedded once: {embedded:?}"
    );

    assert_eq!(
        app.delete(&format!("/memories/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    wait_for_a_pass(&app).await;
    assert_eq!(sync_stats(&app).await["applied"], 0);
}

#[tokio::test]
async fn a_link_written_into_another_namespace_by_hand_is_reported_until_it_goes() {
    let app = app().await;
    let theirs = write(&app, "user", "ub", "Ub deploys with the blue pipeline.").await;
    let mine = MemoryId::new().to_string();
    let path = path_of(&app, "users/ua", &mine);
    let linked = memory_file(&mine, "user", "Ua deploys with the green pipeline.").replacen(
        "trigger: manual\n",
        &format!("trigger: manual\nrelated:\n- id: {theirs}\n  relationship: refines\n"),
        1,
    );
    put(&path, &linked);
    let relative = format!("users/ua/{mine}.md");
    wait_until_async("the link to be reported", async || {
        skipped_paths(&app).await.contains(&relative)
    })
    .await;
    let stats = app.get("/stats").await.json;
    assert!(
        skipped_reason(&stats, &relative).starts_with("`related[0].id`"),
        "{stats:#}"
    );
    assert_eq!(
        content_of(&app, &mine).await.as_deref(),
        Some("Ua deploys with the green pipeline.")
    );

    fs::remove_file(&path).unwrap();
    wait_for_content(&app, &mine, None).await;
    wait_for_a_pass(&app).await;
    assert!(!skipped_paths(&app).await.contains(&relative));
}

#[tokio::test]
async fn with_watching_off_changes_on_disk_wait_for_a_restart() {
    let app = TestApp::builder()
        .config(|config| config.store.watch = false)
        .spawn()
        .await;
    let id = MemoryId::new().to_string();
    put(
        &path_of(&app, "repos/forge", &id),
        &memory_file(&id, "repo", "Not seen until a restart."),
    );
    let sync = sync_stats(&app).await;
    assert_eq!(sync["watching"], false, "{sync}");
    assert_eq!(content_of(&app, &id).await, None);
}

#[tokio::test]
async fn a_file_over_the_size_limit_is_reported_without_being_read() {
    let app = app().await;
    let id = MemoryId::new().to_string();
    let path = path_of(&app, "users/ana", &id);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Sparse: 64 times the limit, and no disk used.
    let file = fs::File::create(&path).unwrap();
    file.set_len(64 * engram::store::confine::MAX_FILE_BYTES)
        .unwrap();
    drop(file);
    let relative = format!("users/ana/{id}.md");
    wait_until_async("the large file to be reported", async || {
        skipped_paths(&app).await.contains(&relative)
    })
    .await;
    let stats = app.get("/stats").await.json;
    let reason = skipped_reason(&stats, &relative);
    // Zeros read whole would be refused for their missing front-matter;
    // this reason is given only by the size check made before any read.
    assert!(reason.contains("too large"), "{reason}");
    assert!(
        reason.contains(&(64 * engram::store::confine::MAX_FILE_BYTES).to_string()),
        "{reason}"
    );
    assert_eq!(stats["store"]["memories"], 0);
    assert_eq!(content_of(&app, &id).await, None);
}
