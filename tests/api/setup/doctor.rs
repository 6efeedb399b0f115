//! Whether what setup wrote can work: `engram setup` says whether Engram
//! answers at the hooks' URL and where the hook log is, and `engram
//! doctor` checks the same later (the URL, each agent's entries and the
//! binary they run, the log's last lines), exiting 1 on a problem.
//! Setup edits the agent's files: nothing here depends on the storage backend.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::hooks::{Project, engram, run, start_engram};

async fn command(project: &Project, args: &[&str]) -> Output {
    let mut command = engram(project);
    command.args(args).current_dir(&project.cwd);
    run(command, String::new()).await
}

/// A URL where nothing listens: a port the system handed out, then closed.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Where the hooks log when no `--log-file` is given: the test's state dir.
fn hook_log(project: &Project) -> PathBuf {
    project.home().join("state/engram/hook.log")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn setup_says_when_nothing_answers_at_the_url_and_where_the_hook_log_is() {
    let project = Project::new("claude-code/transcript.jsonl");
    let url = dead_url();
    let output = command(&project, &["setup", "claude-code", "--url", &url]).await;
    assert!(
        output.status.success(),
        "a warning, not a failure: {output:?}"
    );
    let report = stdout(&output);
    assert!(
        report.contains(&format!("warning: nothing answers at {url}")),
        "{report}"
    );
    assert!(report.contains("engram serve"), "says how: {report}");
    assert!(
        report.contains(&hook_log(&project).display().to_string()),
        "{report}"
    );

    let app = start_engram().await;
    let output = command(&project, &["setup", "claude-code", "--url", &app.base_url]).await;
    let report = stdout(&output);
    assert!(
        report.contains(&format!("Engram answers at {} and is ready", app.base_url)),
        "{report}"
    );
    assert!(!report.contains("nothing answers"), "{report}");
    app.stop().await;
}

#[tokio::test]
async fn doctor_passes_when_engram_answers_and_the_hooks_run_a_binary_that_exists() {
    let app = start_engram().await;
    let project = Project::new("claude-code/transcript.jsonl");
    let output = command(&project, &["setup", "claude-code", "--url", &app.base_url]).await;
    assert!(output.status.success(), "{output:?}");
    let log = hook_log(&project);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let failure =
        "2026-01-02T03:04:05.000Z claude-code stop: the hook input is not the JSON expected";
    std::fs::write(&log, format!("{failure}\n")).unwrap();

    // No --url: the hooks name theirs, and that is the one probed.
    let output = command(&project, &["doctor"]).await;

    assert!(output.status.success(), "{output:?}");
    let report = stdout(&output);
    assert!(
        report.contains(&format!(
            "ok: Engram answers at {} and is ready",
            app.base_url
        )),
        "{report}"
    );
    let ok_agent = report
        .lines()
        .find(|line| line.starts_with("ok: claude-code (user scope)"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(ok_agent.contains(env!("CARGO_BIN_EXE_engram")), "{report}");
    assert!(!report.contains("problem:"), "{report}");
    assert!(report.contains(&log.display().to_string()), "{report}");
    assert!(report.contains(failure), "the log's last lines: {report}");
    app.stop().await;
}

#[tokio::test]
async fn doctor_finds_qwen_code_copilot_and_amp_where_setup_put_them() {
    let app = start_engram().await;
    let project = Project::new("claude-code/transcript.jsonl");
    for agent in ["qwen-code", "copilot", "amp"] {
        let output = command(&project, &["setup", agent, "--url", &app.base_url]).await;
        assert!(output.status.success(), "{agent}: {output:?}");
    }

    let output = command(&project, &["doctor"]).await;

    assert!(output.status.success(), "{output:?}");
    let report = stdout(&output);
    for agent in ["qwen-code", "copilot", "amp"] {
        let line = report
            .lines()
            .find(|line| line.starts_with(&format!("ok: {agent} (user scope)")))
            .unwrap_or_else(|| panic!("{agent}: {report}"));
        assert!(line.contains(env!("CARGO_BIN_EXE_engram")), "{report}");
    }
    assert!(
        report.contains("ok: qwen-code (user scope): 2 hooks and the MCP server"),
        "{report}"
    );
    assert!(!report.contains("problem:"), "{report}");
    app.stop().await;
}

#[tokio::test]
async fn doctor_names_each_problem_on_a_line_with_what_to_do() {
    let project = Project::new("claude-code/transcript.jsonl");
    let url = dead_url();
    let output = command(&project, &["setup", "claude-code", "--url", &url]).await;
    assert!(output.status.success(), "{output:?}");
    // The binary moved away, and one hook was removed by hand.
    let settings_path = project.home().join(".claude/settings.json");
    let text = std::fs::read_to_string(&settings_path)
        .unwrap()
        .replace(env!("CARGO_BIN_EXE_engram"), "/gone/engram");
    let mut settings: Value = serde_json::from_str(&text).unwrap();
    settings["hooks"]
        .as_object_mut()
        .unwrap()
        .remove("PreCompact");
    std::fs::write(&settings_path, settings.to_string()).unwrap();

    let output = command(&project, &["doctor"]).await;

    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report = stdout(&output);
    let problems: Vec<&str> = report
        .lines()
        .filter(|line| line.starts_with("problem: "))
        .collect();
    let about = |needle: &str| {
        problems
            .iter()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no problem about {needle}: {report}"))
            .to_string()
    };
    assert!(
        about(&format!("nothing answers at {url}")).contains("engram serve"),
        "{report}"
    );
    let gone = about("/gone/engram");
    assert!(gone.contains("does not exist"), "{gone}");
    assert!(gone.contains("engram setup claude-code"), "{gone}");
    let missing = about("PreCompact");
    assert!(missing.contains("engram setup claude-code"), "{missing}");
}

#[tokio::test]
async fn doctor_with_no_agent_set_up_says_to_run_setup() {
    let app = start_engram().await;
    let project = Project::new("claude-code/transcript.jsonl");

    let output = command(&project, &["doctor", "--url", &app.base_url]).await;

    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report = stdout(&output);
    assert!(
        report.contains(&format!("ok: Engram answers at {}", app.base_url)),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|line| line.starts_with("problem: ") && line.contains("engram setup <agent>")),
        "{report}"
    );
    app.stop().await;
}
