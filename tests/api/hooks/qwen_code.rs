//! Qwen Code's hooks: `engram setup qwen-code` writes the two that add
//! memories (the session's start, every prompt) beside the MCP server in
//! its one settings file, and `engram hook qwen-code …`, fed the input its
//! documentation gives (Claude Code's shape), answers both with memories.
//! Its turns are not handed to capture: its transcripts are records
//! Engram does not read yet, so setup writes no hook for them.
//! Files only: the hook and the agent's files are under test, not the store.

use serde_json::{Value, json};

use crate::hooks::{
    Project, engram_remembering, engram_setup, grouped_handlers, hook, json_without_comment_lines,
    printed_context,
};

const SESSION: &str = "5f1c2a7e-3b4d-4e8f-9a0b-1c2d3e4f5a6b";

/// Qwen Code's input to the hook for `event`, as its documentation gives it.
fn payload(project: &Project, event: &str, extra: &Value) -> String {
    let mut input = json!({
        "session_id": SESSION,
        "transcript_path": project.home().join(".qwen/projects/forge/chats/session.jsonl"),
        "cwd": project.cwd,
        "hook_event_name": event,
        "timestamp": "2026-11-28T21:30:00.000Z",
        "permission_mode": "default",
    });
    let fields = input.as_object_mut().unwrap();
    for (key, value) in extra.as_object().unwrap() {
        fields.insert(key.clone(), value.clone());
    }
    input.to_string()
}

#[tokio::test]
async fn qwen_code_hooks_add_memories_at_the_sessions_start_and_to_each_prompt() {
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    let (app, project) = engram_remembering("claude-code/transcript.jsonl", fact).await;

    let prompt = payload(
        &project,
        "UserPromptSubmit",
        &json!({
            "prompt": "Now add error handling to the forge HTTP client.",
            "submitted_prompt": "Now add error handling to the forge HTTP client.",
        }),
    );
    let output = hook(
        &project,
        &app.base_url,
        &["qwen-code", "user-prompt-submit"],
        prompt,
    )
    .await;
    let injection = printed_context(&output, "UserPromptSubmit");
    assert!(injection.contains(fact), "{injection}");

    let start = payload(&project, "SessionStart", &json!({"source": "startup"}));
    let output = hook(
        &project,
        &app.base_url,
        &["qwen-code", "session-start"],
        start,
    )
    .await;
    let brief = printed_context(&output, "SessionStart");
    // The session begins anew: its brief holds the confirmed fact too.
    assert!(brief.contains("Engram keeps long-term memory"), "{brief}");
    assert!(brief.contains(fact), "{brief}");

    assert!(project.log_lines().is_empty(), "{:?}", project.log_lines());
    app.stop().await;
}

#[tokio::test]
async fn setup_qwen_code_writes_its_two_hooks_beside_the_mcp_server_in_one_settings_file() {
    let project = Project::new("claude-code/transcript.jsonl");
    let settings = project.cwd.join(".qwen/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  // the team's settings\n  \"hooks\": {\n    \"PreToolUse\": [{\"matcher\": \
                    \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \
                    \"check-write\"}]}]\n  }\n}\n";
    std::fs::write(&settings, original).unwrap();
    let setup = async || engram_setup(&project, &["qwen-code", "--scope", "project"]).await;
    let output = setup().await;
    assert!(output.status.success(), "{output:?}");
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.starts_with("{\n  // the team's settings\n"), "{text}");
    let written = json_without_comment_lines(&text);
    assert_eq!(
        written["mcpServers"]["engram"],
        json!({"command": "engram", "args": ["mcp"]})
    );
    for (event, command) in [
        ("SessionStart", "session-start"),
        ("UserPromptSubmit", "user-prompt-submit"),
    ] {
        let handlers = grouped_handlers(&written, event);
        let ours = json!({"type": "command", "timeout": 10,
            "command": format!("engram hook qwen-code {command}")});
        assert_eq!(handlers, vec![&ours], "{event}: {text}");
    }
    for event in ["Stop", "PreCompact"] {
        assert!(written["hooks"][event].is_null(), "{event}: {text}");
    }
    assert!(
        text.contains("check-write"),
        "the team's hook stays: {text}"
    );
    // Capture does not run, so the model is asked to remember.
    let agents = std::fs::read_to_string(project.cwd.join("AGENTS.md")).unwrap();
    assert!(agents.contains("`remember`"), "{agents}");

    let again = setup().await;
    assert!(again.status.success(), "{again:?}");
    let report = String::from_utf8(again.stdout).unwrap();
    assert_eq!(report.matches("nothing changed").count(), 2, "{report}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
}
