//! `engram import <source>`: memories brought into a running Engram over
//! its HTTP API, from
//!
//! - an agent's transcripts (`claude-code`, `codex`): each session's new
//!   messages sent to capture as a compaction, resumably ([`transcripts`]);
//! - instructions files (`agents-md`): their bullets and short paragraphs
//!   as repo conventions, with no model ([`instructions`]);
//! - an `engram export` (`jsonl`, `markdown`): whole memories, ids and
//!   links kept ([`whole`]);
//! - mem0's exported memories (`mem0`) ([`mem0`]).
//!
//! Each prints its progress on stderr and what it did on stdout, and exits
//! non-zero when it stops short.

pub mod instructions;
pub mod mem0;
pub mod sessions;
pub mod state;
pub mod transcripts;
pub mod whole;

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::http::{self, ServerArgs};
use crate::causes::error_chain;

/// The most of one input file read.
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// `engram import`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: Source,
}

/// Where the memories come from.
#[derive(Debug, clap::Subcommand)]
pub enum Source {
    /// Claude Code's session transcripts (~/.claude/projects/*/*.jsonl),
    /// each session's new messages sent to capture as a compaction.
    ClaudeCode(transcripts::TranscriptArgs),
    /// Codex's session transcripts (~/.codex/sessions/**/rollout-*.jsonl),
    /// each session's new messages sent to capture as a compaction.
    Codex(transcripts::TranscriptArgs),
    /// Instructions files (CLAUDE.md, AGENTS.md, .cursor/rules/*.mdc, ...):
    /// their bullets and short paragraphs as repo conventions, no model.
    AgentsMd(instructions::InstructionsArgs),
    /// An `engram export --format jsonl` file, ids and links kept.
    Jsonl(FileArgs),
    /// An `engram export --format markdown` directory (or a data
    /// directory), ids and links kept.
    Markdown(FileArgs),
    /// mem0's exported memories (its `get_all` JSON).
    Mem0(mem0::Mem0Args),
}

/// A file or directory to import, and where to.
#[derive(Debug, clap::Args)]
pub struct FileArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The file (jsonl) or directory (markdown).
    pub path: PathBuf,
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] http::Error),
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("encoding a request")]
    Json(#[source] serde_json::Error),
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "this Engram has no classifier (no `llm` configured; capture is agent-driven): a \
         backfill needs an `llm` configured on the server"
    )]
    CaptureDisabled,
    #[error("{0}")]
    Stopped(String),
    #[error("{0}")]
    Usage(String),
    #[error("starting the runtime")]
    Runtime(#[source] io::Error),
}

/// Runs `engram import <source>`.
pub fn run(args: &ImportArgs) -> ExitCode {
    let outcome = super::runtime()
        .map_err(Error::Runtime)
        .and_then(|runtime| runtime.block_on(import(&args.source)));
    match outcome {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("engram: import stopped: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// Imports from `source` and says what was done.
async fn import(source: &Source) -> Result<String, Error> {
    match source {
        Source::ClaudeCode(args) => transcripts::run(args, transcripts::Agent::ClaudeCode).await,
        Source::Codex(args) => transcripts::run(args, transcripts::Agent::Codex).await,
        Source::AgentsMd(args) => instructions::run(args).await,
        Source::Jsonl(args) => {
            let memories = whole::read_jsonl(&args.path)?;
            let outcome = whole::send(&args.server.api()?, memories).await?;
            Ok(whole_summary(&outcome))
        }
        Source::Markdown(args) => {
            let memories = whole::read_markdown(&args.path)?;
            let outcome = whole::send(&args.server.api()?, memories).await?;
            Ok(whole_summary(&outcome))
        }
        Source::Mem0(args) => mem0::run(args).await,
    }
}

fn whole_summary(outcome: &whole::Outcome) -> String {
    format!(
        "imported {} memories; {} existed already and were left as they are",
        outcome.imported, outcome.existing
    )
}

/// The text of the file at `path` (its first 256 MiB).
fn read_text(path: &Path) -> Result<String, Error> {
    let bytes =
        super::hook::bounded::read_head(path, MAX_FILE_BYTES).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The regular files in `dir`, sorted; none when `dir` does not exist.
fn list_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?
        .flatten()
        .filter(|file| file.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|file| file.path())
        .collect();
    files.sort();
    Ok(files)
}

/// The directories in `dir`, by name, each with its files, sorted; none
/// when `dir` does not exist.
fn list_dirs(dir: &Path) -> Result<Vec<(String, Vec<PathBuf>)>, Error> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut listed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        listed.push((
            entry.file_name().to_string_lossy().into_owned(),
            list_files(&path)?,
        ));
    }
    listed.sort();
    Ok(listed)
}
