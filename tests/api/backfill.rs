//! `engram import claude-code` and `engram import codex`, end to end: the
//! real binary reads transcripts laid out as each agent keeps them (the
//! hooks' recorded transcripts, and 199 more sessions made from the
//! Claude Code one), and sends each session to a real Engram as one
//! compaction, tool output stripped; a second run sends nothing, and a
//! session that grew sends only what is new. A dry run sends nothing; a
//! server with no classifier, or capture's daily token budget, stops the
//! backfill with the reason, and the next run resumes where it stopped.
//! Files only: the reading of transcripts is under test; capture runs
//! over both backends in `capture`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use crate::helpers::{RunningApp, TestApp, get_json, wait_until_async};
use crate::hooks::{Project, start_engram};
use crate::import_export::{agent_driven, engram_against, succeeded, text};
use crate::upstream::Behaviour;

const SESSION: &str = "5b0c1f9e-8d7a-4c1b-9f3e-2a6d4e8b7c10";

/// Claude Code's directory for the project's transcripts, with the
/// recorded session and `extra` sessions made from it.
fn claude_code_sessions(project: &Project, extra: usize) -> PathBuf {
    let encoded: String = project
        .cwd
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = project.home().join(".claude/projects").join(encoded);
    std::fs::create_dir_all(&dir).unwrap();
    let transcript = std::fs::read_to_string(project.home().join("session.jsonl")).unwrap();
    std::fs::write(dir.join(format!("{SESSION}.jsonl")), &transcript).unwrap();
    for n in 0..extra {
        let id = format!("00000000-0000-4000-8000-{n:012}");
        let session = transcript.replace(SESSION, &id).replace(
            "the old logging library",
            &format!("logging library number {n}"),
        );
        std::fs::write(dir.join(format!("{id}.jsonl")), session).unwrap();
    }
    dir.join(format!("{SESSION}.jsonl"))
}

async fn capture_stat(app: &RunningApp, field: &str) -> Value {
    get_json(&app.base_url, "/stats").await["capture"][field].clone()
}

/// The `~N tokens` a summary estimates.
fn estimated_tokens(said: &str) -> u64 {
    let start = said.find('~').unwrap() + 1;
    said[start..].split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_claude_code_backfill_sends_each_session_once_then_only_what_is_new() {
    let app = start_engram().await;
    let upstream = app.upstream.clone();
    let project = Project::new("claude-code/transcript.jsonl");
    let recorded = claude_code_sessions(&project, 199);

    let said =
        succeeded(&engram_against(&project, &app, &["import", "claude-code", "--dry-run"]).await);
    assert!(said.contains("dry run: 200 sessions, "), "{said}");
    assert!(said.contains(&format!("claude-code/{SESSION} ")), "{said}");
    assert!(said.contains("repo=forge"), "{said}");
    assert_eq!(
        capture_stat(&app, "accepted").await,
        0,
        "a dry run sends nothing"
    );

    let started = Instant::now();
    let output = engram_against(&project, &app, &["import", "claude-code"]).await;
    let sent_in = started.elapsed();
    let said = succeeded(&output);
    assert!(
        said.starts_with("sent 200 compactions from 200 sessions"),
        "{said}"
    );
    assert!(
        text(&output.stderr).contains("[200/200]"),
        "progress: {output:?}"
    );
    wait_until_async("the backfill to be classified", async || {
        capture_stat(&app, "processed").await == 200
    })
    .await;
    let classified_in = started.elapsed();
    let stats = get_json(&app.base_url, "/stats").await;
    let spent: u64 = stats["models"]["since_start"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["kind"] == "classifier")
        .map(|row| row["prompt_tokens"].as_u64().unwrap())
        .sum();
    eprintln!(
        "backfill of 200 sessions: sent in {sent_in:?}, classified in {classified_in:?}, \
         {} triggers, ~{} tokens estimated, {spent} prompt tokens spent",
        stats["capture"]["accepted"],
        estimated_tokens(&said)
    );
    let requests = serde_json::to_string(&upstream.chat_requests()).unwrap();
    assert!(requests.contains("Before the compaction we talked about the old logging library."));
    assert!(requests.contains("From now on, wrap every error in the forge client"));
    assert!(!requests.contains("grep -rn"), "tool calls are stripped");

    let said = succeeded(&engram_against(&project, &app, &["import", "claude-code"]).await);
    assert!(
        said.starts_with("sent 0 compactions from 0 sessions"),
        "{said}"
    );
    assert!(said.contains("200 sessions had nothing new"), "{said}");
    assert_eq!(capture_stat(&app, "accepted").await, 200);

    let grown = [
        r#"{"type":"user","cwd":"CWD","sessionId":"S","message":{"role":"user","content":"From now on, release notes go in CHANGELOG.md."}}"#,
        r#"{"type":"assistant","cwd":"CWD","sessionId":"S","message":{"role":"assistant","content":[{"type":"text","text":"Release notes in CHANGELOG.md, then."}]}}"#,
    ];
    let mut transcript = std::fs::read_to_string(&recorded).unwrap();
    transcript.push_str(&(grown.join("\n") + "\n"));
    std::fs::write(&recorded, transcript).unwrap();
    let before = upstream.chat_requests().len();
    let said = succeeded(&engram_against(&project, &app, &["import", "claude-code"]).await);
    assert!(
        said.starts_with("sent 1 compactions from 1 sessions"),
        "{said}"
    );
    wait_until_async("the new messages to be classified", async || {
        capture_stat(&app, "processed").await == 201
    })
    .await;
    let new_requests = serde_json::to_string(&upstream.chat_requests()[before..]).unwrap();
    assert!(
        new_requests.contains("release notes go in CHANGELOG.md"),
        "{new_requests}"
    );
    assert!(
        !new_requests.contains("wrap every error"),
        "only what is new: {new_requests}"
    );
    app.stop().await;
}

/// Codex's layout for the recorded rollout, under the project's home.
fn codex_session(project: &Project) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/rollout.jsonl");
    let rollout = std::fs::read_to_string(fixture)
        .unwrap()
        .replace("$CWD", &project.cwd.display().to_string());
    let dir = project.home().join(".codex/sessions/2026/11/23");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rollout-2026-11-23T12-00-00-019a6f2e-7c1d-7b3a-9e4f-0d2c5b8a1e63.jsonl");
    std::fs::write(&path, rollout).unwrap();
    path
}

#[tokio::test]
async fn a_codex_backfill_reads_the_event_stream_and_needs_a_classifier() {
    let project = Project::new("claude-code/transcript.jsonl");
    codex_session(&project);

    let without_llm = agent_driven().await;
    let output = engram_against(&project, &without_llm, &["import", "codex"]).await;
    assert!(!output.status.success(), "{output:?}");
    assert!(
        text(&output.stderr).contains("a backfill needs an `llm` configured"),
        "{output:?}"
    );
    assert!(
        !project
            .home()
            .join("state/engram/import-state.json")
            .exists()
    );
    without_llm.stop().await;

    let app = start_engram().await;
    let upstream = app.upstream.clone();
    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "forge's migrations live in db/migrations.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let said = succeeded(
        &engram_against(
            &project,
            &app,
            &[
                "import",
                "codex",
                "--project",
                &project.cwd.display().to_string(),
            ],
        )
        .await,
    );
    assert!(
        said.starts_with("sent 1 compactions from 1 sessions"),
        "{said}"
    );
    wait_until_async("the session to be classified", async || {
        capture_stat(&app, "processed").await == 1
    })
    .await;
    let requests = serde_json::to_string(&upstream.chat_requests()).unwrap();
    assert!(
        requests.contains("Our migrations live in db/migrations"),
        "{requests}"
    );
    assert!(!requests.contains("TOOL OUTPUT"), "tool output is stripped");
    assert!(!requests.contains("environment_context"), "{requests}");
    let captured = get_json(&app.base_url, "/memories?repo=forge").await;
    assert_eq!(
        captured["memories"][0]["observed_at"], "2026-11-23T12:00:03Z",
        "said when the session's last message was, not today: {captured}"
    );
    let other = project.home().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let said = succeeded(
        &engram_against(
            &project,
            &app,
            &["import", "codex", "--project", &other.display().to_string()],
        )
        .await,
    );
    assert!(
        said.starts_with("sent 0 compactions from 0 sessions"),
        "{said}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_backfill_stops_at_captures_daily_token_budget_and_resumes_where_it_stopped() {
    // Room for one session's window (the classifier's instructions and
    // four short messages), not for two.
    let app = TestApp::builder()
        .embedder()
        .llm()
        .config(|config| config.capture.daily_token_budget = 1000)
        .serve()
        .await;
    let project = Project::new("claude-code/transcript.jsonl");
    claude_code_sessions(&project, 2);

    for run in ["first", "second"] {
        let output = engram_against(&project, &app, &["import", "claude-code"]).await;
        assert!(!output.status.success(), "{run}: {output:?}");
        let said = text(&output.stderr);
        assert!(
            said.contains("capture's daily token budget would be passed"),
            "{run}: {said}"
        );
        assert!(said.contains("run the import again after"), "{run}: {said}");
        assert_eq!(
            capture_stat(&app, "accepted").await,
            1,
            "{run}: one session's worth"
        );
    }
    let state =
        std::fs::read_to_string(project.home().join("state/engram/import-state.json")).unwrap();
    let state: Value = serde_json::from_str(&state).unwrap();
    let sessions = state["servers"][&app.base_url].as_object().unwrap();
    assert_eq!(sessions.len(), 1, "{state}");
    app.stop().await;
}
