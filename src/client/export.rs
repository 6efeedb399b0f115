//! `engram export`: every memory a running Engram holds (for a repo, a
//! user, or all the key sees), every version, with its id, chain, edges,
//! timestamps, importance and use count, as JSON Lines on stdout or as a
//! data directory's own memory files (`repos/<repo>/<id>.md`,
//! `users/<user>/<id>.md`, use counts in `.cache/access-counts.json`), so
//! that an export directory can itself be served. Memories come oldest
//! first, so that an import meets a chain's versions in order.
//! `engram import jsonl` and `engram import markdown` read them back.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::http::{self, Api, ServerArgs};
use crate::causes::error_chain;
use crate::memory::{Lifecycle, MemoryId, Namespace, RepoId, UserId};
use crate::routes::import::ImportedMemory;
use crate::store::{atomic, lifecycle, markdown};

/// The largest page `GET /memories` serves.
const PAGE: usize = 1000;

/// `engram export`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// JSON Lines on stdout, or memory files in `--out`.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Only this repo's memories (with `--user`, that user's too).
    #[arg(long)]
    pub repo: Option<RepoId>,
    /// Only this user's memories (with `--repo`, that repo's too).
    #[arg(long)]
    pub user: Option<UserId>,
    /// The directory the markdown files go to: absent or empty.
    #[arg(long, value_name = "DIR", required_if_eq("format", "markdown"))]
    pub out: Option<PathBuf>,
}

/// How an export is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One memory per line, as `GET /memories` shows it plus `access_count`.
    Jsonl,
    /// The data directory's memory files.
    Markdown,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] http::Error),
    #[error("Engram answered a memory this command cannot read")]
    Answer(#[source] serde_json::Error),
    #[error("memory {id} cannot be written as a file: {reason}")]
    Memory { id: MemoryId, reason: String },
    #[error("{0} is not empty: export markdown into a new or empty directory")]
    NotEmpty(PathBuf),
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("starting the runtime")]
    Runtime(#[source] io::Error),
}

/// Runs `engram export`.
pub fn run(args: &ExportArgs) -> ExitCode {
    match export(args) {
        Ok(count) => {
            eprintln!("engram: exported {count} memories");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("engram: export failed: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

fn export(args: &ExportArgs) -> Result<usize, Error> {
    let api = args.server.api()?;
    let runtime = super::runtime().map_err(Error::Runtime)?;
    let memories = runtime.block_on(fetch_all(&api, args.repo.as_ref(), args.user.as_ref()))?;
    match (&args.format, &args.out) {
        (Format::Markdown, Some(dir)) => write_markdown(dir, &memories)?,
        _ => write_jsonl(&memories)?,
    }
    Ok(memories.len())
}

/// Every version of every memory the filters and the key admit, with its
/// use count, oldest first: one request per page of the listing, which
/// carries the use counts.
pub async fn fetch_all(
    api: &Api,
    repo: Option<&RepoId>,
    user: Option<&UserId>,
) -> Result<Vec<ImportedMemory>, Error> {
    let mut filter = format!("/memories?all_versions=true&limit={PAGE}");
    if let Some(repo) = repo {
        filter.push_str(&format!("&repo={repo}"));
    }
    if let Some(user) = user {
        filter.push_str(&format!("&user={user}"));
    }
    let mut memories: Vec<ImportedMemory> = api.every_page(&filter).await?;
    memories.sort_by_key(|memory| (memory.created_at, memory.id));
    Ok(memories)
}

fn write_jsonl(memories: &[ImportedMemory]) -> Result<(), Error> {
    let failed = |source| Error::Write {
        path: PathBuf::from("<stdout>"),
        source,
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    for memory in memories {
        let line = serde_json::to_string(memory).map_err(|err| failed(err.into()))?;
        writeln!(out, "{line}").map_err(failed)?;
    }
    out.flush().map_err(failed)
}

/// Writes `memories` under `dir` as a data directory holds them.
fn write_markdown(dir: &Path, memories: &[ImportedMemory]) -> Result<(), Error> {
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Error::NotEmpty(dir.to_owned()));
    }
    let mut counts = BTreeMap::new();
    let mut lifecycles: BTreeMap<PathBuf, BTreeMap<MemoryId, Lifecycle>> = BTreeMap::new();
    for (index, exported) in memories.iter().enumerate() {
        let memory = exported
            .clone()
            .into_memory(index)
            .map_err(|err| Error::Memory {
                id: exported.id,
                reason: err.to_string(),
            })?;
        let owner_dir = match &memory.namespace {
            Namespace::Repo(repo) => dir.join("repos").join(repo.as_str()),
            Namespace::User(user) => dir.join("users").join(user.as_str()),
        };
        let path = owner_dir.join(format!("{}.md", memory.id));
        write_file(&path, markdown::render(&memory).as_bytes())?;
        if exported.access_count > 0 {
            counts.insert(memory.id, exported.access_count);
        }
        // As the data directory keeps them: beside the memory files, only
        // what differs from the default.
        if !memory.lifecycle.is_default() {
            lifecycles
                .entry(owner_dir)
                .or_default()
                .insert(memory.id, memory.lifecycle);
        }
    }
    for (owner_dir, kept) in lifecycles {
        let bytes = serde_json::to_vec_pretty(&kept).map_err(Error::Answer)?;
        write_file(&owner_dir.join(lifecycle::LIFECYCLE_FILE), &bytes)?;
    }
    let counts = serde_json::to_vec(&counts).map_err(Error::Answer)?;
    write_file(&dir.join(".cache/access-counts.json"), &counts)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let failed = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    atomic::write(path, bytes).map_err(failed)
}
