//! `injection`: what the agent hooks put in an agent's context over a
//! coding session, and whether what each prompt needs is there.
//!
//! The store is the coding set's 40 project conventions and decisions
//! (`coding_eval.jsonl`, repo `orchid`; a tenth of them marked important)
//! and three of the user's preferences. A scripted session of 50 prompts
//! (a developer adding credit notes to the billing service: the schema,
//! the money type, tests, errors, logging, email, deploys, a few prompts
//! that need nothing) names, for each prompt, the memories it depends on.
//! The session is replayed as the hooks send it (the window so far, no
//! retrieval model: the latest prompt is the query), once as before
//! (`POST /retrieve` with no session: the start asks for the project by
//! a query, each prompt gets its best five within `token_budget`), then
//! as after for each setting measured (the start asks for the session's
//! brief, each prompt names the session), each on a fresh service.
//!
//! Each run reports the tokens injected over the session (`o200k_base`,
//! the injection texts; the guidance the start adds is the same in both
//! and not counted), per prompt, and the share of prompts whose needed
//! memories were all in the context: injected at that prompt or earlier
//! in the session (the start's included).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::floor;
use crate::measure::Report;
use crate::scratch::ScratchDir;
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result};

/// The project of the coding set.
const REPO: &str = "orchid";
const USER: &str = "ana";
const SESSION: &str = "bench-session";
/// The coding set's memories the team marked important.
const IMPORTANT: [usize; 4] = [0, 2, 6, 13];
/// The importance they carry.
const IMPORTANCE: f64 = 0.8;

/// The user's own preferences: (content, importance).
const PREFERENCES: [(&str, f64); 3] = [
    (
        "Ana wants answers short: the code first, the explanation after.",
        0.9,
    ),
    ("Ana works in VS Code with the Go extension and gopls.", 0.5),
    ("Ana prefers small commits that each do one thing.", 0.7),
];

/// The session: each prompt and the coding set's memories it needs.
const PROMPTS: [(&str, &[usize]); 50] = [
    (
        "Let's start on credit notes. We need a table for them; how do I add the schema change?",
        &[0],
    ),
    (
        "A credit note has an amount. What type should that column be?",
        &[13],
    ),
    ("Add when the credit note was issued to the table.", &[14]),
    ("Looks good, go on.", &[]),
    (
        "Now fetch the credit notes of an invoice from the database.",
        &[22],
    ),
    (
        "Write a test for the credit note repository's save method.",
        &[1],
    ),
    (
        "Why does my new repository test hang when I run it locally?",
        &[1],
    ),
    ("OK, it passes now.", &[]),
    ("Commit these changes.", &[6]),
    (
        "Add an endpoint that lists a customer's credit notes page by page.",
        &[37],
    ),
    (
        "What should the endpoint return when the invoice does not exist?",
        &[36],
    ),
    ("Handle the case where the invoice lookup times out.", &[2]),
    (
        "Add some output so we can see why issuing a credit note fails in production.",
        &[3],
    ),
    (
        "Print the incoming request payload in that line so I can debug it.",
        &[3],
    ),
    ("Thanks.", &[]),
    (
        "Write tests for the refund calculator, covering the edge cases.",
        &[32],
    ),
    (
        "Compute the total refunded for an invoice across its credit notes.",
        &[13],
    ),
    (
        "Rename the total field of the invoice response to amount while we are at it.",
        &[4],
    ),
    ("Fine, leave that as it is then.", &[]),
    ("Write the message for this bug fix.", &[6]),
    (
        "Send a receipt to the customer when a credit note is issued.",
        &[35],
    ),
    (
        "Can't we just build the email's HTML in the handler?",
        &[35],
    ),
    ("Upload the generated PDF credit notes somewhere.", &[26]),
    (
        "Show a message on the dashboard when a credit note is issued.",
        &[20],
    ),
    (
        "Hide the new credit notes page behind a toggle until finance signs off.",
        &[8],
    ),
    ("Track when a user downloads a credit note.", &[39]),
    (
        "Generating the PDFs is slow; do it after the request returns.",
        &[15],
    ),
    (
        "Store the exchange rates so we don't call the provider on every credit note.",
        &[17],
    ),
    (
        "Add the amount in the customer's currency to the credit note as well.",
        &[13],
    ),
    ("Show the credit note's date in the email.", &[14]),
    ("Run the tests again.", &[]),
    (
        "We need a library to render PDF files. Can we add one?",
        &[7],
    ),
    ("Make the timeout of the PDF client adjustable.", &[38]),
    ("Where should I put the API key for the PDF service?", &[9]),
    (
        "The finance service needs to ask the billing service for credit notes.",
        &[16],
    ),
    (
        "Add an alert when credit note generation keeps failing.",
        &[25],
    ),
    (
        "Document why we picked credit notes over editing invoices.",
        &[31],
    ),
    ("Add a column for the reason of the credit note.", &[0]),
    (
        "The retry loop should stop when the customer is not found.",
        &[2],
    ),
    ("Cover that case with a test too.", &[32]),
    ("Commit these changes.", &[6]),
    ("Merge my branch.", &[18]),
    ("How do I get this change live?", &[5]),
    ("The site is down, push my fix to prod right now.", &[5]),
    (
        "Stop clients from hammering the credit notes endpoint.",
        &[23],
    ),
    ("Save when the credit note was emailed.", &[14]),
    (
        "Store the billing addresses of the customers on the credit notes.",
        &[33],
    ),
    (
        "The admin table of credit notes needs next and previous buttons.",
        &[37],
    ),
    (
        "There's a newer version of the http client, should I upgrade it in my branch?",
        &[28],
    ),
    ("That's all for today, thanks!", &[]),
];

/// What one replay of the session injected.
struct Replay {
    /// Tokens of each injection: the start's first, then each prompt's.
    tokens: Vec<usize>,
    /// The memories injected at the start.
    at_start: usize,
    /// The prompts whose needed memories were all in the context.
    served: Vec<usize>,
}

/// The settings of one run after: `inject`'s three keys.
#[derive(Clone, Copy)]
struct Inject {
    session_start_tokens: usize,
    prompt_tokens: usize,
    min_relevance: f64,
}

/// What was measured, run by run.
#[derive(clap::Args)]
pub struct Settings {
    #[arg(long, value_enum, default_value_t = EmbedderChoice::Local)]
    embedder: EmbedderChoice,
    /// `inject.session_start_tokens` values measured.
    #[arg(long, value_delimiter = ',', default_value = "0,300,600,1000")]
    session_start_tokens: Vec<usize>,
    /// `inject.prompt_tokens` values measured.
    #[arg(long, value_delimiter = ',', default_value = "150,300")]
    prompt_tokens: Vec<usize>,
    /// `inject.min_relevance` values measured.
    #[arg(long, value_delimiter = ',', default_value = "0,0.4,0.45,0.5")]
    min_relevance: Vec<f64>,
}

/// Replays the session before, then after for every combination of the
/// settings, and reports each.
pub async fn injection(report: &mut Report, settings: &Settings) -> Result {
    let coding = floor::coding_items()?;
    let memories: Vec<&str> = coding.iter().map(|item| item.memory.as_str()).collect();
    let before = replay(&memories, settings.embedder, None).await?;
    figures(report, "before (no session)", &before, None);
    for &session_start_tokens in &settings.session_start_tokens {
        for &prompt_tokens in &settings.prompt_tokens {
            for &min_relevance in &settings.min_relevance {
                let inject = Inject {
                    session_start_tokens,
                    prompt_tokens,
                    min_relevance,
                };
                let after = replay(&memories, settings.embedder, Some(inject)).await?;
                let label = format!(
                    "after (start {session_start_tokens}, prompt {prompt_tokens}, floor {min_relevance})"
                );
                figures(report, &label, &after, Some(&before));
            }
        }
    }
    Ok(())
}

fn figures(report: &mut Report, label: &str, replay: &Replay, before: Option<&Replay>) {
    let total: usize = replay.tokens.iter().sum();
    let prompts = &replay.tokens[1..];
    let needy = PROMPTS
        .iter()
        .filter(|(_, needs)| !needs.is_empty())
        .count();
    #[expect(clippy::cast_precision_loss, reason = "token and prompt counts")]
    let (total_f, start, at_start, mean, most, served) = (
        total as f64,
        replay.tokens[0] as f64,
        replay.at_start as f64,
        prompts.iter().sum::<usize>() as f64 / prompts.len() as f64,
        prompts.iter().copied().max().unwrap_or(0) as f64,
        100.0 * replay.served.len() as f64 / needy as f64,
    );
    report.figure(format!("{label}: tokens injected per session"), total_f, "");
    report.figure(format!("{label}: tokens at the start"), start, "");
    report.figure(format!("{label}: memories at the start"), at_start, "");
    report.figure(format!("{label}: tokens per prompt, mean"), mean, "");
    report.figure(format!("{label}: tokens per prompt, most"), most, "");
    report.figure(
        format!("{label}: prompts needing a memory that had it in the context"),
        served,
        "%",
    );
    if let Some(before) = before {
        let lost = before
            .served
            .iter()
            .filter(|prompt| !replay.served.contains(prompt))
            .count();
        let before_total: usize = before.tokens.iter().sum();
        #[expect(clippy::cast_precision_loss, reason = "token and prompt counts")]
        let (lost, fewer) = (lost as f64, before_total as f64 / total.max(1) as f64);
        report.figure(
            format!("{label}: prompts that had their memory before and not now"),
            lost,
            "",
        );
        report.figure(format!("{label}: fewer tokens than before"), fewer, "×");
    }
}

/// One replay on a fresh service: before with `inject` `None`, after
/// with those settings.
async fn replay(
    memories: &[&str],
    embedder: EmbedderChoice,
    inject: Option<Inject>,
) -> Result<Replay> {
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start_with(dir.path(), embedder, |config| {
        // As most hooks run: no retrieval model, the prompt is the query.
        config.llm = None;
        if let Some(inject) = inject {
            config.inject.session_start_tokens = inject.session_start_tokens;
            config.inject.prompt_tokens = inject.prompt_tokens;
            config.inject.min_relevance = inject.min_relevance;
        }
    })
    .await?;
    let client = server.client();
    let ids = seed(&client, memories).await?;
    server.wait_indexed().await?;

    let with_session = inject.is_some();
    let mut start = json!({"turn_id": "start", "repo": REPO, "user": USER});
    if with_session {
        start["session_id"] = json!(SESSION);
    } else {
        // What the start hook asked for before the brief.
        start["query"] = json!(format!(
            "Conventions, decisions and preferences for working on {REPO}."
        ));
    }
    let mut in_context: HashSet<String> = HashSet::new();
    let mut tokens = vec![injected(&client.retrieve(&start).await?, &mut in_context)];
    let at_start = in_context.len();
    let mut window: Vec<Value> = Vec::new();
    let mut served = Vec::new();
    for (number, (prompt, needs)) in PROMPTS.iter().enumerate() {
        window.push(json!({"role": "user", "content": prompt}));
        let mut body = json!({
            "turn_id": format!("turn-{number}"),
            "repo": REPO,
            "user": USER,
            "messages": window,
        });
        if with_session {
            body["session_id"] = json!(SESSION);
        }
        let answer = client.retrieve(&body).await?;
        if answer["degraded"] != Value::Null {
            return Err(format!("a retrieval came back degraded: {answer}").into());
        }
        tokens.push(injected(&answer, &mut in_context));
        if !needs.is_empty() && needs.iter().all(|&need| in_context.contains(&ids[need])) {
            served.push(number);
        }
        window.push(json!({"role": "assistant", "content": format!("Done: {prompt}")}));
    }
    server.stop().await;
    Ok(Replay {
        tokens,
        at_start,
        served,
    })
}

/// Writes the coding set (some of it important) and the preferences;
/// the coding set's ids, in order.
async fn seed(client: &Client, memories: &[&str]) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(memories.len());
    for (number, content) in memories.iter().enumerate() {
        let mut body = json!({"scope": "repo", "repo": REPO, "user": USER,
            "category": "project-conventions", "content": content});
        if IMPORTANT.contains(&number) {
            body["importance"] = json!(IMPORTANCE);
        }
        let created = client.create(&body).await?;
        let id = created["id"]
            .as_str()
            .ok_or_else(|| format!("no id in {created}"))?;
        ids.push(id.to_owned());
    }
    for (content, importance) in PREFERENCES {
        let body = json!({"scope": "user", "repo": REPO, "user": USER,
            "category": "coding-preferences", "content": content, "importance": importance});
        client.create(&body).await?;
    }
    Ok(ids)
}

/// The tokens of `answer`'s injection; its injected memories join
/// `in_context`.
fn injected(answer: &Value, in_context: &mut HashSet<String>) -> usize {
    for memory in answer["memories"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if memory["injected"] == true
            && let Some(id) = memory["id"].as_str()
        {
            in_context.insert(id.to_owned());
        }
    }
    engram::tokens::count(answer["injection"].as_str().unwrap_or_default())
}
