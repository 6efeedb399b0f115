//! Capture anchors what it captures: a turn that names the working
//! tree's `HEAD` and the files its conversation read or edited has the
//! classifier asked which of them each fact is about, and a repo memory is
//! written anchored to those it names that the turn named (with the hash
//! sent), at the turn's commit, and to the function or type it names in
//! one when the conversation says that name; a file outside the list is
//! dropped, and a user memory is about no repo's files. A turn without
//! them is captured as before, and bad files are refused by field,
//! queueing nothing.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{app_on, turn};
use crate::helpers::{TestApp, settled};
use crate::upstream::Behaviour;

const COMMIT: &str = "3f9c2b7e8a1d4c6b9e0f2a3d5c7b8e9f0a1b2c3d";

fn hash(digit: char) -> String {
    format!("sha256:{}", digit.to_string().repeat(64))
}

/// The current memory of `forge` or of `ana` that says `content`.
async fn memory_saying(app: &TestApp, content: &str) -> Value {
    let listed = app.get("/memories?repo=forge&user=ana").await.json;
    listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|memory| memory["content"] == content)
        .unwrap_or_else(|| panic!("no memory says {content:?}: {listed:#}"))
        .clone()
}

fn anchors(memory: &Value) -> Value {
    memory.get("anchors").cloned().unwrap_or_else(|| json!([]))
}

#[tokio::test]
async fn a_turn_with_files_writes_memories_anchored_to_the_classifiers_choices() {
    let app = app_on(|_| {}).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "The pool connects lazily.", "scope": "repo", "category": "architectural-decisions", "files": ["src/db/pool.rs", "src/invented.rs", "README.md"]},
            {"content": "Ana reads the pool before changing it.", "scope": "user", "category": "user-facts", "files": ["src/db/pool.rs"]},
            {"content": "forge keeps a changelog.", "scope": "repo", "category": "project-conventions", "files": ["CHANGELOG.md"]}]"#,
    );
    let mut body = turn("s1", "forge", "The pool should connect lazily.");
    body["commit"] = json!(COMMIT);
    body["files"] = json!([
        {"path": "src/db/pool.rs", "hash": hash('a')},
        {"path": "README.md"},
    ]);
    app.accept("/turns", &body).await;
    settled(&app, 1).await;

    let prompt = app.upstream.chat_requests()[0][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        prompt.contains("READ OR EDITED (name in \"files\" those a repo memory is about):\n- src/db/pool.rs\n- README.md\n"),
        "{prompt}"
    );

    let pool = memory_saying(&app, "The pool connects lazily.").await;
    assert_eq!(
        anchors(&pool),
        json!([{"path": "src/db/pool.rs", "hash": hash('a')}, {"path": "README.md"}]),
        "the invented file is dropped: {pool:#}"
    );
    assert_eq!(pool["commit"], COMMIT);
    let user = memory_saying(&app, "Ana reads the pool before changing it.").await;
    assert_eq!(anchors(&user), json!([]), "{user:#}");
    assert!(user.get("commit").is_none(), "{user:#}");
    let changelog = memory_saying(&app, "forge keeps a changelog.").await;
    assert_eq!(
        anchors(&changelog),
        json!([]),
        "none of its files was named"
    );
    assert_eq!(changelog["commit"], COMMIT);
}

/// A fact about one function is anchored to it, when the conversation
/// names it: a name the window never says is the model's guess, and the
/// file alone is kept.
#[tokio::test]
async fn a_memory_about_a_function_the_turn_names_is_anchored_to_it() {
    let app = app_on(|_| {}).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "connect_pool retries three times.", "scope": "repo", "category": "patterns",
             "files": [{"path": "src/db/pool.rs", "symbol": "connect_pool"}]},
            {"content": "The pool closes idle connections.", "scope": "repo", "category": "patterns",
             "files": [{"path": "src/db/pool.rs", "symbol": "reap_idle"}, "src/db/pool.rs"]}]"#,
    );
    let mut body = turn(
        "s1",
        "forge",
        "Why does connect_pool retry three times? And the pool closes idle connections.",
    );
    body["commit"] = json!(COMMIT);
    body["files"] = json!([{"path": "src/db/pool.rs", "hash": hash('a')}]);
    app.accept("/turns", &body).await;
    settled(&app, 1).await;

    let retries = memory_saying(&app, "connect_pool retries three times.").await;
    assert_eq!(
        anchors(&retries),
        json!([{"path": "src/db/pool.rs", "symbol": "connect_pool", "hash": hash('a')}]),
        "{retries:#}"
    );
    let idle = memory_saying(&app, "The pool closes idle connections.").await;
    assert_eq!(
        anchors(&idle),
        json!([{"path": "src/db/pool.rs", "hash": hash('a')}]),
        "the name the window never says is dropped, the file kept once: {idle:#}"
    );
}

#[tokio::test]
async fn a_turn_without_files_is_captured_as_before() {
    let app = app_on(|_| {}).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "forge formats with gofumpt.", "scope": "repo", "category": "project-conventions", "files": ["src/main.go"]}]"#,
    );
    app.accept("/turns", &turn("s1", "forge", "We run gofumpt."))
        .await;
    settled(&app, 1).await;
    let prompt = app.upstream.chat_requests()[0][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!prompt.contains("READ OR EDITED"), "{prompt}");
    let memory = memory_saying(&app, "forge formats with gofumpt.").await;
    assert_eq!(anchors(&memory), json!([]), "{memory:#}");
    assert!(memory.get("commit").is_none(), "{memory:#}");
}

#[tokio::test]
async fn files_a_turn_names_are_checked_as_anchors_are() {
    let app = app_on(|_| {}).await;
    let with = |field: &str, value: Value| {
        let mut body = turn("s1", "forge", "x");
        body[field] = value;
        body
    };
    let too_many: Vec<Value> = (0..65)
        .map(|n| json!({"path": format!("f{n}.rs")}))
        .collect();
    for (body, field) in [
        (
            with("files", json!([{"path": "../outside.rs"}])),
            "files[0].path",
        ),
        (
            with("files", json!([{"path": "a.rs"}, {"path": "/etc/passwd"}])),
            "files[1].path",
        ),
        (
            with("files", json!([{"path": "a.rs"}, {"path": "a.rs"}])),
            "files[1].path",
        ),
        (
            with("files", json!([{"path": "a.rs", "hash": "md5:abc"}])),
            "files[0].hash",
        ),
        (
            with("files", json!([{"path": "a.rs", "symbol": "x"}])),
            "files[0].symbol",
        ),
        (
            with("files", json!([{"path": "keys/AKIAIOSFODNN7EXAMPLE"}])),
            "files[0].path",
        ),
        (with("files", json!(too_many)), "files"),
        (with("commit", json!("main")), "commit"),
    ] {
        for path in ["/turns", "/compactions"] {
            app.post(path, &body)
                .await
                .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
        }
    }
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["accepted"], 0, "nothing was queued");
}
