//! `engram hook` end to end: the real binary, fed recorded hook payloads
//! and transcripts (`tests/fixtures/<agent>/`), against a real Engram on a
//! port whose only fakes are the model upstreams. What Engram received is
//! read back from the upstream's requests and from the memories written.
//! Files only: the hook and the agent's files are under test, not the store.
//! Around it, a module each: Cursor's, Gemini CLI's and Qwen Code's hooks
//! (`cursor`, `gemini`, `qwen_code`), hooks with no classifier
//! (`capture`), what an agent's machine may hold instead of what it should
//! (`bounds`) and the files a turn touched in a real git working tree
//! (`touched`).

mod bounds;
mod capture;
mod cursor;
mod gemini;
mod qwen_code;
mod touched;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::helpers::{Ground, PATIENCE, RunningApp, TestApp, get_json, wait_until_async};
use crate::upstream::{Behaviour, Upstream};

const CLAUDE_SESSION: &str = "5b0c1f9e-8d7a-4c1b-9f3e-2a6d4e8b7c10";
const CODEX_TURN: &str = "019a6f2f-0000-7000-8000-00000000c0de";

/// A git checkout named `forge` with an agent's transcript beside it.
pub struct Project {
    temp: TempDir,
    pub cwd: PathBuf,
    transcript: PathBuf,
    pub log: PathBuf,
}

impl Project {
    pub fn new(transcript_fixture: &str) -> Self {
        let temp = tempfile::tempdir().unwrap();
        let cwd = temp.path().join("forge");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        let transcript = temp.path().join("session.jsonl");
        std::fs::write(&transcript, fixture(transcript_fixture, &cwd, &transcript)).unwrap();
        let log = temp.path().join("state/hook.log");
        Self {
            temp,
            cwd,
            transcript,
            log,
        }
    }

    /// A recorded hook payload pointing at this project.
    pub fn payload(&self, name: &str) -> String {
        fixture(name, &self.cwd, &self.transcript)
    }

    pub fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn home(&self) -> &Path {
        self.temp.path()
    }
}

/// Runs `engram setup` with `args` in `project`'s checkout.
pub async fn engram_setup(project: &Project, args: &[&str]) -> Output {
    let mut command = engram(project);
    command.arg("setup").args(args).current_dir(&project.cwd);
    run(command, String::new()).await
}

/// A settings file that may hold whole-line `//` comments, read as JSON.
pub fn json_without_comment_lines(text: &str) -> Value {
    let plain: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect();
    serde_json::from_str(&plain).unwrap()
}

/// Every handler of `event` in a settings document whose hooks are
/// grouped (Claude Code's layout, which Gemini CLI and Qwen Code share).
pub fn grouped_handlers<'a>(settings: &'a Value, event: &str) -> Vec<&'a Value> {
    settings["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|group| group["hooks"].as_array().unwrap())
        .collect()
}

/// `tests/fixtures/<name>` with `$CWD` and `$TRANSCRIPT` filled in.
fn fixture(name: &str, cwd: &Path, transcript: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .replace("$CWD", &cwd.display().to_string())
        .replace("$TRANSCRIPT", &transcript.display().to_string())
}

/// The `engram` binary with an environment that holds nothing of the
/// machine's: the user is `ana`, home and state are the project's.
pub fn engram(project: &Project) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("XDG_STATE_HOME", project.home().join("state"))
        .env("USER", "ana");
    command
}

/// Runs `command` with `stdin` off the async runtime (the server under
/// test shares it), killing it (and failing) if it still runs after
/// [`PATIENCE`]: far past any hook's budget, so that a hook that hangs
/// fails the test instead of stalling the suite.
pub async fn run(mut command: Command, stdin: String) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > PATIENCE {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("the hook hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// `engram hook <args>` against `url`, logging to the project's log.
pub async fn hook(project: &Project, url: &str, args: &[&str], stdin: String) -> Output {
    let mut command = engram(project);
    command
        .arg("hook")
        .args(args)
        .arg("--log-file")
        .arg(&project.log)
        .env("ENGRAM_URL", url);
    run(command, stdin).await
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Asserts the hook left the agent untouched: exit 0, nothing printed.
pub fn assert_silent(output: &Output) {
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(output), "", "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{output:?}");
}

pub async fn start_engram() -> RunningApp {
    start_engram_on(Ground::new().await).await
}

/// [`start_engram`] on `ground`: a restart on the same data.
pub async fn start_engram_on(ground: Ground) -> RunningApp {
    TestApp::builder()
        .on(ground)
        .embedder()
        .llm()
        .config(|config| config.capture.retry_base_ms = 10)
        .serve()
        .await
}

/// Writes a memory of repo `forge` and waits until retrieval can find it.
pub async fn remember(app: &RunningApp, content: &str) {
    let body = json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "project-conventions", "content": content});
    write_and_wait(app, &body).await;
}

/// Writes the memory `body` and waits until the index has taken it.
pub async fn write_and_wait(app: &RunningApp, body: &Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/memories", app.base_url))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    app.wait_indexed().await;
}

/// Engram serving with `fact` [`remember`]ed and HyDE scripted to
/// hypothesise it, and a project whose agent's transcript is the fixture
/// `transcript`.
pub async fn engram_remembering(transcript: &str, fact: &str) -> (RunningApp, Project) {
    let app = start_engram().await;
    let project = Project::new(transcript);
    remember(&app, fact).await;
    app.upstream
        .set_chat(Behaviour::Answer, &json!([fact]).to_string());
    (app, project)
}

/// The context a successful hook printed for `event`, checking the shape
/// of the agent's output.
pub fn printed_context(output: &Output, event: &str) -> String {
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let specific = &printed["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], event, "{printed}");
    specific["additionalContext"].as_str().unwrap().to_owned()
}

/// Waits until repo `forge` for user `ana` holds `count` memories; newest first.
pub async fn memories(app: &RunningApp, count: usize) -> Vec<Value> {
    let mut listed = Vec::new();
    wait_until_async("capture to write the memories", async || {
        listed = get_json(&app.base_url, "/memories?repo=forge&user=ana").await["memories"]
            .as_array()
            .unwrap()
            .clone();
        listed.len() >= count
    })
    .await;
    listed
}

/// The prompt (second message) of the last chat request the upstream got.
pub fn last_prompt(upstream: &Upstream) -> String {
    let requests = upstream.chat_requests();
    requests.last().expect("a chat request")[1]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn assert_window_of_claude_fixture(prompt: &str) {
    for said in [
        "wrap every error in the forge client with fmt.Errorf",
        "Understood: every error gets wrapped",
        "I found one errors.New call and wrapped it.",
    ] {
        assert!(prompt.contains(said), "{said:?} missing from {prompt}");
    }
    for unsaid in [
        "old logging library",
        "This session is being continued",
        "TOOL RESULT LINE",
        "grep -rn",
        "Private reasoning",
        "SUBAGENT NOTE",
        "<command-name>",
    ] {
        assert!(!prompt.contains(unsaid), "{unsaid:?} leaked into {prompt}");
    }
}

#[tokio::test]
async fn a_claude_code_prompt_gets_the_memories_for_its_window_as_context() {
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    let (app, project) = engram_remembering("claude-code/transcript.jsonl", fact).await;
    let upstream = &app.upstream;

    let payload = project.payload("claude-code/user-prompt-submit.json");
    let args = ["claude-code", "user-prompt-submit"];
    let output = hook(&project, &app.base_url, &args, payload.clone()).await;

    let injection = printed_context(&output, "UserPromptSubmit");
    assert!(injection.contains(fact), "{injection}");
    let prompt = last_prompt(upstream);
    assert!(
        prompt.contains("Now add error handling to the forge HTTP client."),
        "the new prompt is the window's end: {prompt}"
    );
    assert_window_of_claude_fixture(&prompt);

    // The same prompt again is the same turn: Engram's per-turn cache
    // answers, with no second HyDE call.
    let asked = upstream.chat_requests().len();
    let again = hook(&project, &app.base_url, &args, payload).await;
    assert_eq!(stdout(&again), stdout(&output));
    assert_eq!(upstream.chat_requests().len(), asked);
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
async fn a_claude_code_session_start_with_no_past_asks_for_the_project() {
    let app = start_engram().await;
    let upstream = &app.upstream;
    let project = Project::new("claude-code/transcript.jsonl");
    std::fs::remove_file(project.home().join("session.jsonl")).unwrap();
    remember(
        &app,
        "Decisions for working on forge are recorded in docs/adr.",
    )
    .await;

    let payload = project.payload("claude-code/session-start.json");
    let output = hook(
        &project,
        &app.base_url,
        &["claude-code", "session-start"],
        payload,
    )
    .await;

    let injection = printed_context(&output, "SessionStart");
    assert!(injection.contains("docs/adr"), "{injection}");
    assert!(
        upstream.chat_requests().is_empty(),
        "a query is searched for directly"
    );
    app.stop().await;
}

#[tokio::test]
async fn claude_code_stop_and_pre_compact_hand_the_window_to_capture() {
    let app = start_engram().await;
    let upstream = &app.upstream;
    let project = Project::new("claude-code/transcript.jsonl");
    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Errors in the forge client are wrapped with fmt.Errorf and %w.", "scope": "repo", "category": "project-conventions"}]"#,
    );

    let stop = project.payload("claude-code/stop.json");
    assert_silent(&hook(&project, &app.base_url, &["claude-code", "stop"], stop).await);
    let written = memories(&app, 1).await;
    assert_eq!(written[0]["session_id"], CLAUDE_SESSION);
    assert_eq!(written[0]["trigger"], "turn");
    assert_window_of_claude_fixture(&last_prompt(upstream));

    // The compaction carries the same messages, all classified at the
    // stop: it is processed with no model call.
    let calls = upstream.chat_requests().len();
    let compact = project.payload("claude-code/pre-compact.json");
    let args = ["claude-code", "pre-compact"];
    assert_silent(&hook(&project, &app.base_url, &args, compact.clone()).await);
    wait_until_async("the compaction to be processed", async || {
        get_json(&app.base_url, "/stats").await["capture"]["processed"] == 2
    })
    .await;
    assert_eq!(
        upstream.chat_requests().len(),
        calls,
        "nothing new to classify"
    );
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;

    // Where nothing was classified yet, it hands the whole window over.
    let app = start_engram().await;
    let upstream = &app.upstream;
    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Ana wants errors wrapped, never returned bare.", "scope": "user", "category": "coding-preferences"}]"#,
    );
    assert_silent(&hook(&project, &app.base_url, &args, compact).await);
    let written = memories(&app, 1).await;
    assert_eq!(written[0]["trigger"], "compaction", "{written:?}");
    assert_eq!(written[0]["user"], "ana", "the OS user owns user memories");
    assert_window_of_claude_fixture(&last_prompt(upstream));
    assert_eq!(project.log_lines(), Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
async fn codex_hooks_use_its_turn_id_and_its_event_stream() {
    let fact = "Migrations in forge live in db/migrations, numbered by date.";
    let (app, project) = engram_remembering("codex/rollout.jsonl", fact).await;
    let upstream = &app.upstream;

    let payload = project.payload("codex/user-prompt-submit.json");
    let output = hook(
        &project,
        &app.base_url,
        &["codex", "user-prompt-submit"],
        payload,
    )
    .await;
    let injection = printed_context(&output, "UserPromptSubmit");
    assert!(injection.contains(fact), "{injection}");
    let prompt = last_prompt(upstream);
    assert!(
        prompt.contains("Add a migration for the users table."),
        "{prompt}"
    );
    assert!(
        prompt.contains("Our migrations live in db/migrations"),
        "{prompt}"
    );
    for unsaid in ["environment_context", "TOOL OUTPUT"] {
        assert!(!prompt.contains(unsaid), "{unsaid:?} leaked into {prompt}");
    }
    // The retrieval was cached under Codex's own turn id: the same prompt
    // again asks the models nothing, and under another turn id it asks
    // them again.
    let calls = || (upstream.chat_requests().len(), upstream.embedding_calls());
    let before = calls();
    let payload = project.payload("codex/user-prompt-submit.json");
    let again = hook(
        &project,
        &app.base_url,
        &["codex", "user-prompt-submit"],
        payload.clone(),
    )
    .await;
    assert_eq!(printed_context(&again, "UserPromptSubmit"), injection);
    assert_eq!(calls(), before, "answered from the cache");
    assert!(payload.contains(CODEX_TURN), "{payload}");
    let next_turn = payload.replace(CODEX_TURN, "019a6f2f-0000-7000-8000-00000000beef");
    hook(
        &project,
        &app.base_url,
        &["codex", "user-prompt-submit"],
        next_turn,
    )
    .await;
    assert_ne!(calls(), before, "another turn is a new answer");

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "forge numbers migrations by date.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    let stop = project.payload("codex/stop.json");
    assert_silent(&hook(&project, &app.base_url, &["codex", "stop"], stop).await);
    memories(&app, 2).await;
    let prompt = last_prompt(upstream);
    assert!(
        prompt.contains("Added db/migrations/20261123_users.sql."),
        "the last answer comes from the payload: {prompt}"
    );
    assert!(!prompt.contains("TOOL OUTPUT"), "{prompt}");
    app.stop().await;
}

#[tokio::test]
async fn with_engram_down_the_hook_exits_0_silently_and_logs_why() {
    let url = crate::helpers::closed_url();
    let project = Project::new("claude-code/transcript.jsonl");

    for (event, fixture) in [
        ("user-prompt-submit", "claude-code/user-prompt-submit.json"),
        ("stop", "claude-code/stop.json"),
    ] {
        let payload = project.payload(fixture);
        assert_silent(&hook(&project, &url, &["claude-code", event], payload).await);
    }
    let lines = project.log_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("claude-code user-prompt-submit: calling"),
        "{lines:?}"
    );
    assert!(lines[0].contains(&format!("{url}/retrieve")), "{lines:?}");
    assert!(lines[1].contains(&format!("{url}/turns")), "{lines:?}");
}

#[tokio::test]
async fn an_engram_that_never_answers_is_cut_off_at_the_time_budget() {
    // Connections queue in the backlog; nothing ever answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let project = Project::new("claude-code/transcript.jsonl");

    let payload = project.payload("claude-code/user-prompt-submit.json");
    let args = ["claude-code", "user-prompt-submit", "--timeout-ms", "300"];
    assert_silent(&hook(&project, &url, &args, payload).await);
    let lines = project.log_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("no answer within 300 ms"), "{lines:?}");
    drop(silent);
}

#[tokio::test]
async fn a_refused_key_bad_input_and_a_mistyped_command_are_logged_never_shown() {
    let app = TestApp::builder()
        .embedder()
        .llm()
        .config(|config| {
            config.api_key = Some(engram::config::ApiKey::new("s3cret"));
        })
        .serve()
        .await;
    let project = Project::new("claude-code/transcript.jsonl");
    let stop = project.payload("claude-code/stop.json");

    let mut wrong = engram(&project);
    wrong
        .args(["hook", "claude-code", "stop", "--log-file"])
        .arg(&project.log)
        .env("ENGRAM_URL", &app.base_url)
        .env("ENGRAM_API_KEY", "guess");
    assert_silent(&run(wrong, stop.clone()).await);
    let lines = project.log_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("/turns answered 401"), "{lines:?}");

    let mut right = engram(&project);
    right
        .args(["hook", "claude-code", "stop", "--log-file"])
        .arg(&project.log)
        .env("ENGRAM_URL", &app.base_url)
        .env("ENGRAM_API_KEY", "s3cret");
    assert_silent(&run(right, stop).await);
    assert_eq!(project.log_lines().len(), 1, "the right key is accepted");

    let args = ["claude-code", "user-prompt-submit"];
    assert_silent(&hook(&project, &app.base_url, &args, "not json".to_owned()).await);
    let wrong_event = project.payload("claude-code/stop.json");
    assert_silent(&hook(&project, &app.base_url, &args, wrong_event).await);
    let lines = project.log_lines();
    assert!(lines[1].contains("not the JSON expected"), "{lines:?}");
    assert!(lines[2].contains("is for Stop"), "{lines:?}");

    // A typo in the agent's settings: clap cannot even read the command.
    let mut typo = engram(&project);
    typo.args(["hook", "claude-code", "on-prompt"]);
    assert_silent(&run(typo, String::new()).await);
    let default_log = project.home().join("state/engram/hook.log");
    let logged = std::fs::read_to_string(&default_log).unwrap();
    assert!(logged.contains("on-prompt"), "{logged}");
    app.stop().await;
}
