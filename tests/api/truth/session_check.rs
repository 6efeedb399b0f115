//! The `SessionStart` hook checks the anchors too: the real binary, as an
//! agent runs it in a real git working tree, records what `engram check`
//! would (a deleted file's memory is `gone`), the longest unchecked
//! memories first and no more than its bound, so the next session start
//! checks the rest; and it answers as it always did.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::check::{anchored, sha256, working_tree};
use crate::helpers::{RunningApp, TestApp, get_json, post_json};
use crate::hooks::run;

const POOL: &str = "pub fn connect_pool() {}\n";
const RETRY: &str = "pub fn retry_charge() {}\n";
const README: &str = "# forge\n";

/// `engram hook claude-code session-start` as Claude Code runs it in
/// `tree`, with `args` after, logging to `log`.
async fn session_start(tree: &Path, url: &str, log: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", tree)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("USER", "ana")
        .env("ENGRAM_URL", url)
        .args(["hook", "claude-code", "session-start", "--log-file"])
        .arg(log)
        .args(args);
    let payload = json!({"session_id": "s-1", "cwd": tree, "hook_event_name": "SessionStart"});
    run(command, payload.to_string()).await
}

/// The context the hook printed: it answered as before the check.
fn assert_answered(output: &Output) {
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let context = printed["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(
        context.contains("Engram keeps long-term memory"),
        "{printed}"
    );
}

async fn read(app: &RunningApp, id: &str) -> Value {
    get_json(&app.base_url, &format!("/memories/{id}")).await
}

#[tokio::test]
async fn a_session_start_finds_the_memory_of_a_deleted_file_gone() {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(&tree, &[("src/pool.rs", POOL), ("src/retry.rs", RETRY)]);
    let app = TestApp::builder().embedder().serve().await;
    let anchor = |path: &str, content: &str| json!([{"path": path, "hash": sha256(content)}]);
    let kept = anchored(
        &app,
        "The pool connects lazily.",
        anchor("src/pool.rs", POOL),
        &commit,
    )
    .await;
    let deleted = anchored(
        &app,
        "Failed charges are retried.",
        anchor("src/retry.rs", RETRY),
        &commit,
    )
    .await;
    std::fs::remove_file(tree.join("src/retry.rs")).unwrap();

    let log = temp.path().join("hook.log");
    let output = session_start(&tree.join("src"), &app.base_url, &log, &[]).await;
    assert_answered(&output);
    assert_eq!(read(&app, &deleted).await["validity"], "gone");
    let kept = read(&app, &kept).await;
    assert_eq!(kept["validity"], "current", "{kept:#}");
    assert_eq!(kept["checked_commit"], commit.as_str());
    assert!(!log.exists(), "nothing went wrong");
}

#[tokio::test]
async fn a_session_start_checks_the_longest_unchecked_first_and_leaves_the_rest() {
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(&tree, &[("README.md", README)]);
    let app = TestApp::builder().embedder().serve().await;
    let anchors = json!([{"path": "README.md", "hash": sha256(README)}]);
    let mut ids = Vec::new();
    for content in ["First.", "Second.", "Third.", "Fourth."] {
        ids.push(anchored(&app, content, anchors.clone(), &commit).await);
    }
    // The third, then the fourth, were checked before: the first two never.
    for id in [&ids[2], &ids[3]] {
        let body = json!({"repo": "forge", "results": [{"id": id, "validity": "current"}]});
        post_json(&app.base_url, "/memories/check", &body).await;
    }
    let checked_at = async || {
        let mut times = Vec::new();
        for id in &ids {
            times.push(read(&app, id).await["checked_at"].clone());
        }
        times
    };
    let log = temp.path().join("hook.log");
    let limited = ["--check-limit", "2"];

    let before = checked_at().await;
    assert_answered(&session_start(&tree, &app.base_url, &log, &limited).await);
    let first = checked_at().await;
    let changed = |from: &[Value], to: &[Value]| -> Vec<bool> {
        from.iter().zip(to).map(|(from, to)| from != to).collect()
    };
    assert_eq!(
        changed(&before, &first),
        [true, true, false, false],
        "never checked comes first"
    );
    assert_answered(&session_start(&tree, &app.base_url, &log, &limited).await);
    let second = checked_at().await;
    assert_eq!(
        changed(&first, &second),
        [false, false, true, true],
        "then the longest unchecked"
    );
    assert_answered(&session_start(&tree, &app.base_url, &log, &limited).await);
    let third = checked_at().await;
    assert_eq!(changed(&second, &third), [true, true, false, false]);
    assert!(!log.exists(), "nothing went wrong");
}
