//! `engram import <source>`: memories brought into a running Engram over
//! its HTTP API, from
//!
//! - an agent's transcripts (`claude-code`, `codex`: one command per agent
//!   whose entry in [`crate::client::agent`] has an import): each
//!   session's new messages sent to capture as a compaction, resumably
//!   ([`transcripts`]);
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

use super::agent::Agent;
use super::http::{self, ServerArgs};
use sessions::Importable;

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
    /// An agent's session transcripts: one command per agent whose entry
    /// has an import.
    #[command(flatten)]
    Transcripts(AgentTranscripts),
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

/// `engram import <agent>`: the agent, and the backfill's arguments.
#[derive(Debug)]
pub struct AgentTranscripts {
    pub agent: Agent,
    pub args: transcripts::TranscriptArgs,
}

impl clap::FromArgMatches for AgentTranscripts {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut matches.clone())
    }

    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        use clap::error::ErrorKind;
        let Some((name, mut args)) = matches.remove_subcommand() else {
            return Err(clap::Error::raw(
                ErrorKind::MissingSubcommand,
                "a subcommand is required but one was not provided",
            ));
        };
        let agent = Importable::named(&name)
            .map(Importable::agent)
            .ok_or_else(|| {
                clap::Error::raw(
                    ErrorKind::InvalidSubcommand,
                    format!("the subcommand '{name}' wasn't recognized"),
                )
            })?;
        let args = transcripts::TranscriptArgs::from_arg_matches_mut(&mut args)?;
        Ok(Self { agent, args })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Subcommand for AgentTranscripts {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        importable().fold(command, |command, agent| {
            let sub = clap::Command::new(agent.as_str());
            let sub = <transcripts::TranscriptArgs as clap::Args>::augment_args(sub);
            command.subcommand(sub.about(agent.about()).long_about(None))
        })
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        importable().fold(command, |command, agent| {
            let sub = clap::Command::new(agent.as_str());
            let sub = <transcripts::TranscriptArgs as clap::Args>::augment_args_for_update(sub);
            command.subcommand(sub.about(agent.about()).long_about(None))
        })
    }

    fn has_subcommand(name: &str) -> bool {
        Importable::named(name).is_some()
    }
}

/// The agents whose past sessions `engram import` reads, in the table's
/// order.
fn importable() -> impl Iterator<Item = Importable> {
    Agent::ALL.into_iter().filter_map(Importable::of)
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
    super::exit_with(
        "import stopped",
        outcome.map(|summary| format!("{summary}\n")),
    )
}

/// Imports from `source` and says what was done.
async fn import(source: &Source) -> Result<String, Error> {
    match source {
        Source::Transcripts(AgentTranscripts { agent, args }) => {
            transcripts::run(args, *agent).await
        }
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

/// The most JSON one request of an import carries, well inside the
/// default 1 MiB body limit.
const BATCH_BYTES: usize = 512 * 1024;

/// `bodies` in the requests that carry them, in order: at most
/// `max_count` and [`BATCH_BYTES`] of JSON each (a body larger than that
/// alone goes alone, for the server to judge). The bench's loaders use it
/// too.
pub fn batches(bodies: Vec<serde_json::Value>, max_count: usize) -> Vec<Vec<serde_json::Value>> {
    let mut batches = Vec::new();
    let mut batch: Vec<serde_json::Value> = Vec::new();
    let mut bytes = 0;
    for body in bodies {
        let size = body.to_string().len();
        if !batch.is_empty() && (batch.len() == max_count || bytes + size > BATCH_BYTES) {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += size;
        batch.push(body);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
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
