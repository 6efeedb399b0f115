//! Drift: does what Engram injects stay true while the code moves? A real
//! git repository evolves over 100 commits while memories about it are
//! written (see `scenario`), then 50 questions are asked twice: as Engram
//! behaved before memories had a lifecycle (nothing checked, nothing let
//! go: everything current is injected), and after the real `engram check`
//! binary judged the anchors against the working tree, a restart let
//! retention run and a consolidation pass went over the repo. For each:
//! the share of injected memories that are stale (their code gone, their
//! fact replaced, a decision they depend on replaced, a dead end), the
//! share of those injected without a note, the share of questions whose
//! right memory is injected, and the tokens injected. Then how many of the
//! memories linked to a replaced decision are flagged for review, and how
//! many others are (before the consolidation pass, whose own changes are
//! counted apart); and `engram check`'s time over stores of 1,000 and
//! 10,000 anchored memories.
//!
//! The memories are captured along the way through the real hooks and a
//! scripted classifier ([`hooks`]), or, with `--capture import`, written
//! through the import with their dates in the past, as the first published
//! figures were.

mod hooks;
mod scenario;
mod tree;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::Utc;
use engram::config::Config;
use engram::memory::{ContentHash, MemoryId};
use engram_fake_upstream::{Chat, Setup, Upstream};
use serde_json::{Value, json};

use self::hooks::Capture;
use self::scenario::{Answer, REPO, Stale, Story};
use self::tree::Tree;
use crate::measure::{Report, Row};
use crate::process::engram_binary;
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};

/// The memories each question may bring in.
const TOP_K: usize = 5;
/// Lines per `POST /memories/import`.
const IMPORT_BATCH: usize = 500;
/// Files of the repository the check is timed in.
const CHECK_FILES: usize = 2_000;
/// Runs of the check timed at each size.
const CHECK_RUNS: usize = 3;

/// `engram-bench drift`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Settings {
    /// The `engram` binary whose `engram check` runs (default: beside this
    /// bench's own binary).
    #[arg(long)]
    pub engram: Option<PathBuf>,
    /// Anchored memories `engram check` is timed over.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    pub check_sizes: Vec<usize>,
    /// `retrieval.review_factor` after the check (default: the service's).
    #[arg(long)]
    pub review_factor: Option<f64>,
    /// Let no unconfirmed memory go after the check
    /// (`retention.provisional_days` 0): what retention's default trades.
    #[arg(long)]
    pub keep_unconfirmed: bool,
    /// How the story's memories are written.
    #[arg(long, value_enum, default_value_t = CaptureBy::Hooks)]
    pub capture: CaptureBy,
}

/// How the story's memories are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CaptureBy {
    /// Captured along the way: `engram hook claude-code stop` after each
    /// turn that states one, a scripted classifier answering.
    Hooks,
    /// `POST /memories/import` with their dates in the past, the new
    /// versions through `POST /memories` at the end.
    Import,
}

/// The service's ids of the story's memories.
struct Ids {
    /// By the story's id.
    of: HashMap<MemoryId, MemoryId>,
    /// Each new version's, by the story's id of the memory it replaced.
    versions: HashMap<MemoryId, MemoryId>,
}

/// What the questions brought in.
#[derive(Debug, Default)]
struct Injected {
    memories: usize,
    stale: usize,
    stale_without_note: usize,
    answerable: usize,
    found: usize,
    tokens: usize,
}

pub async fn drift(report: &mut Report, settings: &Settings) -> Result {
    let engram = engram_binary(settings.engram.as_deref())?;
    let scratch = ScratchDir::new()?;
    let data = ScratchDir::new()?;
    // The hook names the repo after its checkout's directory.
    let dir = scratch.path().join(REPO);
    std::fs::create_dir(&dir)?;
    let (story, ids) = match settings.capture {
        CaptureBy::Hooks => captured(report, &engram, &dir, scratch.path(), data.path()).await?,
        CaptureBy::Import => imported(data.path(), &dir).await?,
    };
    let stale: HashMap<MemoryId, Stale> = story
        .written
        .iter()
        .filter_map(|memory| Some((*ids.of.get(&id_of(&memory.line)?)?, memory.stale?)))
        .collect();
    let linked_to_replaced: Vec<MemoryId> = story
        .linked_to_replaced
        .iter()
        .filter_map(|id| ids.of.get(id).copied())
        .collect();

    // Before: nothing checked and nothing let go.
    let (server, _) =
        Server::start_with(data.path(), EmbedderChoice::Local, before_the_lifecycle).await?;
    let client = server.client();
    let before = ask(&client, &story, &ids, &stale, "before").await?;
    // What retention is to let go: those nobody confirmed.
    let provisional = listed(&client, "confidence=provisional").await?.len();

    // After: `engram check` in the working tree, then a restart with
    // retention's defaults.
    let checked_in = check(&engram, client.base_url(), story.tree.dir())?;
    server.stop().await;
    let (server, _) = Server::start_with(data.path(), EmbedderChoice::Local, |config| {
        if let Some(factor) = settings.review_factor {
            config.retrieval.review_factor = factor;
        }
        if settings.keep_unconfirmed {
            config.retention.provisional_days = 0;
        }
    })
    .await?;
    let client = server.client();
    let let_go = if settings.keep_unconfirmed {
        0
    } else {
        provisional
    };
    wait_archived(&client, let_go).await?;
    let (flagged_linked, flagged_others) = flagged(&client, &linked_to_replaced).await?;
    let (status, consolidated) = client
        .send("POST", "/consolidate", Some(&json!({ "repo": REPO })))
        .await?;
    if status != 200 {
        return Err(format!("the consolidation answered {status}: {consolidated}").into());
    }
    let after = ask(&client, &story, &ids, &stale, "after").await?;
    server.stop().await;

    for (label, injected) in [("before", &before), ("after", &after)] {
        let share = |part: usize, whole: usize| 100.0 * part as f64 / whole.max(1) as f64;
        report.figure(
            format!("drift {label}: stale share of injected memories"),
            share(injected.stale, injected.memories),
            "%",
        );
        report.figure(
            format!("drift {label}: stale and injected without a note"),
            share(injected.stale_without_note, injected.memories),
            "%",
        );
        report.figure(
            format!("drift {label}: right answers injected"),
            share(injected.found, injected.answerable),
            "%",
        );
        report.figure(
            format!("drift {label}: memories injected"),
            injected.memories as f64,
            "memories",
        );
        report.figure(
            format!("drift {label}: tokens injected"),
            injected.tokens as f64,
            "tokens",
        );
    }
    report.figure(
        "drift: memories linked to a replaced decision, flagged",
        flagged_linked as f64,
        &format!("of {}", linked_to_replaced.len()),
    );
    report.figure(
        "drift: other memories flagged",
        flagged_others as f64,
        "memories",
    );
    for action in ["merged", "flagged"] {
        let changes = consolidated["passes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|pass| pass["changes"].as_array().into_iter().flatten())
            .filter(|change| change["action"] == action)
            .count();
        report.figure(
            format!("drift: the consolidation pass, {action}"),
            changes as f64,
            "changes",
        );
    }
    report.figure(
        format!(
            "drift: engram check over the story ({} commits)",
            story.commits
        ),
        checked_in.as_secs_f64() * 1000.0,
        "ms",
    );
    for &size in &settings.check_sizes {
        time_check(report, &engram, size).await?;
    }
    Ok(())
}

fn id_of(line: &Value) -> Option<MemoryId> {
    line["id"].as_str()?.parse().ok()
}

/// Before the lifecycle: nothing let go, and no memory ranked lower for
/// its standing (capture's invalidations put some under review already).
fn before_the_lifecycle(config: &mut Config) {
    config.retention.provisional_days = 0;
    config.retention.unused_days = 0;
    config.retrieval.changed_factor = 1.0;
    config.retrieval.review_factor = 1.0;
    config.retrieval.provisional_factor = 1.0;
}

/// The story played in `dir`, its memories captured through the hooks
/// along the way into the store under `data` (the transcripts and the
/// hook's log under `scratch`).
async fn captured(
    report: &mut Report,
    engram: &Path,
    dir: &Path,
    scratch: &Path,
    data: &Path,
) -> Result<(Story, Ids)> {
    let now = Utc::now();
    let upstream = Upstream::start_with(Setup {
        chat: Chat::Scripted,
        ..Setup::BENCH
    })
    .await;
    let (server, _) =
        Server::start_on(data, EmbedderChoice::Local, &upstream, before_the_lifecycle).await?;
    let mut capture = Capture::new(engram, dir, scratch, &upstream, server.client())?;
    // The modules' memories at the first commit, before anything happens
    // to the modules; the rest once the story has played.
    let beginning = scenario::begin(dir, now)?;
    let modules = beginning.written.len();
    capture.capture(&beginning.written, &[]).await?;
    let story = scenario::go_on(beginning, now)?;
    capture
        .capture(&story.written[modules..], &story.superseding)
        .await?;
    server.wait_indexed().await?;
    server.stop().await;
    let dated = hooks::date_writes_to_the_turns(data, REPO)?;
    report.figure(
        "drift: writes dated to their turns",
        dated as f64,
        "memories",
    );
    report.figure(
        "drift: memories captured through the hook",
        (capture.ids.len() + capture.versions.len()) as f64,
        &format!("of {}", story.written.len() + story.superseding.len()),
    );
    report.figure(
        "drift: captured again in another session, confirmed",
        capture.confirmed as f64,
        "memories",
    );
    report.figure(
        "drift: first captures taken for a near-duplicate",
        capture.merged.len() as f64,
        "memories",
    );
    Ok((
        story,
        Ids {
            of: capture.ids,
            versions: capture.versions,
        },
    ))
}

/// The story played in `dir`, its memories imported into the store under
/// `data` with their dates in the past, the new versions written at the
/// end.
async fn imported(data: &Path, dir: &Path) -> Result<(Story, Ids)> {
    let now = Utc::now();
    let story = scenario::go_on(scenario::begin(dir, now)?, now)?;
    let (server, _) = Server::start_with(data, EmbedderChoice::Local, before_the_lifecycle).await?;
    let client = server.client();
    let lines: Vec<Value> = story.written.iter().map(|m| m.line.clone()).collect();
    import(&client, &lines).await?;
    let versions = supersede(&client, &story).await?;
    server.wait_indexed().await?;
    server.stop().await;
    let of = lines.iter().filter_map(id_of).map(|id| (id, id)).collect();
    Ok((story, Ids { of, versions }))
}

async fn import(client: &Client, lines: &[Value]) -> Result {
    for batch in lines.chunks(IMPORT_BATCH) {
        let (status, answer) = client
            .send(
                "POST",
                "/memories/import",
                Some(&json!({ "memories": batch })),
            )
            .await?;
        if status != 200 {
            return Err(format!("the import answered {status}: {answer}").into());
        }
    }
    Ok(())
}

/// Writes the story's new versions; the id of each, by the one it replaced.
async fn supersede(client: &Client, story: &Story) -> Result<HashMap<MemoryId, MemoryId>> {
    let mut versions = HashMap::new();
    for new in &story.superseding {
        let written = client
            .create(
                &json!({"repo": REPO, "scope": "repo", "category": new.category,
                "content": new.content, "supersedes": new.old.to_string()}),
            )
            .await?;
        let id = written["id"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .ok_or("a new version without an id")?;
        versions.insert(new.old, id);
    }
    Ok(versions)
}

async fn ask(
    client: &Client,
    story: &Story,
    ids: &Ids,
    stale: &HashMap<MemoryId, Stale>,
    round: &str,
) -> Result<Injected> {
    let mut injected = Injected::default();
    for (index, question) in story.questions.iter().enumerate() {
        let result = client
            .retrieve(&json!({"turn_id": format!("{round}-{index}"), "repo": REPO,
                "query": question.text, "top_k": TOP_K}))
            .await?;
        injected.tokens += engram::tokens::count(result["injection"].as_str().unwrap_or(""));
        let mut found = HashSet::new();
        for memory in result["memories"].as_array().into_iter().flatten() {
            if memory["injected"] != true {
                continue;
            }
            let Some(id) = id_of(memory) else { continue };
            found.insert(id);
            injected.memories += 1;
            if stale.contains_key(&id) {
                injected.stale += 1;
                let noted = memory["validity"] == "changed" || memory["needs_review"] == true;
                injected.stale_without_note += usize::from(!noted);
            }
        }
        if let Some(answer) = question.right {
            let right = match answer {
                Answer::Memory(id) => ids.of.get(&id),
                Answer::VersionOf(old) => ids.versions.get(&old),
            };
            injected.answerable += 1;
            let Some(&right) = right else {
                eprintln!(
                    "drift {round}: not injected for {:?}: its right memory was never written",
                    question.text
                );
                continue;
            };
            if found.contains(&right) {
                injected.found += 1;
            } else {
                let (_, memory) = client
                    .send("GET", &format!("/memories/{right}"), None)
                    .await?;
                eprintln!(
                    "drift {round}: not injected for {:?}: the right memory is {}, {}{}",
                    question.text,
                    memory["confidence"],
                    memory["validity"],
                    if memory["archived"] == true {
                        ", archived"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    Ok(injected)
}

/// Runs `engram check` in `dir` against the service at `url`; how long it
/// took.
fn check(engram: &Path, url: &str, dir: &Path) -> Result<Duration> {
    let started = Instant::now();
    let output = Command::new(engram)
        .args(["check", "--repo", REPO, "--dir"])
        .arg(dir)
        .env("ENGRAM_URL", url)
        .env_remove("ENGRAM_API_KEY")
        .output()?;
    let took = started.elapsed();
    if !output.status.success() {
        return Err(format!(
            "engram check failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(took)
}

/// Waits until retention's pass at start archived `count` memories.
async fn wait_archived(client: &Client, count: usize) -> Result {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let archived = listed(client, "archived=true").await?.len();
        if archived >= count {
            return Ok(());
        }
        if Instant::now() > give_up {
            return Err(format!("retention archived {archived} of {count} memories").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The story's memories that `filter` (a query string of `GET /memories`)
/// admits, up to 1,000 (the story holds fewer).
async fn listed(client: &Client, filter: &str) -> Result<Vec<Value>> {
    let (_, listed) = client
        .send(
            "GET",
            &format!("/memories?repo={REPO}&{filter}&limit=1000"),
            None,
        )
        .await?;
    Ok(listed["memories"].as_array().cloned().unwrap_or_default())
}

/// Of the memories under review: those linked to a replaced decision, and
/// the others.
async fn flagged(client: &Client, linked: &[MemoryId]) -> Result<(usize, usize)> {
    let linked: HashSet<MemoryId> = linked.iter().copied().collect();
    let flagged: Vec<MemoryId> = listed(client, "needs_review=true")
        .await?
        .iter()
        .filter_map(id_of)
        .collect();
    let of_linked = flagged.iter().filter(|id| linked.contains(id)).count();
    Ok((of_linked, flagged.len() - of_linked))
}

/// `engram check`'s time over `size` memories anchored to the files of a
/// repository of [`CHECK_FILES`], over [`CHECK_RUNS`] runs.
async fn time_check(report: &mut Report, engram: &Path, size: usize) -> Result {
    let repo = ScratchDir::new()?;
    let data = ScratchDir::new()?;
    let tree = Tree::init(repo.path())?;
    let mut hashes = Vec::with_capacity(CHECK_FILES);
    for file in 0..CHECK_FILES {
        let content = format!(
            "pub fn handler_{file}() -> usize {{\n    {file}\n}}\n{}",
            "// padding\n".repeat(100)
        );
        tree.write(&format!("src/m{}/f{file}.rs", file % 50), &content)?;
        hashes.push(ContentHash::of(content.as_bytes()));
    }
    let head = tree.commit("the files")?;
    let written = Utc::now().to_rfc3339();
    let lines: Vec<Value> = (0..size)
        .map(|serial| {
            let file = serial % CHECK_FILES;
            json!({"id": MemoryId::new().to_string(), "version": 1, "scope": "repo",
                "repo": REPO, "category": "patterns", "created_at": written,
                "updated_at": written, "trigger": "manual", "commit": head,
                "content": format!("handler {serial} answers its file's number."),
                "anchors": [{"path": format!("src/m{}/f{file}.rs", file % 50),
                             "symbol": format!("handler_{file}"),
                             "hash": hashes[file].as_str()}]})
        })
        .collect();
    let (server, _) = Server::start(data.path(), EmbedderChoice::Fake).await?;
    let client = server.client();
    import(&client, &lines).await?;
    server.wait_indexed().await?;
    let mut samples = (0..CHECK_RUNS)
        .map(|_| check(engram, client.base_url(), repo.path()))
        .collect::<Result<Vec<_>>>()?;
    server.stop().await;
    let wall = samples.iter().sum();
    report.rows.push(Row::from_samples(
        "drift: engram check",
        format!("{size} anchored memories, {CHECK_FILES} files"),
        &mut samples,
        wall,
    ));
    Ok(())
}
