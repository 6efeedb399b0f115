//! The turn hooks tell capture what the turn touched: run in a real git
//! working tree, Claude Code's `Stop` sends the tree's `HEAD` and the
//! files its transcript's tool calls read or edited (inside the tree,
//! repo-relative, hashed as they are now), and the memory the classifier
//! writes of it is anchored to the file it chose, at that commit. A
//! `remember:` prompt for the project is anchored to the files it names
//! that are in the tree.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{assert_silent, last_prompt, memories, printed_context, run, start_engram};
use crate::truth::check::{sha256, working_tree};
use crate::upstream::Behaviour;

const POOL: &str = "pub fn connect_pool() -> Pool { Pool::eager() }\n";
const LAZY: &str = "pub fn connect_pool() -> Pool { Pool::lazy() }\n";
const README: &str = "# forge\n";

fn tool_use(name: &str, input: &Value) -> Value {
    json!({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": name, "input": input}]}})
}

fn said(role: &str, text: &str) -> Value {
    json!({"type": role, "message": {"role": role, "content": text}})
}

/// `engram hook claude-code <event>` as Claude Code runs it, given
/// `payload`, with `home` as its home and `log` as its log.
async fn claude_code(url: &str, home: &Path, log: &Path, event: &str, payload: &Value) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("USER", "ana")
        .env("ENGRAM_URL", url)
        .args(["hook", "claude-code", event, "--log-file"])
        .arg(log);
    run(command, payload.to_string()).await
}

#[tokio::test]
async fn a_stop_sends_the_files_the_turn_touched_and_the_memory_is_anchored_to_its_choice() {
    let app = start_engram().await;
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(&tree, &[("src/pool.rs", POOL), ("README.md", README)]);
    let outside = temp.path().join("notes.md");
    std::fs::write(&outside, "elsewhere\n").unwrap();
    let pool = tree.join("src/pool.rs").display().to_string();
    let transcript = [
        said("user", "Make the pool connect lazily."),
        tool_use("Read", &json!({"file_path": pool})),
        tool_use(
            "Edit",
            &json!({"file_path": pool, "old_string": "eager", "new_string": "lazy"}),
        ),
        tool_use("Read", &json!({"file_path": outside})),
        tool_use("Bash", &json!({"command": "cat src/pool.rs"})),
        tool_use("Read", &json!({"file_path": tree.join("README.md")})),
        said("assistant", "Done: the pool connects lazily."),
    ];
    let lines: Vec<String> = transcript.iter().map(Value::to_string).collect();
    let transcript_path = temp.path().join("session.jsonl");
    std::fs::write(&transcript_path, lines.join("\n") + "\n").unwrap();
    // What the turn's edit left.
    std::fs::write(tree.join("src/pool.rs"), LAZY).unwrap();
    app.upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "The forge pool connects lazily.", "scope": "repo", "category": "architectural-decisions", "files": ["src/pool.rs"]}]"#,
    );

    let log = temp.path().join("hook.log");
    let payload = json!({"session_id": "s-1", "transcript_path": transcript_path,
        "cwd": tree.join("src"), "hook_event_name": "Stop"});
    assert_silent(&claude_code(&app.base_url, temp.path(), &log, "stop", &payload).await);

    let written = memories(&app, 1).await;
    let prompt = last_prompt(&app.upstream);
    assert!(
        prompt.contains("a repo memory is about):\n- README.md\n- src/pool.rs\n\n"),
        "the files named last first, each once, the outside one left out: {prompt}"
    );
    assert_eq!(
        written[0]["anchors"],
        json!([{"path": "src/pool.rs", "hash": sha256(LAZY)}]),
        "{written:#?}"
    );
    assert_eq!(written[0]["commit"], commit.as_str());
    assert!(!log.exists(), "nothing went wrong");
    app.stop().await;
}

#[tokio::test]
async fn a_remember_prompt_is_anchored_to_the_files_it_names_in_the_tree() {
    let app = start_engram().await;
    app.upstream
        .set_chat(Behaviour::Answer, r#"["The pool connects lazily."]"#);
    let temp = tempfile::tempdir().unwrap();
    let tree = temp.path().join("forge");
    let commit = working_tree(&tree, &[("src/pool.rs", LAZY), ("README.md", README)]);
    let log = temp.path().join("hook.log");
    let prompt = "remember: src/pool.rs connects lazily (see `README.md`, not docs/pool.md).";
    let payload = json!({"session_id": "s-1", "cwd": tree, "prompt": prompt,
        "hook_event_name": "UserPromptSubmit"});
    let output = claude_code(
        &app.base_url,
        temp.path(),
        &log,
        "user-prompt-submit",
        &payload,
    )
    .await;
    let said = printed_context(&output, "UserPromptSubmit");
    assert!(said.starts_with("Engram remembered this"), "{said}");

    let written = memories(&app, 1).await;
    assert_eq!(
        written[0]["anchors"],
        json!([{"path": "README.md", "hash": sha256(README)},
               {"path": "src/pool.rs", "hash": sha256(LAZY)}]),
        "the missing file is not named: {written:#?}"
    );
    assert_eq!(written[0]["commit"], commit.as_str());
    app.stop().await;
}
