//! The LongMemEval_S user-turn extract: questions, their haystacks, the
//! evidence, the fixed halves, and the documents each variant loads.

use std::collections::HashSet;
use std::path::Path;

use engram::memory::MAX_CONTENT_CHARS;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::workload::Result;

pub const FILE: &str = "longmemeval_s_useronly.json.gz";

#[derive(Deserialize)]
pub struct Item {
    pub question_id: String,
    pub question_type: String,
    pub question: String,
    /// When the question is asked, as the benchmark writes dates.
    pub question_date: String,
    pub answer_session_ids: Vec<String>,
    pub sessions: Vec<Session>,
}

#[derive(Deserialize)]
pub struct Session {
    pub session_id: String,
    /// When the session took place, as the benchmark writes dates.
    pub date: String,
    pub user_turns: Vec<UserTurn>,
}

/// How long after its question's time a session of the haystack may be
/// dated: the benchmark's times are consistent to the day only (41 of the
/// 468 questions, 40 of them temporal-reasoning, have evidence sessions
/// dated up to 23.4 hours after the question, 6 hours at the median).
pub const QUESTION_DATE_SLACK_HOURS: i64 = 24;

/// The moment a question is asked as of: its date, plus the slack its
/// haystack's dates need ([`QUESTION_DATE_SLACK_HOURS`]), in RFC 3339.
pub fn asked_at(item: &Item) -> Result<String> {
    let date = read_date(&item.question_date)?;
    Ok((date + chrono::TimeDelta::hours(QUESTION_DATE_SLACK_HOURS)).to_rfc3339())
}

/// A date as the benchmark writes them, in RFC 3339.
pub fn rfc3339(date: &str) -> Result<String> {
    Ok(read_date(date)?.to_rfc3339())
}

/// A date as the benchmark writes them, `2023/05/30 (Tue) 10:18`, read
/// as UTC (the benchmark names no zone).
fn read_date(date: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    let (day, time) = date
        .split_once(' ')
        .and_then(|(day, rest)| Some((day, rest.rsplit_once(' ')?.1)))
        .ok_or_else(|| format!("not a LongMemEval date: {date:?}"))?;
    let at = chrono::NaiveDateTime::parse_from_str(&format!("{day} {time}"), "%Y/%m/%d %H:%M")
        .map_err(|err| format!("not a LongMemEval date: {date:?}: {err}"))?;
    Ok(at.and_utc())
}

#[derive(Deserialize)]
pub struct UserTurn {
    pub content: String,
    #[serde(default)]
    pub has_answer: bool,
}

/// What a memory stands for: a session of the item's haystack (its index
/// in `sessions`) and, in the turn variant, one of its user turns (the
/// index in `user_turns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Place {
    pub session: u32,
    pub turn: Option<u32>,
}

/// One memory's worth of text.
pub struct Document {
    pub place: Place,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Granularity {
    /// One memory per user turn, as an agent would write them.
    Turn,
    /// One memory per session: its user turns joined, as several peers index.
    Session,
}

impl Granularity {
    pub fn as_arg(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Session => "session",
        }
    }
}

/// The fixed halves: a question is in `tune` when the first byte of the
/// SHA-256 of its `question_id` is even, in `report` when it is odd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Half {
    /// Tune here (255 questions, 237 scored).
    Tune,
    /// Report here; never tune (243 questions, 231 scored).
    Report,
    All,
}

impl Half {
    pub fn holds(self, question_id: &str) -> bool {
        let even = digest(question_id)[0].is_multiple_of(2);
        match self {
            Self::Tune => even,
            Self::Report => !even,
            Self::All => true,
        }
    }

    pub fn as_arg(self) -> &'static str {
        match self {
            Self::Tune => "tune",
            Self::Report => "report",
            Self::All => "all",
        }
    }
}

/// The order a `--questions` sample is drawn in: by digest, so a sample
/// mixes the question types that the file groups.
pub fn digest(question_id: &str) -> [u8; 32] {
    Sha256::digest(question_id.as_bytes()).into()
}

/// Reads the extract (gzip, through the system's `gzip`).
pub fn read(data: &Path) -> Result<Vec<Item>> {
    let path = data.join(FILE);
    if !path.is_file() {
        return Err(format!(
            "the LongMemEval extract is not at {}; point --data at the directory that holds {FILE}",
            path.display()
        )
        .into());
    }
    let unpacked = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .output()
        .map_err(|err| format!("running gzip on {}: {err}", path.display()))?;
    if !unpacked.status.success() {
        return Err(format!(
            "gzip could not read {}: {}",
            path.display(),
            String::from_utf8_lossy(&unpacked.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&unpacked.stdout)?)
}

impl Item {
    /// Abstention questions have no evidence; the benchmark's retrieval
    /// metrics leave them out.
    pub fn abstains(&self) -> bool {
        self.question_id.ends_with("_abs")
    }

    /// The documents of this item's haystack, in order. A text longer than
    /// a memory may be is split into pieces that stand for the same place;
    /// empty turns and sessions are left out.
    pub fn documents(&self, granularity: Granularity) -> Vec<Document> {
        let mut documents = Vec::new();
        for (session_index, session) in (0u32..).zip(&self.sessions) {
            let texts: Vec<(Option<u32>, String)> = match granularity {
                Granularity::Turn => (0u32..)
                    .zip(&session.user_turns)
                    .map(|(turn, user)| (Some(turn), user.content.clone()))
                    .collect(),
                Granularity::Session => {
                    let joined: Vec<&str> = session
                        .user_turns
                        .iter()
                        .map(|user| user.content.trim())
                        .filter(|content| !content.is_empty())
                        .collect();
                    vec![(None, joined.join("\n"))]
                }
            };
            for (turn, text) in texts {
                let place = Place {
                    session: session_index,
                    turn,
                };
                for piece in pieces(&text, MAX_CONTENT_CHARS) {
                    documents.push(Document { place, text: piece });
                }
            }
        }
        documents
    }

    /// Sessions named in `answer_session_ids`, as indices into `sessions`.
    pub fn evidence_sessions(&self) -> HashSet<u32> {
        (0u32..)
            .zip(&self.sessions)
            .filter(|(_, session)| self.answer_session_ids.contains(&session.session_id))
            .map(|(index, _)| index)
            .collect()
    }

    /// User turns flagged `has_answer`, as turn-variant places.
    pub fn evidence_turns(&self) -> HashSet<Place> {
        let mut turns = HashSet::new();
        for (session, held) in (0u32..).zip(&self.sessions) {
            for (turn, user) in (0u32..).zip(&held.user_turns) {
                if user.has_answer {
                    turns.insert(Place {
                        session,
                        turn: Some(turn),
                    });
                }
            }
        }
        turns
    }
}

/// `text` trimmed and cut into pieces of at most `max_chars` characters,
/// at the last whitespace within each piece where there is one.
pub fn pieces(text: &str, max_chars: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((cut, _)) = rest.char_indices().nth(max_chars) else {
            pieces.push(rest.to_owned());
            break;
        };
        let head = &rest[..cut];
        let at = head
            .rfind(char::is_whitespace)
            .filter(|at| *at > 0)
            .unwrap_or(cut);
        pieces.push(rest[..at].trim_end().to_owned());
        rest = rest[at..].trim_start();
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_read_as_utc() {
        assert_eq!(
            rfc3339("2023/05/30 (Tue) 10:18").unwrap(),
            "2023-05-30T10:18:00+00:00"
        );
        assert!(rfc3339("2023-05-30").is_err());
    }

    #[test]
    fn long_texts_are_cut_at_whitespace_within_the_limit() {
        assert_eq!(pieces("  one two three  ", 100), ["one two three"]);
        assert_eq!(pieces("one two three", 9), ["one two", "three"]);
        assert_eq!(pieces("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(pieces("éé éé", 3), ["éé", "éé"]);
        assert!(pieces("   ", 10).is_empty());
        for piece in pieces(&"word ".repeat(5000), MAX_CONTENT_CHARS) {
            assert!(piece.chars().count() <= MAX_CONTENT_CHARS);
        }
    }

    #[test]
    fn each_variant_knows_its_places_and_evidence() {
        let item: Item = serde_json::from_value(serde_json::json!({
            "question_id": "q1", "question_type": "single-session-user",
            "question": "Where do I live?", "answer": "Lisbon",
            "question_date": "2023/05/30 (Tue) 10:18",
            "answer_session_ids": ["answer_1"],
            "sessions": [
                {"session_id": "s0", "date": "2023/05/20 (Sat) 07:47",
                 "user_turns": [{"i": 0, "content": "Hi"}]},
                {"session_id": "answer_1", "date": "2023/05/21 (Sun) 09:00", "user_turns": [
                    {"i": 0, "content": "I moved.", "has_answer": false},
                    {"i": 2, "content": "I live in Lisbon now.", "has_answer": true}]},
                {"session_id": "s2", "date": "2023/05/22 (Mon) 09:00", "user_turns": []}
            ]
        }))
        .unwrap();
        let turns = item.documents(Granularity::Turn);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2].text, "I live in Lisbon now.");
        assert_eq!(
            turns[2].place,
            Place {
                session: 1,
                turn: Some(1)
            }
        );
        let sessions = item.documents(Granularity::Session);
        assert_eq!(sessions.len(), 2);
        assert_eq!(sessions[1].text, "I moved.\nI live in Lisbon now.");
        assert_eq!(
            sessions[1].place,
            Place {
                session: 1,
                turn: None
            }
        );
        assert_eq!(item.evidence_sessions(), HashSet::from([1]));
        assert_eq!(
            item.evidence_turns(),
            HashSet::from([Place {
                session: 1,
                turn: Some(1)
            }])
        );
    }

    #[test]
    fn the_halves_split_by_digest_and_cover_every_question() {
        for id in ["001be529", "gpt4_2655b836", "6a1eabeb_abs"] {
            assert_ne!(Half::Tune.holds(id), Half::Report.holds(id));
            assert!(Half::All.holds(id));
            assert_eq!(Half::Tune.holds(id), digest(id)[0].is_multiple_of(2));
        }
    }
}
