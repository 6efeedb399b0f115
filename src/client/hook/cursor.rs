//! Cursor's hooks, as its hooks reference documents them (no real Cursor
//! runs in Engram's tests: it is in no package registry).
//!
//! Input relied on: `conversation_id` (the session; `sessionStart` also
//! gives it as `session_id`), `generation_id` (changes with every user
//! message: the turn id), `workspace_roots` (the first is the project),
//! `hook_event_name`, `prompt` (`beforeSubmitPrompt`) and `text`
//! (`afterAgentResponse`, the answer). Output relied on:
//! `{"additional_context": …}` from `sessionStart` adds context, and
//! `{"continue": true}` from `beforeSubmitPrompt` lets the prompt go on.
//!
//! `beforeSubmitPrompt` cannot add context, so the prompt gets no
//! memories from a hook (the MCP tools and the rule setup writes ask the
//! agent to `recall`); it stores a `remember:` prompt's fact, and keeps
//! the prompt ([`Step::Keep`]) for the answer's hook of the same
//! generation to send with it ([`Step::Take`]), since neither hook is
//! given the other's text and Cursor's transcript format is not
//! documented. The prompt is kept in one small file per conversation,
//! the owner's alone, beside the hook's log, and removed once taken.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::bounded;

/// What `beforeSubmitPrompt` prints: the prompt goes on, whatever Engram did.
pub const CONTINUE: &str = r#"{"continue":true}"#;

/// The most kept-prompt file read back.
const MAX_KEPT_BYTES: u64 = 1024 * 1024;

/// The kept prompts' directory, beside the hook's log.
pub fn prompts_dir(log_path: &Path) -> Option<PathBuf> {
    log_path.parent().map(|dir| dir.join("cursor-prompts"))
}

/// What one hook does with the kept prompt of its conversation.
#[derive(Debug)]
pub enum Step {
    /// `beforeSubmitPrompt`: keep this turn's prompt.
    Keep {
        file: PathBuf,
        turn_id: String,
        prompt: String,
    },
    /// `afterAgentResponse`: take the prompt kept for this turn.
    Take { file: PathBuf, turn_id: String },
}

#[derive(Serialize, Deserialize)]
struct Kept {
    turn_id: String,
    prompt: String,
}

impl Step {
    /// The file of `session_id`'s kept prompt in `dir`. The session id is
    /// already an Engram id: letters, digits, `.`, `_` and `-`, starting
    /// with a letter or digit, so it names a file in `dir` and no other.
    pub fn file(dir: &Path, session_id: &str) -> PathBuf {
        dir.join(format!("{session_id}.json"))
    }

    /// Does the step: the prompt taken, if one was kept for this turn.
    pub fn run(self) -> io::Result<Option<String>> {
        match self {
            Self::Keep {
                file,
                turn_id,
                prompt,
            } => {
                keep(&file, &Kept { turn_id, prompt })?;
                Ok(None)
            }
            Self::Take { file, turn_id } => {
                let bytes = match bounded::read_head(&file, MAX_KEPT_BYTES) {
                    Ok(bytes) => bytes,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(err) => return Err(err),
                };
                let kept: Option<Kept> = serde_json::from_slice(&bytes).ok();
                // Taken once: a later answer of the same turn (or a stale
                // prompt of an older one) is not sent with it again.
                fs::remove_file(&file)?;
                Ok(kept
                    .filter(|kept| kept.turn_id == turn_id)
                    .map(|kept| kept.prompt))
            }
        }
    }
}

/// Writes `kept` to a temporary file (the owner's alone) and renames it
/// over `file`, so a reader sees the old prompt or the new one.
fn keep(file: &Path, kept: &Kept) -> io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut temporary = file.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    out.write_all(&serde_json::to_vec(kept).map_err(io::Error::other)?)?;
    drop(out);
    fs::rename(&temporary, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_prompt_is_taken_once_and_only_for_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let file = Step::file(dir.path(), "conv-1");
        let keep = |turn: &str, prompt: &str| Step::Keep {
            file: file.clone(),
            turn_id: turn.to_owned(),
            prompt: prompt.to_owned(),
        };
        let take = |turn: &str| Step::Take {
            file: file.clone(),
            turn_id: turn.to_owned(),
        };
        assert_eq!(take("g1").run().unwrap(), None, "nothing kept yet");
        assert_eq!(keep("g1", "Use tabs.").run().unwrap(), None);
        assert_eq!(take("g1").run().unwrap().as_deref(), Some("Use tabs."));
        assert_eq!(take("g1").run().unwrap(), None, "taken once");
        keep("g2", "old").run().unwrap();
        assert_eq!(take("g3").run().unwrap(), None, "another turn's prompt");
        assert!(!file.exists(), "a stale prompt is dropped");
    }
}
