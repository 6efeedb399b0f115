//! `engram hook <agent> <event>`: a coding agent's lifecycle hook. It reads
//! the hook's JSON on stdin, calls a running Engram over HTTP, and prints
//! what the agent reads back, mapping the agent's hooks onto the seed
//! design's triggers:
//!
//! | event | Engram call | printed |
//! | --- | --- | --- |
//! | `UserPromptSubmit` | `POST /retrieve` with the window and the new prompt | the injection as `additionalContext` |
//! | the same, for a `remember:` prompt ([`remember`]) | also `POST /memories` (with `dedupe`) | one line on what was stored, or why not, then the injection |
//! | `SessionStart` | `POST /retrieve` with the window, or a query for the project when it is empty | [`GUIDANCE`], then the injection |
//! | `Stop` (a turn ended) | `POST /turns` with the window | nothing |
//! | `PreCompact` | `POST /compactions` with the window | nothing |
//!
//! With no classifier configured, Engram refuses turns and compactions
//! (`409 capture-disabled`: capture is agent-driven); the hook says so once
//! in its log and treats it as done, since that is the service's setting,
//! not a failure. The guidance at `SessionStart` is printed whatever the
//! mode, since the hook reads no server configuration.
//!
//! The window is the transcript since its last compaction, reduced to user
//! and assistant text (see [`transcript`]).
//!
//! Documented hook input fields relied on (Claude Code's hooks reference;
//! Codex's hooks take the same shape and add `turn_id`): `session_id`,
//! `transcript_path` (JSON Lines; may be null for Codex), `cwd`,
//! `hook_event_name`, `prompt` (`UserPromptSubmit`), `last_assistant_message`
//! (`Stop`, where given), `turn_id` (Codex). Unknown fields are ignored.
//! Documented output relied on: exit code 0 with
//! `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}` on
//! stdout adds context for `UserPromptSubmit` and `SessionStart`; exit 0
//! with nothing on stdout changes nothing for `Stop` and `PreCompact`.
//!
//! Invariant: a hook never harms the agent. Whatever fails (bad stdin, an
//! unreadable transcript, Engram down, a bad key, a 4xx or 5xx, the time
//! budget running out), the hook prints nothing, exits 0, and appends one
//! line with the reason to its log ([`log`]); only a `remember:` prompt's
//! outcome is always told, in one line, so that the agent never believes
//! a fact stored that was not. It loads no model and reads
//! no server configuration; one current-thread runtime serves its one
//! request, all within `--timeout-ms`, reading files included: the
//! transcript and `.git` are read through [`bounded`] (regular files only,
//! opened without blocking, the transcript's last 8 MiB at most).

pub mod bounded;
pub mod log;
pub mod project;
pub mod remember;
pub mod transcript;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::causes::error_chain;
use transcript::{Format, Message, Role};

/// Where Engram listens unless `--url` or `ENGRAM_URL` says otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// The most hook input read from stdin.
const MAX_STDIN_BYTES: u64 = 16 * 1024 * 1024;

/// The longest turn id Engram accepts.
const MAX_TURN_ID_CHARS: usize = 256;

/// What `SessionStart` tells the agent is worth remembering, before any
/// memories: a few lines, since it costs context in every session.
pub const GUIDANCE: &str = "Engram keeps long-term memory across sessions. When the user \
states a preference or a project convention, makes a decision (and why), or corrects you, \
save it with Engram's `remember` tool: one fact per memory, scope `repo` for this project, \
`user` for the person; if a memory already says it, `update_memory` instead. Not what the \
code or git records, never secrets. The user may also type `remember: …` (or \
`remember for me: …`) to store a fact directly.";

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

/// A coding agent whose hooks Engram serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex CLI.
    Codex,
}

impl Agent {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
        }
    }

    fn transcript_format(self) -> Format {
        match self {
            Self::ClaudeCode => Format::ClaudeCode,
            Self::Codex => Format::Codex,
        }
    }
}

/// A hook event Engram answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Event {
    /// A session starts, resumes or restarts after a compaction.
    SessionStart,
    /// The user sent a prompt; the agent has not answered yet.
    UserPromptSubmit,
    /// The agent finished its answer: a turn completed.
    Stop,
    /// The agent is about to compact its context.
    PreCompact,
}

impl Event {
    /// Every event, in the order a session meets them.
    pub const ALL: [Self; 4] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::Stop,
        Self::PreCompact,
    ];

    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "session-start",
            Self::UserPromptSubmit => "user-prompt-submit",
            Self::Stop => "stop",
            Self::PreCompact => "pre-compact",
        }
    }

    /// The event's name in the agents' configuration and hook input.
    pub fn hook_event_name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::PreCompact => "PreCompact",
        }
    }
}

/// `engram hook`'s arguments. The API key comes only from `ENGRAM_API_KEY`.
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The agent running the hook.
    #[arg(value_enum)]
    pub agent: Agent,
    /// The hook event.
    #[arg(value_enum)]
    pub event: Event,
    /// Engram's base URL.
    #[arg(long, env = "ENGRAM_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// The repo id (default: the git checkout's directory name of the agent's cwd).
    #[arg(long)]
    pub repo: Option<String>,
    /// The user id (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
    /// The most the hook may take in all, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
    /// The failure log (default: $XDG_STATE_HOME/engram/hook.log, else
    /// ~/.local/state/engram/hook.log).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// Why a hook did nothing. Logged, never shown to the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the hook input")]
    Stdin(#[source] io::Error),
    #[error("the hook input is not the JSON expected")]
    Payload(#[source] serde_json::Error),
    #[error("the hook input is for {found}, but the command says {expected}")]
    WrongEvent {
        found: String,
        expected: &'static str,
    },
    #[error("the session id {0:?} cannot become an Engram id")]
    SessionId(String),
    #[error("reading the transcript {path}")]
    Transcript {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("nothing to capture: the transcript holds no user or assistant text")]
    EmptyWindow,
    #[error("starting the runtime")]
    Runtime(#[source] io::Error),
    #[error("reading the project and the transcript")]
    Read(#[source] tokio::task::JoinError),
    #[error("building the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("calling {url}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {status}: {detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
        /// The problem document's `type`, when the answer is one.
        problem: Option<String>,
    },
    #[error("{url} answered 2xx with a body that is not JSON")]
    Answer {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("writing the answer to stdout")]
    Stdout(#[source] io::Error),
}

/// The hook input fields Engram reads; the rest are ignored.
#[derive(Debug, Deserialize)]
struct Payload {
    session_id: String,
    #[serde(default)]
    transcript_path: Option<PathBuf>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    last_assistant_message: Option<String>,
    #[serde(default)]
    turn_id: Option<String>,
}

/// Runs the hook on this process's stdin and stdout. Always exits 0.
pub fn run(args: &HookArgs) -> ExitCode {
    let env = |var: &str| std::env::var(var).ok();
    let log_path = args.log_file.clone().or_else(|| log::default_path(env));
    let outcome = read_stdin()
        .and_then(|input| answer(args, &input, env, log_path.as_deref()))
        .and_then(|printed| match printed {
            Some(text) => writeln!(io::stdout().lock(), "{text}").map_err(Error::Stdout),
            None => Ok(()),
        });
    if let (Err(err), Some(path)) = (outcome, &log_path) {
        log::append(path, &what(args.agent, args.event), &error_chain(&err));
    }
    ExitCode::SUCCESS
}

/// How a log line names the hook.
fn what(agent: Agent, event: Event) -> String {
    format!("{} {}", agent.as_str(), event.as_str())
}

/// Logs a failure that happened before the arguments could be read (a
/// mistyped hook command), to the default log.
pub fn log_usage_error(reason: &str) {
    if let Some(path) = log::default_path(|var| std::env::var(var).ok()) {
        log::append(&path, "hook", reason);
    }
}

fn read_stdin() -> Result<Vec<u8>, Error> {
    let mut input = Vec::new();
    io::stdin()
        .take(MAX_STDIN_BYTES)
        .read_to_end(&mut input)
        .map_err(Error::Stdin)?;
    Ok(input)
}

/// What the hook prints for `input`, if anything, within the time budget.
/// A degraded retrieval is logged to `log_path` and still answered.
fn answer(
    args: &HookArgs,
    input: &[u8],
    env: impl Fn(&str) -> Option<String>,
    log_path: Option<&Path>,
) -> Result<Option<String>, Error> {
    let payload: Payload = serde_json::from_slice(input).map_err(Error::Payload)?;
    let expected = args.event.hook_event_name();
    if let Some(found) = payload.hook_event_name.as_deref()
        && found != expected
    {
        return Err(Error::WrongEvent {
            found: found.to_owned(),
            expected,
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let budget = Duration::from_millis(args.timeout_ms);
    let mut call = Call::new(args, &payload, env, log_path)?;
    let to_read = ToRead::new(args, &payload, call.user.is_none());
    let answered = runtime.block_on(async {
        let read_and_call = async {
            // Off the runtime, so the budget's timer runs while it reads.
            let found = tokio::task::spawn_blocking(move || to_read.read())
                .await
                .map_err(Error::Read)?;
            call.found(found, args.event);
            call.run(args, &payload).await
        };
        tokio::time::timeout(budget, read_and_call)
            .await
            .unwrap_or(Err(Error::Timeout(args.timeout_ms)))
    });
    // A read held up past the budget (a slow file system) is left behind,
    // not waited for: the budget covers the whole hook.
    runtime.shutdown_background();
    answered
}

/// What the hook reads from the file system, owned so that it can be read
/// off the runtime, within the time budget. Every file is read through
/// [`bounded`].
struct ToRead {
    /// `--repo`, else found from `cwd`.
    repo: Option<String>,
    cwd: Option<PathBuf>,
    /// Look the user up in the password database (the environment and
    /// `--user` named none).
    user_from_passwd: bool,
    transcript: Option<PathBuf>,
    format: Format,
}

/// What [`ToRead`] found.
struct Found {
    repo: Option<String>,
    /// The password database's name for the uid, where it was looked up.
    user: Option<String>,
    /// Whether it was looked up (and so whether no user name was found).
    user_looked_up: bool,
    window: Result<Vec<Message>, Error>,
}

impl ToRead {
    fn new(args: &HookArgs, payload: &Payload, user_from_passwd: bool) -> Self {
        Self {
            repo: args.repo.clone(),
            cwd: payload.cwd.clone(),
            user_from_passwd: user_from_passwd && args.user.is_none(),
            transcript: payload.transcript_path.clone(),
            format: args.agent.transcript_format(),
        }
    }

    fn read(self) -> Found {
        let repo = match &self.repo {
            Some(repo) => project::to_id(repo),
            None => self
                .cwd
                .or_else(|| std::env::current_dir().ok())
                .and_then(|dir| project::repo_name(&dir)),
        };
        let user = self.user_from_passwd.then(project::passwd_user).flatten();
        let window = match self.transcript {
            Some(path) => match transcript::read_window(&path, self.format) {
                Ok(window) => Ok(window),
                // Not written yet (a session's first prompt): an empty past.
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(source) => Err(Error::Transcript { path, source }),
            },
            None => Ok(Vec::new()),
        };
        Found {
            repo,
            user,
            user_looked_up: self.user_from_passwd,
            window,
        }
    }
}

/// One hook's call to Engram: where, as whom, for which namespaces.
struct Call {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    session_id: String,
    repo: Option<String>,
    user: Option<String>,
    window: Result<Vec<Message>, Error>,
    agent: Agent,
    log_path: Option<PathBuf>,
}

impl Call {
    /// The call as far as the arguments and the environment say; the rest
    /// comes from [`Call::found`].
    fn new(
        args: &HookArgs,
        payload: &Payload,
        env: impl Fn(&str) -> Option<String>,
        log_path: Option<&Path>,
    ) -> Result<Self, Error> {
        let session_id = project::to_id(&payload.session_id)
            .ok_or_else(|| Error::SessionId(payload.session_id.clone()))?;
        let user = match &args.user {
            Some(user) => project::to_id(user),
            None => project::env_user(&env),
        };
        // A local service needs no proxy, and one set in the agent's
        // environment must not see the key. The time budget is enforced
        // around the whole call, not here.
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(Error::Client)?;
        Ok(Self {
            client,
            base_url: args.url.trim_end_matches('/').to_owned(),
            api_key: env("ENGRAM_API_KEY").filter(|key| !key.is_empty()),
            session_id,
            repo: None,
            user,
            window: Ok(Vec::new()),
            agent: args.agent,
            log_path: log_path.map(Path::to_path_buf),
        })
    }

    /// Takes in what was read; says once in the log when no user name
    /// was found anywhere, since the user's memories are then the default
    /// user's.
    fn found(&mut self, found: Found, event: Event) {
        self.repo = found.repo;
        self.user = self.user.take().or(found.user);
        self.window = found.window;
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

    async fn run(&mut self, args: &HookArgs, payload: &Payload) -> Result<Option<String>, Error> {
        let mut window = std::mem::replace(&mut self.window, Ok(Vec::new()))?;
        match args.event {
            Event::UserPromptSubmit => {
                if let Some(prompt) = &payload.prompt {
                    append_unless_last(&mut window, Role::User, prompt);
                }
                if window.is_empty() {
                    return Ok(None);
                }
                let turn_id = turn_id(payload, &self.session_id, &window);
                let body = json!({"turn_id": turn_id, "messages": wire(&window)});
                let Some(request) = payload.prompt.as_deref().and_then(remember::parse) else {
                    let injection = self.retrieve(args.event, body).await?;
                    return Ok(injection.map(|text| context(args.event, &text)));
                };
                // Both at once, within the one budget; the retrieval does
                // not wait for the write (it would not see it before the
                // index takes it anyway).
                let (confirmation, retrieved) = tokio::join!(
                    self.remember(&request, args.event),
                    self.retrieve(args.event, body)
                );
                let injection = retrieved.unwrap_or_else(|err| {
                    self.log(args.event, &error_chain(&err));
                    None
                });
                let text = match injection {
                    Some(injection) => format!("{confirmation}\n\n{injection}"),
                    None => confirmation,
                };
                Ok(Some(context(args.event, &text)))
            }
            Event::SessionStart => {
                let turn_id = turn_id(payload, &self.session_id, &window);
                let body = if window.is_empty() {
                    let project = self.repo.as_deref().unwrap_or("this project");
                    json!({"turn_id": turn_id, "query": format!(
                        "Conventions, decisions and preferences for working on {project}."
                    )})
                } else {
                    json!({"turn_id": turn_id, "messages": wire(&window)})
                };
                let text = match self.retrieve(args.event, body).await? {
                    Some(injection) => format!("{GUIDANCE}\n\n{injection}"),
                    None => GUIDANCE.to_owned(),
                };
                Ok(Some(context(args.event, &text)))
            }
            Event::Stop | Event::PreCompact => {
                if let Some(answer) = &payload.last_assistant_message {
                    append_unless_last(&mut window, Role::Assistant, answer);
                }
                if window.is_empty() {
                    return Err(Error::EmptyWindow);
                }
                let path = if args.event == Event::Stop {
                    "/turns"
                } else {
                    "/compactions"
                };
                let body = json!({
                    "session_id": self.session_id,
                    "turn_id": turn_id(payload, &self.session_id, &window),
                    "messages": wire(&window),
                });
                match self.post(path, body).await {
                    Err(Error::Status {
                        problem: Some(problem),
                        ..
                    }) if problem == CAPTURE_DISABLED => {
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

    /// `POST /memories` for a `remember:` prompt, and the one line that
    /// tells the agent what became of it. Engram's refusals of the content
    /// (a secret, a near-duplicate, a field out of bounds) are told with
    /// Engram's reason; any other failure is logged as well, and one
    /// without an answer from Engram is told without details.
    async fn remember(&self, request: &remember::Request<'_>, event: Event) -> String {
        if request.content.is_empty() {
            return "Engram remembered nothing: nothing follows `remember:`.".to_owned();
        }
        let body = json!({
            "scope": request.scope,
            "category": request.category(),
            "content": request.content,
            "importance": REQUESTED_IMPORTANCE,
            "session_id": self.session_id,
            "dedupe": true,
        });
        match self.post("/memories", body).await {
            Ok(memory) => {
                let scope = memory["scope"].as_str().unwrap_or_default();
                let owner = memory[scope].as_str().unwrap_or_default();
                format!(
                    "Engram remembered this for {scope} {owner} as {} (memory {}): {}. It is \
                     stored; there is no need to call `remember` for it.",
                    memory["category"].as_str().unwrap_or_default(),
                    memory["id"].as_str().unwrap_or_default(),
                    crate::memory::excerpt(request.content, CONFIRMATION_CHARS),
                )
            }
            // What was said is at fault (a secret, a duplicate, too long):
            // the agent is told, and nothing went wrong with the hook.
            Err(Error::Status {
                status: 409 | 422,
                detail,
                ..
            }) => format!("Engram did not remember this: {detail}"),
            Err(err) => {
                self.log(event, &error_chain(&err));
                match err {
                    Error::Status { status, detail, .. } if (400..500).contains(&status) => {
                        format!("Engram did not remember this: {detail}")
                    }
                    _ => "Engram could not store this (see Engram's hook log): it is not \
                          remembered."
                        .to_owned(),
                }
            }
        }
    }

    /// Appends `reason` to the log, if there is one.
    fn log(&self, event: Event, reason: &str) {
        if let Some(path) = &self.log_path {
            log::append(path, &what(self.agent, event), reason);
        }
    }

    /// Posts `body` (with the namespaces added) and returns the JSON answer
    /// of a 2xx; anything else is an error naming the status and detail.
    async fn post(&self, path: &str, mut body: Value) -> Result<Value, Error> {
        if let Some(repo) = &self.repo {
            body["repo"] = json!(repo);
        }
        if let Some(user) = &self.user {
            body["user"] = json!(user);
        }
        let url = format!("{}{path}", self.base_url);
        let mut request = self.client.post(&url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let failed = |source| Error::Request {
            url: url.clone(),
            source,
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(failed)?;
        if !status.is_success() {
            let problem = serde_json::from_slice::<Value>(&bytes).unwrap_or_default();
            let detail = problem["detail"].as_str().map_or_else(
                || String::from_utf8_lossy(&bytes).chars().take(200).collect(),
                str::to_owned,
            );
            return Err(Error::Status {
                url,
                status: status.as_u16(),
                detail,
                problem: problem["type"].as_str().map(str::to_owned),
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| Error::Answer { url, source })
    }
}

/// The agent's output that adds `text` to its context.
fn context(event: Event, text: &str) -> String {
    let output = json!({"hookSpecificOutput": {
        "hookEventName": event.hook_event_name(),
        "additionalContext": text,
    }});
    output.to_string()
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
