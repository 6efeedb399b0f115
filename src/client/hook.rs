//! `engram hook <agent> <event>`: a coding agent's lifecycle hook. It reads
//! the hook's JSON on stdin, calls a running Engram over HTTP, and prints
//! what the agent reads back, mapping the agent's hooks onto the seed
//! design's triggers:
//!
//! | event | Engram call | printed |
//! | --- | --- | --- |
//! | `UserPromptSubmit` | `POST /retrieve` with the window, the new prompt and the session (so what the session was given is not injected again) | the injection as `additionalContext` |
//! | the same, for a `remember:` prompt ([`remember`]) | also `POST /memories` (with `dedupe`; the project's, anchored to the files it names in a git working tree) | one line on what was stored, or why not, then the injection |
//! | `SessionStart` | `POST /retrieve` for the session's brief (its id, no query: the most important confirmed memories); beside it, in a git working tree, the anchors' check ([`tree_check`]) | [`GUIDANCE`], then the brief |
//! | `Stop` (a turn ended) | `POST /turns` with the window, and in a git working tree its `HEAD` and the files the window's tool calls read or edited ([`touched`]) | nothing |
//! | `PreCompact` | `POST /compactions` with the same | nothing |
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
//! What differs between agents (each event's name, how the output adds
//! context, what the prompt hook can do, how the prompt is cleaned and the
//! transcript read) is the agent's entry in [`crate::client::agent`].
//!
//! Gemini CLI's hooks (its hooks reference) take the same base input and
//! output under their own event names: `SessionStart`, `BeforeAgent` (the
//! prompt), `AfterAgent` (a turn ended; the answer is `prompt_response`)
//! and `PreCompress`; its transcript is read by [`transcript::gemini`]. In
//! its prompts, the context that hooks added (`<hook_context>` blocks) is
//! cut out before anything reads them.
//!
//! Cursor's hooks ([`cursor`]) take their own shapes: `sessionStart`'s
//! context is printed as `additional_context`, `beforeSubmitPrompt` (which
//! cannot add context) only stores a `remember:` prompt and keeps the
//! prompt for `afterAgentResponse`, which hands the turn to capture.
//!
//! Invariant: a hook never harms the agent. Whatever fails (bad stdin, an
//! unreadable transcript, Engram down, a bad key, a 4xx or 5xx, the time
//! budget running out), the hook prints nothing, exits 0, and appends one
//! line with the reason to its log ([`log`]); only a `remember:` prompt's
//! outcome is always told, in one line, so that the agent never believes
//! a fact stored that was not. It loads no model and reads
//! no server configuration; one current-thread runtime serves its
//! requests, all within `--timeout-ms`, reading files included: the
//! transcript and `.git` are read through [`bounded`] (regular files only,
//! opened without blocking, the transcript's last 8 MiB at most).

pub mod bounded;
mod call;
pub mod cursor;
pub mod log;
pub mod project;
pub mod remember;
pub mod touched;
pub mod transcript;
mod tree_check;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde::Deserialize;

use super::agent::{Agent, Event, Hooks, PromptHook};
use super::http::{self, DEFAULT_URL};
use crate::causes::error_chain;
use crate::memory::Scope;
use call::Call;
use transcript::{Format, Message};

/// The most hook input read from stdin.
const MAX_STDIN_BYTES: u64 = 16 * 1024 * 1024;

/// What `SessionStart` tells the agent is worth remembering, before any
/// memories: a few lines, since it costs context in every session.
pub const GUIDANCE: &str = "Engram keeps long-term memory across sessions. When the user \
states a preference or a project convention, makes a decision (and why), or corrects you, \
save it with Engram's `remember` tool: one fact per memory, scope `repo` for this project, \
`user` for the person; if a memory already says it, `update_memory` instead. Not what the \
code or git records, never secrets. The user may also type `remember: …` (or \
`remember for me: …`) to store a fact directly.";

/// `engram hook`'s arguments. The API key comes only from `ENGRAM_API_KEY`.
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// The agent running the hook.
    #[arg(value_parser = with_hooks())]
    pub agent: Agent,
    /// The hook event.
    #[arg(value_enum)]
    pub event: Event,
    /// Engram's base URL.
    #[arg(long, env = "ENGRAM_URL", hide_env_values = true, default_value = DEFAULT_URL)]
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
    /// The most `SessionStart`'s check of the repo's anchors against the
    /// working tree may take, in milliseconds, beside the retrieval (0:
    /// no check). What does not fit is checked by the next session.
    #[arg(long, default_value_t = 500)]
    pub check_ms: u64,
    /// The most anchored memories one `SessionStart` checks, the longest
    /// unchecked first.
    #[arg(long, default_value_t = 200)]
    pub check_limit: usize,
    /// The failure log (default: $XDG_STATE_HOME/engram/hook.log, else
    /// ~/.local/state/engram/hook.log).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// The agents of the table whose hooks Engram serves, as the command
/// line takes them.
fn with_hooks() -> impl clap::builder::TypedValueParser<Value = Agent> {
    use clap::ValueEnum;
    use clap::builder::TypedValueParser;
    let served = Agent::ALL
        .iter()
        .filter(|agent| agent.hooks().is_some())
        .filter_map(ValueEnum::to_possible_value);
    clap::builder::PossibleValuesParser::new(served).try_map(|name| Agent::from_str(&name, false))
}

/// Why a hook did nothing. Logged, never shown to the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Engram serves no hooks of {0}")]
    NoHooks(&'static str),
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
    #[error("the hook input names no session (`session_id` or `conversation_id`)")]
    NoSession,
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
    #[error(transparent)]
    Api(#[from] http::Error),
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("writing the answer to stdout")]
    Stdout(#[source] io::Error),
    #[error("checking the anchors against the working tree")]
    Check(#[source] super::check::Error),
}

/// The hook input fields Engram reads; the rest are ignored.
#[derive(Debug, Deserialize)]
struct Payload {
    #[serde(default)]
    session_id: Option<String>,
    /// Cursor's session: its `sessionStart` gives both, the same.
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    transcript_path: Option<PathBuf>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    /// Cursor's workspace folders, in place of a `cwd`: the first is the
    /// project.
    #[serde(default)]
    workspace_roots: Vec<PathBuf>,
    #[serde(default)]
    hook_event_name: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    /// The answer that ended the turn: Gemini CLI calls it
    /// `prompt_response`, Cursor's `afterAgentResponse` `text`.
    #[serde(default, alias = "prompt_response", alias = "text")]
    last_assistant_message: Option<String>,
    /// Cursor's `generation_id` changes with every user message: a turn.
    #[serde(default, alias = "generation_id")]
    turn_id: Option<String>,
}

impl Payload {
    /// The agent's session id.
    fn session(&self) -> Result<&str, Error> {
        self.session_id
            .as_deref()
            .or(self.conversation_id.as_deref())
            .ok_or(Error::NoSession)
    }

    /// The directory the agent works in.
    fn working_dir(&self) -> Option<PathBuf> {
        self.cwd
            .clone()
            .or_else(|| self.workspace_roots.first().cloned())
    }
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
    let hooks = args
        .agent
        .hooks()
        .ok_or(Error::NoHooks(args.agent.as_str()))?;
    let mut payload: Payload = serde_json::from_slice(input).map_err(Error::Payload)?;
    if let Some(clean) = hooks.clean_prompt {
        payload.prompt = payload.prompt.map(|prompt| clean(&prompt));
    }
    let expected = hooks.name(args.event);
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
    let mut call = Call::new(args, hooks, &payload, env, log_path)?;
    let to_read = ToRead::new(
        args,
        hooks,
        &payload,
        !call.names_a_user(),
        call.session_id(),
        log_path,
    );
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
    transcript: Option<(PathBuf, Format)>,
    /// Cursor's kept prompt, to keep or take ([`cursor`]).
    kept_prompt: Option<cursor::Step>,
    /// Which files of the working tree to look for ([`touched`]).
    touches: Touches,
}

/// Which files of the working tree a hook looks for, with its `HEAD`.
enum Touches {
    Nothing,
    /// Those the transcript's tool calls name: the turn goes to capture.
    ToolCalls,
    /// Those a `remember:` prompt for the project names.
    Named(Vec<String>),
}

/// What [`ToRead`] found.
struct Found {
    repo: Option<String>,
    /// The password database's name for the uid, where it was looked up.
    user: Option<String>,
    /// Whether it was looked up (and so whether no user name was found).
    user_looked_up: bool,
    window: Result<Vec<Message>, Error>,
    /// Why Cursor's prompt could not be kept or taken: the turn goes on
    /// without it, and the log says why.
    kept_prompt_error: Option<io::Error>,
    /// What the turn (or the `remember:` prompt) touched in its working
    /// tree, when it is in one.
    touched: Option<touched::Touched>,
}

impl ToRead {
    fn new(
        args: &HookArgs,
        hooks: &Hooks,
        payload: &Payload,
        user_from_passwd: bool,
        session_id: &str,
        log_path: Option<&Path>,
    ) -> Self {
        let transcript = payload
            .transcript_path
            .clone()
            .zip(args.agent.transcript_format());
        let kept_prompt = match (hooks.prompt, log_path.and_then(cursor::prompts_dir)) {
            (PromptHook::KeepsForTheAnswer, Some(dir)) => {
                let file = cursor::Step::file(&dir, session_id);
                let turn_id = payload.turn_id.clone();
                match (args.event, turn_id, &payload.prompt) {
                    (Event::UserPromptSubmit, Some(turn_id), Some(prompt)) => {
                        Some(cursor::Step::Keep {
                            file,
                            turn_id,
                            prompt: prompt.clone(),
                        })
                    }
                    (Event::Stop, Some(turn_id), _) => Some(cursor::Step::Take { file, turn_id }),
                    _ => None,
                }
            }
            _ => None,
        };
        Self {
            repo: args.repo.clone(),
            cwd: payload.working_dir(),
            user_from_passwd: user_from_passwd && args.user.is_none(),
            transcript,
            kept_prompt,
            touches: match args.event {
                Event::Stop | Event::PreCompact => Touches::ToolCalls,
                Event::UserPromptSubmit => {
                    match payload.prompt.as_deref().and_then(remember::parse) {
                        Some(request) if request.scope == Scope::Repo => {
                            Touches::Named(remember::named_files(request.content))
                        }
                        _ => Touches::Nothing,
                    }
                }
                Event::SessionStart => Touches::Nothing,
            },
        }
    }

    fn read(self) -> Found {
        let dir = self.cwd.or_else(|| std::env::current_dir().ok());
        let repo = match &self.repo {
            Some(repo) => project::to_id(repo),
            None => dir.as_deref().and_then(project::repo_name),
        };
        let user = self.user_from_passwd.then(project::passwd_user).flatten();
        let read = match self.transcript {
            Some((path, format)) => match transcript::read(&path, format) {
                Ok(read) => Ok(read),
                // Not written yet (a session's first prompt): an empty past.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    Ok(transcript::Read::default())
                }
                Err(source) => Err(Error::Transcript { path, source }),
            },
            None => Ok(transcript::Read::default()),
        };
        let touched = match (self.touches, &read, &dir) {
            (Touches::ToolCalls, Ok(read), Some(dir)) => touched::in_tree(dir, &read.files),
            (Touches::Named(names), _, Some(dir)) => touched::in_tree(dir, &names),
            _ => None,
        };
        let mut window = read.map(|read| read.window);
        let kept = self.kept_prompt.map(cursor::Step::run);
        if let (Ok(window), Some(Ok(Some(prompt)))) = (&mut window, &kept) {
            window.push(Message {
                role: transcript::Role::User,
                text: prompt.clone(),
                at: None,
            });
        }
        Found {
            repo,
            user,
            user_looked_up: self.user_from_passwd,
            window,
            kept_prompt_error: kept.and_then(Result::err),
            touched,
        }
    }
}
