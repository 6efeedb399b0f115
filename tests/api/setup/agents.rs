//! `engram setup` for Cursor, Gemini CLI, VS Code, OpenCode, Qwen Code,
//! GitHub Copilot CLI and Amp: each agent's MCP server entry in the shape
//! it reads and, for those whose hooks Engram does not serve or cannot add memories
//! to a prompt (Cursor's), its instructions block, a fresh install, a
//! merge into existing files (comments kept where the format has them),
//! idempotence, a file that does not parse refused. The agents' own CLIs
//! reading what setup wrote are in `clis`.
//! Setup edits the agent's files: nothing here depends on the storage backend.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use super::backups;
use crate::helpers::{npm_installed, or_skip};
use crate::hooks::Project;
use crate::hooks::engram_setup;
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
            // Its hooks share the settings file (tests/api/hooks/qwen_code.rs).
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
            let output = engram_setup(&project, &[agent.agent, "--scope", scope]).await;
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
            let again = engram_setup(&project, &[agent.agent, "--scope", scope]).await;
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
        let output = engram_setup(&project, &[agent, "--scope", "project"]).await;
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
        let again = engram_setup(&project, &[agent, "--scope", "project"]).await;
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
        let output = engram_setup(&project, &[agent, "--scope", "project"]).await;
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
    let output = engram_setup(&project, &["vscode", "--scope", "project"]).await;
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("`servers` is not an object"));

    for args in [
        &["vscode", "--file", "hooks.json"][..],
        &["opencode", "--no-mcp"],
        &["vscode", "--scope", "local"],
    ] {
        let output = engram_setup(&project, args).await;
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
