//! `engram import <agent>` (`claude-code`, `codex`: the agents whose entry
//! has an import): a backfill of an agent's past sessions. Each session's messages since what was last sent
//! (see [`state`](super::state)) go to capture as compactions
//! (`POST /compactions`, which are never dropped) for the session's
//! project and the user, tool output stripped as the hook strips it, in
//! windows of at most [`MAX_WINDOW_BYTES`]; the offset is saved after
//! each accepted one, so a stopped backfill resumes and a second run sends
//! only what is new.
//!
//! Capture's budgets are respected, read from `/stats` before each send:
//! past the daily token budget (today's use, or what backfills have sent
//! today by the state's count, whichever is more, plus the window's
//! estimate) the backfill stops and says when the budget renews; a queue at its byte budget
//! (`429`) is waited out. `--dry-run` sends nothing: it lists the
//! sessions with their messages and estimated classifier tokens, and the
//! cost at the classifier's price so far where `/stats` shows one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Value, json};

use super::Error;
use super::sessions::{self, Importable, Session};
use super::state::{self, State};
use crate::client::agent::Agent;
use crate::client::hook::project;
use crate::client::hook::transcript::{self, MAX_WINDOW_BYTES, Message};
use crate::client::http::{self, Api, ServerArgs};

/// The problem type of `POST /compactions` with no classifier.
const CAPTURE_DISABLED: &str = "urn:engram:problem:capture-disabled";

/// How many times a full queue is waited out for one window before the
/// backfill gives up.
const MAX_QUEUE_WAITS: u32 = 120;

/// `engram import claude-code|codex`'s arguments.
#[derive(Debug, clap::Args)]
pub struct TranscriptArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Only the sessions that ran in this project directory (or below it).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Only sessions whose transcript changed on or after this day
    /// (YYYY-MM-DD, UTC).
    #[arg(long, value_name = "DATE")]
    pub since: Option<NaiveDate>,
    /// List the sessions, their messages and the estimated classifier
    /// tokens (and cost), and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The repo id for every session (default: each session's project,
    /// found from its directory as the hooks find it).
    #[arg(long)]
    pub repo: Option<String>,
    /// The user id (default: the OS user).
    #[arg(long)]
    pub user: Option<String>,
    /// Where the agent's transcripts are (default: ~/.claude/projects or
    /// ~/.codex/sessions).
    #[arg(long, value_name = "DIR")]
    pub transcripts: Option<PathBuf>,
    /// What was sent, kept to resume (default:
    /// $XDG_STATE_HOME/engram/import-state.json, beside the hook's log).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// One window of a session to send.
struct Window {
    messages: Vec<Message>,
    /// The transcript's offset just past the window's last line.
    end: u64,
    tokens: usize,
}

/// A session with what it has not sent yet.
struct Pending {
    session: Session,
    key: String,
    repo: Option<String>,
    windows: Vec<Window>,
    /// Where the transcript's complete lines end: recorded even when they
    /// hold no new message, so they are not read again.
    end: u64,
    sent: u64,
}

pub async fn run(args: &TranscriptArgs, agent: Agent) -> Result<String, Error> {
    let agent = Importable::of(agent).ok_or_else(|| {
        Error::Usage(format!(
            "Engram does not import {}'s transcripts",
            agent.as_str()
        ))
    })?;
    let env = |var: &str| std::env::var(var).ok();
    let root = match &args.transcripts {
        Some(root) => root.clone(),
        None => sessions::default_root(agent, env).ok_or_else(|| {
            Error::Usage("no HOME to find the transcripts in: pass --transcripts".to_owned())
        })?,
    };
    let state_path = match &args.state {
        Some(path) => path.clone(),
        None => state::default_path(env).ok_or_else(|| {
            Error::Usage("no state directory (HOME is unset): pass --state".to_owned())
        })?,
    };
    let mut state = State::load(&state_path)?;
    let user = match &args.user {
        Some(user) => project::to_id(user),
        None => project::os_user(env),
    };
    let api = args.server.api()?;
    let url = args.server.url.trim_end_matches('/').to_owned();
    let project_dir = args.project.as_deref().map(absolute);
    let since = args
        .since
        .map(|day| day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());

    let found = sessions::find(agent, &root)?;
    let none_found = found.is_empty().then(|| {
        format!(
            "\nno {} transcripts found in {}: {}",
            agent.as_str(),
            root.display(),
            agent.layout()
        )
    });
    let mut pending = Vec::new();
    for session in found {
        if project_dir
            .as_deref()
            .is_some_and(|dir| !sessions::belongs_to(&session, dir))
            || since.is_some_and(|since| DateTime::<Utc>::from(session.modified) < since)
        {
            continue;
        }
        let key = format!("{}/{}", agent.as_str(), session.id);
        let sent = state.sent(&url, &key);
        pending.push(unsent(agent, session, key, sent, args.repo.as_deref())?);
    }
    let none_found = none_found.unwrap_or_default();
    if args.dry_run {
        return Ok(dry_run(&api, &pending).await + &none_found);
    }

    let mut budget = Budget::read(&api).await?;
    let total = pending.len();
    let (mut triggers, mut tokens, mut idle) = (0, 0, 0);
    for (number, session) in pending.into_iter().enumerate() {
        if session.windows.is_empty() {
            idle += 1;
            if session.end > session.sent {
                state.record(&state_path, &url, &session.key, session.end)?;
            }
            continue;
        }
        let pair = (session.repo.clone(), user.clone());
        for window in &session.windows {
            budget
                .check(
                    &api,
                    |day| state.tokens_sent(&url, day),
                    &pair,
                    window.tokens,
                )
                .await?;
            send(&api, &session, user.as_deref(), window).await?;
            state.record_sent(
                &state_path,
                &url,
                (&session.key, window.end),
                (&budget.day, window.tokens as u64),
            )?;
            triggers += 1;
            tokens += window.tokens;
        }
        if session.end > session.windows.last().map_or(0, |window| window.end) {
            state.record(&state_path, &url, &session.key, session.end)?;
        }
        eprintln!(
            "engram: [{}/{total}] {} session {} (repo {}): {} messages sent in {} windows",
            number + 1,
            agent.as_str(),
            session.session.id,
            session.repo.as_deref().unwrap_or("default"),
            session
                .windows
                .iter()
                .map(|w| w.messages.len())
                .sum::<usize>(),
            session.windows.len(),
        );
    }
    Ok(format!(
        "sent {triggers} compactions from {} sessions (~{tokens} classifier prompt tokens \
         estimated, existing memories not counted); {idle} sessions had nothing new{none_found}",
        total - idle
    ))
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// What of `session` is not sent yet, cut into windows.
fn unsent(
    agent: Importable,
    session: Session,
    key: String,
    sent: u64,
    repo: Option<&str>,
) -> Result<Pending, Error> {
    let text = super::read_text(&session.path)?;
    // A transcript shorter than what was sent was started afresh.
    let start = usize::try_from(sent)
        .ok()
        .filter(|&start| start <= text.len() && text.is_char_boundary(start))
        .unwrap_or(0);
    let new = &text[start..];
    let end = (start + transcript::complete_lines_end(new)) as u64;
    let mut windows: Vec<Window> = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for (message, message_end) in transcript::messages(new, agent.transcript_format()) {
        if !current.is_empty() && bytes + message.text.len() > MAX_WINDOW_BYTES {
            windows.push(window(std::mem::take(&mut current), start, bytes));
            bytes = 0;
        }
        bytes += message.text.len();
        current.push((message, message_end));
    }
    if !current.is_empty() {
        windows.push(window(current, start, bytes));
    }
    let repo = match repo {
        Some(repo) => project::to_id(repo),
        None => session.cwd.as_deref().and_then(project::repo_name),
    };
    Ok(Pending {
        session,
        key,
        repo,
        windows,
        end,
        sent,
    })
}

/// A window of `messages` (each with its end, relative to `start`), a
/// single message longer than the window cut to its end.
fn window(messages: Vec<(Message, usize)>, start: usize, bytes: usize) -> Window {
    let end = messages.last().map_or(0, |(_, end)| start + end) as u64;
    let mut messages: Vec<Message> = messages.into_iter().map(|(message, _)| message).collect();
    if bytes > MAX_WINDOW_BYTES {
        messages = transcript::cut_to_budget(messages, MAX_WINDOW_BYTES);
    }
    // The classifier reads its instructions and the messages; the
    // existing memories it is shown come on top and are not known here.
    let tokens = crate::capture::classify::system_tokens()
        + messages
            .iter()
            .map(|message| crate::tokens::count(&message.text))
            .sum::<usize>();
    Window {
        messages,
        end,
        tokens,
    }
}

/// `POST /compactions` for one window, waiting out a full queue.
async fn send(
    api: &Api,
    session: &Pending,
    user: Option<&str>,
    window: &Window,
) -> Result<(), Error> {
    let session_id = project::to_id(&session.session.id).ok_or_else(|| {
        Error::Usage(format!(
            "session id {:?} cannot become an Engram id",
            session.session.id
        ))
    })?;
    let mut body = json!({
        "session_id": session_id,
        "messages": window.messages.iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.text}))
            .collect::<Vec<_>>(),
    });
    if let Some(repo) = &session.repo {
        body["repo"] = json!(repo);
    }
    if let Some(user) = user {
        body["user"] = json!(user);
    }
    // What is captured from an old session was said then, not today.
    if let Some(at) = transcript::latest_time(&window.messages) {
        body["observed_at"] = json!(at);
    }
    for _ in 0..MAX_QUEUE_WAITS {
        match api.post("/compactions", &body).await {
            Ok(_) => return Ok(()),
            Err(http::Error::Status {
                problem: Some(problem),
                ..
            }) if problem == CAPTURE_DISABLED => return Err(Error::CaptureDisabled),
            Err(http::Error::Status {
                status: 429,
                retry_after_s,
                ..
            }) => {
                let wait = retry_after_s.unwrap_or(30);
                eprintln!(
                    "engram: capture's queue is at its byte budget; waiting {wait} s for the \
                     classifier to catch up"
                );
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(Error::Stopped(
        "capture's queue stayed full; what was sent is recorded: run the import again later"
            .to_owned(),
    ))
}

/// Capture's daily token budget as a run sees it.
struct Budget {
    /// Capture's budget day, as `/stats` names it when it shows budgets.
    day: String,
}

impl Budget {
    async fn read(api: &Api) -> Result<Self, Error> {
        let stats = api.get("/stats").await?;
        Ok(Self {
            day: stats["models"]["day"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// Stops the run when sending `tokens` more would pass the daily
    /// budget (today's use as the server counts it, or what backfills
    /// have sent today, whichever is more: what they sent may still wait
    /// in the queue), or `pair`'s is spent. A key that does not see
    /// `/stats`'s models (limited to some namespaces) is not held back
    /// here; the server still holds capture at the budget.
    async fn check(
        &mut self,
        api: &Api,
        sent_today: impl Fn(&str) -> u64,
        pair: &(Option<String>, Option<String>),
        tokens: usize,
    ) -> Result<(), Error> {
        let stats = api.get("/stats").await?;
        let budgets = &stats["models"]["budgets"];
        let renews = stats["models"]["renews_at"].as_str().unwrap_or("tomorrow");
        let limit = budgets["capture"]["limit"].as_u64().unwrap_or(0);
        let used = budgets["capture"]["used"].as_u64().unwrap_or(0);
        if let Some(day) = stats["models"]["day"].as_str() {
            day.clone_into(&mut self.day);
        }
        let sent = sent_today(&self.day);
        let projected = used.max(sent) + tokens as u64;
        if limit > 0 && projected > limit {
            return Err(Error::Stopped(format!(
                "capture's daily token budget would be passed ({used} of {limit} tokens used \
                 today, ~{sent} sent by backfills today, ~{tokens} more for the next window); \
                 stopped before sending it. What was sent is recorded: run the import again \
                 after {renews}"
            )));
        }
        let spent = budgets["exhausted_pairs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|owner| owner_is(owner, pair));
        if spent {
            return Err(Error::Stopped(format!(
                "capture's token budget for repo {} and user {} is spent for today; stopped. \
                 What was sent is recorded: run the import again after {renews}",
                pair.0.as_deref().unwrap_or("default"),
                pair.1.as_deref().unwrap_or("default"),
            )));
        }
        Ok(())
    }
}

fn owner_is(owner: &Value, (repo, user): &(Option<String>, Option<String>)) -> bool {
    let matches = |field: &str, id: &Option<String>| {
        owner[field].as_str().unwrap_or("default") == id.as_deref().unwrap_or("default")
    };
    matches("repo", repo) && matches("user", user)
}

/// The listing of a dry run, with the estimated cost where the
/// classifier's price shows in `/stats`.
async fn dry_run(api: &Api, pending: &[Pending]) -> String {
    let mut lines = Vec::new();
    let (mut messages, mut tokens, mut windows) = (0, 0, 0);
    for session in pending.iter().filter(|session| !session.windows.is_empty()) {
        let count: usize = session.windows.iter().map(|w| w.messages.len()).sum();
        let estimate: usize = session.windows.iter().map(|w| w.tokens).sum();
        lines.push(format!(
            "{} {} repo={} messages={count} windows={} tokens~{estimate}",
            session.key,
            session.session.path.display(),
            session.repo.as_deref().unwrap_or("default"),
            session.windows.len(),
        ));
        messages += count;
        tokens += estimate;
        windows += session.windows.len();
    }
    let stats = api.get("/stats").await;
    let cost = match &stats {
        Ok(stats) => classifier_cost_per_token(stats).map_or_else(
            || "cost unknown (no classifier price shown in /stats yet)".to_owned(),
            |rate| {
                format!(
                    "~{:.4} at the classifier's cost per token so far",
                    rate * tokens as f64
                )
            },
        ),
        Err(err) => format!("cost unknown (/stats: {err})"),
    };
    // The real run hands every window to the server's classifier.
    let classifier = match stats
        .as_ref()
        .map(|stats| stats["capture"]["enabled"].as_bool())
    {
        Ok(Some(true)) => "The real run hands them to this Engram's classifier.",
        Ok(Some(false)) => {
            "The real run needs a classifier, and this Engram has none (no `llm` configured: \
             capture is agent-driven): it would be refused until `llm` is configured on the \
             server."
        }
        _ => "The real run needs a classifier (`llm`) configured on the server.",
    };
    lines.push(format!(
        "dry run: {} sessions, {messages} messages, {windows} compactions, ~{tokens} classifier \
         prompt tokens (its instructions and the messages; the existing memories it is shown \
         come on top); {cost}; nothing was sent. {classifier}",
        lines.len()
    ));
    lines.join("\n")
}

/// The classifier's cost per token since the server started, where a
/// price makes it known.
fn classifier_cost_per_token(stats: &Value) -> Option<f64> {
    let rows = stats["models"]["since_start"].as_array()?;
    let (cost, tokens) = rows
        .iter()
        .filter(|row| row["kind"] == "classifier")
        .filter_map(|row| {
            let tokens = row["prompt_tokens"].as_u64()? + row["completion_tokens"].as_u64()?;
            Some((row["cost"].as_f64()?, tokens))
        })
        .fold((0.0, 0), |(cost, tokens), (c, t)| (cost + c, tokens + t));
    #[expect(clippy::cast_precision_loss, reason = "token counts stay below 2^52")]
    (tokens > 0).then(|| cost / tokens as f64)
}
