//! The coding agents Engram serves: one entry per agent, and every
//! command reads the agent's ways from it. An entry ([`Spec`]) says the
//! agent's name, its hook events and their names, its hooks file and how
//! the file lists a hook, how its hooks add context, where it keeps its
//! MCP servers and instructions (per [`Scope`], with each file's
//! dialect), and how its transcripts are read and found for import.
//! docs/guides/adding-an-agent.md says how to add one.
//!
//! The paths follow each agent's own documentation; a scope an entry has
//! no file for is an error naming the agent and the scope.

mod dirs;
mod spec;

pub use dirs::{Dirs, Missing};
pub use spec::{
    Base, ContextOutput, Event, EventNames, HookLayout, Hooks, Import, InstructionsFile, Key,
    McpFile, McpFormat, Place, PromptHook, Scope, ServerStyle, SessionFiles, Spec, TimeUnit,
    Transcripts,
};

use std::path::PathBuf;

use crate::client::hook::transcript::{Format, gemini};
use crate::client::setup::json_edit::JsonDialect;

/// A coding agent Engram knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    Codex,
    Cursor,
    Gemini,
    VsCode,
    OpenCode,
}

impl Agent {
    /// Every agent, in the order commands list them.
    pub const ALL: [Self; 6] = [
        Self::ClaudeCode,
        Self::Codex,
        Self::Cursor,
        Self::Gemini,
        Self::VsCode,
        Self::OpenCode,
    ];

    /// The agent's entry.
    pub fn spec(self) -> &'static Spec {
        match self {
            Self::ClaudeCode => &CLAUDE_CODE,
            Self::Codex => &CODEX,
            Self::Cursor => &CURSOR,
            Self::Gemini => &GEMINI,
            Self::VsCode => &VS_CODE,
            Self::OpenCode => &OPEN_CODE,
        }
    }

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// Its hooks, when Engram serves them.
    pub fn hooks(self) -> Option<&'static Hooks> {
        self.spec().hooks.as_ref()
    }

    /// How the transcript its hooks name is written, when Engram reads it.
    pub fn transcript_format(self) -> Option<Format> {
        self.spec().transcripts.as_ref().map(|read| read.format)
    }

    /// Where its past sessions are, when `engram import` reads them.
    pub fn import(self) -> Option<&'static Import> {
        self.spec().transcripts.as_ref()?.import.as_ref()
    }

    /// Its hooks file for `scope`.
    pub fn hooks_file(self, scope: Scope, dirs: &Dirs) -> Result<PathBuf, Missing> {
        let files = self.hooks().map_or(&[][..], |hooks| hooks.files);
        dirs.resolve(for_scope(files, scope)?)
    }

    /// The file where it keeps its MCP servers for `scope`, with the keys
    /// to the servers' table.
    pub fn mcp_file(self, scope: Scope, dirs: &Dirs) -> Result<Resolved, Missing> {
        let file = for_scope(self.spec().mcp, scope)?;
        let at = file
            .at
            .iter()
            .map(|key| match key {
                Key::Name(name) => (*name).to_owned(),
                Key::ProjectPath => dirs.project.to_string_lossy().into_owned(),
            })
            .collect();
        Ok(Resolved {
            path: dirs.resolve(&file.place)?,
            format: file.format,
            at,
            style: file.style,
        })
    }

    /// Its instructions file for `scope` and the text a new one starts
    /// with; `None` when it has none there (Cursor's and VS Code's
    /// user-wide instructions live in their settings, not in a file).
    pub fn instructions_file(
        self,
        scope: Scope,
        dirs: &Dirs,
    ) -> Result<Option<(PathBuf, &'static str)>, Missing> {
        match for_scope(self.spec().instructions, scope) {
            Ok(file) => Ok(Some((dirs.resolve(&file.place)?, file.starts_with))),
            Err(_) => Ok(None),
        }
    }
}

impl clap::ValueEnum for Agent {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let spec = self.spec();
        Some(clap::builder::PossibleValue::new(spec.name).help(spec.about))
    }
}

impl Hooks {
    /// `event`'s name in the agent's configuration and hook input.
    pub fn name(&self, event: Event) -> &'static str {
        match event {
            Event::SessionStart => self.names.session_start,
            Event::UserPromptSubmit => self.names.user_prompt_submit,
            Event::Stop => self.names.stop,
            Event::PreCompact => self.names.pre_compact,
        }
    }
}

/// An agent's MCP file for one scope, found on this machine.
#[derive(Debug)]
pub struct Resolved {
    pub path: PathBuf,
    pub format: McpFormat,
    pub at: Vec<String>,
    pub style: ServerStyle,
}

/// The entry of `entries` for `scope`.
fn for_scope<T>(entries: &'static [(Scope, T)], scope: Scope) -> Result<&'static T, Missing> {
    entries
        .iter()
        .find(|(at, _)| *at == scope)
        .map(|(_, entry)| entry)
        .ok_or(Missing::Scope)
}

/// Claude Code's and Codex's event names (Codex's hooks copy Claude Code's).
const CLAUDE_EVENT_NAMES: EventNames = EventNames {
    session_start: "SessionStart",
    user_prompt_submit: "UserPromptSubmit",
    stop: "Stop",
    pre_compact: "PreCompact",
};

/// Anthropic's Claude Code.
const CLAUDE_CODE: Spec = Spec {
    name: "claude-code",
    about: "Anthropic's Claude Code: hooks and MCP",
    hooks: Some(Hooks {
        names: CLAUDE_EVENT_NAMES,
        events: &Event::ALL,
        files: &[
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
        dialect: JsonDialect::Strict,
        layout: HookLayout::Grouped {
            timeout: TimeUnit::Seconds,
        },
        context: ContextOutput::HookSpecific,
        prompt: PromptHook::AddsContext,
        clean_prompt: None,
    }),
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place::at(Base::Home, ".claude.json"),
                format: McpFormat::Json(JsonDialect::Strict),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Typed,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::at(Base::Project, ".mcp.json"),
                format: McpFormat::Json(JsonDialect::Strict),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Typed,
            },
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
const CODEX: Spec = Spec {
    name: "codex",
    about: "OpenAI's Codex CLI: hooks and MCP",
    hooks: Some(Hooks {
        names: CLAUDE_EVENT_NAMES,
        events: &Event::ALL,
        files: &[
            (Scope::User, Place::at(Base::CodexHome, "hooks.json")),
            (
                Scope::Project,
                Place::at(Base::Project, ".codex/hooks.json"),
            ),
        ],
        dialect: JsonDialect::Strict,
        layout: HookLayout::Grouped {
            timeout: TimeUnit::Seconds,
        },
        context: ContextOutput::HookSpecific,
        prompt: PromptHook::AddsContext,
        clean_prompt: None,
    }),
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
const CURSOR: Spec = Spec {
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
            McpFile {
                place: Place::at(Base::Home, ".cursor/mcp.json"),
                format: McpFormat::Json(JsonDialect::Strict),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Untyped,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::at(Base::Project, ".cursor/mcp.json"),
                format: McpFormat::Json(JsonDialect::Strict),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Untyped,
            },
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
const GEMINI: Spec = Spec {
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
            McpFile {
                place: Place::at(Base::Home, ".gemini/settings.json"),
                format: McpFormat::Json(JsonDialect::Comments),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Untyped,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place::at(Base::Project, ".gemini/settings.json"),
                format: McpFormat::Json(JsonDialect::Comments),
                at: &[Key::Name("mcpServers")],
                style: ServerStyle::Untyped,
            },
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
const VS_CODE: Spec = Spec {
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
const OPEN_CODE: Spec = Spec {
    name: "opencode",
    about: "OpenCode: MCP and AGENTS.md",
    hooks: None,
    mcp: &[
        (
            Scope::User,
            McpFile {
                place: Place {
                    base: Base::XdgConfig,
                    path: "opencode/opencode.json",
                    or_only: Some("opencode/opencode.jsonc"),
                },
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("mcp")],
                style: ServerStyle::Local,
            },
        ),
        (
            Scope::Project,
            McpFile {
                place: Place {
                    base: Base::Project,
                    path: "opencode.json",
                    or_only: Some("opencode.jsonc"),
                },
                format: McpFormat::Json(JsonDialect::CommentsAndTrailingCommas),
                at: &[Key::Name("mcp")],
                style: ServerStyle::Local,
            },
        ),
    ],
    instructions: &[
        (
            Scope::User,
            InstructionsFile {
                place: Place::at(Base::XdgConfig, "opencode/AGENTS.md"),
                starts_with: "",
            },
        ),
        (
            Scope::Project,
            InstructionsFile {
                place: Place::at(Base::Project, "AGENTS.md"),
                starts_with: "",
            },
        ),
    ],
    transcripts: None,
};

#[cfg(test)]
mod tests;
