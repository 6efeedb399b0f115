//! Conversation windows as agents send them (OpenAI-style chat messages),
//! and the text Engram reads from them.
//!
//! The window is the user and assistant messages in order. Everything else
//! is stripped here, once: other roles (system, tool, function), tool calls,
//! and content parts that are not text. Nothing downstream sees tool output.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// One chat message. The other fields of OpenAI chat messages (`name`,
/// `tool_calls`, `tool_call_id`, `function_call`, `refusal`) are accepted
/// and never read; any other field is refused.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// `user` and `assistant` messages are read; any other role is skipped.
    pub role: String,
    /// A string, or a list of parts of which the `text` ones are read.
    #[serde(default)]
    #[schema(value_type = Object, example = "Use errors.As, not type assertions.")]
    pub content: Value,
    #[serde(default, skip_serializing)]
    #[schema(value_type = Option<String>)]
    pub name: Option<Value>,
    /// Tool calls an assistant made; never read.
    #[serde(default, skip_serializing)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Value>,
    #[serde(default, skip_serializing)]
    #[schema(value_type = Option<String>)]
    pub tool_call_id: Option<Value>,
    #[serde(default, skip_serializing)]
    #[schema(value_type = Option<Object>)]
    pub function_call: Option<Value>,
    #[serde(default, skip_serializing)]
    #[schema(value_type = Option<String>)]
    pub refusal: Option<Value>,
}

/// Who said a line of the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
}

impl Speaker {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// One user or assistant message, reduced to its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub speaker: Speaker,
    pub text: String,
}

/// The window of `messages`: user and assistant text, in order, without
/// tool traffic or empty messages.
pub fn window(messages: &[Message]) -> Vec<Line> {
    messages
        .iter()
        .filter_map(|message| {
            let speaker = match message.role.as_str() {
                "user" => Speaker::User,
                "assistant" => Speaker::Assistant,
                _ => return None,
            };
            let text = text_of(&message.content);
            let text = text.trim();
            (!text.is_empty()).then(|| Line {
                speaker,
                text: text.to_owned(),
            })
        })
        .collect()
}

/// The text of the last user message in the window.
pub fn latest_user_text(lines: &[Line]) -> Option<&str> {
    lines
        .iter()
        .rev()
        .find(|line| line.speaker == Speaker::User)
        .map(|line| line.text.as_str())
}

/// `content` as text: a string as is; of a list, the `text` of parts whose
/// `type` is `text`, one per line. Tool results, images and the like give
/// nothing.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(value: Value) -> Vec<Message> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn tool_traffic_and_other_roles_are_stripped() {
        let lines = window(&messages(json!([
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the build."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "error[E0308]: secret output"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "The build is fixed."},
                {"type": "tool_use", "id": "t1", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "content": "more tool output"},
                {"type": "image_url", "image_url": {"url": "data:..."}},
                {"type": "text", "text": "Thanks. Always run clippy."},
            ]},
        ])));
        assert_eq!(
            lines,
            [
                Line {
                    speaker: Speaker::User,
                    text: "Fix the build.".into()
                },
                Line {
                    speaker: Speaker::Assistant,
                    text: "The build is fixed.".into()
                },
                Line {
                    speaker: Speaker::User,
                    text: "Thanks. Always run clippy.".into()
                },
            ]
        );
        assert_eq!(latest_user_text(&lines), Some("Thanks. Always run clippy."));
    }

    #[test]
    fn a_window_without_user_text_has_no_latest_user_message() {
        let lines = window(&messages(json!([
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "   "},
        ])));
        assert_eq!(latest_user_text(&lines), None);
    }

    #[test]
    fn unknown_message_fields_are_refused() {
        let result: Result<Vec<Message>, _> =
            serde_json::from_value(json!([{"role": "user", "content": "x", "colour": "red"}]));
        assert!(result.unwrap_err().to_string().contains("colour"));
    }
}
