//! `capture-cost`: what capture costs in model tokens over a realistic
//! coding session. Fifty turns of a scripted session (a user asking, an
//! assistant answering at a coding assistant's length, with tool calls
//! between, and a dozen durable facts stated along the way: preferences,
//! conventions, decisions, corrections) go through `POST /turns` with the
//! whole window each time, as the agent hooks send it. The fake upstream
//! answers the classifier with one memory per fact sentence it finds in
//! the messages it is asked to classify, and reports `usage` (a token per
//! four characters of what it received and sent). The workload reports
//! prompt and completion tokens per turn and per memory written, and the
//! memories written.

use std::time::Duration;

use engram_fake_upstream::{Chat, Setup, Upstream};
use serde_json::{Value, json};

use crate::measure::Report;
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};

/// The session: (what the user says, what the assistant answers).
pub(crate) const TURNS: [(&str, &str); 50] = [
    (
        "Let's add a retry to the capture worker when the classifier times out.",
        "capture worker retry on timeout",
    ),
    (
        "I prefer `thiserror` enums over `anyhow` in library code.",
        "error enums for the worker",
    ),
    (
        "Show me where the queue is opened at start.",
        "where the queue opens",
    ),
    (
        "We decided to keep the queue on disk as a log, not in SQLite.",
        "the queue's log segments",
    ),
    (
        "What happens to a trigger that fails four times?",
        "failed triggers and queue/failed",
    ),
    ("Can you write a test for the backoff?", "a backoff test"),
    (
        "From now on, run `cargo clippy -- -D warnings` before every commit.",
        "clippy before committing",
    ),
    (
        "The test is flaky on CI, can you look?",
        "a flaky test on CI",
    ),
    (
        "Never use `unwrap()` on an input path; return an error instead.",
        "errors instead of unwrap",
    ),
    (
        "Rename `Step::Done` to something clearer.",
        "renaming the step outcome",
    ),
    (
        "Add a counter for the retries to /stats.",
        "a retries counter",
    ),
    (
        "Actually, the config keys are snake_case, not camelCase.",
        "snake_case config keys",
    ),
    (
        "Where do the config keys get validated?",
        "config validation",
    ),
    (
        "Add a key for the retry base delay.",
        "the retry base delay key",
    ),
    (
        "The convention here is one module per HTTP resource under `src/routes/`.",
        "one module per resource",
    ),
    (
        "Move the stats handler into its own module then.",
        "the stats handler's module",
    ),
    (
        "Does the OpenAPI document need regenerating now?",
        "regenerating the OpenAPI document",
    ),
    ("Run the API tests for stats.", "the stats API tests"),
    (
        "I prefer small commits with messages like `Area: what changed and why`.",
        "commit messages",
    ),
    ("Commit what we have so far.", "a commit"),
    (
        "Next: the worker should stop cleanly at shutdown.",
        "a clean worker shutdown",
    ),
    (
        "How does the cancellation token reach the worker?",
        "the cancellation token",
    ),
    (
        "We decided the retry backoff doubles and caps at sixty seconds.",
        "the backoff cap",
    ),
    (
        "Write the cap as a constant with a comment.",
        "the backoff cap constant",
    ),
    (
        "What does the metrics endpoint show for capture?",
        "capture metrics",
    ),
    (
        "Add a histogram for the classifier's duration.",
        "a duration histogram",
    ),
    (
        "Always put new config keys in `docs/configuration.md` with their default.",
        "documenting config keys",
    ),
    (
        "Document the retry base delay there.",
        "the retry delay's documentation",
    ),
    ("Why does the queue test take so long?", "a slow queue test"),
    (
        "Actually, tests must not sleep; wait on a condition instead.",
        "waiting on conditions in tests",
    ),
    (
        "Rewrite that test to wait for the queue to drain.",
        "a test that waits for the drain",
    ),
    (
        "Now the hooks: what does the Claude Code hook send?",
        "what the hook sends",
    ),
    ("Does it strip tool output?", "tool output stripped"),
    (
        "Add a test with a tool call in the window.",
        "a test with a tool call",
    ),
    (
        "I prefer `tracing` fields with units, like `duration_ms`.",
        "tracing fields with units",
    ),
    (
        "Fix the log line in the worker to follow that.",
        "the worker's log line",
    ),
    ("What is left on the issue?", "what is left"),
    (
        "Let's look at the compaction path next.",
        "the compaction path",
    ),
    (
        "How big can a compaction's window get?",
        "a compaction's size",
    ),
    (
        "We decided to store timestamps as RFC 3339 in UTC.",
        "RFC 3339 timestamps",
    ),
    (
        "Check the trigger's `accepted_at` follows that.",
        "the accepted_at field",
    ),
    (
        "Add the byte budget for a session's queue.",
        "a session's byte budget",
    ),
    (
        "What status does a refused compaction get?",
        "the refusal's status",
    ),
    ("Write the 429 test.", "a 429 test"),
    (
        "Run clippy and the capture tests.",
        "clippy and the capture tests",
    ),
    ("Update the CHANGELOG.", "the CHANGELOG"),
    (
        "Squash nothing, just push the branch.",
        "pushing the branch",
    ),
    (
        "Open a draft pull request with a summary.",
        "the pull request",
    ),
    ("What would you test next?", "what to test next"),
    ("Thanks, that's all for today.", "wrapping up"),
];

/// The facts stated in the session: what the memories should say.
pub const FACTS: usize = 12;

/// An assistant's answer about `topic`, at a coding assistant's length:
/// a few sentences, a code block, a closing line.
fn answer(turn: usize, topic: &str) -> String {
    let name = topic
        .replace([' ', '\'', '`', '/', ','], "_")
        .to_lowercase();
    let mut code = String::new();
    for line in 0..(8 + turn % 17) {
        code.push_str(&format!(
            "    let step_{line} = {name}::step({line}, &config).await?; // {topic}, part {line}\n"
        ));
    }
    format!(
        "Here is how I would approach {topic}. I read the worker, the queue and the tests \
         around them first, so the change fits what is there.\n\n\
         ```rust\npub async fn {name}(config: &Config) -> Result<(), Error> {{\n{code}    Ok(())\n}}\n```\n\n\
         I ran the module's tests after the change and they pass. The function keeps to the \
         existing error type and logs one event at the end with its duration. Tell me if you \
         want {topic} handled differently, or if I should go on with the next step."
    )
}

/// The window after `turns` turns, as a hook sends it: every message so
/// far, a tool call and its result between each question and its answer.
fn window(turns: usize) -> Vec<Value> {
    let mut messages = Vec::new();
    for (turn, (question, topic)) in TURNS.iter().take(turns).enumerate() {
        messages.push(json!({"role": "user", "content": question}));
        messages.push(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": format!("call-{turn}"), "type": "function"}]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": format!("call-{turn}"),
            "content": format!("src/capture/worker.rs: {} lines read", 200 + turn)}),
        );
        messages.push(json!({"role": "assistant", "content": answer(turn, topic)}));
    }
    messages
}

/// Replays the session and reports what the classifier was sent and
/// answered, turn by turn.
pub async fn capture_cost(report: &mut Report) -> Result {
    let dir = ScratchDir::new()?;
    let upstream = Upstream::start_with(Setup {
        chat: Chat::Facts,
        ..Setup::BENCH
    })
    .await;
    let (server, _) = Server::start_on(dir.path(), EmbedderChoice::Fake, &upstream, |_| {}).await?;
    let client = server.client();
    let mut prompt = Vec::with_capacity(TURNS.len());
    let mut completion = Vec::with_capacity(TURNS.len());
    let mut before = upstream.usage();
    for turn in 1..=TURNS.len() {
        let body = json!({"session_id": "bench-session", "turn_id": format!("t{turn}"),
            "repo": "bench", "user": "ana", "messages": window(turn)});
        let (status, answer) = client.send("POST", "/turns", Some(&body)).await?;
        if status != 202 || answer["status"] != "queued" {
            return Err(format!("turn {turn}: /turns answered {status}: {answer}").into());
        }
        settled(&client, turn).await?;
        let after = upstream.usage();
        prompt.push(after.prompt_tokens - before.prompt_tokens);
        completion.push(after.completion_tokens - before.completion_tokens);
        before = after;
    }
    let (_, listed) = client
        .send("GET", "/memories?repo=bench&user=ana&limit=100", None)
        .await?;
    let written = listed["memories"].as_array().map_or(0, Vec::len);
    server.stop().await;
    if written != FACTS {
        return Err(
            format!("the session wrote {written} memories; it states {FACTS} facts").into(),
        );
    }
    report.figure(
        "capture-cost: classifier calls over 50 turns",
        count(before.calls),
        "",
    );
    report.figure("capture-cost: memories written", count(written as u64), "");
    for (name, tokens) in [("prompt", &mut prompt), ("completion", &mut completion)] {
        let total: u64 = tokens.iter().sum();
        tokens.sort_unstable();
        let figures = [
            ("per turn, p50", count(tokens[tokens.len() / 2])),
            ("per turn, max", count(tokens[tokens.len() - 1])),
            ("total", count(total)),
            ("per memory written", count(total) / count(written as u64)),
        ];
        for (what, value) in figures {
            report.figure(
                format!("capture-cost: {name} tokens {what}"),
                value,
                "tokens",
            );
        }
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "token counts stay below 2^52")]
pub(crate) fn count(value: u64) -> f64 {
    value as f64
}

/// Waits until `done` triggers were processed (each turn waits for its
/// pass, as an agent's next turn comes after the last one's capture).
pub(crate) async fn settled(client: &Client, done: usize) -> Result {
    loop {
        let (_, stats) = client.send("GET", "/stats", None).await?;
        let capture = &stats["capture"];
        if capture["failed"].as_u64().unwrap_or_default() > 0 {
            return Err(format!("a capture pass failed: {capture}").into());
        }
        if capture["processed"].as_u64().unwrap_or_default() >= done as u64
            && capture["queue_depth"] == 0
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
