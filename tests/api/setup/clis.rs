//! The agents' own CLIs, pinned in `tests/<agent>-cli` (skipped with the
//! reason printed when not installed), reading what `engram setup` wrote,
//! offline, against a temporary `HOME`: Gemini CLI, OpenCode and Qwen Code
//! start the bridge and finish the MCP handshake with it; Copilot CLI and
//! Amp list servers without starting them (Amp's `mcp doctor`, which does,
//! wants a sign-in), so what they list having read is the check.
//! Setup edits the agent's files: nothing here depends on the storage backend.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::agents::{cli_or_skip, printed};
use crate::helpers::{npm_installed, or_skip};
use crate::hooks::engram_setup;
use crate::hooks::{Project, engram, run};

/// `program` run as the user would run it in `project`'s checkout: with
/// the project's home and user, and nothing else of this process's
/// environment but `PATH`.
fn as_the_user(program: impl AsRef<OsStr>, project: &Project) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("USER", "ana");
    command
}

/// A user's settings file at `relative` under the home, listing no server
/// yet, in the JSON with comments that Gemini CLI and Qwen Code read.
fn no_servers_yet(project: &Project, relative: &str) {
    let settings = project.home().join(relative);
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        "{\n  // no sign-in is needed to list servers\n  \"mcpServers\": {}\n}\n",
    )
    .unwrap();
}

/// That an `mcp list` of Gemini CLI's kind shows the server setup wrote
/// connected: the agent started `engram mcp` and finished the MCP
/// handshake with it (the bridge answers it without a running Engram).
fn assert_connected(listed: &str) {
    let line = listed
        .lines()
        .find(|line| line.contains("engram:"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains(&format!(
            "{} mcp (stdio) - Connected",
            env!("CARGO_BIN_EXE_engram")
        )),
        "{listed}"
    );
}

#[tokio::test]
async fn the_gemini_cli_connects_to_the_server_setup_wrote() {
    let Some(cli) = cli_or_skip("gemini-cli", "gemini") else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    no_servers_yet(&project, ".gemini/settings.json");
    let output = engram_setup(&project, &["gemini"]).await;
    assert!(output.status.success(), "{output:?}");
    // Gemini CLI starts stdio servers only in folders the user trusts.
    std::fs::write(
        project.home().join(".gemini/trustedFolders.json"),
        json!({project.cwd.to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();

    let mut gemini = as_the_user(cli, &project);
    gemini.args(["mcp", "list"]);
    let output = run(gemini, String::new()).await;
    // It prints the list on stderr when stdout is not a terminal.
    let listed = printed(&output);
    assert!(output.status.success(), "{output:?}");
    assert_connected(&listed);
}

#[tokio::test]
async fn the_opencode_cli_connects_to_the_server_setup_merged_into_its_jsonc() {
    let Some(cli) = cli_or_skip("opencode-cli", "opencode") else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    // The project's own file, in the JSONC OpenCode documents: comments,
    // trailing commas, and a server of its own, off.
    let config = project.cwd.join("opencode.jsonc");
    std::fs::write(
        &config,
        "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  // the team's servers\n  \
         \"mcp\": {\n    \"docs\": {\"type\": \"local\", \"command\": [\"docs-mcp\"], \
         \"enabled\": false,},\n  },\n}\n",
    )
    .unwrap();
    // A project file runs `engram` from PATH.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_engram")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut command = engram(&project);
    command
        .args(["setup", "opencode", "--scope", "project"])
        .current_dir(&project.cwd)
        .env("PATH", &path);
    let output = run(command, String::new()).await;
    assert!(output.status.success(), "{output:?}");

    let mut opencode = as_the_user(cli, &project);
    opencode
        .args(["mcp", "list"])
        .env("PATH", &path)
        // Nothing from the network: listing servers needs none of it.
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1");
    let output = run(opencode, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    let listed = printed(&output);
    // Both servers read from the one file: the team's, still off, and
    // Engram's, which OpenCode started and finished the MCP handshake with
    // (the bridge answers it without a running Engram).
    let lines: Vec<&str> = listed.lines().collect();
    let status = |name: &str| {
        let at = lines
            .iter()
            .position(|line| line.split_whitespace().nth(2) == Some(name))
            .unwrap_or_else(|| panic!("{name} is not listed: {listed}"));
        (
            lines[at].to_owned(),
            lines.get(at + 1).copied().unwrap_or_default(),
        )
    };
    let (docs, _) = status("docs");
    assert!(docs.ends_with("disabled"), "{listed}");
    let (engram, runs) = status("engram");
    assert!(engram.contains("✓ engram connected"), "{listed}");
    assert_eq!(
        runs.trim_start_matches(['│', ' ']),
        "engram mcp",
        "{listed}"
    );
}

#[tokio::test]
async fn qwen_code_connects_to_the_server_setup_wrote() {
    // Qwen Code needs Node 22, installed beside it in its package.
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/qwen-code-cli");
    let node = package.join("node_modules/.bin/node");
    let Some(cli) = or_skip(npm_installed(
        &node,
        "qwen-code-cli",
        "@qwen-code/qwen-code/cli.js",
    )) else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    no_servers_yet(&project, ".qwen/settings.json");
    let output = engram_setup(&project, &["qwen-code"]).await;
    assert!(output.status.success(), "{output:?}");

    let mut qwen = as_the_user(node, &project);
    qwen.arg(cli).args(["mcp", "list"]);
    let output = run(qwen, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    let listed = printed(&output);
    assert_connected(&listed);
}

/// GitHub Copilot CLI run as the user, with its files in `copilot_home`
/// and no update check.
fn copilot_as_the_user(cli: &Path, project: &Project, copilot_home: &Path) -> Command {
    let mut copilot = as_the_user(cli, project);
    copilot
        .env("COPILOT_HOME", copilot_home)
        .env("COPILOT_AUTO_UPDATE", "false");
    copilot
}

/// GitHub Copilot CLI's own account of the MCP servers it would start in
/// `project`, with its files in `copilot_home`: `copilot mcp list --json`.
async fn copilot_servers(cli: &Path, project: &Project, copilot_home: &Path) -> Value {
    let mut copilot = copilot_as_the_user(cli, project, copilot_home);
    copilot.args(["mcp", "list", "--json"]);
    let output = run(copilot, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{err}: {output:?}"))
}

#[tokio::test]
async fn the_copilot_cli_reads_the_servers_and_instructions_setup_wrote() {
    let Some(cli) = cli_or_skip("copilot-cli", "copilot") else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    let copilot_home = project.home().join("copilot-home");
    std::fs::create_dir_all(&copilot_home).unwrap();
    // Copilot CLI reads a project's servers in a folder the user trusts.
    std::fs::write(
        copilot_home.join("config.json"),
        json!({"trustedFolders": [project.cwd]}).to_string(),
    )
    .unwrap();
    for scope in ["user", "project"] {
        let mut command = engram(&project);
        command
            .args(["setup", "copilot", "--scope", scope])
            .current_dir(&project.cwd)
            .env("COPILOT_HOME", &copilot_home);
        let output = run(command, String::new()).await;
        assert!(output.status.success(), "{scope}: {output:?}");
    }
    assert!(copilot_home.join("mcp-config.json").is_file());
    assert!(project.cwd.join(".mcp.json").is_file());

    // Listing starts no server: what Copilot CLI read from each file is
    // the check, in its own words.
    let servers = copilot_servers(&cli, &project, &copilot_home).await;
    let engram = &servers["mcpServers"]["engram"];
    assert_eq!(engram["type"], "stdio", "{servers}");
    assert_eq!(engram["args"], json!(["mcp"]), "{servers}");
    assert_eq!(engram["enabled"], true, "{servers}");
    // One name in both files: the project's entry is the one it starts.
    assert_eq!(engram["command"], "engram", "{servers}");
    assert_eq!(engram["source"], "workspace", "{servers}");
    std::fs::remove_file(project.cwd.join(".mcp.json")).unwrap();
    let servers = copilot_servers(&cli, &project, &copilot_home).await;
    let engram = &servers["mcpServers"]["engram"];
    assert_eq!(engram["command"], env!("CARGO_BIN_EXE_engram"), "{servers}");
    assert_eq!(engram["source"], "user", "{servers}");

    let mut copilot = copilot_as_the_user(&cli, &project, &copilot_home);
    copilot.args(["instruction", "list"]);
    let output = run(copilot, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    let listed = printed(&output);
    for file in [
        ".github/instructions/engram.instructions.md".to_owned(),
        copilot_home
            .join("copilot-instructions.md")
            .display()
            .to_string(),
    ] {
        assert!(listed.contains(&format!("from {file}")), "{listed}");
    }
}

#[tokio::test]
async fn amp_lists_the_servers_setup_wrote_at_each_scope() {
    let Some(cli) = cli_or_skip("amp-cli", "amp") else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    // The project's own settings, in the JSONC Amp reads: comments,
    // trailing commas and a server of its own.
    let workspace = project.cwd.join(".amp/settings.jsonc");
    std::fs::create_dir_all(workspace.parent().unwrap()).unwrap();
    std::fs::write(
        &workspace,
        "{\n  // the team's servers\n  \"amp.mcpServers\": {\n    \"docs\": {\"command\": \"docs-mcp\", \"args\": [\"serve\"]},\n  },\n}\n",
    )
    .unwrap();
    for scope in ["user", "project"] {
        let output = engram_setup(&project, &["amp", "--scope", scope]).await;
        assert!(output.status.success(), "{scope}: {output:?}");
    }
    assert!(!project.cwd.join(".amp/settings.json").exists());

    let mut amp = as_the_user(cli, &project);
    amp.args(["mcp", "list"]);
    let output = run(amp, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    let listed = printed(&output);
    // It lists without an account (and says it could not reach one);
    // `amp mcp doctor`, which starts them, wants a sign-in, so what it read
    // is the check: the workspace's two, then the user's.
    let servers: Vec<Vec<&str>> = listed
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|words| words.get(1) == Some(&"command"))
        .collect();
    assert_eq!(
        servers,
        vec![
            vec!["docs", "command", "docs-mcp", "serve"],
            vec!["engram", "command", "engram", "mcp"],
            vec!["engram", "command", env!("CARGO_BIN_EXE_engram"), "mcp"],
        ],
        "{listed}"
    );
    // It names the workspace's file `.amp/settings.json`, read from the
    // `.jsonc` there.
    let workspace_at = listed.find("Workspace .amp/settings.json");
    let user_at = listed.find("Global ~/.config/amp/settings.json");
    assert!(workspace_at.is_some() && workspace_at < user_at, "{listed}");
}
