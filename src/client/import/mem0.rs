//! `engram import mem0 FILE`: memories exported from mem0 (the JSON its
//! `get_all` returns: `{"results": [{id, memory, user_id, agent_id,
//! app_id, run_id, metadata, categories, created_at, updated_at, ...}]}`,
//! or the bare list) as Engram memories, with no model.
//!
//! Each becomes a user memory of its `user_id` (or `--user`, else the OS
//! user), category `user-facts`; with `--repo-from agent` (or `app`), one
//! that carries an `agent_id` (or `app_id`) becomes a memory of the repo
//! of that name instead, category `project-conventions`. Its `run_id` is
//! kept as the session id, its timestamps as they were (and `used_at` is
//! now, so retention does not let go at once of what was just brought
//! in); `metadata` and `categories` have no place in an Engram memory and
//! are left out.
//!
//! Memories go through `POST /memories/import` with an id made from
//! mem0's (a UUID v7 of the memory's creation time, its random bits from
//! a hash of the mem0 id), so importing the same file again skips every
//! memory as existing and changes nothing. Memories Engram would refuse
//! (empty, too long, holding a secret) are told and left out before
//! anything is sent.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Error, whole};
use crate::client::hook::project;
use crate::client::http::ServerArgs;
use crate::memory::{
    Category, Lifecycle, Memory, MemoryId, Namespace, Origin, RepoId, SessionId, UserId,
    parse_content,
};
use crate::routes::import::ImportedMemory;

/// `engram import mem0`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Mem0Args {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The mem0 export (its `get_all` JSON).
    pub file: std::path::PathBuf,
    /// The user of every memory (default: each memory's `user_id`, else
    /// the OS user).
    #[arg(long)]
    pub user: Option<String>,
    /// Make a memory with this id a memory of the repo it names.
    #[arg(long, value_enum)]
    pub repo_from: Option<RepoFrom>,
}

/// Which of mem0's ids names a repo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RepoFrom {
    /// `agent_id`.
    Agent,
    /// `app_id`.
    App,
}

/// One of mem0's memories: the fields read; the rest are ignored.
#[derive(Debug, Deserialize)]
struct Mem0Memory {
    id: String,
    memory: String,
    user_id: Option<String>,
    agent_id: Option<String>,
    app_id: Option<String>,
    run_id: Option<String>,
    created_at: Option<DateTime<chrono::FixedOffset>>,
    updated_at: Option<DateTime<chrono::FixedOffset>>,
}

pub async fn run(args: &Mem0Args) -> Result<String, Error> {
    let text = super::read_text(&args.file)?;
    let parse_failed = |reason: String| Error::Parse {
        path: args.file.clone(),
        reason,
    };
    let json: Value = serde_json::from_str(&text).map_err(|err| parse_failed(err.to_string()))?;
    let list = match json {
        Value::Object(mut object) => object.remove("results").unwrap_or(Value::Null),
        list => list,
    };
    let listed: Vec<Mem0Memory> = serde_json::from_value(list).map_err(|err| {
        parse_failed(format!(
            "not mem0's get_all JSON (`results` of memories): {err}"
        ))
    })?;
    let os_user = project::os_user(|var| std::env::var(var).ok());
    let mut memories = Vec::new();
    let mut refused = 0;
    for mem0 in &listed {
        match convert(mem0, args, os_user.as_deref()) {
            Ok(memory) => memories.push(ImportedMemory::from_memory(&memory, 0)),
            Err(reason) => {
                refused += 1;
                eprintln!("refused mem0 memory {}: {reason}", mem0.id);
            }
        }
    }
    let outcome = whole::send(&args.server.api()?, memories).await?;
    Ok(format!(
        "{} mem0 memories: {} imported, {} existed already, {refused} refused",
        listed.len(),
        outcome.imported,
        outcome.existing
    ))
}

/// The Engram memory for one of mem0's, or why Engram would refuse it.
fn convert(mem0: &Mem0Memory, args: &Mem0Args, os_user: Option<&str>) -> Result<Memory, String> {
    let content = parse_content(&mem0.memory).map_err(|err| format!("its text {err}"))?;
    if let Some(kind) = crate::secrets::find_secret(content) {
        return Err(format!("its text looks like a secret ({})", kind.as_str()));
    }
    let repo_id = match args.repo_from {
        Some(RepoFrom::Agent) => mem0.agent_id.as_deref(),
        Some(RepoFrom::App) => mem0.app_id.as_deref(),
        None => None,
    };
    let (namespace, category) = match repo_id {
        Some(name) => (
            Namespace::Repo(id::<RepoId>(name, "repo")?),
            Category::ProjectConventions,
        ),
        None => {
            let name = args
                .user
                .as_deref()
                .or(mem0.user_id.as_deref())
                .or(os_user)
                .ok_or("it names no user and none was found: pass --user")?;
            (
                Namespace::User(id::<UserId>(name, "user")?),
                Category::UserFacts,
            )
        }
    };
    let created_at = mem0.created_at.map_or_else(Utc::now, |at| at.to_utc());
    let updated_at = mem0.updated_at.map_or(created_at, |at| at.to_utc());
    Ok(Memory {
        id: id_for(&mem0.id, created_at),
        version: 1,
        namespace,
        category,
        created_at,
        updated_at,
        supersedes: None,
        related: Vec::new(),
        importance: None,
        session_id: mem0
            .run_id
            .as_deref()
            .and_then(project::to_id)
            .and_then(|id| id.parse::<SessionId>().ok()),
        trigger: Origin::Manual,
        anchors: Vec::new(),
        commit: None,
        observed_at: None,
        content: content.to_owned(),
        // Brought in today: retention counts its disuse from now, not from
        // when mem0 wrote it.
        lifecycle: Lifecycle {
            used_at: Some(Utc::now()),
            ..Lifecycle::default()
        },
    })
}

fn id<T: std::str::FromStr>(name: &str, what: &str) -> Result<T, String> {
    project::to_id(name)
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| format!("{name:?} cannot become an Engram {what} id"))
}

/// The Engram id of mem0's memory `mem0_id`: a UUID v7 of its creation
/// time whose random bits come from a hash of `mem0_id`, so the same
/// memory always gets the same id.
fn id_for(mem0_id: &str, created_at: DateTime<Utc>) -> MemoryId {
    let hash = Sha256::digest(mem0_id.as_bytes());
    let mut random = [0u8; 10];
    random.copy_from_slice(&hash[..10]);
    let millis = u64::try_from(created_at.timestamp_millis()).unwrap_or(0);
    let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
    uuid.hyphenated()
        .to_string()
        .parse()
        .expect("a hyphenated UUID is a memory id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_mem0_memory_always_gets_the_same_time_ordered_id() {
        let at = DateTime::parse_from_rfc3339("2024-07-20T01:19:47.567-07:00")
            .unwrap()
            .to_utc();
        let one = id_for("892db2ae-06d9-49e5-8b3e-585ef9b85b8e", at);
        assert_eq!(one, id_for("892db2ae-06d9-49e5-8b3e-585ef9b85b8e", at));
        assert_ne!(one, id_for("another", at));
        let later = id_for(
            "892db2ae-06d9-49e5-8b3e-585ef9b85b8e",
            at + chrono::Duration::seconds(1),
        );
        assert!(one.to_string() < later.to_string());
    }
}
