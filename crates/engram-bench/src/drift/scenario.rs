//! The drift workload's story: a repository of 60 modules evolves over
//! 100 commits while memories about it are written, and each memory's
//! truth at the end is known. What happens, in commit order:
//!
//! - 60 memories, one per module, anchored to its file and function at the
//!   first commit; 9 of them the classifier wrote and nobody confirmed
//!   (`provisional`), the others confirmed.
//! - 25 modules rewritten (their memory still holds), 10 renamed with
//!   `git mv` (still holds), 8 deleted and 7 stripped of the function the
//!   memory names (stale: the code is gone).
//! - 10 conventions changed: 5 written as a new version of the old one,
//!   5 as a separate memory, as a classifier in another session would
//!   (the old one then stale).
//! - 10 decisions, each with two memories that depend on it (`related`);
//!   5 decisions replaced by a new version, which makes the memories that
//!   depend on them stale.
//! - 10 dead ends: approaches tried and abandoned, captured as provisional
//!   facts and never confirmed (stale).
//! - 49 commits that add files nothing is remembered about.
//!
//! Then 50 questions: 30 about modules, 10 about conventions, 5 about
//! decisions and 5 about dead ends, each with its right memory where one
//! holds at the end.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use engram::memory::{ContentHash, MemoryId};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tree::Tree;
use crate::corpus::Rng;
use crate::workload::Result;

/// The repo the memories belong to.
pub const REPO: &str = "drift";

/// The story's words: its modules, what they do, the conventions, the
/// decisions and the dead ends.
const STORY: &str = include_str!("story.json");

#[derive(Deserialize)]
struct Words {
    modules: Vec<String>,
    behaviours: Vec<String>,
    conventions: Vec<Convention>,
    decisions: Vec<Decision>,
    dead_ends: Vec<DeadEnd>,
}

#[derive(Deserialize)]
struct Convention {
    area: String,
    old: String,
    new: String,
}

/// A decision first made, the one that replaced it (for the first five),
/// and what follows from the first.
#[derive(Deserialize)]
struct Decision {
    subject: String,
    first: String,
    then: String,
    consequences: Vec<String>,
}

/// An approach tried and abandoned, and what it was for.
#[derive(Deserialize)]
struct DeadEnd {
    approach: String,
    purpose: String,
}

/// Why a memory no longer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stale {
    CodeGone,
    FactReplaced,
    DecisionReplaced,
    DeadEnd,
}

/// A memory of the story.
pub struct Written {
    /// Its line for `POST /memories/import`.
    pub line: Value,
    pub stale: Option<Stale>,
}

/// A new version written later, through `POST /memories` (which puts the
/// memories linked to the old one under review).
pub struct Superseding {
    pub old: MemoryId,
    pub content: String,
    pub category: &'static str,
    /// When it is said, for capture through the hooks (the import writes
    /// it at the end, as the published figures had it).
    pub at: String,
}

pub struct Question {
    pub text: String,
    /// The memory that answers it at the end, if one does.
    pub right: Option<Answer>,
}

/// A right answer: a memory written at first, or the new version
/// superseding one (whose id is known only once it is written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Memory(MemoryId),
    VersionOf(MemoryId),
}

pub struct Story {
    pub tree: Tree,
    pub commits: usize,
    pub written: Vec<Written>,
    pub superseding: Vec<Superseding>,
    pub questions: Vec<Question>,
    /// The memories that depend on a replaced decision: what invalidation
    /// along links must flag, and nothing else.
    pub linked_to_replaced: Vec<MemoryId>,
}

fn module_file(module: &str) -> String {
    format!("src/{module}.rs")
}

fn function(module: &str) -> String {
    format!("{module}_handle")
}

fn module_source(module: &str, revision: usize, with_function: bool) -> String {
    let body = if with_function {
        format!(
            "pub fn {}(input: &str) -> usize {{\n    input.len() + {revision}\n}}\n",
            function(module)
        )
    } else {
        String::new()
    };
    format!(
        "//! The {module} module, revision {revision}.\n\n{body}pub const REVISION: usize = {revision};\n"
    )
}

/// The moment `days` days before `now`, plus `minutes`.
fn at(now: DateTime<Utc>, days: i64, minutes: i64) -> String {
    (now - TimeDelta::days(days) + TimeDelta::minutes(minutes)).to_rfc3339()
}

fn line(content: &str, category: &str, written: &str, fields: &Value) -> Value {
    let mut line = json!({
        "id": MemoryId::new().to_string(), "version": 1, "scope": "repo", "repo": REPO,
        "category": category, "created_at": written, "updated_at": written,
        "related": [], "trigger": "turn", "content": content,
    });
    for (key, value) in fields.as_object().into_iter().flatten() {
        line[key] = value.clone();
    }
    line
}

fn id_of(line: &Value) -> MemoryId {
    line["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("every line has an id")
}

/// The story at its first commit: the modules in the tree and the
/// memories about them, before anything happens to them (where capture
/// through the hooks reads them).
pub struct Beginning {
    pub tree: Tree,
    /// The modules' memories.
    pub written: Vec<Written>,
    words: Words,
    rng: Rng,
    /// Each module's memory, by the module's place.
    module_memories: HashMap<usize, MemoryId>,
}

/// Plays the story in a new repository in `dir`.
#[cfg(test)]
pub fn play(dir: &std::path::Path, now: DateTime<Utc>) -> Result<Story> {
    go_on(begin(dir, now)?, now)
}

/// The story's first commit in a new repository in `dir`, and the
/// modules' memories, written at it 100 days before `now`.
pub fn begin(dir: &std::path::Path, now: DateTime<Utc>) -> Result<Beginning> {
    let words: Words = serde_json::from_str(STORY)?;
    let modules: Vec<&str> = words.modules.iter().map(String::as_str).collect();
    let tree = Tree::init(dir)?;
    let mut rng = Rng::new(46);
    for &module in &modules {
        tree.write(&module_file(module), &module_source(module, 0, true))?;
    }
    let first = tree.commit("the first modules")?;
    let mut written = Vec::new();

    // The modules' memories, written at the first commit, 100 days ago.
    let mut order: Vec<usize> = (0..modules.len()).collect();
    shuffle(&mut rng, &mut order);
    let mut module_memories = HashMap::new();
    for (index, &module) in modules.iter().enumerate() {
        let path = module_file(module);
        let hash = ContentHash::of(tree.read(&path)?.as_bytes());
        let provisional = order.iter().position(|&at| at == index) >= Some(51);
        let behaviour = &words.behaviours[index % words.behaviours.len()];
        let content = format!(
            "The {module} module's {} function in {path} {behaviour}.",
            function(module)
        );
        let confidence = if provisional {
            "provisional"
        } else {
            "confirmed"
        };
        let memory = line(
            &content,
            "patterns",
            &at(now, 100, index as i64),
            &json!({"anchors": [{"path": path, "symbol": function(module), "hash": hash.as_str()}],
                   "commit": first, "confidence": confidence}),
        );
        module_memories.insert(index, id_of(&memory));
        written.push(Written {
            line: memory,
            stale: None,
        });
    }
    Ok(Beginning {
        tree,
        written,
        words,
        rng,
        module_memories,
    })
}

/// The rest of the story after [`begin`]: what happens to the modules,
/// the conventions, the decisions and the dead ends, and the commits that
/// touch nothing remembered.
pub fn go_on(beginning: Beginning, now: DateTime<Utc>) -> Result<Story> {
    let Beginning {
        tree,
        mut written,
        words,
        mut rng,
        module_memories,
    } = beginning;
    let modules: Vec<&str> = words.modules.iter().map(String::as_str).collect();
    let mut commits = 1;
    let mut questions = Vec::new();

    // What happens to the modules, one commit each, in a shuffled order.
    let mut events: Vec<usize> = (0..modules.len()).collect();
    shuffle(&mut rng, &mut events);
    for (rank, &index) in events.iter().enumerate() {
        let module = modules[index];
        let path = module_file(module);
        let stale = match rank {
            0..8 => {
                tree.delete(&path)?;
                Some(Stale::CodeGone)
            }
            8..15 => {
                tree.write(&path, &module_source(module, 1, false))?;
                Some(Stale::CodeGone)
            }
            15..25 => {
                tree.rename(&path, &format!("src/{module}/mod.rs"))?;
                None
            }
            25..50 => {
                tree.write(&path, &module_source(module, 1, true))?;
                None
            }
            _ => continue,
        };
        tree.commit(&format!("{module}: change {rank}"))?;
        commits += 1;
        if let Some(stale) = stale {
            let id = module_memories[&index];
            if let Some(memory) = written.iter_mut().find(|memory| id_of(&memory.line) == id) {
                memory.stale = Some(stale);
            }
        }
    }
    for (asked, index) in (0..modules.len()).step_by(2).enumerate() {
        let module = modules[index];
        let id = module_memories[&index];
        let holds = written
            .iter()
            .any(|memory| id_of(&memory.line) == id && memory.stale.is_none());
        questions.push(Question {
            text: format!(
                "What does {} in the {module} module do? ({asked})",
                function(module)
            ),
            right: holds.then_some(Answer::Memory(id)),
        });
    }

    // Conventions: the first five replaced by a new version, the others by
    // a separate memory that leaves the old one current and wrong.
    let mut superseding = Vec::new();
    for (index, Convention { area, old, new }) in words.conventions.iter().enumerate() {
        let old_memory = line(
            &format!("Convention for {area}: {old}."),
            "project-conventions",
            &at(now, 90, index as i64),
            &json!({}),
        );
        let old_id = id_of(&old_memory);
        let new_content = format!("Convention for {area}: {new}.");
        let right = if index < 5 {
            written.push(Written {
                line: old_memory,
                stale: None,
            });
            superseding.push(Superseding {
                old: old_id,
                content: new_content,
                category: "project-conventions",
                at: at(now, 30, index as i64),
            });
            Answer::VersionOf(old_id)
        } else {
            written.push(Written {
                line: old_memory,
                stale: Some(Stale::FactReplaced),
            });
            let new_memory = line(
                &new_content,
                "project-conventions",
                &at(now, 30, index as i64),
                &json!({}),
            );
            let new_id = id_of(&new_memory);
            written.push(Written {
                line: new_memory,
                stale: None,
            });
            Answer::Memory(new_id)
        };
        questions.push(Question {
            text: format!("What is our convention for {area}?"),
            right: Some(right),
        });
    }

    // Decisions and what depends on them; the first five replaced.
    let mut linked_to_replaced = Vec::new();
    for (index, decision) in words.decisions.iter().enumerate() {
        let Decision {
            subject,
            first: first_choice,
            then: second_choice,
            consequences,
        } = decision;
        let decision = line(
            &format!("Decision: the {subject} is {first_choice}."),
            "architectural-decisions",
            &at(now, 95, index as i64),
            &json!({}),
        );
        let decision_id = id_of(&decision);
        let replaced = index < 5;
        written.push(Written {
            line: decision,
            stale: None,
        });
        for (consequence_index, consequence) in consequences.iter().enumerate() {
            let memory = line(
                &format!("Because the {subject} is {first_choice}, {consequence}."),
                "patterns",
                &at(now, 94, (index * 2 + consequence_index) as i64),
                &json!({"related": [{"id": decision_id.to_string(), "relationship": "depends-on"}]}),
            );
            if replaced {
                linked_to_replaced.push(id_of(&memory));
            }
            written.push(Written {
                line: memory,
                stale: replaced.then_some(Stale::DecisionReplaced),
            });
        }
        if replaced {
            superseding.push(Superseding {
                old: decision_id,
                content: format!("Decision: the {subject} is {second_choice}."),
                category: "architectural-decisions",
                at: at(now, 20, index as i64),
            });
        }
        if index % 2 == 0 {
            questions.push(Question {
                text: format!("Which {subject} do we use?"),
                right: Some(if replaced {
                    Answer::VersionOf(decision_id)
                } else {
                    Answer::Memory(decision_id)
                }),
            });
        }
    }

    // Dead ends: captured as facts, never confirmed.
    for (index, DeadEnd { approach, purpose }) in words.dead_ends.iter().enumerate() {
        let memory = line(
            &format!("Use {approach} to speed up {purpose}."),
            "architectural-decisions",
            &at(now, 60 - index as i64 * 4, 0),
            &json!({"confidence": "provisional"}),
        );
        written.push(Written {
            line: memory,
            stale: Some(Stale::DeadEnd),
        });
        if index < 5 {
            questions.push(Question {
                text: format!("How do we speed up {purpose}?"),
                right: None,
            });
        }
    }

    // The commits that touch nothing remembered.
    while commits < 100 {
        tree.write(
            &format!("src/extra/file_{commits}.rs"),
            &format!("pub const SERIAL: usize = {commits};\n"),
        )?;
        tree.commit(&format!("extra file {commits}"))?;
        commits += 1;
    }
    Ok(Story {
        tree,
        commits,
        written,
        superseding,
        questions,
        linked_to_replaced,
    })
}

/// Fisher-Yates with the workload's generator.
fn shuffle(rng: &mut Rng, items: &mut [usize]) {
    for at in (1..items.len()).rev() {
        items.swap(at, rng.below(at + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_story_has_its_commits_questions_and_stale_memories() {
        let dir = tempfile::tempdir().unwrap();
        let story = play(dir.path(), Utc::now()).unwrap();
        assert_eq!(story.commits, 100);
        assert_eq!(story.questions.len(), 50);
        let count = |kind: Stale| {
            story
                .written
                .iter()
                .filter(|memory| memory.stale == Some(kind))
                .count()
        };
        assert_eq!(count(Stale::CodeGone), 15);
        assert_eq!(count(Stale::FactReplaced), 5);
        assert_eq!(count(Stale::DecisionReplaced), 10);
        assert_eq!(count(Stale::DeadEnd), 10);
        assert_eq!(story.linked_to_replaced.len(), 10);
        assert_eq!(story.superseding.len(), 10);
        // A memory whose code is gone points at a file that is missing or
        // no longer holds its function.
        for memory in &story.written {
            let Some(anchor) = memory.line["anchors"].get(0) else {
                continue;
            };
            let path = anchor["path"].as_str().unwrap();
            let symbol = anchor["symbol"].as_str().unwrap();
            let holds = std::fs::read_to_string(dir.path().join(path))
                .is_ok_and(|text| text.contains(symbol))
                || std::fs::read_to_string(dir.path().join(path.replace(".rs", "/mod.rs")))
                    .is_ok_and(|text| text.contains(symbol));
            assert_eq!(
                holds,
                memory.stale.is_none(),
                "{path}: {}",
                memory.line["content"]
            );
        }
    }
}
