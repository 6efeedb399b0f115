//! Cursor's hooks: `engram hook cursor …`, fed input in the shapes
//! Cursor's hooks reference documents (`tests/fixtures/cursor/`; Cursor
//! is in no package registry, so no real Cursor runs), answers
//! `sessionStart` with the guidance and memories as `additional_context`,
//! lets `beforeSubmitPrompt` go on (storing a `remember:` prompt's fact),
//! and hands `afterAgentResponse`'s answer with the prompt kept for it to
//! capture; `engram setup cursor` writes the three hooks into its
//! hooks.json beside what is there, once.
//! Files only: the hook and the agent's files are under test, not the store.

use serde_json::{Value, json};

use crate::helpers::RunningApp;
use crate::hooks::{
    Project, assert_silent, engram_remembering, engram_setup, hook, last_prompt, memories,
    start_engram,
};
use crate::setup::backups;
use crate::upstream::Behaviour;

const CONVERSATION: &str = "7d1c3b52-5f0e-4a8b-9c61-2e4f8a0b9d37";

/// The JSON a hook printed.
fn printed_json(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{err}: {output:?}"))
}

/// Runs the `beforeSubmitPrompt` hook on `payload`, which must let the
/// prompt go on.
async fn prompt_goes_on(project: &Project, app: &RunningApp, payload: String) {
    let args = ["cursor", "user-prompt-submit"];
    let output = hook(project, &app.base_url, &args, payload).await;
    assert_eq!(printed_json(&output), json!({"continue": true}));
}

#[tokio::test]
async fn cursor_hooks_inject_at_session_start_keep_the_prompt_and_hand_the_turn_to_capture() {
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    // The payloads name a transcript, here a Claude Code one: Cursor's
    // is not read, so none of it may reach Engram.
    let (app, project) = engram_remembering("claude-code/transcript.jsonl", fact).await;
    let upstream = &app.upstream;

    let start = project.payload("cursor/session-start.json");
    let output = hook(&project, &app.base_url, &["cursor", "session-start"], start).await;
    let printed = printed_json(&output);
    let context = printed["additional_context"].as_str().unwrap();
    assert!(
        context.contains("Engram keeps long-term memory"),
        "{printed}"
    );
    assert!(context.contains(fact), "the project's memories: {printed}");

    let prompt = project.payload("cursor/before-submit-prompt.json");
    prompt_goes_on(&project, &app, prompt).await;

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Errors in the forge client are wrapped with fmt.Errorf and %w.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let answer = project.payload("cursor/after-agent-response.json");
    assert_silent(&hook(&project, &app.base_url, &["cursor", "stop"], answer).await);
    let written = memories(&app, 2).await;
    let captured = written.iter().find(|m| m["trigger"] == "turn").unwrap();
    assert_eq!(captured["session_id"], CONVERSATION, "{written:?}");
    let classified = last_prompt(upstream);
    for said in [
        "Wrap every error in the forge client with fmt.Errorf and %w.",
        "Understood: every error gets wrapped. I found one errors.New call and wrapped it.",
    ] {
        assert_eq!(
            classified.matches(said).count(),
            1,
            "{said:?} once in {classified}"
        );
    }
    assert!(
        !classified.contains("old logging library"),
        "the transcript was read: {classified}"
    );

    assert!(project.log_lines().is_empty(), "{:?}", project.log_lines());
    app.stop().await;
}

#[tokio::test]
async fn a_cursor_remember_prompt_is_stored_and_the_prompt_goes_on() {
    let app = start_engram().await;
    let project = Project::new("claude-code/transcript.jsonl");
    let prompt = project.payload("cursor/before-submit-remember.json");
    prompt_goes_on(&project, &app, prompt).await;
    let stored = memories(&app, 1).await;
    assert_eq!(
        stored[0]["content"],
        "the forge client retries with exponential backoff, five tries at most."
    );
    assert_eq!(stored[0]["session_id"], CONVERSATION);
    // A Cursor event under another hook's command is refused and logged.
    let start = project.payload("cursor/session-start.json");
    assert_silent(&hook(&project, &app.base_url, &["cursor", "stop"], start).await);
    let lines = project.log_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("is for sessionStart"), "{lines:?}");
    app.stop().await;
}

#[tokio::test]
async fn setup_cursor_writes_its_hooks_into_hooks_json_keeping_the_rest_once() {
    let project = Project::new("claude-code/transcript.jsonl");
    let user_hooks = project.home().join(".cursor/hooks.json");
    std::fs::create_dir_all(user_hooks.parent().unwrap()).unwrap();
    let original = "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [{\"command\": \
                    \"./hooks/format.sh\"}],\n    \"afterAgentResponse\": [{\"command\": \
                    \"./hooks/audit.sh\"}]\n  }\n}\n";
    std::fs::write(&user_hooks, original).unwrap();
    let setup = async |scope: &str| engram_setup(&project, &["cursor", "--scope", scope]).await;
    for (scope, file, program) in [
        ("user", user_hooks.clone(), env!("CARGO_BIN_EXE_engram")),
        ("project", project.cwd.join(".cursor/hooks.json"), "engram"),
    ] {
        let output = setup(scope).await;
        assert!(output.status.success(), "{output:?}");
        let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(written["version"], 1, "{written}");
        for (event, command) in [
            ("sessionStart", "session-start"),
            ("beforeSubmitPrompt", "user-prompt-submit"),
            ("afterAgentResponse", "stop"),
        ] {
            let ours = json!({"command": format!("{program} hook cursor {command}")});
            let handlers = written["hooks"][event].as_array().unwrap();
            assert_eq!(
                handlers.iter().filter(|h| **h == ours).count(),
                1,
                "{event}: {written}"
            );
        }
        assert!(written["hooks"].get("preCompact").is_none(), "{written}");
        let before = std::fs::read(&file).unwrap();
        let again = setup(scope).await;
        let report = String::from_utf8(again.stdout).unwrap();
        assert!(
            report.contains("already set up, nothing changed"),
            "{report}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before);
    }
    let merged: Value = serde_json::from_slice(&std::fs::read(&user_hooks).unwrap()).unwrap();
    assert_eq!(
        merged["hooks"]["afterFileEdit"],
        json!([{"command": "./hooks/format.sh"}])
    );
    assert_eq!(
        merged["hooks"]["afterAgentResponse"][0],
        json!({"command": "./hooks/audit.sh"}),
        "the user's own hook stays first"
    );
    assert_eq!(
        backups(&user_hooks).len(),
        1,
        "one backup, of the first change"
    );

    // A version Cursor's reference does not document is refused.
    std::fs::write(&user_hooks, "{\"version\": 2, \"hooks\": {}}").unwrap();
    let output = setup("user").await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("`version` is not 1"));
}
