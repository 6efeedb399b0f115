//! Gemini CLI's session transcripts (`~/.gemini/tmp/<project>/chats/
//! session-*.jsonl`), read as the CLI itself reads them back: a metadata
//! line, then one record per line, where
//! - a message record (`id`, `type`, `content`) adds a message, or
//!   replaces the one with the same `id` in its place (the CLI writes a
//!   message again when its tokens or tool calls arrive);
//! - `{"$set": {"messages": […]}}` replaces every message (other `$set`
//!   keys are metadata);
//! - `{"$rewindTo": id}` drops that message and every later one (all of
//!   them when the id is unknown), and the files their tool calls named.
//!
//! Only `user` and `gemini` messages count (`info`, `error` and `warning`
//! are the CLI's own), and of their content only text: a user message's
//! parts without `text` are tool results. Text the CLI wraps in its own
//! tags is not something the user said and is cut out: the environment it
//! sends first (`<session_context>`) and what hooks added
//! (`<hook_context>`, Engram's own injection among them).

use serde_json::Value;

use super::{Message, Role, tools};

/// The tags around text the CLI adds to a user message.
const INJECTED_TAGS: [&str; 2] = ["hook_context", "session_context"];

/// One message record, in its latest version.
struct Record {
    id: String,
    /// Its text, when it is the user's or the model's and holds any.
    message: Option<Message>,
    /// The files its tool calls named, over all its versions.
    files: Vec<String>,
}

/// The messages of a Gemini CLI transcript's text, in order, each
/// message's latest version, before joining and cutting; and the files
/// their tool calls named, in order.
pub fn read(transcript: &str) -> (Vec<Message>, Vec<String>) {
    let mut records: Vec<Record> = Vec::new();
    for line in transcript.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(id) = entry["$rewindTo"].as_str() {
            let at = records.iter().position(|record| record.id == id);
            records.truncate(at.unwrap_or(0));
        } else if let Some(all) = entry["$set"]["messages"].as_array() {
            records.clear();
            for record in all {
                upsert(&mut records, record);
            }
        } else {
            upsert(&mut records, &entry);
        }
    }
    let mut messages = Vec::new();
    let mut files = Vec::new();
    for record in records {
        messages.extend(record.message);
        files.extend(record.files);
    }
    (messages, files)
}

/// Adds the record `entry` holds, or replaces the one with its id (the
/// files its earlier versions named stay named).
fn upsert(records: &mut Vec<Record>, entry: &Value) {
    let Some(id) = entry["id"].as_str() else {
        return;
    };
    let named = tools::gemini_files(entry);
    match records.iter_mut().find(|record| record.id == id) {
        Some(old) => {
            old.message = message(entry);
            for file in named {
                if !old.files.contains(&file) {
                    old.files.push(file);
                }
            }
        }
        None => records.push(Record {
            id: id.to_owned(),
            message: message(entry),
            files: named,
        }),
    }
}

/// The user's or the model's text in a message record, if it holds any.
fn message(record: &Value) -> Option<Message> {
    let role = match record["type"].as_str()? {
        "user" => Role::User,
        "gemini" => Role::Assistant,
        _ => return None,
    };
    let text = match &record["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let text = without_injected(&text);
    (!text.is_empty()).then_some(Message {
        role,
        text,
        at: super::stamped(record),
    })
}

/// `text` with the blocks the CLI and its hooks add taken out, trimmed.
/// The CLI escapes `<` and `>` in what hooks add, so a block cannot hold
/// its own closing tag.
pub fn without_injected(text: &str) -> String {
    let mut text = text.to_owned();
    for tag in INJECTED_TAGS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = text.find(&open) {
            let Some(length) = text[start..].find(&close) else {
                break;
            };
            text.replace_range(start..start + length + close.len(), "");
        }
    }
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn said(role: Role, text: &str) -> Message {
        Message {
            role,
            text: text.to_owned(),
            at: None,
        }
    }

    #[test]
    fn reads_the_latest_version_of_each_message_without_what_the_cli_added() {
        let transcript = [
            r#"{"sessionId":"s","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}"#,
            r#"{"$set":{"messages":[{"id":"env","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}]}}"#,
            r#"{"id":"u1","type":"user","content":[{"text":"<hook_context>memories</hook_context>\n\nUse tabs."},{"text":"<hook_context>more</hook_context>"}]}"#,
            r#"{"$set":{"lastUpdated":"t2"}}"#,
            r#"{"id":"g1","type":"gemini","content":"","toolCalls":[{"name":"read_file"}]}"#,
            r#"{"id":"t1","type":"user","content":[{"functionResponse":{"name":"read_file","response":{"output":"TOOL OUTPUT"}}}]}"#,
            r#"{"id":"g1","type":"gemini","content":"Will do.","tokens":{"total":3}}"#,
            r#"{"id":"i1","type":"info","content":"Update available"}"#,
            r#"{"id":"u2","type":"user","content":"half"#,
        ]
        .join("\n");
        assert_eq!(
            read(&transcript).0,
            vec![
                said(Role::User, "Use tabs."),
                said(Role::Assistant, "Will do.")
            ]
        );
    }

    #[test]
    fn a_rewind_drops_the_message_and_what_followed() {
        let transcript = [
            r#"{"id":"u1","type":"user","content":"first"}"#,
            r#"{"id":"g1","type":"gemini","content":"one"}"#,
            r#"{"id":"u2","type":"user","content":"second"}"#,
            r#"{"$rewindTo":"g1"}"#,
            r#"{"id":"u3","type":"user","content":"again"}"#,
        ]
        .join("\n");
        assert_eq!(
            read(&transcript).0,
            vec![said(Role::User, "first"), said(Role::User, "again")]
        );
        let unknown = format!("{transcript}\n{}", r#"{"$rewindTo":"nowhere"}"#);
        assert_eq!(read(&unknown).0, Vec::new());
    }

    #[test]
    fn injected_blocks_are_cut_wherever_they_are() {
        assert_eq!(
            without_injected("<hook_context>a</hook_context>\n\nremember: tabs"),
            "remember: tabs"
        );
        assert_eq!(
            without_injected("x <hook_context>a</hook_context> y"),
            "x  y"
        );
        assert_eq!(
            without_injected("open <hook_context> only"),
            "open <hook_context> only"
        );
    }

    proptest! {
        #[test]
        fn any_text_reads_without_panicking(text in ".*") {
            let _ = read(&text);
            let _ = without_injected(&text);
        }
    }
}
