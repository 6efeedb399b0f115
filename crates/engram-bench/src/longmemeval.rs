//! LongMemEval retrieval quality, scored as the benchmark's own retrieval
//! evaluation scores it. Each question's haystack goes into a user
//! namespace of its own through `POST /memories` (one memory per user
//! turn, or per session with `--granularity session`); the question is
//! asked through `POST /retrieve` in query mode; recall_any@k,
//! recall_all@k and NDCG@10 are reported at session level, and at turn
//! level for the turn variant, leaving out abstention questions. A
//! reference BM25 ranks the same documents in the same run. A second
//! retrieval with the service's defaults gives the tokens injected.
//!
//! The data is read from `../shared/benchmarks/longmemeval/` (MIT; never
//! copied into the repository). The data directory persists under
//! `target/longmemeval/<granularity>/` with its embedding cache, so the
//! haystacks are loaded and embedded once; later runs start over it.

mod bm25;
mod haystack;
mod loaded;
mod score;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::measure::{Report, Row};
use crate::server::{Client, Server};
use crate::workload::{EmbedderChoice, Result, Weighing};
use haystack::{Granularity, Half, Item, Place};
use loaded::Loaded;
use score::{Scores, Tally};

/// Where the data is unless `--data` says otherwise.
pub const DEFAULT_DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/benchmarks/longmemeval"
);
/// Where the loaded data directories persist unless `--work-dir` says.
pub const DEFAULT_WORK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/longmemeval");

/// Memories asked for per question: enough for ten distinct sessions in
/// the turn variant.
const RANKED: usize = 50;

#[derive(clap::Args)]
pub struct Settings {
    #[arg(long, value_enum, default_value_t = Granularity::Turn)]
    granularity: Granularity,
    /// The fixed half of the questions (by the SHA-256 of `question_id`).
    #[arg(long, value_enum, default_value_t = Half::Tune)]
    half: Half,
    /// Only the first N questions of the half (in digest order), for quick runs.
    #[arg(long)]
    questions: Option<usize>,
    /// Only questions of this type (e.g. `temporal-reasoning`).
    #[arg(long)]
    question_type: Option<String>,
    /// The directory that holds `longmemeval_s_useronly.json.gz`.
    #[arg(long, default_value = DEFAULT_DATA)]
    data: PathBuf,
    /// Where the loaded data directories and the results persist.
    #[arg(long, default_value = DEFAULT_WORK)]
    work_dir: PathBuf,
    /// Ask without the question's date (`as_of`): as a client that does
    /// not know when it asks, or as Engram before it knew time.
    #[arg(long)]
    without_dates: bool,
    /// `retrieval.time_weight`: how much the time a question names counts.
    #[arg(long, default_value_t = engram::config::Retrieval::default().time_weight)]
    time_weight: f64,
    #[command(flatten)]
    weighing: Weighing,
}

/// One system's tallies.
#[derive(Default)]
struct Tallies {
    session: Tally,
    turn: Tally,
}

impl Tallies {
    /// Scores one ranking of places against the item's evidence.
    fn add(&mut self, item: &Item, ranking: &[Place], granularity: Granularity) {
        let sessions = score::first_places(ranking.iter().map(|place| place.session));
        self.session
            .add(&Scores::of(&sessions, &item.evidence_sessions()));
        let turns = item.evidence_turns();
        // The turn level needs turns to find: questions whose evidence is
        // in the assistant's turns only have none among the user's.
        if granularity == Granularity::Turn && !turns.is_empty() {
            let ranked = score::first_places(ranking.iter().copied());
            self.turn.add(&Scores::of(&ranked, &turns));
        }
    }
}

pub async fn longmemeval(report: &mut Report, settings: Settings) -> Result {
    let Settings {
        granularity,
        half,
        questions,
        question_type,
        data,
        work_dir,
        without_dates,
        time_weight,
        weighing,
    } = settings;
    let items = haystack::read(&data)?;
    let mut chosen: Vec<&Item> = items
        .iter()
        .filter(|item| !item.abstains() && half.holds(&item.question_id))
        .filter(|item| {
            question_type
                .as_deref()
                .is_none_or(|kind| item.question_type == kind)
        })
        .collect();
    chosen.sort_by_key(|item| haystack::digest(&item.question_id));
    chosen.truncate(questions.unwrap_or(usize::MAX));

    let dir = work_dir.join(granularity.as_arg());
    let data_dir = dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let mut loaded = Loaded::open(&dir.join("loaded.jsonl"))?;
    for item in &chosen {
        let partial = data_dir.join("users").join(&item.question_id);
        if loaded.get(&item.question_id).is_none() && partial.exists() {
            std::fs::remove_dir_all(&partial)?;
        }
    }
    let (server, ready_in) = Server::start_with(&data_dir, EmbedderChoice::Local, |config| {
        weighing.apply(config);
        config.retrieval.time_weight = time_weight;
    })
    .await?;
    let client = server.client();
    let variant = format!(
        "{} half, {} granularity, {}{}",
        half.as_arg(),
        granularity.as_arg(),
        weighing.label(),
        if without_dates {
            ", without dates".to_owned()
        } else {
            format!(", time_weight {time_weight}")
        }
    );
    report.rows.push(Row::single(
        "longmemeval startup",
        variant.clone(),
        ready_in,
    ));

    let load_started = Instant::now();
    for item in &chosen {
        if loaded.get(&item.question_id).is_none() {
            loaded.record(load(&client, item, granularity).await?)?;
        }
    }
    wait_indexed(&client).await?;
    report.figure(
        format!("longmemeval load and index time ({variant}; haystacks of earlier runs excluded)"),
        load_started.elapsed().as_secs_f64(),
        "s",
    );

    let results_path = dir.join(format!("results-{}.jsonl", half.as_arg()));
    let mut results = std::fs::File::create(&results_path)?;
    let (mut engram, mut reference) = (Tallies::default(), Tallies::default());
    let mut by_type: HashMap<&str, Tally> = HashMap::new();
    let (mut ranked_latencies, mut default_latencies) = (Vec::new(), Vec::new());
    let (mut tokens, mut injected) = (Vec::new(), Vec::new());
    let (mut memories, mut refused) = (0, 0);
    let asked = Instant::now();
    for item in &chosen {
        let record = loaded
            .get(&item.question_id)
            .ok_or("a question was not loaded")?;
        memories += record.memories.len();
        refused += record.refused;
        let place_of: HashMap<&str, Place> = record
            .memories
            .iter()
            .map(|(id, place)| (id.as_str(), *place))
            .collect();

        // Every memory is loaded at the same moment with no importance, so
        // the eval ranks by the match alone, as the LoCoMo workload does.
        let mut ranked = json!({
            "turn_id": format!("lme-{}", item.question_id),
            "user": item.question_id,
            "query": item.question,
            "top_k": RANKED,
            "hop_depth": 0,
            "token_budget": 128_000,
            "weights": engram::config::Weights::similarity_only(),
        });
        let asked_at = (!without_dates)
            .then(|| haystack::asked_at(item))
            .transpose()?;
        if let Some(asked_at) = &asked_at {
            ranked["as_of"] = json!(asked_at);
        }
        let (answer, took) = retrieve(&client, &ranked).await?;
        ranked_latencies.push(took);
        let returned = answer["memories"].as_array().map(Vec::as_slice);
        let scored: Vec<(Place, &Value)> = returned
            .unwrap_or_default()
            .iter()
            .filter_map(|memory| Some((*place_of.get(memory["id"].as_str()?)?, &memory["scores"])))
            .collect();
        let ranking: Vec<Place> = scored.iter().map(|(place, _)| *place).collect();
        let scored: Vec<Value> = scored
            .iter()
            .map(|(place, scores)| json!([place.session, place.turn, scores]))
            .collect();
        engram.add(item, &ranking, granularity);
        let sessions = score::first_places(ranking.iter().map(|place| place.session));
        by_type
            .entry(&item.question_type)
            .or_default()
            .add(&Scores::of(&sessions, &item.evidence_sessions()));

        let documents = item.documents(granularity);
        let texts: Vec<&str> = documents.iter().map(|doc| doc.text.as_str()).collect();
        let bm25: Vec<Place> = bm25::rank(&texts, &item.question)
            .into_iter()
            .map(|index| documents[index].place)
            .collect();
        reference.add(item, &bm25, granularity);

        let mut defaults = json!({
            "turn_id": format!("lme-default-{}", item.question_id),
            "user": item.question_id,
            "query": item.question,
        });
        if let Some(asked_at) = &asked_at {
            defaults["as_of"] = json!(asked_at);
        }
        let (answer, took) = retrieve(&client, &defaults).await?;
        default_latencies.push(took);
        let injection = answer["injection"].as_str().unwrap_or_default();
        tokens.push(engram::tokens::count(injection));
        let returned = answer["memories"].as_array().map(Vec::as_slice);
        let fitted = returned.unwrap_or_default().iter();
        injected.push(fitted.filter(|memory| memory["injected"] == true).count());

        let session_ids = |places: &[Place]| -> Vec<&str> {
            score::first_places(places.iter().map(|place| place.session))
                .into_iter()
                .take(10)
                .map(|session| item.sessions[session as usize].session_id.as_str())
                .collect()
        };
        let line = json!({"question_id": item.question_id, "question_type": item.question_type,
            "evidence": item.answer_session_ids, "engram": session_ids(&ranking),
            "bm25": session_ids(&bm25), "scored": scored});
        writeln!(results, "{line}")?;
    }
    let wall = asked.elapsed();
    server.stop().await;
    eprintln!("results: {}", results_path.display());

    report.rows.push(Row::from_samples(
        "longmemeval retrieve (query, top 50, similarity weights)",
        variant.clone(),
        &mut ranked_latencies,
        wall,
    ));
    report.rows.push(Row::from_samples(
        "longmemeval retrieve (query, the defaults)",
        variant.clone(),
        &mut default_latencies,
        wall,
    ));
    report.figure(
        format!("longmemeval questions scored ({variant})"),
        count(chosen.len()),
        "",
    );
    report.figure(
        "longmemeval memories of those questions",
        count(memories),
        "",
    );
    report.figure(
        "longmemeval documents refused (looked like a secret)",
        count(refused),
        "",
    );
    for (system, tallies) in [("Engram", &engram), ("BM25", &reference)] {
        let mut levels = vec![("session", &tallies.session)];
        if granularity == Granularity::Turn {
            levels.push(("turn", &tallies.turn));
        }
        for (level, tally) in levels {
            for (metric, value) in tally.percentages() {
                report.figure(
                    format!("{level} {metric}, {system} (n {})", tally.questions),
                    value,
                    "%",
                );
            }
        }
    }
    let mut types: Vec<_> = by_type.into_iter().collect();
    types.sort_by_key(|(name, _)| *name);
    for (name, tally) in types {
        let any5 = tally.percentages()[0].1;
        report.figure(
            format!(
                "session recall_any@5, Engram, {name} (n {})",
                tally.questions
            ),
            any5,
            "%",
        );
    }
    for (quantile, name) in [(0.5, "median"), (0.95, "p95")] {
        report.figure(
            format!("tokens injected per question, the defaults, {name}"),
            count(score::percentile(&mut tokens, quantile)),
            "",
        );
        report.figure(
            format!("memories injected per question, the defaults, {name}"),
            count(score::percentile(&mut injected, quantile)),
            "",
        );
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "a count")]
fn count(value: usize) -> f64 {
    value as f64
}

/// Writes `item`'s documents as memories of its own user namespace.
async fn load(client: &Client, item: &Item, granularity: Granularity) -> Result<loaded::Question> {
    let mut question = loaded::Question {
        question_id: item.question_id.clone(),
        memories: Vec::new(),
        refused: 0,
        sessions: true,
        observed: true,
    };
    let documents = item.documents(granularity);
    let mut bodies = Vec::with_capacity(documents.len());
    for document in &documents {
        let session = &item.sessions[document.place.session as usize];
        bodies.push(json!({"scope": "user", "user": item.question_id,
            "category": "user-facts", "session_id": session.session_id,
            "observed_at": haystack::rfc3339(&session.date)?, "content": document.text}));
    }
    let results = client.create_all(bodies).await?;
    for (document, result) in documents.into_iter().zip(results) {
        let problem = &result["problem"];
        match result["status"].as_u64() {
            Some(201) => {
                let id = result["memory"]["id"]
                    .as_str()
                    .ok_or_else(|| format!("no id in {result}"))?;
                question.memories.push((id.to_owned(), document.place));
            }
            Some(422)
                if problem["type"]
                    .as_str()
                    .is_some_and(|kind| kind.ends_with("secret-content")) =>
            {
                question.refused += 1;
            }
            _ => return Err(format!("POST /memories/batch refused a memory: {result}").into()),
        }
    }
    Ok(question)
}

async fn retrieve(client: &Client, body: &Value) -> Result<(Value, Duration)> {
    let started = Instant::now();
    let answer = client.retrieve(body).await?;
    let took = started.elapsed();
    if answer["degraded"] != Value::Null {
        return Err(format!("a retrieval came back degraded: {answer}").into());
    }
    Ok((answer, took))
}

/// Waits until every vector is in the index, saying how many are left
/// every half minute (the first load embeds for minutes).
async fn wait_indexed(client: &Client) -> Result {
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        let (_, stats) = client.send("GET", "/stats", None).await?;
        let pending = &stats["index"]["pending"];
        if *pending == 0 {
            return Ok(());
        }
        if said.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "longmemeval: {pending} memories still to index after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
