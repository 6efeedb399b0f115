//! The agents' hooks send their session: the real `engram hook` binary,
//! fed each agent's recorded input, against a real Engram on a port. The
//! session start's brief holds the project's memory; the prompt's
//! retrieval of the same session finds it and does not inject it again;
//! and Engram holds it as injected in that session. Files only: the hooks
//! are under test, not the store.

use serde_json::{Value, json};

use super::returned;
use crate::helpers::{RunningApp, post_json};
use crate::hooks::{Project, assert_silent, engram_remembering, hook, printed_context};

const FACT: &str = "The forge client wraps every error with fmt.Errorf and %w.";
const CLAUDE_SESSION: &str = "5b0c1f9e-8d7a-4c1b-9f3e-2a6d4e8b7c10";
const CODEX_SESSION: &str = "019a6f2e-7c1d-7b3a-9e4f-0d2c5b8a1e63";
const GEMINI_SESSION: &str = "60340f6a-7c26-4eef-abda-b20a6b5720ba";
const CURSOR_CONVERSATION: &str = "7d1c3b52-5f0e-4a8b-9c61-2e4f8a0b9d37";

/// Asserts Engram holds [`FACT`] as injected in `session` of forge and ana.
async fn injected_in_session(app: &RunningApp, session: &str) {
    let body = json!({"turn_id": "check", "repo": "forge", "user": "ana",
        "session_id": session, "query": FACT});
    let answer = post_json(&app.base_url, "/retrieve", &body).await;
    let fact = answer["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|memory| memory["content"] == FACT)
        .unwrap_or_else(|| panic!("{answer:#}"));
    let fact = returned(&answer, fact["id"].as_str().unwrap());
    assert_eq!(fact["not_injected"], "earlier_in_session", "{answer:#}");
}

/// The session start of `agent` (its payload `start`) briefs the agent
/// with the fact; its prompt hook (payload `prompt`) of the same session
/// retrieves and prints nothing, the fact being in the context already.
async fn the_prompt_is_not_given_what_the_start_gave(
    agent: &str,
    transcript: &str,
    start: impl Fn(&Project) -> String,
    prompt: &str,
    session: &str,
) {
    let (app, project) = engram_remembering(transcript, FACT).await;
    let output = hook(
        &project,
        &app.base_url,
        &[agent, "session-start"],
        start(&project),
    )
    .await;
    assert!(printed_context(&output, "SessionStart").contains(FACT));

    let asked = app.upstream.chat_requests().len();
    let payload = project.payload(prompt);
    let output = hook(
        &project,
        &app.base_url,
        &[agent, "user-prompt-submit"],
        payload,
    )
    .await;
    assert_silent(&output);
    assert!(
        app.upstream.chat_requests().len() > asked,
        "the prompt's retrieval ran (HyDE)"
    );
    injected_in_session(&app, session).await;
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
async fn claude_codes_prompt_is_not_given_what_its_session_start_gave() {
    the_prompt_is_not_given_what_the_start_gave(
        "claude-code",
        "claude-code/transcript.jsonl",
        |project| project.payload("claude-code/session-start.json"),
        "claude-code/user-prompt-submit.json",
        CLAUDE_SESSION,
    )
    .await;
}

#[tokio::test]
async fn codexs_prompt_is_not_given_what_its_session_start_gave() {
    // Codex's session start takes Claude Code's shape.
    let start = |project: &Project| {
        project
            .payload("claude-code/session-start.json")
            .replace(CLAUDE_SESSION, CODEX_SESSION)
    };
    the_prompt_is_not_given_what_the_start_gave(
        "codex",
        "codex/rollout.jsonl",
        start,
        "codex/user-prompt-submit.json",
        CODEX_SESSION,
    )
    .await;
}

#[tokio::test]
async fn gemini_clis_prompt_is_not_given_what_its_session_start_gave() {
    the_prompt_is_not_given_what_the_start_gave(
        "gemini",
        "gemini/transcript.jsonl",
        |project| project.payload("gemini/session-start.json"),
        "gemini/before-agent.json",
        GEMINI_SESSION,
    )
    .await;
}

#[tokio::test]
async fn cursors_session_start_briefs_its_conversation() {
    let (app, project) = engram_remembering("claude-code/transcript.jsonl", FACT).await;
    let start = project.payload("cursor/session-start.json");
    let output = hook(&project, &app.base_url, &["cursor", "session-start"], start).await;
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let context = printed["additional_context"].as_str().unwrap();
    assert!(context.contains(FACT), "{printed}");
    // Cursor's prompt hook cannot add context: the brief is what it
    // injects, and Engram holds it for the conversation.
    injected_in_session(&app, CURSOR_CONVERSATION).await;
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;
}
