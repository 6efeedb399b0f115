//! Gemini CLI's hooks: `engram setup gemini` writes them beside the MCP
//! server in its one settings file, and `engram hook gemini …`, fed
//! Gemini CLI's recorded input shapes (`tests/fixtures/gemini/`), answers
//! `BeforeAgent` with memories and hands `AfterAgent` and `PreCompress`
//! to capture; then the real Gemini CLI runs a whole turn through those
//! hooks with no model: a `BeforeModel` hook of the test's answers in the
//! model's place, after recording the request the model would have had.
//! Files only: the hook and the agent's files are under test, not the store.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{closed_url, get_json, post_json, wait_until_async};
use crate::hooks::{
    Project, assert_silent, engram_remembering, engram_setup, grouped_handlers, hook,
    json_without_comment_lines, last_prompt, memories, printed_context, run,
};
use crate::injection::brief::provisional_line;
use crate::setup::agents::{cli_or_skip, printed};
use crate::setup::backups;
use crate::setup::private::backup_place;
use crate::upstream::Behaviour;

const SESSION: &str = "60340f6a-7c26-4eef-abda-b20a6b5720ba";

/// What must and must not reach Engram from the fixture's transcript.
fn assert_window_of_gemini_fixture(prompt: &str) {
    for said in [
        "Wrap every error in the forge client with fmt.Errorf and %w.",
        "Understood: every error gets wrapped. I found one errors.New call and wrapped it.",
    ] {
        assert_eq!(prompt.matches(said).count(), 1, "{said:?} once in {prompt}");
    }
    for unsaid in [
        "session_context",
        "hook_context",
        "OLD INJECTION",
        "OLD MEMORIES",
        "Engram keeps long-term memory",
        "TOOL RESULT LINE",
        "Private reasoning",
        "update available",
    ] {
        assert!(!prompt.contains(unsaid), "{unsaid:?} leaked into {prompt}");
    }
}

#[tokio::test]
async fn gemini_hooks_retrieve_for_the_prompt_and_hand_turns_and_compressions_to_capture() {
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    let (app, project) = engram_remembering("gemini/transcript.jsonl", fact).await;
    let upstream = &app.upstream;

    let payload = project.payload("gemini/before-agent.json");
    let output = hook(
        &project,
        &app.base_url,
        &["gemini", "user-prompt-submit"],
        payload,
    )
    .await;
    let injection = printed_context(&output, "BeforeAgent");
    assert!(injection.contains(fact), "{injection}");
    let prompt = last_prompt(upstream);
    assert!(
        prompt.contains("Now add error handling to the forge HTTP client."),
        "the prompt, without the context hooks added to it: {prompt}"
    );
    assert_window_of_gemini_fixture(&prompt);

    let start = project.payload("gemini/session-start.json");
    let output = hook(&project, &app.base_url, &["gemini", "session-start"], start).await;
    assert!(printed_context(&output, "SessionStart").contains("Engram keeps long-term memory"));

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Errors in the forge client are wrapped with fmt.Errorf and %w.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let stop = project.payload("gemini/after-agent.json");
    assert_silent(&hook(&project, &app.base_url, &["gemini", "stop"], stop).await);
    let written = memories(&app, 2).await;
    let captured = written.iter().find(|m| m["trigger"] == "turn").unwrap();
    assert_eq!(captured["session_id"], SESSION, "{written:?}");
    assert_window_of_gemini_fixture(&last_prompt(upstream));

    let compress = project.payload("gemini/pre-compress.json");
    assert_silent(
        &hook(
            &project,
            &app.base_url,
            &["gemini", "pre-compact"],
            compress,
        )
        .await,
    );
    wait_until_async("the compression to be processed", async || {
        get_json(&app.base_url, "/stats").await["capture"]["processed"] == 2
    })
    .await;
    // A Claude Code payload is not Gemini CLI's event.
    let claude = project.payload("gemini/after-agent.json");
    assert_silent(&hook(&project, &app.base_url, &["gemini", "pre-compact"], claude).await);
    let lines = project.log_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("is for AfterAgent"), "{lines:?}");
    app.stop().await;
}

#[tokio::test]
async fn setup_gemini_writes_its_hooks_beside_the_mcp_server_in_one_settings_file() {
    let project = Project::new("gemini/transcript.jsonl");
    let settings = project.cwd.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  // the team's settings\n  \"theme\": \"GitHub\",\n  \"hooks\": {\n    \
                    \"BeforeAgent\": [{\"hooks\": [{\"type\": \"command\", \"command\": \
                    \"lint-prompt\"}]}]\n  }\n}\n";
    std::fs::write(&settings, original).unwrap();
    let setup = async || engram_setup(&project, &["gemini", "--scope", "project"]).await;
    let output = setup().await;
    assert!(output.status.success(), "{output:?}");
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.starts_with("{\n  // the team's settings\n"), "{text}");
    let written = json_without_comment_lines(&text);
    assert_eq!(written["theme"], "GitHub");
    assert_eq!(
        written["mcpServers"]["engram"],
        json!({"command": "engram", "args": ["mcp"]})
    );
    for (event, command) in [
        ("SessionStart", "session-start"),
        ("BeforeAgent", "user-prompt-submit"),
        ("AfterAgent", "stop"),
        ("PreCompress", "pre-compact"),
    ] {
        let handlers = grouped_handlers(&written, event);
        let ours = json!({"type": "command", "timeout": 10_000,
            "command": format!("engram hook gemini {command}")});
        assert!(handlers.contains(&&ours), "{event}: {text}");
    }
    assert!(
        text.contains("lint-prompt"),
        "the team's hook stays: {text}"
    );
    // A shared file's backup is kept out of the checkout.
    assert_eq!(backups(&settings).len(), 0);
    assert_eq!(
        backups(&backup_place(&project, &settings)).len(),
        1,
        "one file, backed up once"
    );
    assert!(
        !project.cwd.join("GEMINI.md").exists(),
        "its hooks serve it: no instructions"
    );

    let again = setup().await;
    assert!(again.status.success(), "{again:?}");
    let report = String::from_utf8(again.stdout).unwrap();
    assert_eq!(report.matches("nothing changed").count(), 1, "{report}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);
}

#[tokio::test]
async fn the_gemini_cli_runs_engrams_hooks_through_a_turn_without_a_model() {
    let Some(cli) = cli_or_skip("gemini-cli", "gemini") else {
        return;
    };
    // The fact for the prompt is provisional, so the session's brief
    // leaves it to the prompt; the confirmed convention is the brief's,
    // and the prompt, of the same session, does not repeat it.
    let fact = "forge indents Go with tabs, never spaces.";
    let convention = "forge vendors no Go modules.";
    let (app, project) = engram_remembering("gemini/transcript.jsonl", convention).await;
    let upstream = &app.upstream;
    let import = json!({"memories": [provisional_line(fact)]});
    post_json(&app.base_url, "/memories/import", &import).await;
    app.wait_indexed().await;
    upstream.set_chat(Behaviour::Answer, &json!([fact]).to_string());

    let home = project.home();
    let output = engram_setup(&project, &["gemini"]).await;
    assert!(output.status.success(), "{output:?}");
    // The model's part, played by a hook: it keeps the request the model
    // would have had and answers in its place ("deny" with a response is
    // how a BeforeModel hook stands in for the model).
    let request = home.join("model-request.json");
    let answer = json!({"decision": "deny", "reason": "the test answers",
    "hookSpecificOutput": {"llm_response": {"candidates": [
        {"content": {"role": "model", "parts": ["Tabs it is."]}, "finishReason": "STOP"}
    ]}}});
    let stand_in = format!("cat > '{}'; printf '%s' '{answer}'", request.display());
    let settings_path = home.join(".gemini/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_path).unwrap()).unwrap();
    settings["hooks"]["BeforeModel"] =
        json!([{"hooks": [{"type": "command", "command": stand_in}]}]);
    settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
    std::fs::write(&settings_path, settings.to_string()).unwrap();
    std::fs::write(
        home.join(".gemini/trustedFolders.json"),
        json!({project.cwd.to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();

    let mut gemini = Command::new(cli);
    gemini
        .args([
            "--model",
            "gemini-2.5-flash",
            "--prompt",
            "Indent the new file.",
        ])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("USER", "ana")
        .env("XDG_STATE_HOME", home.join("state"))
        .env("ENGRAM_URL", &app.base_url)
        // A key is needed to start; nothing listens where it would be sent.
        .env("GEMINI_API_KEY", "unused")
        .env("GOOGLE_GEMINI_BASE_URL", closed_url());
    let output = run(gemini, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    assert!(printed(&output).contains("Tabs it is."), "{output:?}");

    // What BeforeAgent printed reached the model's request, after the
    // prompt (SessionStart's context, in a headless run, comes before it).
    let sent: Value = serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    let messages = sent["llm_request"]["messages"].to_string();
    let after_prompt = messages
        .split_once("Indent the new file.")
        .unwrap_or_else(|| panic!("{messages}"))
        .1;
    assert!(after_prompt.contains(fact), "{messages}");
    assert_eq!(messages.matches(convention).count(), 1, "{messages}");
    assert!(!after_prompt.contains(convention), "{messages}");
    // AfterAgent handed the turn, the stand-in's answer included, to capture.
    wait_until_async("the turn to reach the classifier", async || {
        upstream.chat_requests().iter().any(|request| {
            let prompt = request[1]["content"].as_str().unwrap_or_default();
            prompt.contains("Indent the new file.") && prompt.contains("Tabs it is.")
        })
    })
    .await;
    assert_eq!(
        get_json(&app.base_url, "/stats").await["capture"]["accepted"],
        1
    );
    let log = home.join("state/engram/hook.log");
    assert!(
        !Path::new(&log).exists(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    app.stop().await;
}
