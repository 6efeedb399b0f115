//! `engram setup`: merging into an agent's existing settings, idempotence,
//! the backup, `--print`, and the written commands working as a hook and
//! as the agent's MCP server.

use std::path::{Path, PathBuf};
use std::process::Output;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::helpers::RunningApp;
use crate::hooks::{Project, engram, printed_context, remember_and_expect, run, start_engram};
use crate::upstream::Upstream;

const EVENTS: [(&str, &str); 4] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("PreCompact", "pre-compact"),
];

async fn setup(project: &Project, args: &[&str]) -> Output {
    let mut command = engram(project);
    command.arg("setup").args(args).current_dir(&project.cwd);
    run(command, String::new()).await
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The files beside `path` whose names start with its name and `.engram-backup-`.
fn backups(path: &Path) -> Vec<PathBuf> {
    let prefix = format!(
        "{}.engram-backup-",
        path.file_name().unwrap().to_string_lossy()
    );
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|file| {
            file.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .collect()
}

/// The command of our hook for `event` in a settings document.
fn command_for(settings: &Value, event: &str) -> String {
    let groups = settings["hooks"][event].as_array().unwrap();
    let ours: Vec<&Value> = groups
        .iter()
        .flat_map(|group| group["hooks"].as_array().unwrap())
        .filter(|hook| hook["command"].as_str().unwrap().contains(" hook "))
        .collect();
    assert_eq!(ours.len(), 1, "{settings:#}");
    assert_eq!(ours[0]["type"], "command");
    ours[0]["command"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn setup_merges_the_hooks_into_existing_settings_and_backs_them_up() {
    let project = Project::new("claude-code/transcript.jsonl");
    let file = project.cwd.join(".claude/settings.local.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let original = json!({
        "model": "opus",
        "permissions": {"allow": ["Bash(cargo test:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}
    });
    let original_text = serde_json::to_string_pretty(&original).unwrap();
    std::fs::write(&file, &original_text).unwrap();

    let output = setup(&project, &["claude-code", "--scope", "local"]).await;

    assert!(output.status.success(), "{output:?}");
    let report = String::from_utf8(output.stdout).unwrap();
    assert!(report.contains(&file.display().to_string()), "{report}");
    assert_eq!(report.matches("added").count(), 5, "{report}");
    let settings = read_json(&file);
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["permissions"], original["permissions"]);
    assert_eq!(
        settings["hooks"]["Stop"][0]["hooks"][0]["command"], "say done",
        "other hooks stay"
    );
    for (event, arg) in EVENTS {
        let command = command_for(&settings, event);
        assert!(
            command.ends_with(&format!(" hook claude-code {arg}")),
            "{command}"
        );
        assert!(
            command.starts_with(env!("CARGO_BIN_EXE_engram")),
            "{command}"
        );
    }
    let saved = backups(&file);
    assert_eq!(saved.len(), 1);
    assert_eq!(std::fs::read_to_string(&saved[0]).unwrap(), original_text);
    // The local scope's MCP server: the project's entry in ~/.claude.json.
    let state = read_json(&project.home().join(".claude.json"));
    let server = &state["projects"][project.cwd.to_str().unwrap()]["mcpServers"]["engram"];
    assert_eq!(server["type"], "stdio", "{state:#}");
    assert_eq!(server["command"], env!("CARGO_BIN_EXE_engram"));
    assert_eq!(server["args"], json!(["mcp"]));
}

#[tokio::test]
async fn setup_a_second_time_changes_nothing() {
    let project = Project::new("claude-code/transcript.jsonl");
    let file = project.home().join(".claude/settings.json");

    let first = setup(&project, &["claude-code"]).await;
    assert!(first.status.success(), "{first:?}");
    assert!(String::from_utf8_lossy(&first.stdout).contains("created"));
    let written = std::fs::read(&file).unwrap();
    assert!(backups(&file).is_empty(), "nothing to back up on creation");

    let second = setup(&project, &["claude-code"]).await;
    assert!(second.status.success(), "{second:?}");
    let report = String::from_utf8(second.stdout).unwrap();
    assert!(report.contains("nothing changed"), "{report}");
    assert_eq!(std::fs::read(&file).unwrap(), written);
    assert!(backups(&file).is_empty());

    // A new option is a change: the entries are updated in place.
    let third = setup(&project, &["claude-code", "--url", "http://127.0.0.1:9000"]).await;
    let report = String::from_utf8(third.stdout).unwrap();
    assert_eq!(report.matches("updated").count(), 5, "{report}");
    let settings = read_json(&file);
    for (event, _) in EVENTS {
        assert!(command_for(&settings, event).ends_with("--url http://127.0.0.1:9000"));
    }
    assert_eq!(backups(&file).len(), 1);
    let state = read_json(&project.home().join(".claude.json"));
    assert_eq!(
        state["mcpServers"]["engram"]["args"],
        json!(["mcp", "--url", "http://127.0.0.1:9000"])
    );
}

#[tokio::test]
async fn setup_print_shows_the_snippet_and_writes_nothing() {
    let project = Project::new("claude-code/transcript.jsonl");
    let output = setup(&project, &["codex", "--print", "--repo", "forge"]).await;
    assert!(output.status.success(), "{output:?}");
    // Each file's snippet under a `# <file>` line: the hooks, then the
    // MCP server.
    let printed = String::from_utf8(output.stdout).unwrap();
    let snippets: Vec<(&str, &str)> = printed
        .split("# ")
        .filter(|part| !part.is_empty())
        .map(|part| part.split_once('\n').unwrap())
        .collect();
    assert_eq!(snippets.len(), 2, "{printed}");
    assert!(snippets[0].0.ends_with(".codex/hooks.json"), "{printed}");
    let hooks: Value = serde_json::from_str(snippets[0].1).unwrap();
    for (event, arg) in EVENTS {
        assert!(
            command_for(&hooks, event).ends_with(&format!(" hook codex {arg} --repo forge")),
            "{hooks:#}"
        );
    }
    assert!(snippets[1].0.ends_with(".codex/config.toml"), "{printed}");
    assert!(
        snippets[1]
            .1
            .contains(r#"args = ["mcp", "--repo", "forge"]"#),
        "{printed}"
    );
    assert!(!project.home().join(".codex").exists());
    assert!(!project.cwd.join(".codex").exists());
}

#[tokio::test]
async fn setup_for_codex_writes_its_hooks_file_and_refuses_what_is_not_json() {
    let project = Project::new("codex/rollout.jsonl");
    let config = project.cwd.join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let original = "# the team's Codex settings\nmodel = \"gpt-5\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
    std::fs::write(&config, original).unwrap();
    let output = setup(&project, &["codex", "--scope", "project"]).await;
    assert!(output.status.success(), "{output:?}");
    let settings = read_json(&project.cwd.join(".codex/hooks.json"));
    assert!(command_for(&settings, "Stop").ends_with(" hook codex stop"));
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.starts_with(original),
        "layout and comments stay: {written}"
    );
    assert!(
        written.contains(&format!(
            "[mcp_servers.engram]\ncommand = \"{}\"\nargs = [\"mcp\"]\nenv_vars = [\"ENGRAM_API_KEY\", \"ENGRAM_URL\"]\n",
            env!("CARGO_BIN_EXE_engram")
        )),
        "{written}"
    );
    assert_eq!(backups(&config).len(), 1);
    let again = setup(&project, &["codex", "--scope", "project"]).await;
    assert_eq!(
        String::from_utf8_lossy(&again.stdout)
            .matches("nothing changed")
            .count(),
        2,
        "{again:?}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), written);

    let broken = project.home().join("broken.json");
    std::fs::write(&broken, "{\"hooks\": ").unwrap();
    let file = broken.to_str().unwrap();
    let output = setup(&project, &["claude-code", "--file", file]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not JSON"));
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "{\"hooks\": ");
    assert!(backups(&broken).is_empty());

    let output = setup(&project, &["codex", "--scope", "local"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

#[tokio::test]
async fn the_command_setup_writes_runs_as_the_agent_would_run_it() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app: RunningApp = start_engram(&upstream, dir.path()).await;
    let project = Project::new("claude-code/transcript.jsonl");
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    remember_and_expect(&app, &upstream, fact).await;
    let output = setup(&project, &["claude-code", "--url", &app.base_url]).await;
    assert!(output.status.success(), "{output:?}");
    let settings = read_json(&project.home().join(".claude/settings.json"));
    let command = command_for(&settings, "UserPromptSubmit");

    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", &command])
        .env_clear()
        .env("HOME", project.home())
        .env("USER", "ana");
    let output = run(
        shell,
        project.payload("claude-code/user-prompt-submit.json"),
    )
    .await;
    let injection = printed_context(&output, "UserPromptSubmit");
    assert!(injection.contains(fact), "{injection}");
    app.stop().await;
}

#[tokio::test]
async fn the_mcp_server_setup_writes_serves_the_projects_memories() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let app: RunningApp = start_engram(&upstream, dir.path()).await;
    let project = Project::new("claude-code/transcript.jsonl");
    let output = setup(
        &project,
        &["claude-code", "--scope", "project", "--url", &app.base_url],
    )
    .await;
    assert!(output.status.success(), "{output:?}");
    let servers = read_json(&project.cwd.join(".mcp.json"));
    let server = &servers["mcpServers"]["engram"];
    let args: Vec<String> = serde_json::from_value(server["args"].clone()).unwrap();

    // Started as the agent starts it: in the project, as the OS user.
    let command =
        tokio::process::Command::new(server["command"].as_str().unwrap()).configure(|command| {
            command
                .args(&args)
                .current_dir(&project.cwd)
                .env_clear()
                .env("HOME", project.home())
                .env("USER", "ana");
        });
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let remember = async |scope: &str, content: &str| {
        let Value::Object(arguments) =
            json!({"scope": scope, "category": "patterns", "content": content})
        else {
            unreachable!("an object literal");
        };
        let written = client
            .call_tool(CallToolRequestParams::new("remember").with_arguments(arguments))
            .await
            .unwrap();
        assert_ne!(written.is_error, Some(true), "{written:?}");
        written.structured_content.unwrap()
    };
    let memory = remember("repo", "Forge's release notes are written by hand.").await;
    assert_eq!(memory["repo"], "forge", "the project's repo: {memory:#}");
    let memory = remember("user", "Ana reviews pull requests in the morning.").await;
    assert_eq!(memory["user"], "ana", "the OS user: {memory:#}");
    client.cancel().await.unwrap();
    app.stop().await;
}
