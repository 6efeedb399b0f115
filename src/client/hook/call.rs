//! One hook's call to Engram: the request each event makes, and what the
//! agent is told of its answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::touched::Touched;
use super::transcript::{self, Message, Role};
use super::{
    Error, Found, GUIDANCE, HookArgs, Payload, cursor, log, project, remember, tree_check, what,
};
use crate::capture::queue::MAX_TOUCHED_FILES;
use crate::causes::error_chain;
use crate::client::agent::{Agent, ContextOutput, Event, Hooks, PromptHook};
use crate::client::http::{self, Api};
use crate::memory::MAX_ANCHORS;

/// The longest turn id Engram accepts.
const MAX_TURN_ID_CHARS: usize = 256;

/// The importance of a memory the user asked for in so many words: above
/// the neutral default, as nothing says more clearly that it matters.
const REQUESTED_IMPORTANCE: f64 = 0.8;

/// The most of a remembered fact the confirmation repeats, in characters.
const CONFIRMATION_CHARS: usize = 160;

/// The problem type of `POST /turns` and `/compactions` with no classifier.
const CAPTURE_DISABLED: &str = "urn:engram:problem:capture-disabled";

/// What the log says, once, when capture turns out to be agent-driven.
const AGENT_DRIVEN_NOTE: &str = "note: capture is agent-driven (Engram has no `llm` \
configured), so turns and compactions are not classified; memories come from the \
`remember` tool and `remember:` prompts. Not an error; said once.";

/// One hook's call to Engram: where, as whom, for which namespaces.
pub(super) struct Call {
    api: Api,
    session_id: String,
    repo: Option<String>,
    user: Option<String>,
    window: Result<Vec<Message>, Error>,
    /// What the turn touched in its working tree, for capture's anchors.
    touched: Option<Touched>,
    agent: Agent,
    hooks: &'static Hooks,
    log_path: Option<PathBuf>,
}

impl Call {
    /// The call as far as the arguments and the environment say; the rest
    /// comes from [`Call::found`].
    pub(super) fn new(
        args: &HookArgs,
        hooks: &'static Hooks,
        payload: &Payload,
        env: impl Fn(&str) -> Option<String>,
        log_path: Option<&Path>,
    ) -> Result<Self, Error> {
        let session = payload.session()?;
        let session_id =
            project::to_id(session).ok_or_else(|| Error::SessionId(session.to_owned()))?;
        let user = match &args.user {
            Some(user) => project::to_id(user),
            None => project::env_user(&env),
        };
        // The time budget is enforced around the whole call, not here.
        let api = Api::new(
            &args.url,
            env("ENGRAM_API_KEY").filter(|key| !key.is_empty()),
        )?;
        Ok(Self {
            api,
            session_id,
            repo: None,
            user,
            window: Ok(Vec::new()),
            touched: None,
            agent: args.agent,
            hooks,
            log_path: log_path.map(Path::to_path_buf),
        })
    }

    /// The session id, as an Engram id.
    pub(super) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whether `--user` or the environment named the user.
    pub(super) fn names_a_user(&self) -> bool {
        self.user.is_some()
    }

    /// Takes in what was read; says once in the log when no user name
    /// was found anywhere, since the user's memories are then the default
    /// user's.
    pub(super) fn found(&mut self, found: Found, event: Event) {
        self.repo = found.repo;
        self.user = self.user.take().or(found.user);
        self.window = found.window;
        self.touched = found.touched;
        if let Some(err) = found.kept_prompt_error {
            self.log(
                event,
                &format!("Cursor's prompt, kept for its answer: {err}"),
            );
        }
        if found.user_looked_up
            && self.user.is_none()
            && let Some(path) = &self.log_path
        {
            let reason = format!(
                "no user name (USER and LOGNAME are unset and uid {} is not in /etc/passwd): \
                 the service's default user is used; pass --user to choose one",
                rustix::process::getuid().as_raw()
            );
            log::append_once(path, &what(self.agent, event), &reason);
        }
    }

    pub(super) async fn run(
        &mut self,
        args: &HookArgs,
        payload: &Payload,
    ) -> Result<Option<String>, Error> {
        let mut window = std::mem::replace(&mut self.window, Ok(Vec::new()))?;
        match args.event {
            // A prompt hook that cannot add context (Cursor's) stores what
            // a `remember:` prompt asks (a failure is logged by `remember`)
            // and lets the prompt go on.
            Event::UserPromptSubmit if self.hooks.prompt == PromptHook::KeepsForTheAnswer => {
                if let Some(request) = payload.prompt.as_deref().and_then(remember::parse) {
                    self.remember(&request, args.event).await;
                }
                Ok(Some(cursor::CONTINUE.to_owned()))
            }
            Event::UserPromptSubmit => {
                if let Some(prompt) = &payload.prompt {
                    append_unless_last(&mut window, Role::User, prompt);
                }
                if window.is_empty() {
                    return Ok(None);
                }
                let turn_id = turn_id(payload, &self.session_id, &window);
                // The session's: what an earlier prompt or the brief put
                // in the agent's context is not injected again.
                let body = json!({
                    "turn_id": turn_id,
                    "session_id": self.session_id,
                    "messages": wire(&window),
                });
                let Some(request) = payload.prompt.as_deref().and_then(remember::parse) else {
                    let injection = self.retrieve(args.event, body).await?;
                    return Ok(injection.map(|text| self.context(args.event, &text)));
                };
                // The retrieval before the write: what is remembered now is
                // told by the confirmation, and a retrieval that raced the
                // write would inject it once more, or not, by chance (and,
                // injected, never again this session).
                let retrieved = self.retrieve(args.event, body).await;
                let confirmation = self.remember(&request, args.event).await;
                let injection = retrieved.unwrap_or_else(|err| {
                    self.log(args.event, &error_chain(&err));
                    None
                });
                let text = match injection {
                    Some(injection) => format!("{confirmation}\n\n{injection}"),
                    None => confirmation,
                };
                Ok(Some(self.context(args.event, &text)))
            }
            Event::SessionStart => {
                // The session's brief: no query, so the most important
                // confirmed memories, and the session begins anew (a
                // resumed or compacted context holds nothing injected
                // before).
                let body = json!({
                    "turn_id": turn_id(payload, &self.session_id, &window),
                    "session_id": self.session_id,
                });
                // Side by side: the session waits for the slower one,
                // and the check's budget is the smaller.
                let (retrieved, ()) = tokio::join!(
                    self.retrieve(args.event, body),
                    self.check_tree(args, payload)
                );
                let text = match retrieved? {
                    Some(injection) => format!("{GUIDANCE}\n\n{injection}"),
                    None => GUIDANCE.to_owned(),
                };
                Ok(Some(self.context(args.event, &text)))
            }
            Event::Stop | Event::PreCompact => {
                if let Some(answer) = &payload.last_assistant_message {
                    append_unless_last(&mut window, Role::Assistant, answer);
                }
                // A compaction of a context where nothing was said yet is
                // nothing to hand over: Gemini CLI asks its hook before
                // every turn, the first one included, whether or not it
                // then compresses.
                if window.is_empty() && args.event == Event::PreCompact {
                    return Ok(None);
                }
                if window.is_empty() {
                    return Err(Error::EmptyWindow);
                }
                let path = if args.event == Event::Stop {
                    "/turns"
                } else {
                    "/compactions"
                };
                let mut body = json!({
                    "session_id": self.session_id,
                    "turn_id": turn_id(payload, &self.session_id, &window),
                    "messages": wire(&window),
                });
                if let Some(touched) = &self.touched {
                    add_touched(&mut body, touched, "files", MAX_TOUCHED_FILES);
                }
                if let Some(at) = transcript::latest_time(&window) {
                    body["observed_at"] = json!(at);
                }
                match self.post(path, body).await {
                    Err(Error::Api(http::Error::Status {
                        problem: Some(problem),
                        ..
                    })) if problem == CAPTURE_DISABLED => {
                        if let Some(log_path) = &self.log_path {
                            log::append_once(log_path, self.agent.as_str(), AGENT_DRIVEN_NOTE);
                        }
                        Ok(None)
                    }
                    answered => answered.map(|_| None),
                }
            }
        }
    }

    /// `POST /retrieve`: its injection, if it holds one.
    async fn retrieve(&self, event: Event, body: Value) -> Result<Option<String>, Error> {
        let answer = self.post("/retrieve", body).await?;
        if let Some(reason) = answer["degraded"].as_str() {
            self.log(event, &format!("retrieval degraded: {reason}"));
        }
        let injection = answer["injection"].as_str().unwrap_or_default();
        Ok((!injection.trim().is_empty()).then(|| injection.to_owned()))
    }

    /// Checks the repo's anchors against the agent's working tree
    /// ([`tree_check`]); a failure is logged, and changes nothing else.
    async fn check_tree(&self, args: &HookArgs, payload: &Payload) {
        let repo = self.repo.as_deref().and_then(|repo| repo.parse().ok());
        let (Some(dir), Some(repo)) = (payload.working_dir(), repo) else {
            return;
        };
        if args.check_ms == 0 {
            return;
        }
        let budget = Duration::from_millis(args.check_ms);
        if let Err(err) = tree_check::run(&self.api, dir, repo, args.check_limit, budget).await {
            self.log(args.event, &error_chain(&Error::Check(err)));
        }
    }

    /// `POST /memories` for a `remember:` prompt, and the one line that
    /// tells the agent what became of it. Engram's refusals of the content
    /// (a secret, a near-duplicate, a field out of bounds) are told with
    /// Engram's reason; any other failure is logged as well, and one
    /// without an answer from Engram is told without details.
    async fn remember(&self, request: &remember::Request<'_>, event: Event) -> String {
        if request.content.is_empty() {
            return "Engram remembered nothing: nothing follows `remember:`.".to_owned();
        }
        let content = remember::told_of_the_user(request.content);
        let mut body = json!({
            "scope": request.scope,
            "category": request.category(),
            "content": content,
            "importance": REQUESTED_IMPORTANCE,
            "session_id": self.session_id,
            "dedupe": true,
        });
        // Found only for the project's memories: the files it names.
        if let Some(touched) = &self.touched {
            add_touched(&mut body, touched, "anchors", MAX_ANCHORS);
        }
        match self.post("/memories", body).await {
            Ok(memory) => {
                let scope = memory["scope"].as_str().unwrap_or_default();
                let owner = memory[scope].as_str().unwrap_or_default();
                format!(
                    "Engram remembered this for {scope} {owner} as {} (memory {}): {}. It is \
                     stored; there is no need to call `remember` for it.",
                    memory["category"].as_str().unwrap_or_default(),
                    memory["id"].as_str().unwrap_or_default(),
                    crate::memory::excerpt(&content, CONFIRMATION_CHARS),
                )
            }
            // What was said is at fault (a secret, a duplicate, too long):
            // the agent is told, and nothing went wrong with the hook.
            Err(Error::Api(http::Error::Status {
                status: 409 | 422,
                detail,
                ..
            })) => format!("Engram did not remember this: {detail}"),
            Err(err) => {
                self.log(event, &error_chain(&err));
                match err {
                    Error::Api(http::Error::Status { status, detail, .. })
                        if (400..500).contains(&status) =>
                    {
                        format!("Engram did not remember this: {detail}")
                    }
                    _ => "Engram could not store this (see Engram's hook log): it is not \
                          remembered."
                        .to_owned(),
                }
            }
        }
    }

    /// The agent's output that adds `text` to its context.
    fn context(&self, event: Event, text: &str) -> String {
        let output = match self.hooks.context {
            ContextOutput::AdditionalContext => json!({"additional_context": text}),
            ContextOutput::HookSpecific => json!({"hookSpecificOutput": {
                "hookEventName": self.hooks.name(event),
                "additionalContext": text,
            }}),
        };
        output.to_string()
    }

    /// Appends `reason` to the log, if there is one.
    fn log(&self, event: Event, reason: &str) {
        if let Some(path) = &self.log_path {
            log::append(path, &what(self.agent, event), reason);
        }
    }

    /// Posts `body` with the namespaces added.
    async fn post(&self, path: &str, mut body: Value) -> Result<Value, Error> {
        if let Some(repo) = &self.repo {
            body["repo"] = json!(repo);
        }
        if let Some(user) = &self.user {
            body["user"] = json!(user);
        }
        Ok(self.api.post(path, &body).await?)
    }
}

/// Adds the tree's `HEAD` to `body` as `commit`, and at most `most` of
/// the files found as `field` (an anchor and a touched file share their
/// shape: `path`, `hash`).
fn add_touched(body: &mut Value, touched: &Touched, field: &str, most: usize) {
    if let Some(commit) = &touched.commit {
        body["commit"] = json!(commit);
    }
    if !touched.files.is_empty() {
        let files = &touched.files[..touched.files.len().min(most)];
        body[field] = json!(files);
    }
}

/// Adds `text` as the window's last message unless it already is (the
/// agent may have written it to the transcript before the hook ran).
fn append_unless_last(window: &mut Vec<Message>, role: Role, text: &str) {
    let text = text.trim();
    let already = window
        .last()
        .is_some_and(|last| last.role == role && last.text.ends_with(text));
    if !text.is_empty() && !already {
        window.push(Message {
            role,
            text: text.to_owned(),
            at: None,
        });
    }
    let cut = transcript::cut_to_budget(std::mem::take(window), transcript::MAX_WINDOW_BYTES);
    *window = cut;
}

/// The turn id: the agent's own where it gives one (Codex), else one
/// derived from the session and the window up to its last user message, so
/// the prompt's retrieval and the end of the same turn agree, and the next
/// prompt gets a new one.
fn turn_id(payload: &Payload, session_id: &str, window: &[Message]) -> String {
    if let Some(id) = payload.turn_id.as_deref().map(str::trim)
        && !id.is_empty()
        && id.chars().count() <= MAX_TURN_ID_CHARS
    {
        return id.to_owned();
    }
    let end = window
        .iter()
        .rposition(|message| message.role == Role::User)
        .map_or(0, |last| last + 1);
    let mut hasher = Sha256::new();
    hasher.update(session_id.as_bytes());
    for message in &window[..end] {
        hasher.update([0]);
        hasher.update(message.role.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(message.text.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("{session_id}-{hex}")
}

/// The window as chat messages for Engram.
fn wire(window: &[Message]) -> Vec<Value> {
    window
        .iter()
        .map(|message| json!({"role": message.role.as_str(), "content": message.text}))
        .collect()
}
