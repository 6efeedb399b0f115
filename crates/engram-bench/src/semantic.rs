//! Retrieval by meaning: `semantic_eval.jsonl`, a hand-written set of 150
//! memories, each with a question that asks for it in other words, and a
//! distractor that shares the question's incidental words ("the user",
//! "the team") but not its meaning. Every memory and distractor goes into
//! one user namespace; every question is asked in query mode, once with the
//! lexical fusion and once vector only, and the figures say how often an
//! answer comes first (top-1) and in the top five (R@5).
//!
//! An answer is the item's memory or one of the other memories its `also`
//! names: the facts of two people (Ana and Bea) share the namespace, so
//! "Does the user own a pet?" is answered by Bea's dog and by Ana's. No
//! distractor answers any question.
//!
//! The set is written for this repository (preferences, conventions,
//! decisions, facts about people and projects); it is no benchmark's data.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::dump::Dump;
use crate::measure::Report;
use crate::scratch::ScratchDir;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result, Weighing};

const EVAL_SET: &str = include_str!("semantic_eval.jsonl");

/// The user namespace that holds the set.
const NAMESPACE: &str = "eval";
/// Results asked for per question.
const TOP_K: usize = 5;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub memory: String,
    pub question: String,
    pub distractor: String,
    /// Other items whose memory answers this question too.
    #[serde(default)]
    pub also: Vec<usize>,
}

pub fn items() -> Result<Vec<Item>> {
    EVAL_SET
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(Into::into))
        .collect()
}

/// Top-1 and R@5 over the eval set, fused (at `lexical_weight`) and
/// vector only; the fused run's evidence goes to `dump` if given.
pub async fn semantic(
    report: &mut Report,
    embedder: EmbedderChoice,
    weighing: Weighing,
    dump: Option<&Path>,
) -> Result {
    let items = items()?;
    let mut dump = dump.map(Dump::create).transpose()?;
    let vector_only = Weighing {
        lexical_weight: 0.0,
        ..weighing
    };
    for (label, weighing) in [("fused", weighing), ("vector only", vector_only)] {
        let (top1, recall) = run(&items, embedder, weighing, dump.take()).await?;
        let weights = weighing.label();
        report.figure(
            format!("semantic eval top-1, {label} ({weights})"),
            top1,
            "%",
        );
        report.figure(
            format!("semantic eval R@{TOP_K}, {label} ({weights})"),
            recall,
            "%",
        );
    }
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    report.figure("semantic eval questions", items.len() as f64, "");
    Ok(())
}

/// Loads the set into a fresh service and asks every question: the share
/// (%) answered first and within the top five.
async fn run(
    items: &[Item],
    embedder: EmbedderChoice,
    weighing: Weighing,
    mut dump: Option<Dump>,
) -> Result<(f64, f64)> {
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start_with(dir.path(), embedder, |config| {
        weighing.apply(config);
    })
    .await?;
    let client = server.client();
    let mut id_of: HashMap<usize, String> = HashMap::new();
    // Memory ids to the dump's keys: `m<item>` or `d<item>` (its distractor).
    let mut key_of: HashMap<String, String> = HashMap::new();
    let written: Vec<(usize, &String, bool)> = items
        .iter()
        .enumerate()
        .flat_map(|(number, item)| {
            [
                (number, &item.memory, true),
                (number, &item.distractor, false),
            ]
        })
        .collect();
    let bodies = written
        .iter()
        .map(|(_, content, _)| json!({"scope": "user", "user": NAMESPACE, "category": "user-facts", "content": content}))
        .collect();
    let created = client.create_each(bodies).await?;
    for ((number, content, answer), created) in written.into_iter().zip(&created) {
        let id = created["id"]
            .as_str()
            .ok_or_else(|| format!("no id in {created}"))?;
        let key = format!("{}{number}", if answer { 'm' } else { 'd' });
        if let Some(dump) = &mut dump {
            dump.memory(NAMESPACE, &key, content)?;
        }
        key_of.insert(id.to_owned(), key);
        if answer {
            id_of.insert(number, id.to_owned());
        }
    }
    server.wait_indexed().await?;

    let (mut first, mut within) = (0usize, 0usize);
    for (number, item) in items.iter().enumerate() {
        let request = json!({
            "turn_id": format!("semantic-{number}"),
            "user": NAMESPACE,
            "query": item.question,
            "top_k": TOP_K,
            "hop_depth": 0,
            "weights": engram::config::Weights::similarity_only(),
        });
        let answer = client.retrieve(&request).await?;
        if answer["degraded"] != Value::Null {
            return Err(format!("a retrieval came back degraded: {answer}").into());
        }
        let returned: Vec<&str> = answer["memories"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|memory| memory["id"].as_str())
            .collect();
        let answers: Vec<&str> = std::iter::once(number)
            .chain(item.also.iter().copied())
            .map(|answer| id_of[&answer].as_str())
            .collect();
        first += usize::from(returned.first().is_some_and(|id| answers.contains(id)));
        within += usize::from(returned.iter().any(|id| answers.contains(id)));
        if let Some(dump) = &mut dump {
            let answers: Vec<&str> = answers.iter().map(|id| key_of[*id].as_str()).collect();
            let key = |id: &str| key_of.get(id).map(String::as_str);
            dump.question(&client, NAMESPACE, &request, &answers, key)
                .await?;
        }
    }
    server.stop().await;
    if let Some(dump) = dump {
        dump.finish()?;
    }
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let share = |count: usize| 100.0 * count as f64 / items.len() as f64;
    Ok((share(first), share(within)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eval_set_parses_and_holds_at_least_150_pairs() {
        let items = items().unwrap();
        assert!(items.len() >= 150, "{}", items.len());
        assert!(
            items
                .iter()
                .all(|item| !item.memory.is_empty() && !item.question.is_empty())
        );
        for (number, item) in items.iter().enumerate() {
            for &other in &item.also {
                assert!(
                    other < items.len() && other != number,
                    "item {number}: also {other}"
                );
            }
        }
    }
}
