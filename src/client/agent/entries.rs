//! The table's entries: what Engram knows of each coding agent, from the
//! agent's own documentation (or, where it ships them, its package's docs).
//! The words they are written in are in [`super::spec`].

use super::spec::{
    Base, ContextOutput, Event, EventNames, HookLayout, Hooks, Import, InstructionsFile, Key,
    McpFile, McpFormat, Place, PromptHook, Scope, ServerStyle, SessionFiles, Spec, TimeUnit,
    Transcripts,
};
use crate::client::hook::transcript::{Format, gemini};
use crate::client::setup::json_edit::JsonDialect;

/// Anthropic's Claude Code.
pub(super) const CLAUDE_CODE: Spec = Spec {
    name: "claude-code",
    about: "Anthropic's Claude Code: hooks and MCP",
    hooks: Some(Hooks::claude_style(
        &Event::ALL,
        &[
            (Scope::User, Place::at(Base::Home, ".claude/settings.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".claude/settings.json"),
            ),
            (
                Scope::Local,
                Place::at(Base::Project, ".claude/settings.local.json"),
            ),
        ],
        JsonDialect::Strict,
    )),
    mcp: &[
        (
            Scope::User,
            McpFile::mcp_servers(
                Place::at(Base::Home, ".claude.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Typed,
            ),
        ),
        (
            Scope::Project,
            McpFile::mcp_servers(
                Place::at(Base::Project, ".mcp.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Typed,
            ),
        ),
        (
            Scope::Local,
            McpFile {
                place: Place::at(Base::Home, ".claude.json"),
                format: McpFormat::Json(JsonDialect::Strict),
                at: &[
                    Key::Name("projects"),
                    Key::ProjectPath,
                    Key::Name("mcpServers"),
                ],
                style: ServerStyle::Typed,
            },
        ),
    ],
    instructions: &[],
    transcripts: Some(Transcripts {
        format: Format::ClaudeCode,
        import: Some(Import {
            about: "Claude Code's session transcripts (~/.claude/projects/*/*.jsonl), each \
                    session's new messages sent to capture as a compaction",
            dir_var: "CLAUDE_CONFIG_DIR",
            home_dir: ".claude",
            folder: "projects",
            sessions: SessionFiles::ByProject,
            layout: "Claude Code keeps them as <folder>/<project folder>/<session id>.jsonl \
                     (~/.claude/projects by default): pass that folder, or one project's folder \
                     in it, as --transcripts",
        }),
    }),
};

/// OpenAI's Codex CLI.
pub(super) const CODEX: Spec = Spec {
    name: "codex",
    about: "OpenAI's Codex CLI: hooks and MCP",
    hooks: Some(Hooks::claude_style(
        &Event::ALL,
        &[
            (Scope::User, Place::at(Base::CodexHome, "hooks.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".codex/hooks.json"),
            ),
        ],
        JsonDialect::Strict,
    )),
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place::at(Base::CodexHome, "config.toml"),
                format: McpFormat::Toml,
                at: &[Key::Name("mcp_servers")],
                style: ServerStyle::Untyped,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::at(Base::Project, ".codex/config.toml"),
                format: McpFormat::Toml,
                at: &[Key::Name("mcp_servers")],
                style: ServerStyle::Untyped,
            },
        ),
    ],
    instructions: &[],
    transcripts: Some(Transcripts {
        format: Format::Codex,
        import: Some(Import {
            about: "Codex's session transcripts (~/.codex/sessions/**/rollout-*.jsonl), each \
                    session's new messages sent to capture as a compaction",
            dir_var: "CODEX_HOME",
            home_dir: ".codex",
            folder: "sessions",
            sessions: SessionFiles::Rollouts,
            layout: "Codex keeps them as <folder>/YYYY/MM/DD/rollout-<time>-<id>.jsonl \
                     (~/.codex/sessions by default): pass that folder, or any folder below it, \
                     as --transcripts",
        }),
    }),
};

/// Cursor's agent ([`crate::client::hook::cursor`]): its compaction hook
/// only observes, and no window reaches it, so setup does not write it;
/// its transcript's format is not documented, so its window comes from
/// the hooks themselves.
pub(super) const CURSOR: Spec = Spec {
    name: "cursor",
    about: "Cursor: hooks, MCP and a project rule",
    hooks: Some(Hooks {
        names: EventNames {
            session_start: "sessionStart",
            user_prompt_submit: "beforeSubmitPrompt",
            stop: "afterAgentResponse",
            pre_compact: "preCompact",
        },
        events: &[Event::SessionStart, Event::UserPromptSubmit, Event::Stop],
        files: &[
            (Scope::User, Place::at(Base::Home, ".cursor/hooks.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".cursor/hooks.json"),
            ),
        ],
        dialect: JsonDialect::Strict,
        layout: HookLayout::Versioned { version: 1 },
        context: ContextOutput::AdditionalContext,
        prompt: PromptHook::KeepsForTheAnswer,
        clean_prompt: None,
    }),
    // Cursor documents mcp.json as JSON; comments are refused rather than
    // kept in a file whose reader is not known to take them.
    mcp: &[
        (
            Scope::User,
            McpFile::mcp_servers(
                Place::at(Base::Home, ".cursor/mcp.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Untyped,
            ),
        ),
        (
            Scope::Project,
            McpFile::mcp_servers(
                Place::at(Base::Project, ".cursor/mcp.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Untyped,
            ),
        ),
    ],
    // Its prompt hook cannot add memories to a prompt.
    instructions: &[(
        Scope::Project,
        InstructionsFile {
            place: Place::at(Base::Project, ".cursor/rules/engram.mdc"),
            starts_with: "---\ndescription: Engram, the long-term memory across sessions\n\
                          alwaysApply: true\n---\n\n",
        },
    )],
    transcripts: None,
};

/// Google's Gemini CLI: its hooks live in settings.json beside its MCP
/// servers; it strips comments there, and refuses trailing commas.
pub(super) const GEMINI: Spec = Spec {
    name: "gemini",
    about: "Google's Gemini CLI: hooks and MCP",
    hooks: Some(Hooks {
        names: EventNames {
            session_start: "SessionStart",
            user_prompt_submit: "BeforeAgent",
            stop: "AfterAgent",
            pre_compact: "PreCompress",
        },
        events: &Event::ALL,
        files: &[
            (Scope::User, Place::at(Base::Home, ".gemini/settings.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".gemini/settings.json"),
            ),
        ],
        dialect: JsonDialect::Comments,
        layout: HookLayout::Grouped {
            timeout: TimeUnit::Milliseconds,
        },
        context: ContextOutput::HookSpecific,
        prompt: PromptHook::AddsContext,
        clean_prompt: Some(gemini::without_injected),
    }),
    mcp: &[
        (
            Scope::User,
            McpFile::mcp_servers(
                Place::at(Base::Home, ".gemini/settings.json"),
                McpFormat::Json(JsonDialect::Comments),
                ServerStyle::Untyped,
            ),
        ),
        (
            Scope::Project,
            McpFile::mcp_servers(
                Place::at(Base::Project, ".gemini/settings.json"),
                McpFormat::Json(JsonDialect::Comments),
                ServerStyle::Untyped,
            ),
        ),
    ],
    instructions: &[],
    transcripts: Some(Transcripts {
        format: Format::Gemini,
        import: None,
    }),
};

/// VS Code (GitHub Copilot's agent mode): no command hooks that add
/// context, so instructions instead.
pub(super) const VS_CODE: Spec = Spec {
    name: "vscode",
    about: "VS Code (GitHub Copilot's agent mode): MCP and a project instructions file",
    hooks: None,
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place::at(Base::VsCodeUser, "mcp.json"),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("servers")],
                style: ServerStyle::Typed,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::at(Base::Project, ".vscode/mcp.json"),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("servers")],
                style: ServerStyle::Typed,
            },
        ),
    ],
    instructions: &[(
        Scope::Project,
        InstructionsFile {
            place: Place::at(Base::Project, ".github/instructions/engram.instructions.md"),
            starts_with: "---\napplyTo: \"**\"\n---\n\n",
        },
    )],
    transcripts: None,
};

/// OpenCode: no command hooks that add context, so AGENTS.md instead.
pub(super) const OPEN_CODE: Spec = Spec {
    name: "opencode",
    about: "OpenCode: MCP and AGENTS.md",
    hooks: None,
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place::either(
                    Base::XdgConfig,
                    "opencode/opencode.json",
                    "opencode/opencode.jsonc",
                ),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("mcp")],
                style: ServerStyle::Local,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::either(Base::Project, "opencode.json", "opencode.jsonc"),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("mcp")],
                style: ServerStyle::Local,
            },
        ),
    ],
    instructions: &[
        (
            Scope::User,
            InstructionsFile::plain(Place::at(Base::XdgConfig, "opencode/AGENTS.md")),
        ),
        (
            Scope::Project,
            InstructionsFile::plain(Place::at(Base::Project, "AGENTS.md")),
        ),
    ],
    transcripts: None,
};

/// Qwen Code, a Gemini CLI fork: its settings.json is Gemini CLI's, read
/// the same way (comments, no trailing commas), and holds its hooks beside
/// its MCP servers. Its hooks copy Claude Code's (names, input, output,
/// `timeout` in seconds); setup writes the two that add memories, at the
/// session's start and to every prompt. Capture would read its transcripts,
/// records of its own that Engram does not read yet, so the instructions
/// ask the model to `remember`: `AGENTS.md`, which it reads beside its own
/// `QWEN.md`, in the project, and `~/.qwen/QWEN.md` for the user.
pub(super) const QWEN_CODE: Spec = Spec {
    name: "qwen-code",
    about: "Qwen Code: hooks that add memories, MCP and instructions (AGENTS.md)",
    hooks: Some(Hooks::claude_style(
        &[Event::SessionStart, Event::UserPromptSubmit],
        &[
            (Scope::User, Place::at(Base::Home, ".qwen/settings.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".qwen/settings.json"),
            ),
        ],
        JsonDialect::Comments,
    )),
    mcp: &[
        (
            Scope::User,
            McpFile::mcp_servers(
                Place::at(Base::Home, ".qwen/settings.json"),
                McpFormat::Json(JsonDialect::Comments),
                ServerStyle::Untyped,
            ),
        ),
        (
            Scope::Project,
            McpFile::mcp_servers(
                Place::at(Base::Project, ".qwen/settings.json"),
                McpFormat::Json(JsonDialect::Comments),
                ServerStyle::Untyped,
            ),
        ),
    ],
    instructions: &[
        (
            Scope::User,
            InstructionsFile::plain(Place::at(Base::Home, ".qwen/QWEN.md")),
        ),
        (
            Scope::Project,
            InstructionsFile::plain(Place::at(Base::Project, "AGENTS.md")),
        ),
    ],
    transcripts: None,
};

/// GitHub Copilot CLI: strict JSON everywhere. In a project it reads
/// `.mcp.json` (Claude Code's, in the same shape), or `.github/mcp.json`
/// when only that exists; and VS Code's instructions files. Its hooks
/// (`.github/hooks/*.json`, `bash` and `powershell` commands) are a
/// layout Engram does not write yet, so instructions instead.
pub(super) const COPILOT: Spec = Spec {
    name: "copilot",
    about: "GitHub Copilot CLI: MCP and instructions",
    hooks: None,
    mcp: &[
        (
            Scope::User,
            McpFile::mcp_servers(
                Place::at(Base::CopilotHome, "mcp-config.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Typed,
            ),
        ),
        (
            Scope::Project,
            McpFile::mcp_servers(
                Place::either(Base::Project, ".mcp.json", ".github/mcp.json"),
                McpFormat::Json(JsonDialect::Strict),
                ServerStyle::Typed,
            ),
        ),
    ],
    instructions: &[
        (
            Scope::User,
            InstructionsFile::plain(Place::at(Base::CopilotHome, "copilot-instructions.md")),
        ),
        (
            Scope::Project,
            InstructionsFile {
                place: Place::at(Base::Project, ".github/instructions/engram.instructions.md"),
                starts_with: "---\napplyTo: \"**\"\n---\n\n",
            },
        ),
    ],
    transcripts: None,
};

/// Sourcegraph's Amp: its servers sit under one dotted key,
/// `"amp.mcpServers"`, in its JSONC settings; it has no command hooks
/// (its plugins are TypeScript programs), so `AGENTS.md` instead.
pub(super) const AMP: Spec = Spec {
    name: "amp",
    about: "Sourcegraph's Amp: MCP and AGENTS.md",
    hooks: None,
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place::either(Base::XdgConfig, "amp/settings.json", "amp/settings.jsonc"),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("amp.mcpServers")],
                style: ServerStyle::Untyped,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::either(Base::Project, ".amp/settings.json", ".amp/settings.jsonc"),
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("amp.mcpServers")],
                style: ServerStyle::Untyped,
            },
        ),
    ],
    instructions: &[
        (
            Scope::User,
            InstructionsFile::plain(Place::at(Base::XdgConfig, "amp/AGENTS.md")),
        ),
        (
            Scope::Project,
            InstructionsFile::plain(Place::at(Base::Project, "AGENTS.md")),
        ),
    ],
    transcripts: None,
};
