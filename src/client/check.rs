//! `engram check`: judges the anchors of a repo's memories against a git
//! working tree (the server never sees it) and records what it found with
//! `POST /memories/check`: a memory whose files and symbols are as they
//! were is `current`, one whose file's content changed is `changed`, one
//! whose file or symbol is gone (and not renamed, as git's rename
//! detection sees it) is `gone`. An anchor on a file git found renamed is
//! judged at the new path and comes to name it, so the next check finds
//! the file without git's help (which fails once the file is rewritten).
//!
//! The `SessionStart` hook runs the same check ([`check_repo`]) within a
//! time budget and a bound ([`Bound`]): the longest unchecked memories
//! first, recorded round by round, so what does not fit is checked by the
//! next session.

pub mod git;
mod judge;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use self::git::WorkingTree;
use self::judge::{Anchored, Judgement, ReadError};
use super::hook::project;
use super::http::{self, Api, ServerArgs};
use crate::memory::{CommitId, RepoId};
use crate::routes::check::{CheckRequest, CheckResponse, MAX_RESULTS, Verdict};

/// The largest page `GET /memories` serves.
const PAGE: usize = 1000;

/// `engram check`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The repo whose memories are checked (default: the working tree's
    /// project, as the hooks find it).
    #[arg(long)]
    pub repo: Option<String>,
    /// A directory in the git working tree to check against (default: the
    /// current directory).
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

/// Why a check stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Git(#[from] git::Error),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Api(#[from] http::Error),
    #[error("Engram answered something this command cannot read")]
    Answer(#[source] serde_json::Error),
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
    #[error("judging the anchors")]
    Judge(#[source] tokio::task::JoinError),
}

/// How much of a repo one check judges.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The most anchored memories judged.
    pub memories: usize,
    /// The most judged, then recorded, at a time.
    pub round: usize,
}

impl Bound {
    /// Every anchored memory (`engram check`), recorded in requests of at
    /// most [`MAX_RESULTS`].
    pub const ALL: Self = Self {
        memories: usize::MAX,
        round: MAX_RESULTS,
    };
}

/// What a check did, as it is printed.
pub struct Summary {
    repo: RepoId,
    head: Option<CommitId>,
    judgement: Judgement,
    unknown: usize,
}

/// Runs `engram check`.
pub fn run(args: &CheckArgs) -> ExitCode {
    super::exit_with("check failed", check(args))
}

fn check(args: &CheckArgs) -> Result<Summary, Error> {
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|err| Error::Usage(format!("no current directory: {err}")))?,
    };
    let tree = WorkingTree::holding(&dir)?;
    let head = tree.head()?;
    // Named from git's top directory, which is absolute: `--dir .` has
    // no name of its own.
    let repo = match &args.repo {
        Some(repo) => project::to_id(repo),
        None => project::repo_name(&tree.root),
    }
    .and_then(|repo| repo.parse::<RepoId>().ok())
    .ok_or_else(|| Error::Usage("no repo id: pass --repo".to_owned()))?;
    let api = args.server.api()?;
    let runtime = super::runtime().map_err(Error::Runtime)?;
    runtime.block_on(check_repo(&api, Arc::new(tree), head, repo, Bound::ALL))
}

/// Judges the anchored memories of `repo` against `tree`, whose `HEAD`
/// is `head`, and records the verdicts: the longest unchecked first
/// (never checked, then by `checked_at`), at most `bound.memories` of
/// them, in rounds of `bound.round`, each recorded before the next is
/// judged. So a check cut short keeps what it recorded, and the next one
/// starts with what it left.
pub async fn check_repo(
    api: &Api,
    tree: Arc<WorkingTree>,
    head: Option<CommitId>,
    repo: RepoId,
    bound: Bound,
) -> Result<Summary, Error> {
    let mut anchored = list(api, &repo).await?;
    anchored.sort_by_key(|memory| (memory.checked_at, memory.created_at, memory.id));
    let mut summary = Summary {
        repo,
        head,
        judgement: Judgement::default(),
        unknown: 0,
    };
    anchored.truncate(bound.memories);
    for round in anchored.chunks(bound.round.max(1)) {
        let (tree, round) = (tree.clone(), round.to_vec());
        let judged = tokio::task::spawn_blocking(move || {
            judge::judge(&tree.root, &round, |concerned| renames(&tree, concerned))
        })
        .await
        .map_err(Error::Judge)??;
        summary.unknown += record(api, &summary.repo, summary.head.as_ref(), &judged).await?;
        summary.judgement.results.extend(judged.results);
        summary.judgement.followed.extend(judged.followed);
    }
    Ok(summary)
}

/// The repo's current memories with anchors, from every page of the
/// listing (the server leaves out those without).
async fn list(api: &Api, repo: &RepoId) -> Result<Vec<Anchored>, Error> {
    Ok(api
        .every_page(&format!("/memories?repo={repo}&anchored=true&limit={PAGE}"))
        .await?)
}

/// The renames git finds between the working tree and the commit of the
/// earliest written of `concerned` that this repository knows: one diff
/// for the whole check. None when no such commit is known.
fn renames(tree: &WorkingTree, concerned: &[&Anchored]) -> Result<HashMap<String, String>, Error> {
    let mut dated: Vec<(&CommitId, _)> = concerned
        .iter()
        .filter_map(|memory| Some((memory.commit.as_ref()?, memory.created_at)))
        .collect();
    dated.sort_by_key(|(commit, created_at)| (*created_at, *commit));
    let mut seen = HashSet::new();
    let commits: Vec<&CommitId> = dated
        .into_iter()
        .map(|(commit, _)| commit)
        .filter(|commit| seen.insert(*commit))
        .collect();
    if commits.is_empty() {
        return Ok(HashMap::new());
    }
    let known = tree.known(&commits)?;
    match commits.iter().zip(known).find(|(_, known)| *known) {
        Some((base, _)) => Ok(tree.renames_since(base)?),
        None => Ok(HashMap::new()),
    }
}

/// Records the verdicts, in requests of at most [`MAX_RESULTS`]; returns
/// how many ids the server knew no memory of the repo by.
async fn record(
    api: &Api,
    repo: &RepoId,
    head: Option<&CommitId>,
    judgement: &Judgement,
) -> Result<usize, Error> {
    let mut unknown = 0;
    for results in judgement.results.chunks(MAX_RESULTS) {
        let request = CheckRequest {
            repo: repo.clone(),
            commit: head.cloned(),
            results: results.to_vec(),
        };
        let body = serde_json::to_value(&request).expect("a check request serializes to JSON");
        let answer: CheckResponse =
            serde_json::from_value(api.post("/memories/check", &body).await?)
                .map_err(Error::Answer)?;
        unknown += answer.unknown.len();
    }
    Ok(unknown)
}

impl Summary {
    fn count(&self, verdict: Verdict) -> usize {
        let results = &self.judgement.results;
        results.iter().filter(|r| r.validity == verdict).count()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self
            .head
            .as_ref()
            .map_or_else(String::new, |head| format!(" at {head}"));
        writeln!(
            f,
            "{}{at}: {} current, {} changed, {} gone",
            self.repo,
            self.count(Verdict::Current),
            self.count(Verdict::Changed),
            self.count(Verdict::Gone),
        )?;
        for (old, new) in &self.judgement.followed {
            writeln!(
                f,
                "renamed: {old} -> {new} (judged at its new path, which its memories now name)"
            )?;
        }
        if self.unknown > 0 {
            writeln!(
                f,
                "{} memories were forgotten while they were checked: nothing recorded for them",
                self.unknown
            )?;
        }
        Ok(())
    }
}
