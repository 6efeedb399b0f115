//! `engram import jsonl FILE` and `engram import markdown DIR`: an export
//! brought back through `POST /memories/import`, ids, chains, edges,
//! timestamps and use counts kept. Everything is read and checked before
//! anything is sent; memories go oldest first, in batches, so a version
//! always follows the one it supersedes. Ids Engram holds already are
//! skipped and counted, so importing an export twice changes nothing.

use std::collections::HashMap;
use std::path::Path;

use serde_json::json;

use super::Error;
use crate::client::http::Api;
use crate::memory::{MemoryId, Namespace, RepoId, UserId};
use crate::routes::import::ImportedMemory;
use crate::store::{lifecycle, markdown};

/// The most memories one request carries (the endpoint takes 1,000).
const BATCH_MEMORIES: usize = 500;

/// What an import of whole memories did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub imported: usize,
    pub existing: usize,
}

/// The memories of a JSON Lines export; a line that is not one names its
/// number.
pub fn read_jsonl(path: &Path) -> Result<Vec<ImportedMemory>, Error> {
    let text = super::read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|err| Error::Parse {
                path: path.to_owned(),
                reason: format!("line {}: {err}", index + 1),
            })
        })
        .collect()
}

/// The memories of a markdown export (or of a data directory):
/// `repos/<repo>/*.md` and `users/<user>/*.md`, with the use counts of
/// `.cache/access-counts.json` and each namespace's lifecycles
/// (`.lifecycle.json`) when they are there.
pub fn read_markdown(dir: &Path) -> Result<Vec<ImportedMemory>, Error> {
    let counts: HashMap<MemoryId, u64> = match std::fs::read(dir.join(".cache/access-counts.json"))
    {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| Error::Parse {
            path: dir.join(".cache/access-counts.json"),
            reason: err.to_string(),
        })?,
        Err(_) => HashMap::new(),
    };
    let mut memories = Vec::new();
    for (scope_dir, namespace_of) in [
        ("repos", repo_namespace as fn(&str) -> Option<Namespace>),
        ("users", user_namespace),
    ] {
        for (owner, files) in super::list_dirs(&dir.join(scope_dir))? {
            let Some(namespace) = namespace_of(&owner) else {
                continue;
            };
            let mut lifecycles = lifecycle::read_file(&dir.join(scope_dir).join(&owner));
            for path in files
                .into_iter()
                .filter(|path| path.extension() == Some("md".as_ref()))
            {
                let text = super::read_text(&path)?;
                let mut memory =
                    markdown::parse(&text, namespace.clone()).map_err(|err| Error::Parse {
                        path: path.clone(),
                        reason: err.to_string(),
                    })?;
                if let Some(lifecycle) = lifecycles.remove(&memory.id) {
                    memory.lifecycle = lifecycle;
                }
                let count = counts.get(&memory.id).copied().unwrap_or(0);
                memories.push(ImportedMemory::from_memory(&memory, count));
            }
        }
    }
    Ok(memories)
}

fn repo_namespace(name: &str) -> Option<Namespace> {
    name.parse::<RepoId>().ok().map(Namespace::Repo)
}

fn user_namespace(name: &str) -> Option<Namespace> {
    name.parse::<UserId>().ok().map(Namespace::User)
}

/// Sends `memories` to `POST /memories/import`, oldest first, in batches.
pub async fn send(api: &Api, mut memories: Vec<ImportedMemory>) -> Result<Outcome, Error> {
    memories.sort_by_key(|memory| (memory.created_at, memory.id));
    let mut outcome = Outcome::default();
    let total = memories.len();
    let bodies = memories
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::Json)?;
    for batch in super::batches(bodies, BATCH_MEMORIES) {
        post(api, batch, &mut outcome, total).await?;
    }
    Ok(outcome)
}

async fn post(
    api: &Api,
    batch: Vec<serde_json::Value>,
    outcome: &mut Outcome,
    total: usize,
) -> Result<(), Error> {
    let answer = api
        .post("/memories/import", &json!({ "memories": batch }))
        .await?;
    outcome.imported += count(&answer["imported"]);
    outcome.existing += count(&answer["existing"]);
    eprintln!(
        "engram: {} of {total} memories sent ({} imported, {} existed already)",
        outcome.imported + outcome.existing,
        outcome.imported,
        outcome.existing
    );
    Ok(())
}

fn count(value: &serde_json::Value) -> usize {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
}
