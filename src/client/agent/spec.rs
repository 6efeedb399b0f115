//! The shape of one agent's entry in the table ([`super::Agent::spec`]):
//! the words an entry is written in, and nothing that reads them.

use crate::client::hook::transcript::Format;
use crate::client::setup::json_edit::JsonDialect;

/// Everything Engram knows of one coding agent.
#[derive(Debug)]
pub struct Spec {
    /// The name on the command line (`engram setup <name>`, `engram hook
    /// <name> …`, `engram import <name>`), in hook commands and in logs.
    pub name: &'static str,
    /// What `--help` says of it.
    pub about: &'static str,
    /// Its command hooks, when Engram serves them.
    pub hooks: Option<Hooks>,
    /// Where it keeps its MCP servers, per scope.
    pub mcp: &'static [(Scope, McpFile)],
    /// Where it reads instructions to call Engram's tools, per scope (for
    /// agents whose hooks cannot inject memories into a prompt).
    pub instructions: &'static [(Scope, InstructionsFile)],
    /// How its transcripts are read, when Engram reads them.
    pub transcripts: Option<Transcripts>,
}

/// Which of an agent's configuration files: the user's, the project's
/// shared ones, or the project's on this machine only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The user's own settings, for every project (`~/.claude/settings.json`
    /// and `~/.claude.json`, `~/.codex/`, `~/.cursor/mcp.json`,
    /// `~/.gemini/settings.json`, VS Code's user `mcp.json`,
    /// `~/.config/opencode/`, `~/.qwen/settings.json`, `~/.copilot/`,
    /// `~/.config/amp/`).
    User,
    /// The project's shared settings in the git checkout
    /// (`.claude/settings.json` and `.mcp.json`, `.codex/`, `.cursor/`,
    /// `.gemini/settings.json`, `.vscode/mcp.json`, `opencode.json`,
    /// `.qwen/settings.json`, `.amp/settings.json`; Copilot CLI's `.mcp.json`).
    Project,
    /// The project's settings for this machine only
    /// (`.claude/settings.local.json`, and the project's entry in
    /// `~/.claude.json`; Claude Code only).
    Local,
}

impl Scope {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

/// A hook event Engram answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Event {
    /// A session starts, resumes or restarts after a compaction.
    SessionStart,
    /// The user sent a prompt; the agent has not answered yet.
    UserPromptSubmit,
    /// The agent finished its answer: a turn completed.
    Stop,
    /// The agent is about to compact its context.
    PreCompact,
}

impl Event {
    /// Every event, in the order a session meets them.
    pub const ALL: [Self; 4] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::Stop,
        Self::PreCompact,
    ];

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "session-start",
            Self::UserPromptSubmit => "user-prompt-submit",
            Self::Stop => "stop",
            Self::PreCompact => "pre-compact",
        }
    }
}

/// An agent's command hooks.
#[derive(Debug)]
pub struct Hooks {
    /// Each event's name in the agent's configuration and hook input.
    pub names: EventNames,
    /// The events whose hooks setup writes.
    pub events: &'static [Event],
    /// Its hooks file, per scope.
    pub files: &'static [(Scope, Place)],
    /// The JSON its hooks file is read as.
    pub dialect: JsonDialect,
    /// How the hooks file lists a hook.
    pub layout: HookLayout,
    /// How a hook's output adds context.
    pub context: ContextOutput,
    /// What its prompt hook can do.
    pub prompt: PromptHook,
    /// Cuts what the agent itself put into a prompt before anything reads
    /// it (its own tags around hooks' context).
    pub clean_prompt: Option<fn(&str) -> String>,
}

impl Hooks {
    /// Hooks as Claude Code has them, which Codex's and Qwen Code's copy:
    /// its event names, groups of handlers with a `timeout` in seconds,
    /// context added through `hookSpecificOutput`, a prompt hook that adds
    /// it, nothing to cut from a prompt.
    pub const fn claude_style(
        events: &'static [Event],
        files: &'static [(Scope, Place)],
        dialect: JsonDialect,
    ) -> Self {
        Self {
            names: CLAUDE_EVENT_NAMES,
            events,
            files,
            dialect,
            layout: HookLayout::Grouped {
                timeout: TimeUnit::Seconds,
            },
            context: ContextOutput::HookSpecific,
            prompt: PromptHook::AddsContext,
            clean_prompt: None,
        }
    }
}

/// Claude Code's event names, which Codex's and Qwen Code's hooks copy.
pub const CLAUDE_EVENT_NAMES: EventNames = EventNames {
    session_start: "SessionStart",
    user_prompt_submit: "UserPromptSubmit",
    stop: "Stop",
    pre_compact: "PreCompact",
};

/// The agent's name for each of Engram's events.
#[derive(Debug)]
pub struct EventNames {
    pub session_start: &'static str,
    pub user_prompt_submit: &'static str,
    pub stop: &'static str,
    pub pre_compact: &'static str,
}

/// How a hooks file lists the handlers of one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookLayout {
    /// `{"hooks": {<event>: [{"hooks": [{"type": "command", "command",
    /// "timeout"}]}]}}`: groups of handlers, the time limit in `unit`.
    Grouped { timeout: TimeUnit },
    /// `{"version": <version>, "hooks": {<event>: [{"command"}]}}`: the
    /// handlers themselves, with their command only.
    Versioned { version: u64 },
}

/// The unit an agent reads a hook's `timeout` in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Milliseconds,
}

/// How a hook's output on stdout adds context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextOutput {
    /// `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`.
    HookSpecific,
    /// `{"additional_context": …}`.
    AdditionalContext,
}

/// What the agent's prompt hook can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptHook {
    /// Add context: the prompt gets memories.
    AddsContext,
    /// Only let the prompt go on (`{"continue": true}`): it stores a
    /// `remember:` prompt and keeps the prompt for the answer's hook,
    /// which is not given it (Cursor's, [`crate::client::hook::cursor`]).
    KeepsForTheAnswer,
}

/// Where a file is: `path` under `base`.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub base: Base,
    pub path: &'static str,
    /// The name used instead when only it exists (OpenCode's
    /// `opencode.jsonc` beside `opencode.json`, Copilot CLI's
    /// `.github/mcp.json` beside `.mcp.json`).
    pub or_only: Option<&'static str>,
}

impl Place {
    pub const fn at(base: Base, path: &'static str) -> Self {
        Self {
            base,
            path,
            or_only: None,
        }
    }

    /// `path` under `base`, or `or_only` when only it exists.
    pub const fn either(base: Base, path: &'static str, or_only: &'static str) -> Self {
        Self {
            base,
            path,
            or_only: Some(or_only),
        }
    }
}

/// The directory a [`Place`] starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Home,
    /// `CODEX_HOME`, else `~/.codex`.
    CodexHome,
    /// `COPILOT_HOME`, else `~/.copilot` (GitHub Copilot CLI's).
    CopilotHome,
    /// `XDG_CONFIG_HOME`, else `~/.config`.
    XdgConfig,
    /// VS Code's user directory (its default profile).
    VsCodeUser,
    /// The project's top: the git checkout holding the working directory.
    Project,
}

/// The file of an agent's MCP servers.
#[derive(Debug)]
pub struct McpFile {
    pub place: Place,
    pub format: McpFormat,
    /// The keys that lead to the servers' table.
    pub at: &'static [Key],
    /// How a server entry is spelled there.
    pub style: ServerStyle,
}

impl McpFile {
    /// Servers under `mcpServers`, where most agents keep them.
    pub const fn mcp_servers(place: Place, format: McpFormat, style: ServerStyle) -> Self {
        Self {
            place,
            format,
            at: &[Key::Name("mcpServers")],
            style,
        }
    }
}

/// The format of a file of MCP servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpFormat {
    Json(JsonDialect),
    /// Codex's TOML.
    Toml,
}

/// One key on the way to the servers' table.
#[derive(Clone, Copy, Debug)]
pub enum Key {
    Name(&'static str),
    /// The project's path (Claude Code's per-project entries).
    ProjectPath,
}

/// How an agent spells a stdio MCP server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerStyle {
    /// `{"type": "stdio", "command": …, "args": […]}` (Claude Code, VS Code,
    /// Copilot CLI).
    Typed,
    /// `{"command": …, "args": […]}` (Cursor, Gemini CLI, Qwen Code, Amp;
    /// Codex's TOML).
    Untyped,
    /// `{"type": "local", "command": [program, args…], "enabled": true}`
    /// (OpenCode).
    Local,
}

/// An agent's instructions file, and the text a new one starts with
/// (front matter, where the agent reads one).
#[derive(Debug)]
pub struct InstructionsFile {
    pub place: Place,
    pub starts_with: &'static str,
}

impl InstructionsFile {
    /// A file a new one of which starts empty.
    pub const fn plain(place: Place) -> Self {
        Self {
            place,
            starts_with: "",
        }
    }
}

/// How an agent's transcripts are read.
#[derive(Debug)]
pub struct Transcripts {
    /// How the transcript its hooks name is written.
    pub format: Format,
    /// Where its past sessions are, for `engram import <agent>`.
    pub import: Option<Import>,
}

/// Where an agent keeps its past sessions' transcripts.
#[derive(Debug)]
pub struct Import {
    /// What `engram import --help` says of it.
    pub about: &'static str,
    /// The variable naming the agent's own directory, and that directory
    /// under the home directory when it is unset.
    pub dir_var: &'static str,
    pub home_dir: &'static str,
    /// The transcripts' folder in that directory.
    pub folder: &'static str,
    /// How the folder is laid out.
    pub sessions: SessionFiles,
    /// The layout as said when no transcript was found.
    pub layout: &'static str,
}

/// How a folder of transcripts is laid out, and where a session's id
/// and working directory are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionFiles {
    /// `<folder>/<project folder>/<session id>.jsonl` (or one project's
    /// folder itself); each line carries the `cwd`.
    ByProject,
    /// `rollout-*.jsonl` files at any depth, whose first lines hold a
    /// `session_meta` with the session's `id` and `cwd`.
    Rollouts,
}
