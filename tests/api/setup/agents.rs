//! `engram setup` for Cursor, Gemini CLI, VS Code, OpenCode, Qwen Code,
//! GitHub Copilot CLI and Amp: each agent's MCP server entry in the shape it reads
//! and, for those whose hooks Engram does not serve or cannot add memories
//! to a prompt (Cursor's), its instructions block, a fresh install, a
//! merge into existing files (comments kept where the format has them),
//! idempotence, a file that does not parse refused; and the real Gemini
//! CLI, OpenCode CLI, Qwen Code, Copilot CLI and Amp reading what setup
//! wrote.
//! Setup edits the agent's files: nothing here depends on the storage backend.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{backups, setup};
use crate::helpers::{npm_installed, or_skip};
use crate::hooks::{Project, engram, run};
use crate::setup::private::backup_place;

/// The file's JSON, read without the library's own parser: its `//`
/// comments, comment lines and the trailing commas setup leaves taken out.
fn read_jsonc(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let plain: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("/*"))
        .map(|line| line.split(" //").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
        .replace(",\n}", "\n}")
        .replace(",\n  }", "\n  }");
    serde_json::from_str(&plain).unwrap_or_else(|err| panic!("{err}: {text}"))
}

/// One agent's files at one scope, and the server entry each must hold.
struct Expected {
    agent: &'static str,
    mcp: PathBuf,
    server: Value,
    servers_key: &'static str,
    instructions: Option<PathBuf>,
    /// A hooks file of its own (Cursor's; tests/api/hooks/cursor.rs).
    hooks: Option<PathBuf>,
}

fn expected(project: &Project, scope: &str) -> Vec<Expected> {
    let (home, cwd) = (project.home().to_path_buf(), project.cwd.clone());
    let user = scope == "user";
    let command = if user {
        env!("CARGO_BIN_EXE_engram")
    } else {
        "engram"
    };
    let pick = |user_path: PathBuf, project_path: PathBuf| {
        if user { user_path } else { project_path }
    };
    vec![
        Expected {
            agent: "cursor",
            mcp: pick(home.join(".cursor/mcp.json"), cwd.join(".cursor/mcp.json")),
            server: json!({"command": command, "args": ["mcp"]}),
            servers_key: "mcpServers",
            instructions: (!user).then(|| cwd.join(".cursor/rules/engram.mdc")),
            hooks: Some(pick(
                home.join(".cursor/hooks.json"),
                cwd.join(".cursor/hooks.json"),
            )),
        },
        Expected {
            agent: "gemini",
            mcp: pick(
                home.join(".gemini/settings.json"),
                cwd.join(".gemini/settings.json"),
            ),
            server: json!({"command": command, "args": ["mcp"]}),
            servers_key: "mcpServers",
            // Its hooks (tests/api/hooks/gemini.rs) serve it instead.
            instructions: None,
            hooks: None,
        },
        Expected {
            agent: "vscode",
            mcp: pick(
                home.join(".config/Code/User/mcp.json"),
                cwd.join(".vscode/mcp.json"),
            ),
            server: json!({"type": "stdio", "command": command, "args": ["mcp"]}),
            servers_key: "servers",
            instructions: (!user).then(|| cwd.join(".github/instructions/engram.instructions.md")),
            hooks: None,
        },
        Expected {
            agent: "opencode",
            mcp: pick(
                home.join(".config/opencode/opencode.json"),
                cwd.join("opencode.json"),
            ),
            server: json!({"type": "local", "command": [command, "mcp"], "enabled": true}),
            servers_key: "mcp",
            instructions: Some(pick(
                home.join(".config/opencode/AGENTS.md"),
                cwd.join("AGENTS.md"),
            )),
            hooks: None,
        },
        Expected {
            agent: "qwen-code",
            mcp: pick(
                home.join(".qwen/settings.json"),
                cwd.join(".qwen/settings.json"),
            ),
            server: json!({"command": command, "args": ["mcp"]}),
            servers_key: "mcpServers",
            // In a project, the AGENTS.md OpenCode's setup wrote: one block.
            instructions: Some(pick(home.join(".qwen/QWEN.md"), cwd.join("AGENTS.md"))),
            hooks: None,
        },
        Expected {
            agent: "copilot",
            mcp: pick(home.join(".copilot/mcp-config.json"), cwd.join(".mcp.json")),
            server: json!({"type": "stdio", "command": command, "args": ["mcp"]}),
            servers_key: "mcpServers",
            // In a project, the instructions file VS Code's setup wrote.
            instructions: Some(pick(
                home.join(".copilot/copilot-instructions.md"),
                cwd.join(".github/instructions/engram.instructions.md"),
            )),
            hooks: None,
        },
        Expected {
            agent: "amp",
            mcp: pick(
                home.join(".config/amp/settings.json"),
                cwd.join(".amp/settings.json"),
            ),
            server: json!({"command": command, "args": ["mcp"]}),
            servers_key: "amp.mcpServers",
            instructions: Some(pick(
                home.join(".config/amp/AGENTS.md"),
                cwd.join("AGENTS.md"),
            )),
            hooks: None,
        },
    ]
}

#[tokio::test]
async fn setup_writes_each_agents_server_in_its_shape_and_a_second_run_changes_nothing() {
    for scope in ["user", "project"] {
        let project = Project::new("claude-code/transcript.jsonl");
        for agent in expected(&project, scope) {
            let output = setup(&project, &[agent.agent, "--scope", scope]).await;
            assert!(output.status.success(), "{}: {output:?}", agent.agent);
            let report = String::from_utf8(output.stdout).unwrap();
            assert!(report.contains("created"), "{report}");
            let written = read_jsonc(&agent.mcp);
            assert_eq!(
                written[agent.servers_key],
                json!({"engram": agent.server}),
                "{}",
                agent.agent
            );
            if let Some(file) = &agent.instructions {
                let text = std::fs::read_to_string(file).unwrap();
                assert!(
                    text.contains("`recall`") && text.contains("`remember`"),
                    "{text}"
                );
                if agent.agent == "cursor" {
                    assert!(text.starts_with("---\n"), "a rule's front matter: {text}");
                    assert!(text.contains("alwaysApply: true\n"), "{text}");
                }
            }
            let files: Vec<&PathBuf> = std::iter::once(&agent.mcp)
                .chain(agent.instructions.iter())
                .chain(agent.hooks.iter())
                .collect();
            let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
            let again = setup(&project, &[agent.agent, "--scope", scope]).await;
            let report = String::from_utf8(again.stdout).unwrap();
            assert_eq!(
                report.matches("nothing changed").count(),
                files.len(),
                "{report}"
            );
            for (file, bytes) in files.iter().zip(before) {
                assert_eq!(std::fs::read(file).unwrap(), bytes, "{}", file.display());
                assert_eq!(backups(file).len(), 0, "{}", file.display());
            }
        }
    }
}

#[tokio::test]
async fn setup_merges_into_each_agents_files_keeping_their_comments_and_servers() {
    let project = Project::new("claude-code/transcript.jsonl");
    let cwd = project.cwd.clone();
    let files = [
        (
            "cursor",
            cwd.join(".cursor/mcp.json"),
            "{\n  \"mcpServers\": {\n    \"docs\": {\"command\": \"docs-mcp\"}\n  }\n}\n",
            "mcpServers",
        ),
        (
            "gemini",
            cwd.join(".gemini/settings.json"),
            "{\n  // the team's Gemini settings\n  \"theme\": \"GitHub\",\n  \"mcpServers\": {\n    \"docs\": {\"command\": \"docs-mcp\"} // docs\n  }\n}\n",
            "mcpServers",
        ),
        (
            "vscode",
            cwd.join(".vscode/mcp.json"),
            "{\n  // servers for the workspace\n  \"servers\": {\n    \"docs\": {\"type\": \"stdio\", \"command\": \"docs-mcp\"},\n  },\n  \"inputs\": [],\n}\n",
            "servers",
        ),
        (
            "opencode",
            cwd.join("opencode.jsonc"),
            "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  /* ours */\n  \"mcp\": {\n    \"docs\": {\"type\": \"local\", \"command\": [\"docs-mcp\"]},\n  },\n}\n",
            "mcp",
        ),
        (
            "qwen-code",
            cwd.join(".qwen/settings.json"),
            "{\n  // the team's Qwen settings\n  \"general\": {\"vimMode\": true},\n  \"mcpServers\": {\n    \"docs\": {\"command\": \"docs-mcp\"} // docs\n  }\n}\n",
            "mcpServers",
        ),
        (
            // Only .github/mcp.json: Copilot CLI reads it when there is no
            // .mcp.json, so setup edits it rather than start a .mcp.json.
            "copilot",
            cwd.join(".github/mcp.json"),
            "{\n  \"mcpServers\": {\n    \"docs\": {\"type\": \"stdio\", \"command\": \"docs-mcp\"}\n  }\n}\n",
            "mcpServers",
        ),
        (
            "amp",
            cwd.join(".amp/settings.jsonc"),
            "{\n  // the team's Amp settings\n  \"amp.mcpServers\": {\n    \"docs\": {\"command\": \"docs-mcp\"},\n  },\n}\n",
            "amp.mcpServers",
        ),
    ];
    let agents_md = cwd.join("AGENTS.md");
    std::fs::write(&agents_md, "# Forge\n\nRun `make check` before pushing.\n").unwrap();
    for (agent, path, original, key) in &files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, original).unwrap();
        let output = setup(&project, &[agent, "--scope", "project"]).await;
        assert!(output.status.success(), "{agent}: {output:?}");
        let text = std::fs::read_to_string(path).unwrap();
        // Everything up to the last server stays as it was, comments too.
        let docs_line = original
            .lines()
            .find(|line| line.contains("docs-mcp"))
            .unwrap();
        let kept = &original[..original.find(docs_line).unwrap()];
        assert!(text.starts_with(kept), "{agent}: {text}");
        for line in original.lines() {
            if let Some(at) = line.find("//").or_else(|| line.find("/*")) {
                assert!(text.contains(&line[at..]), "{agent} keeps {line}: {text}");
            }
        }
        let written = read_jsonc(path);
        assert!(written[key]["docs"].is_object(), "{agent}: {text}");
        assert!(written[key]["engram"].is_object(), "{agent}: {text}");
        // A shared file's backup is kept out of the checkout.
        assert_eq!(backups(path).len(), 0, "{agent}");
        assert_eq!(backups(&backup_place(&project, path)).len(), 1, "{agent}");
        let again = setup(&project, &[agent, "--scope", "project"]).await;
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("nothing changed"),
            "{again:?}"
        );
        assert_eq!(std::fs::read_to_string(path).unwrap(), text, "{agent}");
    }
    assert!(
        !cwd.join("opencode.json").exists(),
        "an existing opencode.jsonc is the file"
    );
    assert!(
        !cwd.join(".mcp.json").exists(),
        "an existing .github/mcp.json is Copilot CLI's file"
    );
    let agents = std::fs::read_to_string(&agents_md).unwrap();
    assert!(
        agents.starts_with("# Forge\n\nRun `make check` before pushing.\n\n<!-- engram:begin"),
        "{agents}"
    );
    assert_eq!(backups(&agents_md).len(), 0);
    assert_eq!(backups(&backup_place(&project, &agents_md)).len(), 1);
}

#[tokio::test]
async fn setup_refuses_what_each_agent_could_not_read_and_writes_nothing() {
    let project = Project::new("claude-code/transcript.jsonl");
    let cwd = project.cwd.clone();
    let broken = [
        // Cursor's file is JSON: a comment is not taken on trust.
        ("cursor", cwd.join(".cursor/mcp.json"), "{// mine\n}"),
        // Gemini CLI takes comments but not trailing commas.
        (
            "gemini",
            cwd.join(".gemini/settings.json"),
            "{\"theme\": \"GitHub\",}",
        ),
        ("vscode", cwd.join(".vscode/mcp.json"), "{\"servers\": "),
        ("opencode", cwd.join("opencode.json"), "{\"mcp\": {/* open"),
        // Qwen Code reads its settings as Gemini CLI does.
        (
            "qwen-code",
            cwd.join(".qwen/settings.json"),
            "{\"mcpServers\": {},}",
        ),
        // Copilot CLI skips a workspace file with a comment as malformed.
        ("copilot", cwd.join(".mcp.json"), "{// ours\n}"),
        (
            "amp",
            cwd.join(".amp/settings.json"),
            "{\"amp.mcpServers\": ",
        ),
    ];
    for (agent, path, text) in &broken {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        let output = setup(&project, &[agent, "--scope", "project"]).await;
        assert_eq!(output.status.code(), Some(1), "{agent}: {output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("is not JSON; nothing was changed"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(path).unwrap(), *text);
        assert_eq!(backups(path).len(), 0);
    }
    for instructions in [
        "GEMINI.md",
        "AGENTS.md",
        ".cursor/rules",
        ".github",
        "QWEN.md",
    ] {
        assert!(
            !cwd.join(instructions).exists(),
            "nothing written: {instructions}"
        );
    }
    // A shape the agent would not read is refused too.
    std::fs::write(&broken[2].1, "{\"servers\": []}").unwrap();
    let output = setup(&project, &["vscode", "--scope", "project"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("`servers` is not an object"));

    for args in [
        &["vscode", "--file", "hooks.json"][..],
        &["opencode", "--no-mcp"],
        &["vscode", "--scope", "local"],
    ] {
        let output = setup(&project, args).await;
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
    }
}

/// An agent's CLI, `bin`, from the npm package `tests/<package>`, with
/// `node` on `PATH` to run it; or `None` after saying the test is skipped.
pub fn cli_or_skip(package: &str, bin: &str) -> Option<PathBuf> {
    or_skip(npm_installed(
        Path::new("node"),
        package,
        &format!(".bin/{bin}"),
    ))
}

/// What a CLI printed, on either stream, with its colours taken out.
pub fn printed(output: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence: `ESC [` parameters, then a final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[tokio::test]
async fn the_gemini_cli_connects_to_the_server_setup_wrote() {
    let Some(cli) = cli_or_skip("gemini-cli", "gemini") else {
        return;
    };
    let project = Project::new("claude-code/transcript.jsonl");
    let settings = project.home().join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        "{\n  // no sign-in is needed to list servers\n  \"mcpServers\": {}\n}\n",
    )
    .unwrap();
    let output = setup(&project, &["gemini"]).await;
    assert!(output.status.success(), "{output:?}");
    // Gemini CLI starts stdio servers only in folders the user trusts.
    std::fs::write(
        project.home().join(".gemini/trustedFolders.json"),
        json!({project.cwd.to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();

    let mut gemini = Command::new(cli);
    gemini
        .args(["mcp", "list"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("USER", "ana");
    let output = run(gemini, String::new()).await;
    // It prints the list on stderr when stdout is not a terminal.
    let listed = printed(&output);
    assert!(output.status.success(), "{output:?}");
    // Connected: Gemini CLI started `engram mcp` and finished the MCP
    // handshake with it (the bridge answers it without a running Engram).
    let line = listed
        .lines()
        .find(|line| line.contains("engram:"))
        .unwrap_or_else(|| panic!("{output:?}"));
    assert!(
        line.contains(&format!(
            "{} mcp (stdio) - Connected",
            env!("CARGO_BIN_EXE_engram")
        )),
        "{output:?}"
    );
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

    let mut opencode = Command::new(cli);
    opencode
        .args(["mcp", "list"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", project.home())
        .env("USER", "ana")
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
    let settings = project.home().join(".qwen/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        "{\n  // no sign-in is needed to list servers\n  \"mcpServers\": {}\n}\n",
    )
    .unwrap();
    let output = setup(&project, &["qwen-code"]).await;
    assert!(output.status.success(), "{output:?}");

    let mut qwen = Command::new(node);
    qwen.arg(cli)
        .args(["mcp", "list"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("USER", "ana");
    let output = run(qwen, String::new()).await;
    assert!(output.status.success(), "{output:?}");
    let listed = printed(&output);
    // Connected: Qwen Code started `engram mcp` and finished the MCP
    // handshake with it (the bridge answers it without a running Engram).
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

/// GitHub Copilot CLI's own account of the MCP servers it would start in
/// `project`, with its files in `copilot_home`: `copilot mcp list --json`.
async fn copilot_servers(cli: &Path, project: &Project, copilot_home: &Path) -> Value {
    let mut copilot = Command::new(cli);
    copilot
        .args(["mcp", "list", "--json"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("COPILOT_HOME", copilot_home)
        .env("COPILOT_AUTO_UPDATE", "false");
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

    let mut copilot = Command::new(&cli);
    copilot
        .args(["instruction", "list"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("COPILOT_HOME", &copilot_home)
        .env("COPILOT_AUTO_UPDATE", "false");
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
        let output = setup(&project, &["amp", "--scope", scope]).await;
        assert!(output.status.success(), "{scope}: {output:?}");
    }
    assert!(!project.cwd.join(".amp/settings.json").exists());

    let mut amp = Command::new(cli);
    amp.args(["mcp", "list"])
        .current_dir(&project.cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("USER", "ana");
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
