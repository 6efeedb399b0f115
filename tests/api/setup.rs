//! `engram setup`: merging into an agent's existing settings, idempotence,
//! the backup, `--print`, and the written commands working as a hook and
//! as the agent's MCP server.
//! Setup edits the agent's files: nothing here depends on the storage backend.
//! Around it, a module each: the other agents (`agents`), their own CLIs
//! reading what setup wrote (`clis`), whether what setup wrote can work
//! (`doctor`) and what it leaves on disk (`private`).

pub mod agents;
mod clis;
mod doctor;
pub mod private;

use std::path::{Path, PathBuf};
use std::process::Output;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::helpers::PATIENCE;
use crate::hooks::{
    Project, engram, engram_remembering, engram_setup, grouped_handlers, printed_context, run,
    start_engram,
};
use crate::setup::private::backup_place;

const EVENTS: [(&str, &str); 4] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("PreCompact", "pre-compact"),
];

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The files beside `path` whose names start with its name and `.engram-backup-`.
pub fn backups(path: &Path) -> Vec<PathBuf> {
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
    let ours: Vec<&Value> = grouped_handlers(settings, event)
        .into_iter()
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

    let output = engram_setup(&project, &["claude-code", "--scope", "local"]).await;

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

    let first = engram_setup(&project, &["claude-code"]).await;
    assert!(first.status.success(), "{first:?}");
    assert!(String::from_utf8_lossy(&first.stdout).contains("created"));
    let written = std::fs::read(&file).unwrap();
    assert!(backups(&file).is_empty(), "nothing to back up on creation");

    let second = engram_setup(&project, &["claude-code"]).await;
    assert!(second.status.success(), "{second:?}");
    let report = String::from_utf8(second.stdout).unwrap();
    assert!(report.contains("nothing changed"), "{report}");
    assert_eq!(std::fs::read(&file).unwrap(), written);
    assert!(backups(&file).is_empty());

    // A new option is a change: the entries are updated in place.
    let third = engram_setup(&project, &["claude-code", "--url", "http://127.0.0.1:9000"]).await;
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
    let output = engram_setup(&project, &["codex", "--print", "--repo", "forge"]).await;
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
    let output = engram_setup(&project, &["codex", "--scope", "project"]).await;
    assert!(output.status.success(), "{output:?}");
    let settings = read_json(&project.cwd.join(".codex/hooks.json"));
    assert!(command_for(&settings, "Stop").ends_with(" hook codex stop"));
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.starts_with(original),
        "layout and comments stay: {written}"
    );
    assert!(
        written.contains(
            "[mcp_servers.engram]\ncommand = \"engram\"\nargs = [\"mcp\"]\nenv_vars = [\"ENGRAM_API_KEY\", \"ENGRAM_URL\"]\n"
        ),
        "{written}"
    );
    // A shared file's backup is kept out of the checkout.
    assert!(backups(&config).is_empty());
    assert_eq!(backups(&backup_place(&project, &config)).len(), 1);
    let again = engram_setup(&project, &["codex", "--scope", "project"]).await;
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
    let output = engram_setup(&project, &["claude-code", "--file", file]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not JSON"));
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "{\"hooks\": ");
    assert!(backups(&broken).is_empty());

    let output = engram_setup(&project, &["codex", "--scope", "local"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

#[tokio::test]
async fn the_command_setup_writes_runs_as_the_agent_would_run_it() {
    let fact = "The forge client wraps every error with fmt.Errorf and %w.";
    let (app, project) = engram_remembering("claude-code/transcript.jsonl", fact).await;
    let output = engram_setup(&project, &["claude-code", "--url", &app.base_url]).await;
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
    let app = start_engram().await;
    let _upstream = &app.upstream;
    let project = Project::new("claude-code/transcript.jsonl");
    let bin = bin_dir(&project);
    let output = setup_with_path(
        &project,
        &bin,
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
                .env("PATH", &bin)
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

/// A directory holding `engram` (a link to the binary under test), for
/// a `PATH` on which the command written into shared files resolves.
fn bin_dir(project: &Project) -> PathBuf {
    let bin = project.home().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_engram"), bin.join("engram")).unwrap();
    bin
}

async fn setup_with_path(project: &Project, path: &Path, args: &[&str]) -> Output {
    let mut command = engram(project);
    command
        .arg("setup")
        .args(args)
        .current_dir(&project.cwd)
        .env("PATH", path);
    run(command, String::new()).await
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn setup_for_a_project_writes_the_command_name_not_this_machines_path() {
    let project = Project::new("claude-code/transcript.jsonl");
    let bin = bin_dir(&project);
    let output = setup_with_path(&project, &bin, &["claude-code", "--scope", "project"]).await;
    assert!(output.status.success(), "{output:?}");
    assert!(output.stderr.is_empty(), "no warning: {output:?}");
    let report = String::from_utf8(output.stdout).unwrap();
    assert!(
        report.contains(&format!(
            "from PATH (here: {})",
            bin.join("engram").display()
        )),
        "{report}"
    );
    let servers = read_json(&project.cwd.join(".mcp.json"));
    assert_eq!(servers["mcpServers"]["engram"]["command"], "engram");
    let settings = read_json(&project.cwd.join(".claude/settings.json"));
    for (event, arg) in EVENTS {
        assert_eq!(
            command_for(&settings, event),
            format!("engram hook claude-code {arg}")
        );
    }
    let codex = setup_with_path(&project, &bin, &["codex", "--scope", "project"]).await;
    assert!(codex.status.success(), "{codex:?}");
    let config = std::fs::read_to_string(project.cwd.join(".codex/config.toml")).unwrap();
    assert!(config.contains("command = \"engram\"\n"), "{config}");
    let hooks = read_json(&project.cwd.join(".codex/hooks.json"));
    assert_eq!(command_for(&hooks, "Stop"), "engram hook codex stop");
}

#[tokio::test]
async fn setup_for_a_project_warns_when_the_command_is_not_on_path() {
    let project = Project::new("claude-code/transcript.jsonl");
    let empty = project.home().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let output = setup_with_path(&project, &empty, &["claude-code", "--scope", "project"]).await;
    assert!(output.status.success(), "{output:?}");
    let warning = String::from_utf8(output.stderr).unwrap();
    assert!(
        warning.contains("warning: `engram` is not on PATH"),
        "{warning}"
    );
    assert!(warning.contains("cargo install"), "says how: {warning}");
    let servers = read_json(&project.cwd.join(".mcp.json"));
    assert_eq!(servers["mcpServers"]["engram"]["command"], "engram");

    // The user's own files name this binary: they are private to this machine.
    let output = setup_with_path(&project, &empty, &["claude-code"]).await;
    assert!(output.status.success(), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
    let state = read_json(&project.home().join(".claude.json"));
    assert_eq!(
        state["mcpServers"]["engram"]["command"],
        env!("CARGO_BIN_EXE_engram")
    );
}

#[tokio::test]
async fn setup_backs_up_readable_by_the_owner_only_and_keeps_the_newest_three() {
    use std::os::unix::fs::PermissionsExt;
    let project = Project::new("claude-code/transcript.jsonl");
    let state = project.home().join(".claude.json");
    let settings = project.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&state, r#"{"primaryApiKey": "sk-ant-not-for-others"}"#).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&settings, r#"{"model": "opus"}"#).unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).unwrap();

    // One left readable by others by an older setup: narrowed, then
    // removed as the oldest.
    let old_backup = project
        .home()
        .join(".claude.json.engram-backup-20000101T000000.000Z");
    std::fs::write(&old_backup, "{}").unwrap();
    std::fs::set_permissions(&old_backup, std::fs::Permissions::from_mode(0o644)).unwrap();

    for run in 0..5 {
        let url = format!("http://127.0.0.1:{}", 9000 + run);
        let output = engram_setup(&project, &["claude-code", "--url", &url]).await;
        assert!(output.status.success(), "{output:?}");
        let report = String::from_utf8(output.stdout).unwrap();
        if run == 0 {
            assert_eq!(mode(&old_backup), 0o600);
        }
        for file in [&state, &settings] {
            let newest = backups(file).into_iter().max().unwrap();
            assert!(
                report.contains(&format!("backup: {}", newest.display())),
                "the report says where: {report}"
            );
        }
    }
    for file in [&state, &settings] {
        let saved = backups(file);
        assert_eq!(saved.len(), 3, "{saved:?}");
        for backup in saved {
            assert_eq!(mode(&backup), 0o600, "{}", backup.display());
        }
    }
    assert!(!old_backup.exists());
    assert_eq!(mode(&state), 0o600, "the file keeps its own mode");
    assert_eq!(mode(&settings), 0o644);
    let newest = backups(&state).into_iter().max().unwrap();
    assert!(
        std::fs::read_to_string(newest)
            .unwrap()
            .contains("sk-ant-not-for-others")
    );
}

#[tokio::test]
async fn setup_refuses_links_in_the_project() {
    let project = Project::new("claude-code/transcript.jsonl");
    let bin = bin_dir(&project);
    let private = project.home().join(".claude.json");
    let secret = r#"{"primaryApiKey": "sk-ant-private"}"#;
    std::fs::write(&private, secret).unwrap();
    let mcp = project.cwd.join(".mcp.json");
    std::os::unix::fs::symlink(&private, &mcp).unwrap();

    let output = setup_with_path(&project, &bin, &["claude-code", "--scope", "project"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("is a symbolic link"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&private).unwrap(), secret);
    assert!(
        std::fs::symlink_metadata(&mcp)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        !project.cwd.join(".claude/settings.json").exists(),
        "nothing is written"
    );
    assert!(backups(&mcp).is_empty() && backups(&private).is_empty());

    // The checkout's machine-local file too.
    let local = project.cwd.join(".claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&private, &local).unwrap();
    let output = setup_with_path(&project, &bin, &["claude-code", "--scope", "local"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("settings.local.json is a symbolic link")
    );
    assert_eq!(std::fs::read_to_string(&private).unwrap(), secret);
    std::fs::remove_dir_all(project.cwd.join(".claude")).unwrap();

    // A linked directory on the way is a link too.
    std::fs::remove_file(&mcp).unwrap();
    let elsewhere = project.home().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, project.cwd.join(".claude")).unwrap();
    let output = setup_with_path(&project, &bin, &["claude-code", "--scope", "project"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains(".claude is a symbolic link"));
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
}

#[tokio::test]
async fn setup_writes_through_a_linked_user_file() {
    let project = Project::new("claude-code/transcript.jsonl");
    let dotfiles = project.home().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("claude-settings.json");
    std::fs::write(&real, "{\"model\": \"opus\"}\n").unwrap();
    let settings = project.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &settings).unwrap();

    let output = engram_setup(&project, &["claude-code", "--no-mcp"]).await;
    assert!(output.status.success(), "{output:?}");
    assert!(
        std::fs::symlink_metadata(&settings)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link stays"
    );
    let written = read_json(&real);
    assert_eq!(written["model"], "opus");
    assert!(command_for(&written, "Stop").ends_with(" hook claude-code stop"));
    assert_eq!(backups(&settings).len(), 1, "the backup is beside the link");
    assert!(backups(&real).is_empty(), "and not in the dotfiles");

    // A link to nothing is refused with what to do.
    let dangling = project.home().join(".claude.json");
    std::os::unix::fs::symlink(dotfiles.join("missing.json"), &dangling).unwrap();
    let output = engram_setup(&project, &["claude-code"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot be reached"));
}

#[tokio::test]
async fn setup_refuses_a_file_that_is_not_regular_without_blocking() {
    let project = Project::new("claude-code/transcript.jsonl");
    let fifo = project.home().join(".claude.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A guard against the hang this test is about, not a timing check:
    // past it, a writer opens the FIFO so that a blocked setup ends, and
    // the test fails.
    let running = tokio::spawn({
        let mut command = engram(&project);
        command
            .arg("setup")
            .arg("claude-code")
            .current_dir(&project.cwd);
        run(command, String::new())
    });
    let finished = tokio::time::timeout(PATIENCE, running).await;
    let Ok(output) = finished else {
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
        panic!("setup blocked on the FIFO");
    };
    let output = output.unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("is a FIFO, not a settings file"),
        "{stderr}"
    );
    assert!(!project.home().join(".claude/settings.json").exists());
}

#[tokio::test]
async fn setup_keeps_every_byte_it_does_not_own() {
    let project = Project::new("claude-code/transcript.jsonl");
    let state = project.home().join(".claude.json");
    let original = "{\n    \"numStartups\": 12345678901234567890123,\n    \"zeta\": \"first, not sorted\",\n    \
                    \"tips\": {\"a\": 1, \"a\": 2},\n    \"ratio\": 1.50,\n    \"name\": \"caf\\u00e9\"\n}\n";
    std::fs::write(&state, original).unwrap();
    let settings = project.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = r#"{"type": "command", "command": "say done", "timeout": 1e1}"#;
    let settings_text = format!(
        "{{\"hooks\": {{\"Stop\": [{{\"hooks\": [{theirs}]}}]}}, \"n\": 18446744073709551616}}"
    );
    std::fs::write(&settings, &settings_text).unwrap();

    let output = engram_setup(&project, &["claude-code"]).await;
    assert!(output.status.success(), "{output:?}");
    let written = std::fs::read_to_string(&state).unwrap();
    let before_end = original.trim_end().strip_suffix("\n}").unwrap();
    assert!(
        written.starts_with(&format!("{before_end},\n    \"mcpServers\": {{")),
        "{written}"
    );
    assert_eq!(
        read_json(&state)["mcpServers"]["engram"]["command"],
        env!("CARGO_BIN_EXE_engram")
    );
    let written = std::fs::read_to_string(&settings).unwrap();
    assert!(
        written.starts_with(&format!(
            "{{\"hooks\": {{\"Stop\": [{{\"hooks\": [{theirs}]}},"
        )),
        "{written}"
    );
    assert!(
        written.ends_with(", \"n\": 18446744073709551616}"),
        "{written}"
    );
    assert!(command_for(&read_json(&settings), "Stop").ends_with(" hook claude-code stop"));

    // A change under a key the file holds twice is refused.
    let twice = r#"{"mcpServers": {}, "mcpServers": {"docs": {"command": "d"}}}"#;
    std::fs::write(&state, twice).unwrap();
    let output = engram_setup(&project, &["claude-code"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("the key `mcpServers` appears more than once"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&state).unwrap(), twice);
}
