//! The `SessionStart` hook's check of the repo's anchors against the
//! agent's git working tree: `engram check`'s judgement
//! ([`check::check_repo`]), bounded by `--check-limit` memories, the
//! longest unchecked first, and by `--check-ms` of time, so a session
//! never waits long for it; what does not fit is left for the next
//! session. Outside a git working tree (or without git) there is nothing
//! to check, and nothing is said.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::client::check::{self, Bound, git::WorkingTree};
use crate::client::http::Api;
use crate::memory::RepoId;

/// The most memories judged, then recorded, at a time: a check the
/// budget cuts short keeps the rounds it recorded.
const ROUND: usize = 50;

/// Checks `repo`'s anchored memories against the working tree holding
/// `dir`, at most `limit` of them, within `budget`.
pub async fn run(
    api: &Api,
    dir: PathBuf,
    repo: RepoId,
    limit: usize,
    budget: Duration,
) -> Result<(), check::Error> {
    let checked = async {
        let found = tokio::task::spawn_blocking(move || {
            let tree = WorkingTree::holding(&dir).ok()?;
            let head = tree.head();
            Some((tree, head))
        })
        .await
        .map_err(check::Error::Judge)?;
        let Some((tree, head)) = found else {
            return Ok(());
        };
        let bound = Bound {
            memories: limit,
            round: ROUND,
        };
        check::check_repo(api, Arc::new(tree), head?, repo, bound).await?;
        Ok(())
    };
    // Out of time: the rounds recorded stay; the rest is the next
    // session's.
    tokio::time::timeout(budget, checked)
        .await
        .unwrap_or(Ok(()))
}
