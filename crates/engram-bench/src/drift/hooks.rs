//! The story's memories captured as real use captures them: each memory
//! is a turn of a Claude Code session, written to its JSON Lines
//! transcript with the turn's time, and the real `engram hook claude-code
//! stop` runs in the story's working tree, so that the service gets the
//! window, the tree's `HEAD` and the files the turn's tool calls read,
//! hashed. The classifier is the scripted fake upstream: it answers each
//! turn with the memory the turn states, naming the module file it read
//! and the function the fact is about (the anchor), the decision a consequence depends on (`related`) and
//! the memory a new version replaces (`supersedes`), as a model does from
//! the existing memories its prompt lists.
//!
//! A fact the story holds confirmed is captured again in a session a day
//! later: the near-duplicate guard then confirms the provisional memory
//! the first capture wrote. A provisional one (an unconfirmed module fact,
//! a dead end) is captured once.
//!
//! The whole story is captured in minutes, while its turns are dated over
//! 100 days: each memory carries its turn's time (`observed_at`), but its
//! write is now, and retention counts a provisional memory's days from
//! its write. With the service stopped, [`date_writes_to_the_turns`]
//! dates each write to its turn, as the story's days would have.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use engram::memory::{MemoryId, Namespace};
use engram::store::markdown;
use engram_fake_upstream::Upstream;
use serde_json::{Value, json};

use super::scenario::{Superseding, Written};
use crate::capture_cost::settled;
use crate::server::Client;
use crate::workload::Result;

/// The longest a turn's capture may take before the run gives up.
const CAPTURE_TIMEOUT: Duration = Duration::from_secs(60);

/// One turn that states a fact.
#[derive(Clone)]
struct Turn {
    /// The story's id of the memory it states, or of the one a new
    /// version replaces.
    story: MemoryId,
    new_version: bool,
    at: DateTime<Utc>,
    /// Whether this is the fact's second capture, a day after the first.
    again: bool,
    content: String,
    category: String,
    /// The module file the turn reads, repo-relative.
    file: Option<String>,
    /// The function of it the fact is about, which the turn names.
    symbol: Option<String>,
    /// The story's ids of the memories it depends on.
    depends_on: Vec<MemoryId>,
}

/// Capture through the hooks, and what it wrote.
pub struct Capture<'a> {
    engram: &'a Path,
    tree: PathBuf,
    transcripts: PathBuf,
    log: PathBuf,
    upstream: &'a Upstream,
    client: Client,
    /// Turns captured so far (each one a trigger).
    turns: usize,
    /// The service's id of each story memory captured.
    pub ids: HashMap<MemoryId, MemoryId>,
    /// The service's id of each new version, by the story's id of the
    /// memory it replaced.
    pub versions: HashMap<MemoryId, MemoryId>,
    /// Captures confirming a memory a first capture wrote.
    pub confirmed: usize,
    /// First captures the guard took for a near-duplicate of another
    /// memory: (what was said, the memory it was taken for).
    pub merged: Vec<(String, MemoryId)>,
}

impl<'a> Capture<'a> {
    /// Capture into the service `client` talks to, whose classifier is
    /// `upstream`, from the working tree `tree`, with the transcripts and
    /// the hook's log under `scratch`.
    pub fn new(
        engram: &'a Path,
        tree: &Path,
        scratch: &Path,
        upstream: &'a Upstream,
        client: Client,
    ) -> Result<Self> {
        let transcripts = scratch.join("transcripts");
        std::fs::create_dir_all(&transcripts)?;
        Ok(Self {
            engram,
            tree: tree.to_owned(),
            transcripts,
            log: scratch.join("hook.log"),
            upstream,
            client,
            turns: 0,
            ids: HashMap::new(),
            versions: HashMap::new(),
            confirmed: 0,
            merged: Vec::new(),
        })
    }

    /// Captures `written` (and `superseding`), the facts held confirmed
    /// twice, in time order.
    pub async fn capture(&mut self, written: &[Written], superseding: &[Superseding]) -> Result {
        let mut turns = Vec::new();
        for memory in written {
            let line = &memory.line;
            let turn = Turn {
                story: line["id"].as_str().ok_or("a line without an id")?.parse()?,
                new_version: false,
                at: moment(&line["created_at"])?,
                again: false,
                content: text(&line["content"])?,
                category: text(&line["category"])?,
                file: line["anchors"][0]["path"].as_str().map(str::to_owned),
                symbol: line["anchors"][0]["symbol"].as_str().map(str::to_owned),
                depends_on: line["related"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|edge| edge["id"].as_str()?.parse().ok())
                    .collect(),
            };
            let confirmed = line["confidence"] != "provisional";
            push_with_again(&mut turns, turn, confirmed);
        }
        for new in superseding {
            let turn = Turn {
                story: new.old,
                new_version: true,
                at: DateTime::parse_from_rfc3339(&new.at)?.to_utc(),
                again: false,
                content: new.content.clone(),
                category: new.category.to_owned(),
                file: None,
                symbol: None,
                depends_on: Vec::new(),
            };
            push_with_again(&mut turns, turn, true);
        }
        turns.sort_by_key(|turn| turn.at);
        for turn in &turns {
            self.turn(turn).await?;
        }
        Ok(())
    }

    async fn turn(&mut self, turn: &Turn) -> Result {
        let session = format!(
            "drift-{}-{}",
            turn.at.format("%Y%m%d"),
            if turn.again { "again" } else { "first" }
        );
        let transcript = self.transcripts.join(format!("{session}.jsonl"));
        self.write_turn(&transcript, &session, turn)?;
        let mut memory = json!({"content": turn.content, "scope": "repo",
            "category": turn.category});
        if let Some(file) = &turn.file {
            memory["files"] = json!([{"path": file, "symbol": turn.symbol}]);
        }
        if !turn.again {
            let related: Vec<Value> = turn
                .depends_on
                .iter()
                .filter_map(|story| self.ids.get(story))
                .map(|id| json!({"id": id.to_string(), "relationship": "depends-on"}))
                .collect();
            if !related.is_empty() {
                memory["related"] = json!(related);
            }
            if turn.new_version
                && let Some(old) = self.ids.get(&turn.story)
            {
                memory["supersedes"] = json!(old.to_string());
            }
        }
        self.upstream.set_chat(
            engram_fake_upstream::Behaviour::Answer,
            &json!([memory]).to_string(),
        );
        self.run_hook(&session, &transcript)?;
        self.turns += 1;
        self.settled().await?;
        let id = self.current_id_of(&turn.content).await?;
        let known = if turn.new_version {
            self.versions.get(&turn.story)
        } else {
            self.ids.get(&turn.story)
        };
        match (turn.again, id, known) {
            (true, Some(id), Some(&first)) if id == first => self.confirmed += 1,
            (true, _, _) => eprintln!(
                "drift: the second capture of {:?} confirmed nothing the first wrote",
                turn.content
            ),
            (false, Some(id), _) => {
                let ids = if turn.new_version {
                    &mut self.versions
                } else {
                    &mut self.ids
                };
                ids.insert(turn.story, id);
            }
            (false, None, _) => {
                let taken_for = self.nearest(&turn.content).await?;
                eprintln!(
                    "drift: {:?} was taken for a near-duplicate of {taken_for}",
                    turn.content
                );
                self.merged.push((turn.content.clone(), taken_for));
            }
        }
        Ok(())
    }

    /// Appends the turn to its session's transcript: the user's question,
    /// the assistant reading the module file (when there is one) and its
    /// answer stating the fact, each line stamped with the turn's time.
    fn write_turn(&self, transcript: &Path, session: &str, turn: &Turn) -> Result {
        let stamp = |seconds: i64| (turn.at + TimeDelta::seconds(seconds)).to_rfc3339();
        let line = |kind: &str, content: Value, seconds: i64| {
            json!({"type": kind, "sessionId": session, "cwd": self.tree,
                "timestamp": stamp(seconds), "message": {"role": kind, "content": content}})
        };
        let mut lines = Vec::new();
        match &turn.file {
            Some(file) => {
                lines.push(line("user", json!(format!("What does {file} do?")), 0));
                let call = format!("toolu_{}", self.turns);
                let path = self.tree.join(file);
                lines.push(line(
                    "assistant",
                    json!([{"type": "tool_use", "id": call, "name": "Read",
                        "input": {"file_path": path}}]),
                    2,
                ));
                lines.push(line(
                    "user",
                    json!([{"type": "tool_result", "tool_use_id": call,
                        "content": std::fs::read_to_string(&path)?}]),
                    3,
                ));
                lines.push(line(
                    "assistant",
                    json!([{"type": "text", "text": turn.content}]),
                    5,
                ));
            }
            None => {
                lines.push(line("user", json!(turn.content), 0));
                lines.push(line(
                    "assistant",
                    json!([{"type": "text", "text": "Noted; I will keep to it."}]),
                    2,
                ));
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(transcript)?;
        for line in lines {
            writeln!(file, "{line}")?;
        }
        Ok(())
    }

    /// Runs `engram hook claude-code stop` in the working tree, as Claude
    /// Code runs it at the end of a turn.
    fn run_hook(&self, session: &str, transcript: &Path) -> Result {
        let input = json!({"session_id": session, "transcript_path": transcript,
            "cwd": self.tree, "hook_event_name": "Stop", "stop_hook_active": false});
        let mut hook = Command::new(self.engram)
            .args(["hook", "claude-code", "stop", "--log-file"])
            .arg(&self.log)
            .current_dir(&self.tree)
            .env("ENGRAM_URL", self.client.base_url())
            .env_remove("ENGRAM_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        hook.stdin
            .take()
            .ok_or("the hook's standard input")?
            .write_all(input.to_string().as_bytes())?;
        if !hook.wait()?.success() {
            return Err("the hook failed".into());
        }
        Ok(())
    }

    /// Waits until every turn sent so far was classified, for at most
    /// [`CAPTURE_TIMEOUT`].
    async fn settled(&self) -> Result {
        match tokio::time::timeout(CAPTURE_TIMEOUT, settled(&self.client, self.turns)).await {
            Ok(done) => done,
            Err(_) => {
                let (_, stats) = self.client.send("GET", "/stats", None).await?;
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                Err(format!(
                    "turn {} was not captured: {}; {log}",
                    self.turns, stats["capture"]
                )
                .into())
            }
        }
    }

    /// The current memory of the repo that says `content`, if one does.
    async fn current_id_of(&self, content: &str) -> Result<Option<MemoryId>> {
        Ok(super::listed(&self.client, "all_versions=false")
            .await?
            .iter()
            .find(|memory| memory["content"] == content)
            .and_then(super::id_of))
    }

    /// The memory a retrieval of `content` ranks first.
    async fn nearest(&self, content: &str) -> Result<MemoryId> {
        let found = self
            .client
            .retrieve(&json!({"turn_id": format!("nearest-{}", self.turns), "repo": super::scenario::REPO, "query": content, "top_k": 1}))
            .await?;
        Ok(found["memories"][0]["id"]
            .as_str()
            .ok_or("nothing near")?
            .parse()?)
    }
}

/// Adds `turn`, and when the fact is held confirmed, its capture again
/// in another session a day later.
fn push_with_again(turns: &mut Vec<Turn>, turn: Turn, confirmed: bool) {
    if confirmed {
        turns.push(Turn {
            at: turn.at + TimeDelta::days(1),
            again: true,
            ..turn.clone()
        });
    }
    turns.push(turn);
}

fn moment(value: &Value) -> Result<DateTime<Utc>> {
    Ok(DateTime::parse_from_rfc3339(value.as_str().ok_or("no time")?)?.to_utc())
}

fn text(value: &Value) -> Result<String> {
    Ok(value.as_str().ok_or("no text")?.to_owned())
}

/// Dates the write of every memory of `repo` in the (stopped) service's
/// data directory `data` to when it was said (its `observed_at`); how
/// many were dated.
pub fn date_writes_to_the_turns(data: &Path, repo: &str) -> Result<usize> {
    let namespace = Namespace::Repo(repo.parse()?);
    let mut dated = 0;
    for entry in std::fs::read_dir(data.join("repos").join(repo))? {
        let path = entry?.path();
        if path.extension().is_none_or(|extension| extension != "md") {
            continue;
        }
        let mut memory = markdown::parse(&std::fs::read_to_string(&path)?, namespace.clone())?;
        let Some(said) = memory.observed_at else {
            continue;
        };
        memory.created_at = said;
        memory.updated_at = said;
        std::fs::write(&path, markdown::render(&memory))?;
        dated += 1;
    }
    Ok(dated)
}
