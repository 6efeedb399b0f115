//! Which haystacks the bench's persistent data directory already holds,
//! so a run loads (and embeds) only what an earlier run did not: one JSON
//! line per question, appended once all its memories are written, with
//! every memory's id and the place it stands for. A question without a
//! line was never loaded, or only in part, or before its memories carried
//! their sessions' ids: its namespace directory is removed before the
//! service starts, and it is loaded again.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::haystack::Place;
use crate::workload::Result;

#[derive(Serialize, Deserialize)]
pub struct Question {
    pub question_id: String,
    /// Memory id and the place it stands for.
    pub memories: Vec<(String, Place)>,
    /// Documents the service refused as looking like a secret.
    pub refused: usize,
    /// Whether its memories carry their sessions' ids (as `session_id`);
    /// lines written before they did are loaded again.
    #[serde(default)]
    pub sessions: bool,
    /// Whether its memories carry their sessions' dates (as
    /// `observed_at`); lines written before they did are loaded again.
    #[serde(default)]
    pub observed: bool,
}

pub struct Loaded {
    file: File,
    questions: HashMap<String, Question>,
}

impl Loaded {
    /// Opens the record at `path`, creating it; a line that does not parse
    /// (a run stopped mid-write) is ignored, so its question loads again.
    pub fn open(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => return Err(format!("reading {}: {err}", path.display()).into()),
        };
        let questions = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Question>(line).ok())
            .map(|question| (question.question_id.clone(), question))
            .collect();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|err| format!("opening {}: {err}", path.display()))?;
        Ok(Self { file, questions })
    }

    /// The question's record, if it was loaded whole, with its sessions
    /// and their dates.
    pub fn get(&self, question_id: &str) -> Option<&Question> {
        self.questions
            .get(question_id)
            .filter(|question| question.sessions && question.observed)
    }

    pub fn record(&mut self, question: Question) -> Result {
        // A line starts on a line of its own even after a torn one.
        writeln!(self.file, "\n{}", serde_json::to_string(&question)?)?;
        self.file.flush()?;
        self.questions
            .insert(question.question_id.clone(), question);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_questions_survive_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loaded.jsonl");
        let place = Place {
            session: 2,
            turn: Some(0),
        };
        let mut loaded = Loaded::open(&path).unwrap();
        loaded
            .record(Question {
                question_id: "q1".to_owned(),
                memories: vec![("id-1".to_owned(), place)],
                refused: 1,
                sessions: true,
                observed: true,
            })
            .unwrap();
        drop(loaded);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"question_id": "q2", "memo"#).unwrap();
        drop(file);
        let mut loaded = Loaded::open(&path).unwrap();
        assert_eq!(
            loaded.get("q1").unwrap().memories,
            [("id-1".to_owned(), place)]
        );
        assert!(loaded.get("q2").is_none());
        loaded
            .record(Question {
                question_id: "q2".to_owned(),
                memories: Vec::new(),
                refused: 0,
                sessions: true,
                observed: true,
            })
            .unwrap();
        assert!(Loaded::open(&path).unwrap().get("q2").is_some());
    }
}
