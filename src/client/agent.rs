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
mod entries;
mod spec;

pub use dirs::{Dirs, Missing};
pub use spec::{
    Base, ContextOutput, Event, EventNames, HookLayout, Hooks, Import, InstructionsFile, Key,
    McpFile, McpFormat, Place, PromptHook, Scope, ServerStyle, SessionFiles, Spec, TimeUnit,
    Transcripts,
};

use std::path::PathBuf;

use crate::client::hook::transcript::Format;
use entries::{AMP, CLAUDE_CODE, CODEX, COPILOT, CURSOR, GEMINI, OPEN_CODE, QWEN_CODE, VS_CODE};

/// A coding agent Engram knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    Codex,
    Cursor,
    Gemini,
    VsCode,
    OpenCode,
    QwenCode,
    Copilot,
    Amp,
}

impl Agent {
    /// Every agent, in the order commands list them.
    pub const ALL: [Self; 9] = [
        Self::ClaudeCode,
        Self::Codex,
        Self::Cursor,
        Self::Gemini,
        Self::VsCode,
        Self::OpenCode,
        Self::QwenCode,
        Self::Copilot,
        Self::Amp,
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
            Self::QwenCode => &QWEN_CODE,
            Self::Copilot => &COPILOT,
            Self::Amp => &AMP,
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

#[cfg(test)]
mod tests;
