//! What the vector search's floor (`retrieval.min_similarity`) costs and
//! what it saves, on two sets: the semantic set and the coding set
//! (`coding_eval.jsonl`: 40 project conventions and decisions, each with
//! two task prompts that need it in other words, as a developer types
//! them: "add a column to invoices" for the migrations convention).
//!
//! Each set goes into one namespace of a service searching with no floor,
//! and every prompt asks for every memory (the whole store: no floor
//! applies), vector only (the floor judges
//! cosines; a memory's words bring it back past any floor). For each floor
//! of a range (0: any positive cosine) the figures say:
//! - how many prompts' own memory falls under it: what the floor would
//!   lose in a store of a few memories (which is why a store no larger
//!   than `top_k` is answered whole);
//! - what share of the other memories passes it: what such a store
//!   would inject that the prompt did not need;
//! - R@5 over the whole set at that floor.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::measure::Report;
use crate::scratch::ScratchDir;
use crate::semantic;
use crate::server::Server;
use crate::workload::{EmbedderChoice, Result};

const CODING_SET: &str = include_str!("coding_eval.jsonl");

/// The floors measured (the default among them).
const FLOORS: [f64; 9] = [0.0, 0.02, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15];
/// Results that count as found in the R@5 column.
const TOP_K: usize = 5;
/// Enough for every memory of either set.
const ALL: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodingItem {
    pub memory: String,
    pub prompts: Vec<String>,
}

pub fn coding_items() -> Result<Vec<CodingItem>> {
    CODING_SET
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(Into::into))
        .collect()
}

/// A set as the measure sees it: memories, and prompts with the memories
/// (by position) that answer each.
struct Set {
    name: &'static str,
    memories: Vec<String>,
    prompts: Vec<(String, Vec<usize>)>,
}

fn sets() -> Result<[Set; 2]> {
    let semantic = semantic::items()?;
    // Memory 2n is item n's, 2n + 1 its distractor.
    let semantic = Set {
        name: "semantic set",
        memories: semantic
            .iter()
            .flat_map(|item| [item.memory.clone(), item.distractor.clone()])
            .collect(),
        prompts: semantic
            .iter()
            .enumerate()
            .map(|(number, item)| {
                let answers = std::iter::once(number)
                    .chain(item.also.iter().copied())
                    .map(|answer| 2 * answer)
                    .collect();
                (item.question.clone(), answers)
            })
            .collect(),
    };
    let coding = coding_items()?;
    let coding = Set {
        name: "coding set",
        memories: coding.iter().map(|item| item.memory.clone()).collect(),
        prompts: coding
            .iter()
            .enumerate()
            .flat_map(|(number, item)| {
                item.prompts
                    .iter()
                    .map(move |prompt| (prompt.clone(), vec![number]))
            })
            .collect(),
    };
    Ok([semantic, coding])
}

/// For every prompt of `set`, every memory's similarity to it (as the
/// service reports it: clamped to 0..1, so 0 stands for 0 or less).
async fn similarities(set: &Set, embedder: EmbedderChoice) -> Result<Vec<Vec<f64>>> {
    let dir = ScratchDir::new()?;
    let (server, _) = Server::start_with(dir.path(), embedder, |config| {
        config.retrieval.min_similarity = 0.0;
        config.retrieval.lexical_weight = 0.0;
    })
    .await?;
    let client = server.client();
    let bodies = set
        .memories
        .iter()
        .map(|content| json!({"scope": "repo", "repo": "floor", "category": "project-conventions", "content": content}))
        .collect();
    let mut ids = Vec::with_capacity(set.memories.len());
    for created in client.create_each(bodies).await? {
        let id = created["id"]
            .as_str()
            .ok_or_else(|| format!("no id in {created}"))?;
        ids.push(id.to_owned());
    }
    server.wait_indexed().await?;
    let mut all = Vec::with_capacity(set.prompts.len());
    for (number, (prompt, _)) in set.prompts.iter().enumerate() {
        let request = json!({
            "turn_id": format!("floor-{number}"),
            "repo": "floor",
            "query": prompt,
            "top_k": ALL,
            "hop_depth": 0,
            "weights": engram::config::Weights::similarity_only(),
        });
        let answer = client.retrieve(&request).await?;
        if answer["degraded"] != Value::Null {
            return Err(format!("a retrieval came back degraded: {answer}").into());
        }
        let mut similarity = vec![0.0; ids.len()];
        for memory in answer["memories"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let (Some(id), Some(score)) = (
                memory["id"].as_str(),
                memory["scores"]["similarity"].as_f64(),
            ) else {
                continue;
            };
            if let Some(position) = ids.iter().position(|known| known == id) {
                similarity[position] = score;
            }
        }
        all.push(similarity);
    }
    server.stop().await;
    Ok(all)
}

pub async fn floor(report: &mut Report, embedder: EmbedderChoice) -> Result {
    for set in sets()? {
        let similarities = similarities(&set, embedder).await?;
        for floor in FLOORS {
            let (mut lost, mut passing, mut others, mut found) = (0usize, 0usize, 0usize, 0usize);
            for ((_, answers), row) in set.prompts.iter().zip(&similarities) {
                let best_answer = answers
                    .iter()
                    .map(|&answer| row[answer])
                    .fold(0.0, f64::max);
                // A cosine of 0 or less is found by no floor.
                let under = |similarity: f64| similarity < floor || similarity <= 0.0;
                lost += usize::from(under(best_answer));
                for (memory, &similarity) in row.iter().enumerate() {
                    if !answers.contains(&memory) {
                        others += 1;
                        passing += usize::from(!under(similarity));
                    }
                }
                // Rank among those over the floor, as the search would.
                let closer = row
                    .iter()
                    .enumerate()
                    .filter(|&(memory, &similarity)| {
                        !answers.contains(&memory) && !under(similarity) && similarity > best_answer
                    })
                    .count();
                found += usize::from(!under(best_answer) && closer < TOP_K);
            }
            #[expect(clippy::cast_precision_loss, reason = "small counts")]
            let share = |count: usize, of: usize| 100.0 * count as f64 / of as f64;
            let prompts = set.prompts.len();
            let name = set.name;
            report.figure(
                format!("{name}, floor {floor}: prompts whose memory is under it"),
                share(lost, prompts),
                "%",
            );
            report.figure(
                format!("{name}, floor {floor}: other memories over it"),
                share(passing, others),
                "%",
            );
            report.figure(
                format!("{name}, floor {floor}: R@{TOP_K}"),
                share(found, prompts),
                "%",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coding_set_parses_with_two_prompts_a_memory() {
        let items = coding_items().unwrap();
        assert!(items.len() >= 40, "{}", items.len());
        assert!(items.iter().all(|item| item.prompts.len() == 2));
    }
}
