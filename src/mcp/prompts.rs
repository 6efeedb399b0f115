//! The prompts a person picks in an MCP client: `prompts/list` and
//! `prompts/get` at `/mcp`.
//!
//! `recall-repo` ("what do you remember about this repo") is the repo's
//! session brief (`POST /retrieve` for a new session with no query: its
//! most important confirmed memories within `inject.session_start_tokens`),
//! run with the caller's key, as a message to the model. `remember-this`
//! asks the model to keep a fact with the `remember` tool. Arguments are
//! strings, checked here: an unknown prompt, an unknown or missing
//! argument, or a bad or not-granted repo is invalid params.

use axum::extract::State;
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, JsonObject, ListPromptsResult, Prompt, PromptArgument, PromptMessage, Role,
};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::memory::RepoId;
use crate::routes::extract::{ApiJson, from_arguments};
use crate::routes::retrieve::{self, RetrieveRequest};
use crate::routes::state::AppState;

const RECALL_REPO: &str = "recall-repo";
const REMEMBER_THIS: &str = "remember-this";

/// The `repo` argument both prompts take.
fn repo_argument() -> PromptArgument {
    PromptArgument::new("repo")
        .with_description("The repo id (default: the service's `defaults.repo`)")
        .with_required(false)
}

/// The answer to `prompts/list`.
pub fn list() -> ListPromptsResult {
    ListPromptsResult::with_all_items(vec![
        Prompt::new(
            RECALL_REPO,
            Some(
                "What do you remember about this repo? Its most important memories, \
                 as Engram's session brief gives them.",
            ),
            Some(vec![repo_argument()]),
        )
        .with_title("What do you remember about this repo?"),
        Prompt::new(
            REMEMBER_THIS,
            Some("Ask the model to keep a fact in Engram with the `remember` tool."),
            Some(vec![
                PromptArgument::new("fact")
                    .with_description("What to remember: one fact, preference or decision")
                    .with_required(true),
                repo_argument(),
            ]),
        )
        .with_title("Remember this"),
    ])
}

/// The answer to `prompts/get` for `name` with `arguments`.
pub async fn get(
    state: &AppState,
    caller: Caller,
    name: &str,
    arguments: Option<JsonObject>,
) -> Result<GetPromptResult, ErrorData> {
    let arguments = Arguments::read(arguments.unwrap_or_default())?;
    match name {
        RECALL_REPO => {
            arguments.only(&["repo"])?;
            recall_repo(state, caller, arguments.repo()?).await
        }
        REMEMBER_THIS => {
            arguments.only(&["fact", "repo"])?;
            let fact = arguments.required("fact")?;
            let repo = arguments.repo()?;
            Ok(remember_this(fact, repo.as_ref()))
        }
        other => Err(ErrorData::invalid_params(
            format!("no prompt named `{other}`"),
            None,
        )),
    }
}

/// A prompt's arguments: strings by name.
struct Arguments(JsonObject);

impl Arguments {
    fn read(arguments: JsonObject) -> Result<Self, ErrorData> {
        if let Some((name, _)) = arguments.iter().find(|(_, value)| !value.is_string()) {
            return Err(invalid(name, "must be a string"));
        }
        Ok(Self(arguments))
    }

    /// Refuses an argument not in `names`.
    fn only(&self, names: &[&str]) -> Result<(), ErrorData> {
        match self.0.keys().find(|name| !names.contains(&name.as_str())) {
            Some(name) => Err(invalid(name, "is not an argument of this prompt")),
            None => Ok(()),
        }
    }

    /// A non-blank argument, if given.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .and_then(Value::as_str)
            .filter(|value| !value.trim().is_empty())
    }

    fn required(&self, name: &str) -> Result<&str, ErrorData> {
        self.get(name)
            .ok_or_else(|| invalid(name, "is required and may not be blank"))
    }

    fn repo(&self) -> Result<Option<RepoId>, ErrorData> {
        self.get("repo")
            .map(|repo| {
                RepoId::try_from(repo.to_owned()).map_err(|err| invalid("repo", &err.to_string()))
            })
            .transpose()
    }
}

fn invalid(argument: &str, why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("argument `{argument}` {why}"),
        Some(json!({"argument": argument})),
    )
}

/// The repo's session brief, as a message.
async fn recall_repo(
    state: &AppState,
    caller: Caller,
    repo: Option<RepoId>,
) -> Result<GetPromptResult, ErrorData> {
    let session = format!("mcp-prompt-{}", uuid::Uuid::now_v7());
    let request = json!({
        "turn_id": session,
        "session_id": session,
        "repo": repo,
        "filters": {"scope": "repo"},
    });
    let refused = |err: crate::error::ApiError| {
        let problem = err.report();
        ErrorData::invalid_params(problem.detail.clone(), Some(json!({"problem": problem})))
    };
    let request: RetrieveRequest = from_arguments(&request).map_err(refused)?;
    let axum::Json(outcome) = retrieve::retrieve_memories(
        State(state.retriever.clone()),
        State(state.config.clone()),
        caller,
        ApiJson(request),
    )
    .await
    .map_err(refused)?;
    let repo = repo.unwrap_or_else(|| state.defaults.repo.clone());
    let text = if outcome.injection.trim().is_empty() {
        format!("What do you remember about the repo {repo}? Engram holds no memories of it yet.")
    } else {
        format!(
            "What do you remember about the repo {repo}? Here is what Engram holds, the most \
             important first:\n\n{}",
            outcome.injection
        )
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("What Engram remembers about repo {repo}")),
    )
}

/// A message asking the model to remember `fact`.
fn remember_this(fact: &str, repo: Option<&RepoId>) -> GetPromptResult {
    let scope = repo.map_or_else(
        || "this project (scope `repo`)".to_owned(),
        |repo| format!("the repo {repo} (scope `repo`, repo `{repo}`)"),
    );
    let text = format!(
        "Remember this with Engram's `remember` tool, for {scope}, or scope `user` if it is \
         about me rather than the project; if a memory already says it, `update_memory` \
         that one instead:\n\n{fact}"
    );
    GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
        .with_description("Keep a fact in Engram")
}
