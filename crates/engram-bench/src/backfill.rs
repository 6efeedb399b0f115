//! `backfill`: `engram import claude-code` over 200 generated sessions.
//! Each session is a Claude Code transcript (JSON Lines, in the agent's
//! directory layout) of five turns from the capture-cost session (a user
//! asking, an assistant answering with a tool call, the tool's output
//! between, which the backfill strips); the facts recur every ten
//! sessions, as a person's conventions recur across sessions. The backfill
//! runs in process (the same code as the command) against a served Engram
//! whose classifier is the fake upstream (one memory per fact sentence, a
//! token per four characters); the workload reports how long sending and
//! classifying took, the compactions sent, the tokens the backfill
//! estimated against those the classifier was sent, the memories written,
//! and what a second run sends (nothing).

use std::path::Path;
use std::time::Instant;

use engram::client::agent::Agent;
use engram::client::http::ServerArgs;
use engram::client::import::transcripts::{self, TranscriptArgs};
use engram_fake_upstream::{Chat, Setup, Upstream};
use serde_json::json;

use crate::capture_cost::{TURNS, count, settled};
use crate::measure::Report;
use crate::scratch::ScratchDir;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

/// Turns per session.
const TURNS_PER_SESSION: usize = 5;

/// The tool output between the turns: stripped, never sent.
const TOOL_OUTPUT_BYTES: usize = 4096;

pub async fn backfill(report: &mut Report, sessions: usize) -> Result {
    let dir = ScratchDir::new()?;
    let project = dir.path().join("forge");
    let root = dir.path().join("claude/projects");
    write_sessions(&root, &project, sessions)?;
    let upstream = Upstream::start_with(Setup {
        chat: Chat::Facts,
        ..Setup::BENCH
    })
    .await;
    let data = dir.path().join("data");
    let (server, _) = Server::start_on(&data, EmbedderChoice::Fake, &upstream, |_| {}).await?;
    let args = TranscriptArgs {
        server: ServerArgs {
            url: server.client().base_url().to_owned(),
        },
        project: None,
        since: None,
        dry_run: false,
        repo: None,
        user: Some("ana".to_owned()),
        transcripts: Some(root),
        state: Some(dir.path().join("import-state.json")),
    };
    let started = Instant::now();
    let said = transcripts::run(&args, Agent::ClaudeCode).await?;
    let sent_in = started.elapsed();
    let client = server.client();
    settled(&client, sessions).await?;
    let classified_in = started.elapsed();
    let spent = upstream.usage();
    let (_, stats) = client.send("GET", "/stats", None).await?;
    let (_, listed) = client
        .send("GET", "/memories?repo=forge&user=ana&limit=1000", None)
        .await?;
    let again_started = Instant::now();
    let again = transcripts::run(&args, Agent::ClaudeCode).await?;
    let again_in = again_started.elapsed();
    server.stop().await;

    let name = format!("backfill ({sessions} sessions)");
    report.figure(
        format!("{name}: compactions sent"),
        count(stats["capture"]["accepted"].as_u64().unwrap_or(0)),
        "",
    );
    report.figure(format!("{name}: sent in"), sent_in.as_secs_f64(), "s");
    report.figure(
        format!("{name}: classified in"),
        classified_in.as_secs_f64(),
        "s",
    );
    report.figure(
        format!("{name}: tokens estimated"),
        count(estimated(&said)?),
        "tokens",
    );
    report.figure(
        format!("{name}: prompt tokens spent"),
        count(spent.prompt_tokens),
        "tokens",
    );
    report.figure(
        format!("{name}: completion tokens spent"),
        count(spent.completion_tokens),
        "tokens",
    );
    report.figure(
        format!("{name}: memories written"),
        count(listed["memories"].as_array().map_or(0, Vec::len) as u64),
        "",
    );
    report.figure(
        format!("{name}: second run, compactions sent"),
        count(sent(&again)?),
        "",
    );
    report.figure(
        format!("{name}: second run took"),
        again_in.as_secs_f64(),
        "s",
    );
    Ok(())
}

/// The `~N` tokens a backfill's summary estimates.
fn estimated(said: &str) -> Result<u64> {
    let start = said
        .find('~')
        .ok_or_else(|| format!("no estimate in {said:?}"))?
        + 1;
    Ok(said[start..]
        .split(' ')
        .next()
        .unwrap_or_default()
        .parse()?)
}

/// The compactions a backfill's summary says it sent.
fn sent(said: &str) -> Result<u64> {
    Ok(said
        .strip_prefix("sent ")
        .and_then(|rest| rest.split(' ').next())
        .ok_or_else(|| format!("no count in {said:?}"))?
        .parse()?)
}

/// `sessions` transcripts of the project at `project`, in Claude Code's
/// layout under `root`.
fn write_sessions(root: &Path, project: &Path, sessions: usize) -> Result {
    let encoded: String = project
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = root.join(encoded);
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(project.join(".git"))?;
    let cwd = project.display().to_string();
    let output = "x".repeat(TOOL_OUTPUT_BYTES);
    for session in 0..sessions {
        let id = format!("00000000-0000-4000-8000-{session:012}");
        let mut lines = Vec::new();
        let line = |kind: &str, message: serde_json::Value| {
            json!({"type": kind, "cwd": cwd, "sessionId": id, "isSidechain": false,
                "message": message})
            .to_string()
        };
        for turn in 0..TURNS_PER_SESSION {
            let (asked, topic) = TURNS[(session * TURNS_PER_SESSION + turn) % TURNS.len()];
            lines.push(line("user", json!({"role": "user", "content": asked})));
            lines.push(line(
                "assistant",
                json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Let me look at {topic} first.")},
                {"type": "tool_use", "id": format!("t{turn}"), "name": "Bash",
                    "input": {"command": "grep -rn TODO src"}}]}),
            ));
            lines.push(line(
                "user",
                json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{turn}"), "content": output}]}),
            ));
            lines.push(line(
                "assistant",
                json!({"role": "assistant", "content": [
                {"type": "text", "text": format!(
                    "Done: {topic}. I changed the module, ran the tests and they pass; \
                     the change is small and keeps the existing behaviour.")}]}),
            ));
        }
        std::fs::write(dir.join(format!("{id}.jsonl")), lines.join("\n") + "\n")?;
    }
    Ok(())
}
