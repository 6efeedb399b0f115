//! `engram consolidate`: one consolidation pass over a repo's and a
//! user's memories (`POST /consolidate`), the repo and the user found as
//! the hooks find them (the working tree's project, the OS user) unless
//! named; prints each change with its reason.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;

use super::hook::project;
use super::http::{self, ServerArgs};
use crate::consolidate::Consolidated;

/// `engram consolidate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ConsolidateArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The repo (default: the current directory's project, as the hooks
    /// find it).
    #[arg(long)]
    pub repo: Option<String>,
    /// The user (default: the OS user, as the hooks find it).
    #[arg(long)]
    pub user: Option<String>,
}

/// Why a pass could not be run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] http::Error),
    #[error("Engram answered something this command cannot read")]
    Answer(#[source] serde_json::Error),
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
}

/// Runs `engram consolidate`.
pub fn run(args: &ConsolidateArgs) -> ExitCode {
    super::exit_with(
        "consolidate failed",
        consolidate(args).map(|consolidated| render(&consolidated)),
    )
}

fn consolidate(args: &ConsolidateArgs) -> Result<Consolidated, Error> {
    let body = request(args, |var| std::env::var(var).ok());
    let api = args.server.api()?;
    let runtime = super::runtime().map_err(Error::Runtime)?;
    let answer = runtime.block_on(api.post("/consolidate", &body))?;
    serde_json::from_value(answer).map_err(Error::Answer)
}

/// The request's owners: the flags, else the hooks' way.
fn request(args: &ConsolidateArgs, env: impl Fn(&str) -> Option<String>) -> Value {
    Value::Object(project::owners(
        args.repo.as_deref(),
        args.user.as_deref(),
        env,
    ))
}

/// What a run of passes did, for a person.
fn render(consolidated: &Consolidated) -> String {
    let mut text = String::new();
    for scanned in &consolidated.scanned {
        let owner = scanned.repo.as_ref().map_or_else(
            || {
                scanned
                    .user
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            },
            ToString::to_string,
        );
        let _ = write!(
            text,
            "{}/{owner}: {} memories weighed",
            scanned.scope, scanned.memories
        );
        if scanned.not_indexed > 0 {
            let _ = write!(text, ", {} not indexed yet", scanned.not_indexed);
        }
        text.push('\n');
    }
    let changes: usize = consolidated
        .passes
        .iter()
        .map(|pass| pass.changes.len())
        .sum();
    if changes == 0 {
        text.push_str("nothing to change\n");
    }
    for pass in &consolidated.passes {
        for (index, change) in pass.changes.iter().enumerate() {
            let action = serde_json::to_value(change.action)
                .ok()
                .and_then(|value| value.as_str().map(str::to_owned))
                .unwrap_or_default();
            let _ = writeln!(text, "{action}: {}", change.reason);
            let _ = writeln!(
                text,
                "  undo: POST /consolidations/{}/undo {{\"changes\": [{index}]}}",
                pass.id
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn owners_named_are_made_ids_and_the_others_found_as_the_hooks_find_them() {
        let args = ConsolidateArgs {
            server: ServerArgs {
                url: http::DEFAULT_URL.to_owned(),
            },
            repo: Some("my project".to_owned()),
            user: None,
        };
        let body = request(&args, |var| (var == "USER").then(|| "ana".to_owned()));
        assert_eq!(body, json!({"repo": "my-project", "user": "ana"}));
    }
}
