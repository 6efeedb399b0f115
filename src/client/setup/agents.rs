//! The agents `engram setup` knows, and where each keeps what Engram
//! writes: its hooks file (agents whose hooks `engram hook` serves; Gemini
//! CLI's is the same settings.json as its MCP servers), the
//! file of its MCP servers and the shape of a server entry there, and the
//! instructions file that tells an agent without those hooks to call
//! Engram's tools.
//!
//! Every path follows the agent's own documentation; an agent without a
//! file for a scope is an error naming the scopes it has.

use std::path::{Path, PathBuf};

use super::merge::{Format, JsonDialect, ServerStyle};
use super::{Error, Scope, project_root};
use crate::client::hook;

/// A coding agent `engram setup` configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Anthropic's Claude Code: hooks and MCP.
    ClaudeCode,
    /// OpenAI's Codex CLI: hooks and MCP.
    Codex,
    /// Cursor: hooks, MCP and a project rule.
    Cursor,
    /// Google's Gemini CLI: hooks and MCP.
    Gemini,
    /// VS Code (GitHub Copilot's agent mode): MCP and a project
    /// instructions file.
    #[value(name = "vscode")]
    VsCode,
    /// OpenCode: MCP and AGENTS.md.
    #[value(name = "opencode")]
    OpenCode,
}

/// The file of an agent's MCP servers: where, in which format, the keys
/// that lead to the servers' table, and the shape of one entry.
#[derive(Debug)]
pub struct McpFile {
    pub path: PathBuf,
    pub format: Format,
    pub at: Vec<String>,
    pub style: ServerStyle,
}

impl Agent {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Cursor => "cursor",
            Self::Gemini => "gemini",
            Self::VsCode => "vscode",
            Self::OpenCode => "opencode",
        }
    }

    /// The agent as `engram hook` knows it, when Engram serves its hooks.
    /// VS Code and OpenCode have no command hooks that add context: those
    /// get instructions instead.
    pub fn hook_agent(self) -> Option<hook::Agent> {
        match self {
            Self::ClaudeCode => Some(hook::Agent::ClaudeCode),
            Self::Codex => Some(hook::Agent::Codex),
            Self::Gemini => Some(hook::Agent::Gemini),
            Self::Cursor => Some(hook::Agent::Cursor),
            Self::VsCode | Self::OpenCode => None,
        }
    }

    /// The JSON its hooks file is read as: Gemini CLI keeps its hooks in
    /// settings.json, beside its MCP servers, and strips comments there.
    pub fn hooks_dialect(self) -> JsonDialect {
        match self {
            Self::Gemini => JsonDialect::Comments,
            _ => JsonDialect::Strict,
        }
    }

    fn no_such_scope(self, scope: Scope) -> Error {
        Error::NoSuchScope {
            agent: self.as_str(),
            scope: scope.as_str(),
        }
    }

    /// The agent's hooks file for `scope` (agents with Engram hooks only).
    pub fn hooks_file(self, scope: Scope, dirs: &Dirs) -> Result<PathBuf, Error> {
        Ok(match (self, scope) {
            (Self::ClaudeCode, Scope::User) => dirs.home()?.join(".claude/settings.json"),
            (Self::ClaudeCode, Scope::Project) => dirs.project.join(".claude/settings.json"),
            (Self::ClaudeCode, Scope::Local) => dirs.project.join(".claude/settings.local.json"),
            (Self::Codex, Scope::User) => dirs.codex_home()?.join("hooks.json"),
            (Self::Codex, Scope::Project) => dirs.project.join(".codex/hooks.json"),
            (Self::Gemini, Scope::User) => dirs.home()?.join(".gemini/settings.json"),
            (Self::Gemini, Scope::Project) => dirs.project.join(".gemini/settings.json"),
            (Self::Cursor, Scope::User) => dirs.home()?.join(".cursor/hooks.json"),
            (Self::Cursor, Scope::Project) => dirs.project.join(".cursor/hooks.json"),
            _ => return Err(self.no_such_scope(scope)),
        })
    }

    /// The file where the agent keeps its MCP servers for `scope`.
    pub fn mcp_file(self, scope: Scope, dirs: &Dirs) -> Result<McpFile, Error> {
        let json = |path: PathBuf, key: &str, dialect, style| McpFile {
            path,
            format: Format::Json(dialect),
            at: vec![key.to_owned()],
            style,
        };
        Ok(match (self, scope) {
            (Self::ClaudeCode, Scope::User) => json(
                dirs.home()?.join(".claude.json"),
                "mcpServers",
                JsonDialect::Strict,
                ServerStyle::Typed,
            ),
            (Self::ClaudeCode, Scope::Project) => json(
                dirs.project.join(".mcp.json"),
                "mcpServers",
                JsonDialect::Strict,
                ServerStyle::Typed,
            ),
            (Self::ClaudeCode, Scope::Local) => McpFile {
                path: dirs.home()?.join(".claude.json"),
                format: Format::Json(JsonDialect::Strict),
                at: vec![
                    "projects".to_owned(),
                    dirs.project.to_string_lossy().into_owned(),
                    "mcpServers".to_owned(),
                ],
                style: ServerStyle::Typed,
            },
            (Self::Codex, Scope::User | Scope::Project) => McpFile {
                path: match scope {
                    Scope::User => dirs.codex_home()?.join("config.toml"),
                    _ => dirs.project.join(".codex/config.toml"),
                },
                format: Format::Toml,
                at: vec!["mcp_servers".to_owned()],
                style: ServerStyle::Untyped,
            },
            // Cursor documents mcp.json as JSON; comments are refused
            // rather than kept in a file whose reader is not known to
            // take them.
            (Self::Cursor, Scope::User | Scope::Project) => json(
                match scope {
                    Scope::User => dirs.home()?.join(".cursor/mcp.json"),
                    _ => dirs.project.join(".cursor/mcp.json"),
                },
                "mcpServers",
                JsonDialect::Strict,
                ServerStyle::Untyped,
            ),
            // Gemini CLI strips comments from settings.json, and refuses
            // trailing commas.
            (Self::Gemini, Scope::User | Scope::Project) => json(
                match scope {
                    Scope::User => dirs.home()?.join(".gemini/settings.json"),
                    _ => dirs.project.join(".gemini/settings.json"),
                },
                "mcpServers",
                JsonDialect::Comments,
                ServerStyle::Untyped,
            ),
            (Self::VsCode, Scope::User | Scope::Project) => json(
                match scope {
                    Scope::User => dirs.vscode_user()?.join("mcp.json"),
                    _ => dirs.project.join(".vscode/mcp.json"),
                },
                "servers",
                JsonDialect::CommentsAndTrailingCommas,
                ServerStyle::Typed,
            ),
            (Self::OpenCode, Scope::User | Scope::Project) => json(
                opencode_config(&match scope {
                    Scope::User => dirs.xdg_config()?.join("opencode"),
                    _ => dirs.project.clone(),
                }),
                "mcp",
                JsonDialect::CommentsAndTrailingCommas,
                ServerStyle::Local,
            ),
            _ => return Err(self.no_such_scope(scope)),
        })
    }

    /// The instructions file that tells the agent to use Engram's tools,
    /// for agents whose hooks Engram does not serve or (Cursor's) cannot
    /// add memories to a prompt, and the text a new
    /// file starts with. `None`: the agent's hooks are served, or it has no
    /// such file at `scope` (Cursor's and VS Code's user-wide instructions
    /// live in their settings, not in a file of their own).
    pub fn instructions_file(
        self,
        scope: Scope,
        dirs: &Dirs,
    ) -> Result<Option<(PathBuf, &'static str)>, Error> {
        Ok(match (self, scope) {
            (Self::Cursor, Scope::Project) => Some((
                dirs.project.join(".cursor/rules/engram.mdc"),
                "---\ndescription: Engram, the long-term memory across sessions\n\
                 alwaysApply: true\n---\n\n",
            )),
            (Self::VsCode, Scope::Project) => Some((
                dirs.project
                    .join(".github/instructions/engram.instructions.md"),
                "---\napplyTo: \"**\"\n---\n\n",
            )),
            (Self::OpenCode, Scope::User) => {
                Some((dirs.xdg_config()?.join("opencode/AGENTS.md"), ""))
            }
            (Self::OpenCode, Scope::Project) => Some((dirs.project.join("AGENTS.md"), "")),
            _ => None,
        })
    }
}

/// OpenCode's config file in `dir`: `opencode.json`, or `opencode.jsonc`
/// when only that one exists.
fn opencode_config(dir: &Path) -> PathBuf {
    let json = dir.join("opencode.json");
    let jsonc = dir.join("opencode.jsonc");
    if std::fs::symlink_metadata(&json).is_err() && std::fs::symlink_metadata(&jsonc).is_ok() {
        jsonc
    } else {
        json
    }
}

/// The directories the agents' files are found from.
pub struct Dirs {
    /// The project's top: the git checkout holding the working directory.
    pub project: PathBuf,
    home: Option<PathBuf>,
    codex_home: Option<PathBuf>,
    xdg_config: Option<PathBuf>,
}

impl Dirs {
    pub fn new(cwd: &Path, env: &impl Fn(&str) -> Option<String>) -> Self {
        let dir = |var: &str| {
            env(var)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        Self {
            project: project_root(cwd),
            home: dir("HOME"),
            codex_home: dir("CODEX_HOME"),
            xdg_config: dir("XDG_CONFIG_HOME"),
        }
    }

    fn home(&self) -> Result<PathBuf, Error> {
        self.home.clone().ok_or(Error::NoHome)
    }

    /// Codex's own directory: `CODEX_HOME`, else `~/.codex`.
    fn codex_home(&self) -> Result<PathBuf, Error> {
        match &self.codex_home {
            Some(dir) => Ok(dir.clone()),
            None => Ok(self.home()?.join(".codex")),
        }
    }

    /// `XDG_CONFIG_HOME`, else `~/.config`.
    fn xdg_config(&self) -> Result<PathBuf, Error> {
        match &self.xdg_config {
            Some(dir) => Ok(dir.clone()),
            None => Ok(self.home()?.join(".config")),
        }
    }

    /// VS Code's user directory (its default profile).
    fn vscode_user(&self) -> Result<PathBuf, Error> {
        let app_data = if cfg!(target_os = "macos") {
            self.home()?.join("Library/Application Support")
        } else {
            self.xdg_config()?
        };
        Ok(app_data.join("Code/User"))
    }
}
