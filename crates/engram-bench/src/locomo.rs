//! LoCoMo retrieval quality: every dialog turn of the chosen conversations
//! becomes a memory (one user namespace per conversation) through the HTTP
//! API, every question is asked through `POST /retrieve` in query mode,
//! and the benchmark's own scorer rates the returned turns.
//!
//! The data is read from `../shared/benchmarks/locomo/` (CC BY-NC: never
//! copied into the repository); results go to a scratch file.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::dump::Dump;
use crate::measure::{Report, Row};
use crate::scratch::ScratchDir;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result, Weighing};

/// Where the data is unless `--data` says otherwise.
pub const DEFAULT_DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/benchmarks/locomo"
);

const DEV: &[&str] = &["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"];
const TEST: &[&str] = &["conv-44", "conv-47", "conv-48", "conv-49", "conv-50"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    /// Tune here.
    Dev,
    /// Report here; never tune.
    Test,
    All,
}

impl Split {
    fn conversations(self) -> Vec<&'static str> {
        match self {
            Self::Dev => DEV.to_vec(),
            Self::Test => TEST.to_vec(),
            Self::All => DEV.iter().chain(TEST).copied().collect(),
        }
    }

    fn as_arg(self) -> &'static str {
        match self {
            Self::Dev => "dev",
            Self::Test => "test",
            Self::All => "all",
        }
    }
}

#[derive(Deserialize)]
struct Turn {
    dia_id: String,
    speaker: String,
    text: String,
    blip_caption: Option<String>,
}

#[derive(Deserialize)]
struct Question {
    conv_id: String,
    question_index: u64,
    question: String,
}

pub async fn locomo(
    report: &mut Report,
    split: Split,
    data: &Path,
    embedder: EmbedderChoice,
    out: Option<PathBuf>,
    weighing: Weighing,
    dump: Option<&Path>,
) -> Result {
    let queries_path = data.join("queries.jsonl");
    let scorer = data.join("score_locomo.py");
    if !queries_path.is_file() || !scorer.is_file() {
        return Err(format!(
            "the LoCoMo data is not at {} (it needs queries.jsonl, score_locomo.py and memories/); \
             point --data at the directory that holds them",
            data.display()
        )
        .into());
    }
    let conversations = split.conversations();
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start_with(dir.path(), embedder, |config| {
        weighing.apply(config);
    })
    .await?;
    let client = server.client();
    let mut dump = dump.map(Dump::create).transpose()?;

    let load_started = Instant::now();
    let mut dia_of: HashMap<String, String> = HashMap::new();
    let mut loaded = 0;
    for conversation in &conversations {
        let path = data.join("memories").join(format!("{conversation}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .map_err(|err| format!("reading {}: {err}", path.display()))?;
        let turns: Vec<Turn> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<std::result::Result<_, _>>()?;
        if let Some(dump) = &mut dump {
            for turn in &turns {
                dump.memory(conversation, &turn.dia_id, &content_of(turn))?;
            }
        }
        let bodies = turns
            .iter()
            .map(|turn| {
                json!({"scope": "user", "user": conversation, "category": "user-facts",
                "session_id": turn.session(), "content": content_of(turn)})
            })
            .collect();
        for (turn, created) in turns.iter().zip(client.create_each(bodies).await?) {
            let id = created["id"]
                .as_str()
                .ok_or_else(|| format!("no id in {created}"))?;
            dia_of.insert(id.to_owned(), turn.dia_id.clone());
            loaded += 1;
        }
    }
    server.wait_indexed().await?;
    let load_time = load_started.elapsed();

    let questions: Vec<Question> = std::fs::read_to_string(&queries_path)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<std::result::Result<Vec<Question>, _>>()?
        .into_iter()
        .filter(|question| conversations.contains(&question.conv_id.as_str()))
        .collect();
    let results_path = out.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("engram-locomo-{}.jsonl", split.as_arg()))
    });
    let mut results = std::fs::File::create(&results_path)?;
    let mut latencies = Vec::with_capacity(questions.len());
    let asked = Instant::now();
    for question in &questions {
        // Every turn is loaded at the same moment with no importance, so
        // recency, importance and access would only add noise: the eval
        // ranks by the match alone.
        let body = json!({
            "turn_id": format!("{}-{}", question.conv_id, question.question_index),
            "user": question.conv_id,
            "query": question.question,
            "top_k": 10,
            "hop_depth": 0,
            "token_budget": 128_000,
            "weights": engram::config::Weights::similarity_only(),
        });
        let started = Instant::now();
        let answer = client.retrieve(&body).await?;
        latencies.push(started.elapsed());
        if answer["degraded"] != Value::Null {
            return Err(format!("a retrieval came back degraded: {answer}").into());
        }
        writeln!(results, "{}", result_line(question, &answer, &dia_of))?;
        if let Some(dump) = &mut dump {
            // The scorer knows the evidence; the replay reads it there.
            let dia = |id: &str| dia_of.get(id).map(String::as_str);
            dump.question(&client, &question.conv_id, &body, &[], dia)
                .await?;
        }
    }
    if let Some(dump) = dump {
        dump.finish()?;
    }
    let wall = asked.elapsed();
    drop(results);
    server.stop().await;

    report.rows.push(Row::from_samples(
        "locomo retrieve (query, top 10)",
        format!("{} split, {embedder:?} embedder", split.as_arg()),
        &mut latencies,
        wall,
    ));
    report.figure(
        format!(
            "locomo memories loaded ({} conversations)",
            conversations.len()
        ),
        f64::from(loaded),
        "",
    );
    report.figure("locomo load and index time", load_time.as_secs_f64(), "s");
    report.figure("locomo questions asked", questions.len() as f64, "");
    let mut scoring = std::process::Command::new("python3");
    scoring.arg(&scorer).arg(&results_path);
    if split != Split::All {
        scoring.args(["--split", split.as_arg()]);
    }
    let scored = scoring.output()?;
    if !scored.status.success() {
        return Err(format!(
            "the scorer failed: {}",
            String::from_utf8_lossy(&scored.stderr)
        )
        .into());
    }
    eprintln!("results: {}", results_path.display());
    eprintln!("{}", String::from_utf8_lossy(&scored.stdout));
    Ok(())
}

/// The scorer's line for one question: the `dia_id`s of the memories the
/// retrieval returned, best first.
fn result_line(question: &Question, answer: &Value, dia_of: &HashMap<String, String>) -> Value {
    let retrieved: Vec<&str> = answer["memories"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|memory| dia_of.get(memory["id"].as_str()?).map(String::as_str))
        .collect();
    json!({"conv_id": question.conv_id, "question_index": question.question_index, "retrieved": retrieved})
}

impl Turn {
    /// The session the turn was said in: `D3` of `D3:12`, as an agent's
    /// memories carry the conversation they were captured from.
    fn session(&self) -> &str {
        self.dia_id
            .split_once(':')
            .map_or(self.dia_id.as_str(), |(session, _)| session)
    }
}

/// `"<speaker>: <text>"`, plus ` [image: <caption>]` for a shared image.
fn content_of(turn: &Turn) -> String {
    let mut content = format!("{}: {}", turn.speaker, turn.text);
    if let Some(caption) = &turn.blip_caption {
        content.push_str(&format!(" [image: {caption}]"));
    }
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returned_memories_map_back_to_their_turns_in_order() {
        let turns: Vec<Turn> = [
            r#"{"dia_id": "D1:1", "speaker": "Ana", "text": "I adopted a cat."}"#,
            r#"{"dia_id": "D1:2", "speaker": "Bo", "text": "Look!", "blip_caption": "a grey cat"}"#,
        ]
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
        assert_eq!(content_of(&turns[0]), "Ana: I adopted a cat.");
        assert_eq!(content_of(&turns[1]), "Bo: Look! [image: a grey cat]");
        let dia_of: HashMap<String, String> = [("id-1", "D1:1"), ("id-2", "D1:2")]
            .iter()
            .map(|(id, dia)| ((*id).to_owned(), (*dia).to_owned()))
            .collect();
        let question: Question = serde_json::from_str(
            r#"{"conv_id": "conv-1", "question_index": 3, "question": "What did Ana adopt?"}"#,
        )
        .unwrap();
        let answer = json!({"memories": [{"id": "id-2"}, {"id": "unknown"}, {"id": "id-1"}]});
        assert_eq!(
            result_line(&question, &answer, &dia_of),
            json!({"conv_id": "conv-1", "question_index": 3, "retrieved": ["D1:2", "D1:1"]})
        );
    }
}
