//! Capture's bounds, end to end: compactions past the queue's byte budget
//! get `429` with `Retry-After`, any write below the disk floor gets `507`,
//! secrets are refused on `POST /memories` too, and links under `queue/`
//! are left alone.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::helpers::{Ground, TestApp, memory, spawn_app};
use crate::upstream::Behaviour;

fn window(session: &str, text: &str) -> Value {
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": text},
    ]})
}

/// The status, the `Retry-After` header and the JSON body.
async fn post_raw(app: &TestApp, path: &str, body: &Value) -> (StatusCode, Option<String>, Value) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|value| value.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, retry_after, serde_json::from_slice(&bytes).unwrap())
}

/// Files in `queue/` (its log segments and trigger files), `failed/` aside.
fn queue_files(app: &TestApp) -> usize {
    app.files()
        .iter()
        .filter(|file| file.starts_with("queue/") && !file.starts_with("queue/failed/"))
        .count()
}

#[tokio::test]
async fn compactions_past_the_byte_budget_get_429_with_retry_after_and_turns_still_queue() {
    // The classifier fails and its retry is far off, so the queue only
    // grows; budgets are small enough that a few 100 KB compactions reach
    // them.
    let ground = Ground::new().await;
    let upstream = ground.upstream.clone();
    upstream.set_chat(Behaviour::Fail(503), "");
    let app = TestApp::builder()
        .on(ground)
        .llm()
        .config(|config| {
            config.capture.max_attempts = 20;
            config.capture.retry_base_ms = 600_000;
            config.limits.max_body_bytes = 256 * 1024;
            config.capture.session_queue_bytes = 256 * 1024;
            config.capture.queue_bytes = 450 * 1024;
        })
        .spawn()
        .await;
    let big = "compaction arc ".repeat(100 * 1024 / 15);
    let mut accepted = 0;
    let (status, retry_after, problem) = loop {
        let (status, retry_after, body) = post_raw(&app, "/compactions", &window("s1", &big)).await;
        if status != StatusCode::ACCEPTED {
            break (status, retry_after, body);
        }
        accepted += 1;
        assert!(accepted < 10, "the session budget never refused");
    };
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{problem}");
    assert_eq!(accepted, 2, "two 100 KB compactions fit in 256 KB");
    assert_eq!(problem["type"], "urn:engram:problem:capture-backlog");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("capture.session_queue_bytes")
    );
    let retry_after: u64 = retry_after.expect("a Retry-After header").parse().unwrap();
    assert!(retry_after > 0);

    for session in ["s2", "s3"] {
        let (status, _, body) = post_raw(&app, "/compactions", &window(session, &big)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    let (status, _, problem) = post_raw(&app, "/compactions", &window("s4", &big)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("capture.queue_bytes")
    );
    let stats = app.get("/stats").await.json;
    assert_eq!(
        stats["capture"]["queue_depth"], 4,
        "nothing refused was queued"
    );

    let (status, _, body) = post_raw(&app, "/turns", &window("s5", "a turn")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["status"], "queued", "turns keep their own rule");
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["refused_over_budget"], 2);
    assert!(stats["capture"]["queue_bytes"].as_u64().unwrap() > 400 * 1024);
}

#[tokio::test]
async fn below_the_disk_floor_writes_get_507_and_nothing_is_written() {
    let app = TestApp::builder()
        .llm()
        .config(|config| {
            config.limits.min_free_disk_bytes = u64::MAX;
        })
        .spawn()
        .await;
    for path in ["/turns", "/compactions"] {
        let (status, _, problem) = post_raw(&app, path, &window("s1", "remember this")).await;
        assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{problem}");
        assert_eq!(problem["type"], "urn:engram:problem:insufficient-storage");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("limits.min_free_disk_bytes")
        );
    }
    let response = app
        .post(
            "/memories",
            &memory("user", "ana", "user-facts", "Ana likes tea."),
        )
        .await;
    response.assert_problem(StatusCode::INSUFFICIENT_STORAGE, None);
    assert_eq!(queue_files(&app), 0, "nothing was written to the queue");
    assert!(
        app.files().iter().all(|file| !file.ends_with(".md")),
        "{:?}",
        app.files()
    );
    assert_eq!(
        app.get("/stats").await.json["capture"]["refused_low_disk"],
        2
    );
}

#[tokio::test]
async fn written_memories_that_hold_a_secret_are_refused_naming_content() {
    let app = spawn_app().await;
    for content in [
        "The staging DB_PASSWORD: hunter2",
        "Deploy with mysql -pHunter2Secret",
        "the admin password is Sup3rS3cret!",
        "Use ＡＫＩＡ２ＣＸ７Ｑ４ＬＭＮ９ＰＲ３ＳＴ５ for the bucket",
    ] {
        let response = app
            .post("/memories", &memory("user", "ana", "user-facts", content))
            .await;
        response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("content"));
        assert_eq!(response.json["type"], "urn:engram:problem:secret-content");
        assert!(!response.text.contains("hunter2") && !response.text.contains("Sup3r"));
    }
    assert!(app.files().iter().all(|file| !file.ends_with(".md")));
    for content in [
        "We use a password manager for shared accounts.",
        "The token bucket rate limiter refills every second.",
        "Rotate the secret every 90 days.",
        "Fixed in 3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345 (see 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d).",
    ] {
        app.create(memory("user", "ana", "user-facts", content))
            .await;
    }
}

#[tokio::test]
async fn a_link_planted_in_the_queue_is_skipped_and_counted_not_followed() {
    let ground = Ground::new().await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim.json");
    std::fs::write(&target, "{\"not\": \"a trigger\"}").unwrap();
    let queue = ground.path().join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    let link = queue.join("0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let app = TestApp::builder().on(ground).llm().spawn().await;
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["skipped_symlinks"], 1, "{stats:#}");
    assert_eq!(stats["capture"]["queue_depth"], 0);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "{\"not\": \"a trigger\"}"
    );
    assert!(
        !queue
            .join("failed/0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d.json")
            .exists(),
        "not moved"
    );
}

/// The AWS key pair and the GitHub token of the issue's review, as a
/// developer pastes them into a conversation.
const ACCESS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET_ACCESS_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const GITHUB_TOKEN: &str = "ghp_pzNNybuXMVp0OeCQVSVkZepp1U9NvGyxT5Lj";

/// Every file under the data directory (`.cache/` aside) that holds one of
/// the secrets above.
fn files_holding_a_secret(app: &TestApp) -> Vec<String> {
    app.files()
        .into_iter()
        .filter(|file| {
            let bytes = std::fs::read(app.data_dir.join(file)).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            [ACCESS_KEY_ID, SECRET_ACCESS_KEY, GITHUB_TOKEN]
                .iter()
                .any(|secret| text.contains(secret))
        })
        .collect()
}

/// Files and directories under `dir` whose mode lets anyone but the owner
/// in, with their modes; the derived `.cache/` (vectors and counts, no
/// text) aside.
fn open_to_others(dir: &std::path::Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut open = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|name| name == ".cache") {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            open.push((path.display().to_string(), mode));
        }
        if meta.is_dir() {
            open.extend(open_to_others(&path));
        }
    }
    open
}

#[tokio::test]
async fn a_windows_secrets_never_rest_on_disk_and_capture_files_are_the_owners_alone() {
    let app = TestApp::builder().llm().spawn().await;
    let upstream = &app.upstream;
    upstream.set_chat(
        Behaviour::Delay(std::time::Duration::from_millis(500)),
        r#"[{"content": "Deploys to the staging bucket use the CI's AWS keys.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let window = json!({"session_id": "s1", "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": format!(
            "Deploy with aws_access_key_id = {ACCESS_KEY_ID} and \
             aws_secret_access_key = {SECRET_ACCESS_KEY}; the CI pushes with \
             GITHUB_TOKEN={GITHUB_TOKEN}")},
        {"role": "assistant", "content": "Noted: staging deploys use the CI's keys."},
    ]});
    let (status, _, body) = post_raw(&app, "/turns", &window).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Queued and in flight: what is on disk is the window redacted.
    crate::helpers::wait_until("the trigger to reach the classifier", || {
        !upstream.chat_requests().is_empty()
    })
    .await;
    assert!(
        app.files().iter().any(|file| file.starts_with("queue/")),
        "the trigger is on disk: {:?}",
        app.files()
    );
    assert_eq!(files_holding_a_secret(&app), Vec::<String>::new());
    assert_eq!(open_to_others(&app.data_dir), Vec::new());

    // Processed: its log segment is gone, and so is its window.
    crate::helpers::settled(&app, 1).await;
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["written"], 1, "{stats:#}");
    let segments: Vec<String> = app
        .files()
        .into_iter()
        .filter(|file| file.starts_with("queue/") && file.ends_with(".log"))
        .collect();
    assert_eq!(
        segments,
        Vec::<String>::new(),
        "no processed segment is kept"
    );
    assert_eq!(files_holding_a_secret(&app), Vec::<String>::new());
    assert_eq!(
        open_to_others(&app.data_dir),
        Vec::new(),
        "memory files and the ledger too"
    );
}
