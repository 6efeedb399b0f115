//! The `response_format` a classifier call asks for, and what the server
//! has refused of it.
//!
//! The ladder: a JSON schema of the classifier's reply (an object holding
//! the `memories` array), then `json_object` mode, then nothing. A server
//! refuses by answering 400 or 422 to a request that carried a
//! `response_format` (other statuses are not about the request's shape:
//! 401, 404, 429 and 5xx are errors as before). A refusal whose message
//! names `json_schema` moves to `json_object`; any other moves to no
//! `response_format` at all, since a server that refuses the field
//! refuses both. The call is sent again at once on the new rung, and the
//! refusal is kept for the process, so later calls pay for no refused
//! request. Whatever the rung, the reply is read by the same tolerant
//! parser.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Value, json};

use crate::memory::{Category, Relationship, Scope};

/// A rung of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rung {
    Schema,
    Object,
    Plain,
}

impl Rung {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Schema,
            1 => Self::Object,
            _ => Self::Plain,
        }
    }

    /// The request's `response_format` at this rung.
    pub fn response_format(self) -> Option<Value> {
        match self {
            Self::Schema => Some(json!({
                "type": "json_schema",
                "json_schema": {"name": "memories", "schema": memories_schema()},
            })),
            Self::Object => Some(json!({"type": "json_object"})),
            Self::Plain => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Schema => "json_schema",
            Self::Object => "json_object",
            Self::Plain => "none",
        }
    }
}

/// The highest rung the server has not refused; shared by clones.
#[derive(Clone, Debug, Default)]
pub struct Ladder {
    refused: Arc<AtomicU8>,
}

impl Ladder {
    pub fn current(&self) -> Rung {
        Rung::from_u8(self.refused.load(Ordering::Relaxed))
    }

    /// The server refused `rung`, saying `why`: the rung to ask on, for
    /// this call and every later one.
    pub fn refuse(&self, rung: Rung, why: &str) -> Rung {
        let next = match rung {
            Rung::Schema if why.contains("json_schema") => Rung::Object,
            Rung::Schema | Rung::Object | Rung::Plain => Rung::Plain,
        };
        self.refused.fetch_max(next as u8, Ordering::Relaxed);
        self.current()
    }
}

/// Whether a status answered to a request with a `response_format`
/// refuses the format (rather than failing for another reason).
pub fn is_refusal(status: u16) -> bool {
    matches!(status, 400 | 422)
}

/// The classifier's reply as `capture::classifier_reply` reads it.
fn memories_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string"},
                        "scope": {"type": "string", "enum": names(Scope::ALL, Scope::as_str)},
                        "category": {"type": "string", "enum": names(Category::ALL, Category::as_str)},
                        "supersedes": {"type": "string"},
                        "related": {"type": "array", "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "relationship": {"type": "string", "enum": names(Relationship::ALL, Relationship::as_str)}
                            },
                            "required": ["id", "relationship"]
                        }},
                        "importance": {"type": "number", "minimum": 0, "maximum": 1}
                    },
                    "required": ["content", "scope", "category"]
                }
            }
        },
        "required": ["memories"]
    })
}

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|item| name(*item)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_moves_every_clone_down_the_ladder_for_good() {
        let ladder = Ladder::default();
        let clone = ladder.clone();
        assert_eq!(ladder.current(), Rung::Schema);
        assert_eq!(
            ladder.refuse(Rung::Schema, "response_format json_schema is not supported"),
            Rung::Object
        );
        assert_eq!(clone.current(), Rung::Object);
        assert_eq!(clone.refuse(Rung::Object, "unknown field"), Rung::Plain);
        assert_eq!(
            ladder.refuse(Rung::Schema, "json_schema"),
            Rung::Plain,
            "a late refusal never climbs back"
        );
        assert_eq!(Rung::Plain.response_format(), None);
    }

    #[test]
    fn a_refusal_not_naming_the_schema_drops_the_field() {
        let ladder = Ladder::default();
        assert_eq!(
            ladder.refuse(
                Rung::Schema,
                "Unrecognized request argument: response_format"
            ),
            Rung::Plain
        );
        assert!(is_refusal(400) && is_refusal(422));
        assert!(!is_refusal(401) && !is_refusal(429) && !is_refusal(500));
    }

    #[test]
    fn the_schema_names_every_scope_and_category() {
        let format = Rung::Schema.response_format().unwrap();
        let item = &format["json_schema"]["schema"]["properties"]["memories"]["items"];
        assert_eq!(item["properties"]["scope"]["enum"], json!(["repo", "user"]));
        assert_eq!(
            item["properties"]["category"]["enum"]
                .as_array()
                .unwrap()
                .len(),
            Category::ALL.len()
        );
        assert_eq!(item["required"], json!(["content", "scope", "category"]));
    }
}
